"""Register an operator's own admission webhooks with the local API server, as pure rewrites.

JobSet and LWS rely on their defaulting webhooks (JobSet's controller dereferences fields only
its webhook fills in, e.g. network.enableDNSHostnames, and panics without them; LWS labels its
pods in a pod webhook). In a cluster they are reached through a Service; here the operator is a
local process, so each webhook's `service` becomes a URL on 127.0.0.1 with the run's CA bundle.
Pod webhooks get the objectSelector the operator's own kustomize patches add (only its pods),
so an operator that is down never blocks anyone else's pods.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Mapping
from typing import Any

from queuectl.testenv.operatorargs import HOST

_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _targets_pods(webhook: Mapping[str, Any]) -> bool:
    return any(
        "" in rule.get("apiGroups", []) and "pods" in rule.get("resources", [])
        for rule in webhook.get("rules", [])
    )


def rewrite(
    docs: Iterable[Any],
    *,
    operator: str,
    port: int,
    ca_pem: bytes,
    pod_label: str | None,
) -> list[dict[str, Any]]:
    """The operator's webhook configurations, pointed at https://127.0.0.1:<port><path>.

    Names get the operator's name in front (kubebuilder calls every one
    `mutating-webhook-configuration`, so two operators would overwrite each other). Pod
    webhooks are kept only when `pod_label` says which pods are the operator's.
    """
    bundle = base64.b64encode(ca_pem).decode()
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
            continue
        config = copy.deepcopy(doc)
        config["metadata"] = {"name": f"{operator}-{doc['metadata']['name']}"}
        hooks = []
        for hook in config.get("webhooks", []):
            if _targets_pods(hook):
                if pod_label is None:
                    continue
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": pod_label, "operator": "Exists"}]
                }
            path = hook["clientConfig"]["service"].get("path", "/")
            hook["clientConfig"] = {"url": f"https://{HOST}:{port}{path}", "caBundle": bundle}
            hooks.append(hook)
        if hooks:
            config["webhooks"] = hooks
            out.append(config)
    return out
