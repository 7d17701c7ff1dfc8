"""AdmissionReview envelopes: checking what the API server sent and building what we answer.

Kept apart from the decisions so that every decision is a plain function of a checked request
dict, and so that a malformed review is rejected in one place with a reason (HTTP 400).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})

Request = Mapping[str, Any]
Response = dict[str, Any]
JsonPatch = list[dict[str, Any]]


class MalformedReview(ValueError):
    """The body is not an AdmissionReview v1 request we can decide on; the message says why."""


def parse_review(body: bytes | str) -> dict[str, Any]:
    """Parse and check an AdmissionReview body; returns its `request`.

    Raises MalformedReview naming the first problem found.
    """
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedReview(f"body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise MalformedReview("body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != ADMISSION_API_VERSION:
        raise MalformedReview(
            f"apiVersion must be {ADMISSION_API_VERSION!r}, got {review.get('apiVersion')!r}"
        )
    if review.get("kind") != ADMISSION_KIND:
        raise MalformedReview(f"kind must be {ADMISSION_KIND!r}, got {review.get('kind')!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid is missing or empty")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise MalformedReview("request.kind must be an object with a string 'kind'")
    if request.get("operation") not in OPERATIONS:
        raise MalformedReview(f"request.operation must be one of {sorted(OPERATIONS)}")
    for field in ("object", "oldObject"):
        value = request.get(field)
        if value is not None and not isinstance(value, dict):
            raise MalformedReview(f"request.{field} must be an object or null")
    return request


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
