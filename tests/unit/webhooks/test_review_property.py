"""Whatever JSON arrives, checking it either yields a request or a MalformedReview with a reason."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from webhook_cases import job, request

from queuectl.api import names
from queuectl.webhooks.review import MalformedReview, parse_review

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
ENVELOPE_FIELDS = ["uid", "kind", "operation", "name", "namespace", "subResource", "dryRun",
                   "userInfo", "object", "oldObject"]  # fmt: skip
OBJECT_FIELDS = ["metadata", "spec", "status"]
META_FIELDS = ["name", "namespace", "uid", "labels", "annotations", "ownerReferences",
               "deletionTimestamp", "resourceVersion"]  # fmt: skip


def review(req: dict[str, Any]) -> bytes:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    return json.dumps(body).encode()


def checked(body: bytes) -> dict[str, Any] | str:
    try:
        return parse_review(body)
    except MalformedReview as exc:
        assert str(exc), "a refusal always says why"
        return str(exc)


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(ENVELOPE_FIELDS), value=JSON)
def test_any_value_in_any_envelope_field_is_accepted_typed_or_refused(
    field: str, value: Any
) -> None:
    req = request(job({names.LABEL_QUEUE_NAME: "gpu"}))
    req[field] = value
    result = checked(review(req))
    if isinstance(result, dict):
        assert isinstance(result["uid"], str) and result["uid"]
        assert isinstance(result["operation"], str)
        for name in ("object", "oldObject"):
            assert result.get(name) is None or isinstance(result[name], dict)


@settings(max_examples=300, deadline=None)
@given(
    part=st.sampled_from(OBJECT_FIELDS),
    meta_field=st.sampled_from(META_FIELDS),
    value=JSON,
    in_metadata=st.booleans(),
)
def test_any_value_in_the_objects_envelope_is_accepted_typed_or_refused(
    part: str, meta_field: str, value: Any, in_metadata: bool
) -> None:
    req = request(job({names.LABEL_QUEUE_NAME: "gpu"}))
    if in_metadata:
        req["object"]["metadata"][meta_field] = value
    else:
        req["object"][part] = value
    result = checked(review(req))
    if isinstance(result, dict):
        meta = result["object"].get("metadata") or {}
        assert isinstance(meta, dict)
        for name in ("labels", "annotations"):
            assert all(isinstance(v, str) for v in (meta.get(name) or {}).values())


@given(body=st.binary(max_size=64) | JSON.map(lambda v: json.dumps(v).encode()))
def test_any_body_is_accepted_or_refused_never_crashes(body: bytes) -> None:
    checked(body)
