"""Checks of the values users put in queuectl's Job labels; each returns a problem or None.

The messages say what is wrong and what a valid value looks like, since kubectl shows them as-is.
"""

from __future__ import annotations

import re

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


LABEL_CHECKS = {
    names.LABEL_QUEUE_NAME: queue_name_problem,
    names.LABEL_PRIORITY_CLASS: priority_class_problem,
    names.LABEL_MAX_EXEC_TIME: max_exec_time_problem,
}
