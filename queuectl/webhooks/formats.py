"""Checks of the values users put in queuectl's Job labels; each returns a problem or None.

The messages say what is wrong and what a valid value looks like, since kubectl shows them as-is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from queuectl.api import names

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DIGITS = re.compile(r"^[0-9]+$")
INT32_MAX = 2**31 - 1


def is_dns1123_label(value: str) -> bool:
    """RFC 1123 label: what Kubernetes requires of most object names in one segment."""
    return len(value) <= 63 and bool(_DNS1123_LABEL.match(value))


def queue_name_problem(value: str) -> str | None:
    """Problem with a queuectl.io/queue-name value, if any."""
    if is_dns1123_label(value):
        return None
    return (
        f"label {names.LABEL_QUEUE_NAME}={value!r} is not a valid LocalQueue name: use at most 63 "
        "lowercase letters, digits and '-', starting and ending with a letter or digit "
        "(e.g. 'team-a')"
    )


def priority_class_problem(value: str) -> str | None:
    """Problem with a queuectl.io/priority-class value (a WorkloadPriorityClass name), if any."""
    if len(value) <= 63 and _DNS1123_SUBDOMAIN.match(value):
        return None
    return (
        f"label {names.LABEL_PRIORITY_CLASS}={value!r} is not a valid WorkloadPriorityClass "
        "name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or "
        "digit, at most 63 characters (e.g. 'production'); `kubectl get wpc` lists them"
    )


def max_exec_time_problem(value: str) -> str | None:
    """Problem with a queuectl.io/max-exec-time-seconds value, if any."""
    if _DIGITS.match(value) and 0 < int(value) <= INT32_MAX:
        return None
    return (
        f"label {names.LABEL_MAX_EXEC_TIME}={value!r} must be a whole number of seconds between "
        f"1 and {INT32_MAX}, written with digits only (e.g. '3600' for one hour)"
    )


def podset_group_problems(
    pod_sets: Sequence[tuple[str, tuple[str | None, ...]]], noun: str = "pod set"
) -> list[str]:
    """Problems with queuectl.io/podset-group-name on the pod templates: (pod set name,
    (required level, preferred level, group)) each. A group name is a DNS label, and the
    members of one group ask for the same level the same way (they share one domain of it)."""
    problems = []
    asks: dict[str, dict[tuple[str | None, ...], list[str]]] = {}
    for name, (required, preferred, group, *_) in pod_sets:
        if group is None:
            continue
        if not is_dns1123_label(group):
            problems.append(
                f"{noun} {name!r}: annotation {names.ANNOTATION_PODSET_GROUP_NAME}={group!r} is "
                "not a valid pod-set group name: use at most 63 lowercase letters, digits and "
                "'-', starting and ending with a letter or digit (e.g. 'ddp')"
            )
        elif required is None and preferred is None:
            problems.append(
                f"{noun} {name!r}: annotation {names.ANNOTATION_PODSET_GROUP_NAME}={group!r} "
                "needs a topology level to share: add "
                f"{names.ANNOTATION_PODSET_REQUIRED_TOPOLOGY} (or -preferred-) with the same level "
                "to every member of the group"
            )
        else:
            asks.setdefault(group, {}).setdefault((required, preferred), []).append(name)
    for group, levels in sorted(asks.items()):
        if len(levels) > 1:
            said = "; ".join(
                f"{', '.join(members)}: " + (f"required {req}" if req else f"preferred {pref}")
                for (req, pref), members in levels.items()
            )
            problems.append(
                f"the pod sets of pod-set group {group!r} ask for different topology levels "
                f"({said}); give every member the same level, required or preferred alike"
            )
    return problems


LABEL_CHECKS = {
    names.LABEL_QUEUE_NAME: queue_name_problem,
    names.LABEL_PRIORITY_CLASS: priority_class_problem,
    names.LABEL_MAX_EXEC_TIME: max_exec_time_problem,
}


def label_format_problems(new: Mapping[str, str], old: Mapping[str, str]) -> list[str]:
    """Malformed values among the queuectl labels that this request sets or changes."""
    problems = []
    for key, check in LABEL_CHECKS.items():
        value = new.get(key)
        if value is not None and value != old.get(key):
            problem = check(value)
            if problem:
                problems.append(problem)
    return problems
