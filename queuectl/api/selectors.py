"""Label selectors over plain labels: the one rule the webhooks and the controller both apply.

A selector is read as the API server stores it (a dict with `matchLabels` and
`matchExpressions`); `LabelSelector.matches` on the typed model asks the same function.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from queuectl.api import names

Selector = Mapping[str, Any]


def selector_matches(selector: Selector | None, labels: Mapping[str, str]) -> bool:
    """Whether labels satisfy a metav1.LabelSelector.

    None selects nothing and {} selects everything, as for a ClusterQueue's namespaceSelector.
    An operator we do not know selects nothing, so a typo never widens access.
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator")
        values = expr.get("values") or []
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            ok = False
        if not ok:
            return False
    return True


def _keys(selector: Selector) -> Iterator[str]:
    yield from selector.get("matchLabels") or {}
    for expr in selector.get("matchExpressions") or []:
        yield str(expr.get("key", ""))


def namespace_selected(
    selector: Selector | None, namespace: str, labels: Mapping[str, str] | None
) -> bool:
    """Whether a namespaceSelector selects `namespace`, whose labels a cache holds (`labels`;
    None when it has not seen the namespace yet, as just after `kubectl apply` made it).

    Every namespace carries its automatic name label (`kubernetes.io/metadata.name`, set by the
    API server), so that label is known even for an unseen namespace, and a selector about it
    alone (or `{}`) is decided. A term about any other key of an unseen namespace cannot be
    decided and selects nothing, whatever its operator: access is never granted on labels
    nobody has read (a `NotIn` would otherwise pass for want of the label). The namespace's
    own watch event decides again once it is seen.
    """
    if selector is None:
        return False
    if labels is None and any(key != names.LABEL_NAMESPACE_NAME for key in _keys(selector)):
        return False
    return selector_matches(selector, namespace_labels(namespace, labels))


def namespace_labels(namespace: str, labels: Mapping[str, str] | None) -> dict[str, str]:
    """The labels a namespace is judged by: what the cache holds, and its name label always."""
    return {names.LABEL_NAMESPACE_NAME: namespace, **(labels or {})}
