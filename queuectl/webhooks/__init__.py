"""Admission webhooks: pure decisions (jobs, resources) behind an aiohttp HTTPS shell (server),
self-managed certificates (certs, certmanager) and the webhook configurations (configs).

Kept free of imports here so that light users (the selector matcher, the renderer) stay light.
See docs/design/webhooks.md.
"""
