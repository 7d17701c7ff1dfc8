"""The Mutating/ValidatingWebhookConfiguration objects, rendered in one place.

Used by the certificate manager (to know what to patch), by `queuectl dev up` (url: client config,
https://127.0.0.1:PORT) and by the kustomize base (service: client config; rendered by
`python -m queuectl.webhooks.configs`). Static configurations, one set for all replicas.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from queuectl.api import names

TIMEOUT_SECONDS = 5
EXCLUDED_NAMESPACES = ("kube-system", names.SYSTEM_NAMESPACE)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
QUEUECTL_RESOURCES = ["clusterqueues", "cohorts", "localqueues"]

# Webhook names (fully qualified, as the API requires); stable so patches can find them.
MUTATE_QUEUED_JOB = "queued-job.mutate.queuectl.io"
MUTATE_DEFAULT_QUEUE_JOB = "default-queue-job.mutate.queuectl.io"
VALIDATE_QUEUED_JOB = "queued-job.validate.queuectl.io"
VALIDATE_RESOURCES = "resources.validate.queuectl.io"


@dataclass(frozen=True)
class UrlClient:
    """Reach the webhooks at a URL: local development, https://127.0.0.1:PORT."""

    base_url: str

    def client_config(self, path: str, ca_bundle: bytes | None) -> dict[str, Any]:
        return _with_ca({"url": self.base_url.rstrip("/") + path}, ca_bundle)


@dataclass(frozen=True)
class ServiceClient:
    """Reach the webhooks through their Service: in-cluster."""

    name: str = names.WEBHOOK_SERVICE
    namespace: str = names.SYSTEM_NAMESPACE
    port: int = 443

    def client_config(self, path: str, ca_bundle: bytes | None) -> dict[str, Any]:
        service = {"name": self.name, "namespace": self.namespace, "path": path, "port": self.port}
        return _with_ca({"service": service}, ca_bundle)


def _with_ca(config: dict[str, Any], ca_bundle: bytes | None) -> dict[str, Any]:
    if ca_bundle:
        config["caBundle"] = base64.b64encode(ca_bundle).decode()
    return config


def _namespace_selector() -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": list(EXCLUDED_NAMESPACES)}
        ]
    }


def _queue_label(operator: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": names.LABEL_QUEUE_NAME, "operator": operator}]}


def _job_rule(operations: list[str]) -> dict[str, Any]:
    return {
        "apiGroups": ["batch"],
        "apiVersions": ["v1"],
        "resources": ["jobs"],
        "operations": operations,
        "scope": "Namespaced",
    }


def _webhook(
    name: str, client: dict[str, Any], rules: list[dict[str, Any]], fail: bool
) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": client,
        "rules": rules,
        "failurePolicy": "Fail" if fail else "Ignore",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1"],
        "matchPolicy": "Equivalent",
    }


def render_webhook_configurations(
    client: UrlClient | ServiceClient,
    ca_bundle: bytes | None = None,
    mutating_name: str = names.MUTATING_WEBHOOK_CONFIGURATION,
    validating_name: str = names.VALIDATING_WEBHOOK_CONFIGURATION,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) as plain dicts.

    Jobs carrying the queue label fail closed (failurePolicy Fail): a queued Job is never created
    unsuspended because the webhook was down. Unlabelled Jobs only matter in namespaces with a
    `default` LocalQueue; that webhook sees every Job create, so it fails open (Ignore).
    """

    def mutate_path() -> dict[str, Any]:  # a fresh dict per webhook: no YAML anchors
        return client.client_config(names.WEBHOOK_PATH_MUTATE_JOB, ca_bundle)

    queued = _webhook(
        MUTATE_QUEUED_JOB, mutate_path(), [_job_rule(["CREATE", "UPDATE"])], fail=True
    )
    queued |= {
        "namespaceSelector": _namespace_selector(),
        "objectSelector": _queue_label("Exists"),
        "reinvocationPolicy": "IfNeeded",
    }
    default = _webhook(MUTATE_DEFAULT_QUEUE_JOB, mutate_path(), [_job_rule(["CREATE"])], fail=False)
    default |= {
        "namespaceSelector": _namespace_selector(),
        "objectSelector": _queue_label("DoesNotExist"),
        "reinvocationPolicy": "Never",
    }
    validate_job = _webhook(
        VALIDATE_QUEUED_JOB,
        client.client_config(names.WEBHOOK_PATH_VALIDATE_JOB, ca_bundle),
        [_job_rule(["CREATE", "UPDATE"])],
        fail=True,
    )
    validate_job |= {
        "namespaceSelector": _namespace_selector(),
        "objectSelector": _queue_label("Exists"),
    }
    resources = _webhook(
        VALIDATE_RESOURCES,
        client.client_config(names.WEBHOOK_PATH_VALIDATE_QUEUECTL, ca_bundle),
        [
            {
                "apiGroups": [names.GROUP],
                "apiVersions": [names.VERSION],
                "resources": QUEUECTL_RESOURCES,
                "operations": ["CREATE", "UPDATE"],
                "scope": "*",
            }
        ],
        fail=True,
    )
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": mutating_name, "labels": {"app.kubernetes.io/name": "queuectl"}},
        "webhooks": [queued, default],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": validating_name, "labels": {"app.kubernetes.io/name": "queuectl"}},
        "webhooks": [validate_job, resources],
    }
    return mutating, validating


def main(argv: list[str] | None = None) -> int:
    """Print the in-cluster configurations as YAML (for deploy/kustomize), or JSON with --json."""
    args = sys.argv[1:] if argv is None else argv
    docs = render_webhook_configurations(ServiceClient())
    if "--json" in args:
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}, indent=2))
    else:
        print(yaml.safe_dump_all(docs, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
