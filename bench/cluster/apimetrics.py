"""API server request counts from its /metrics (apiserver_request_total), before and after.

The difference, less the runner's own requests, is what the controller (and the cluster's own
background traffic: leases, node heartbeats) cost; divided by admissions it is the
API-requests-per-admission figure. The per resource/verb split says where they went.
"""

from __future__ import annotations

import re
from collections import Counter

_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def request_counts(metrics_text: str) -> Counter[tuple[str, str]]:
    """(resource, verb) -> requests served so far."""
    counts: Counter[tuple[str, str]] = Counter()
    for line in metrics_text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[(resource, labels.get("verb", ""))] += int(float(m.group("value")))
    return counts


def delta(
    before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]
) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for key, value in after.items():
        diff = value - before.get(key, 0)
        if diff > 0:
            out[key] = diff
    return out
