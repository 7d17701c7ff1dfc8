"""Turn a pydantic JSON schema into a structural OpenAPI v3 schema the API server accepts.

Pydantic speaks JSON Schema: ``$ref``/``$defs`` for nested models, ``anyOf [X, null]`` for
optional fields, titles everywhere. A CRD needs every node inlined with a ``type``, no null
branches, and ``anyOf`` only in the int-or-string form. Validation keywords (bounds, patterns,
enums, defaults, ``x-kubernetes-*``) pass through untouched, but for exclusive bounds, which
OpenAPI v3 spells as a flag beside ``minimum``/``maximum``.
"""

from __future__ import annotations

from typing import Any, Final

from queuectl.api.base import Resource

# Keys that describe, not validate: dropped (titles) or kept as is.
_DROPPED: Final = frozenset({"title", "$defs"})
_INT_OR_STRING: Final = "x-kubernetes-int-or-string"
_FIRST: Final = ("description", "type")
_EXCLUSIVE: Final = {"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}


class SchemaError(ValueError):
    """A model whose schema cannot be made structural; the message names the path."""


def _merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """The referenced schema with the referring node's own keys (default, description) on top."""
    merged = {**base, **overlay}
    first = {k: merged[k] for k in _FIRST if k in merged}
    return first | {k: v for k, v in merged.items() if k not in first}


def _convert(node: Any, defs: dict[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise SchemaError(f"{path}: expected a schema object, got {node!r}")
    node = {k: v for k, v in node.items() if k not in _DROPPED}
    if node.get("default", 0) is None:
        del node["default"]

    ref = node.pop("$ref", None)
    if ref is not None:
        target = defs[ref.rsplit("/", 1)[-1]]
        return _merge(_convert(target, defs, path), _convert_siblings(node, defs, path))

    branches = node.get("anyOf")
    if branches is not None and not node.get(_INT_OR_STRING):
        real = [b for b in branches if b != {"type": "null"}]
        if len(real) != 1:
            raise SchemaError(f"{path}: a union of {len(real)} types is not structural")
        del node["anyOf"]
        return _merge(_convert(real[0], defs, path), _convert_siblings(node, defs, path))
    return _convert_siblings(node, defs, path)


def _convert_siblings(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    # description and type first: the generated YAML reads like a hand-written CRD.
    out: dict[str, Any] = {k: node[k] for k in _FIRST if k in node}
    for key, value in node.items():
        if key == "properties":
            out[key] = {n: _convert(s, defs, f"{path}.{n}") for n, s in value.items()}
        elif key == "items":
            out[key] = _convert(value, defs, f"{path}[]")
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out[key] = _convert(value, defs, f"{path}{{}}")
            # `additionalProperties: true` means "anything": preserve-unknown-fields says it.
        elif key == "const":
            out["enum"] = [value]
        elif key in _EXCLUSIVE and not isinstance(value, bool):
            # JSON Schema's `exclusiveMinimum: N` is OpenAPI v3's `minimum: N` + a flag
            out[_EXCLUSIVE[key]] = value
            out[key] = True
        else:
            out[key] = value
    return out


def structural(model: type[Resource]) -> dict[str, Any]:
    """The openAPIV3Schema of a top-level kind."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema = _convert(raw, raw.get("$defs", {}), model.__name__)
    props = schema["properties"]
    # apiVersion, kind and metadata are the API server's business: plain, without defaults.
    props["apiVersion"] = {"type": "string", "description": "The API version, queuectl.io/v1beta1."}
    props["kind"] = {"type": "string", "description": "The kind of the object."}
    props["metadata"] = {"type": "object"}
    required = [r for r in schema.pop("required", []) if r not in _SERVER_FIELDS]
    if required:
        schema["required"] = required
    _check_structural(schema, model.__name__)
    return schema


_SERVER_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})


def _check_structural(node: dict[str, Any], path: str) -> None:
    """Fail at generation time on what the API server would refuse at install time."""
    if (
        "type" not in node
        and not node.get(_INT_OR_STRING)
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        raise SchemaError(f"{path}: no type")
    if "anyOf" in node and not node.get(_INT_OR_STRING):
        raise SchemaError(f"{path}: anyOf outside int-or-string")
    for name, child in node.get("properties", {}).items():
        _check_structural(child, f"{path}.{name}")
    if "items" in node:
        _check_structural(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        _check_structural(node["additionalProperties"], f"{path}{{}}")
