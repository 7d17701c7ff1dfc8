"""cluster-autoscaler's ProvisioningRequest kind (autoscaling.x-k8s.io/v1), for the local API
server.

The module that ships its CRD (k8s.io/autoscaler/cluster-autoscaler/apis) is not served by the
Go module proxy this project may use (every version tried answers 403), so this is written
here from the published API: the fields queuectl writes (spec.provisioningClassName,
spec.podSets[{podTemplateRef.name, count}], spec.parameters) and a status subresource whose
conditions (Provisioned, Failed, BookingExpired, CapacityRevoked) the autoscaler would set and a
test sets instead. Enough to prove queuectl's side of the contract; not a copy of the CRD.
"""

from __future__ import annotations

from typing import Any

GROUP = "autoscaling.x-k8s.io"
NAME = f"provisioningrequests.{GROUP}"


def crd() -> dict[str, Any]:
    pod_set = {
        "type": "object",
        "required": ["podTemplateRef", "count"],
        "properties": {
            "podTemplateRef": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string", "maxLength": 253}},
            },
            "count": {"type": "integer", "format": "int32", "minimum": 1},
        },
    }
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["provisioningClassName", "podSets"],
                "properties": {
                    "provisioningClassName": {"type": "string", "maxLength": 253},
                    "podSets": {"type": "array", "minItems": 1, "maxItems": 32, "items": pod_set},
                    "parameters": {
                        "type": "object",
                        "additionalProperties": {"type": "string", "maxLength": 32768},
                    },
                },
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "spec is immutable"}
                ],
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "ProvisioningRequest",
                "listKind": "ProvisioningRequestList",
                "plural": "provisioningrequests",
                "singular": "provisioningrequest",
                "shortNames": ["provreq", "provreqs"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
