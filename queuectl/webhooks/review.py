"""AdmissionReview envelopes: checking what the API server sent and building what we answer.

Kept apart from the decisions so that every decision is a plain function of a checked request
dict, and so that a malformed review is rejected in one place with a reason (HTTP 400).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from queuectl.api import names
from queuectl.api.views import ObjectView

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})

Request = Mapping[str, Any]
Response = dict[str, Any]
JsonPatch = list[dict[str, Any]]

DEFAULT_CONTROLLER_USERS: frozenset[str] = frozenset({names.CONTROLLER_USERNAME})
"""Whose writes every webhook lets through: the controller's own service account."""


class MalformedReview(ValueError):
    """The body is not an AdmissionReview v1 request we can decide on; the message says why."""


def parse_review(body: bytes | str) -> dict[str, Any]:
    """Parse and check an AdmissionReview body; returns its `request`.

    Raises MalformedReview naming the first problem found. Every field the decisions read through
    the shared helpers is type-checked here, so a hostile body is a 400, never a handler crash.
    """
    try:
        review = json.loads(body)
    except RecursionError:
        raise MalformedReview("body is nested too deeply to be an AdmissionReview") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedReview(f"body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise MalformedReview("body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != ADMISSION_API_VERSION:
        raise MalformedReview(
            f"apiVersion must be {ADMISSION_API_VERSION!r}, got {_shown(review.get('apiVersion'))}"
        )
    if review.get("kind") != ADMISSION_KIND:
        raise MalformedReview(f"kind must be {ADMISSION_KIND!r}, got {_shown(review.get('kind'))}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid is missing or empty")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise MalformedReview("request.kind must be an object with a string 'kind'")
    for field in ("group", "version"):
        _optional(kind, field, str, f"request.kind.{field}")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise MalformedReview(f"request.operation must be one of {sorted(OPERATIONS)}")
    for field in ("name", "namespace", "subResource"):
        _optional(request, field, str, f"request.{field}")
    _optional(request, "dryRun", bool, "request.dryRun")
    _check_user_info(request.get("userInfo"))
    for field in ("object", "oldObject"):
        _check_object(request.get(field), f"request.{field}")
    return request


def _shown(value: Any) -> str:
    """A value for an error message, cut short: the body may be huge or hostile."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _optional(parent: Mapping[str, Any], field: str, kind: type, where: str) -> None:
    value = parent.get(field)
    if value is not None and not isinstance(value, kind):
        raise MalformedReview(f"{where} must be a {_TYPE_NAMES[kind]} or absent")


_TYPE_NAMES: dict[type, str] = {str: "string", bool: "boolean", dict: "object", list: "list"}


def _check_user_info(info: Any) -> None:
    if info is None:
        return
    if not isinstance(info, dict):
        raise MalformedReview("request.userInfo must be an object or absent")
    _optional(info, "username", str, "request.userInfo.username")
    groups = info.get("groups")
    if groups is not None and (
        not isinstance(groups, list) or not all(isinstance(g, str) for g in groups)
    ):
        raise MalformedReview("request.userInfo.groups must be a list of strings or absent")


def _check_object(obj: Any, where: str) -> None:
    """The object's envelope: what every decision reads before its own kind-specific fields."""
    if obj is None:
        return
    if not isinstance(obj, dict):
        raise MalformedReview(f"{where} must be an object or null")
    for field in ("spec", "status"):
        _optional(obj, field, dict, f"{where}.{field}")
    meta = obj.get("metadata")
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise MalformedReview(f"{where}.metadata must be an object or absent")
    for field in ("name", "namespace", "uid", "deletionTimestamp", "resourceVersion"):
        _optional(meta, field, str, f"{where}.metadata.{field}")
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is not None and (
            not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values())
        ):
            raise MalformedReview(f"{where}.metadata.{field} must map strings to strings")
    owners = meta.get("ownerReferences")
    if owners is not None and (
        not isinstance(owners, list) or not all(isinstance(o, dict) for o in owners)
    ):
        raise MalformedReview(f"{where}.metadata.ownerReferences must be a list of objects")


def review(response: Response) -> dict[str, Any]:
    """Wrap a response in the AdmissionReview envelope the API server expects back."""
    return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": response}


def allow(
    request: Request, patch: Sequence[Mapping[str, Any]] = (), warnings: Iterable[str] = ()
) -> Response:
    """Allow, with a JSONPatch when there is one (an empty patch is left out)."""
    response: Response = {"uid": request["uid"], "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
    warns = list(warnings)
    if warns:
        response["warnings"] = warns
    return response


def deny(request: Request, message: str, code: int = 403, warnings: Iterable[str] = ()) -> Response:
    """Refuse with a message the user sees verbatim in kubectl's error."""
    response: Response = {
        "uid": request["uid"],
        "allowed": False,
        "status": {
            "code": code,
            "reason": "Forbidden" if code == 403 else "Invalid",
            "message": message,
        },
    }
    warns = list(warnings)
    if warns:
        response["warnings"] = warns
    return response


def decode_patch(response: Mapping[str, Any]) -> JsonPatch:
    """The JSONPatch of a response (empty when none); for tests and the dev CLI."""
    raw = response.get("patch")
    if not raw:
        return []
    decoded: JsonPatch = json.loads(base64.b64decode(raw))
    return decoded


def user_name(request: Request) -> str:
    """The authenticated user that sent the request ('' when absent)."""
    info = request.get("userInfo") or {}
    name = info.get("username", "") if isinstance(info, dict) else ""
    return name if isinstance(name, str) else ""


def escape_pointer(token: str) -> str:
    """Escape one JSON Pointer token (RFC 6901): label keys contain '/'."""
    return token.replace("~", "~0").replace("/", "~1")


def namespace_of(request: Request) -> str:
    """The namespace a review is about: the request's, else its object's."""
    obj = request.get("object") or request.get("oldObject") or {}
    ns = request.get("namespace") or ObjectView(obj).namespace
    return str(ns)


def label_patch(job: Mapping[str, Any], wanted: Mapping[str, str | None]) -> JsonPatch:
    """Ops that make the Job's labels match `wanted` (None = absent); empty when they already do."""
    current = ObjectView(job).labels
    if not ObjectView(job).labels:
        present = {k: v for k, v in wanted.items() if v is not None}
        return [{"op": "add", "path": "/metadata/labels", "value": present}] if present else []
    ops: JsonPatch = []
    for key, value in wanted.items():
        path = "/metadata/labels/" + escape_pointer(key)
        if value is None and key in current:
            ops.append({"op": "remove", "path": path})
        elif value is not None and current.get(key) != value:
            ops.append({"op": "add", "path": path, "value": value})
    return ops
