"""The Mutating/ValidatingWebhookConfiguration objects, rendered in one place.

Used by the certificate manager (to know what to patch), by `queuectl dev up` (url: client config,
https://127.0.0.1:PORT) and by the kustomize base (service: client config; rendered by
`python -m queuectl.webhooks.configs`). Static configurations, one set for all replicas. Which
requests each hook is sent (rules, selectors, CEL match conditions) is `matching.py`.
"""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from queuectl.api import names
from queuectl.jobs.registry import KINDS, Registry
from queuectl.webhooks import matching

TIMEOUT_SECONDS = 5

# Webhook names (fully qualified, as the API requires); stable so patches can find them.
MUTATE_QUEUED_JOB = "queued-job.mutate.queuectl.io"
MUTATE_DEFAULT_QUEUE_JOB = "default-queue-job.mutate.queuectl.io"
MUTATE_KUEUE_LABELLED_JOB = "kueue-labelled-job.mutate.queuectl.io"
VALIDATE_QUEUED_JOB = "queued-job.validate.queuectl.io"
VALIDATE_OWNED_JOB = "owned-job.validate.queuectl.io"
VALIDATE_SCALE = "scale.validate.queuectl.io"
VALIDATE_RESOURCES = "resources.validate.queuectl.io"
VALIDATE_WORKLOADS = "workloads.validate.queuectl.io"
MUTATE_QUEUED_POD = "queued-pod.mutate.queuectl.io"
MUTATE_QUEUED_LWS = "queued-leaderworkerset.mutate.queuectl.io"
VALIDATE_QUEUED_POD = "queued-pod.validate.queuectl.io"
# Pods created carrying the pod-pins annotation (an admitted sliced job's): pinned to their
# index's nodes (webhooks/pinned.py).
MUTATE_PINNED_POD = "pinned-pod.mutate.queuectl.io"
# Objects without the queue label that carry one of queuectl's own keys (webhooks/owned.py).
VALIDATE_OWNED_KEYS_JOB = "owned-keys-job.validate.queuectl.io"
VALIDATE_OWNED_KEYS_POD = "owned-keys-pod.validate.queuectl.io"
# Unlabelled pods created claiming a Job whose selector labels they lack (webhooks/owners.py).
VALIDATE_JOB_POD = "job-pod.validate.queuectl.io"


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


def controller_username(namespace: str = names.SYSTEM_NAMESPACE) -> str:
    """The controller's in-cluster user: its ServiceAccount in the namespace it is installed in."""
    return f"system:serviceaccount:{namespace}:{names.CONTROLLER_SERVICE_ACCOUNT}"


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
    namespace: str = names.SYSTEM_NAMESPACE,
    controller_user: str | None = None,
    kinds: Registry = KINDS,
    kueue_queue_label: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) as plain dicts.

    Failure policies, one decision per webhook (docs/design/webhooks.md "Failure policies"):
    Jobs carrying the queue label fail closed, so a queued Job is never created unsuspended
    because the webhook was down. Unlabelled Jobs only matter in namespaces with a `default`
    LocalQueue; that webhook sees every Job create in the cluster, so it has its own route and
    fails open. queuectl resources and user writes to Workloads fail closed; the Workload webhook
    does not see the controller's own writes (matchConditions), so they never depend on it.
    `namespace` is where queuectl is installed: excluded from the Job webhooks, and the namespace
    of the controller's user unless `controller_user` says otherwise. The job webhooks match
    every kind in `kinds`. `kueue_queue_label`: a Job created with Kueue's queue label and not
    queuectl's is queued like a labelled one, through a webhook of its own that fails closed
    (the unlabelled-Job webhook then leaves such Jobs out).
    """
    user = controller_user or controller_username(namespace)

    def job_hook(name: str, path: str, operations: list[str], fail: bool) -> dict[str, Any]:
        hook = _webhook(
            name,
            client.client_config(path, ca_bundle),
            matching.job_rules(kinds, operations),
            fail=fail,
        )
        return hook | {"namespaceSelector": matching.namespace_selector(namespace)}

    queued = job_hook(
        MUTATE_QUEUED_JOB, names.WEBHOOK_PATH_MUTATE_JOB, ["CREATE", "UPDATE"], fail=True
    )
    queued |= {"objectSelector": matching.queue_label("Exists"), "reinvocationPolicy": "IfNeeded"}
    default = job_hook(
        MUTATE_DEFAULT_QUEUE_JOB, names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB, ["CREATE"], fail=False
    )
    kueue = "DoesNotExist" if kueue_queue_label else None
    default |= {
        "objectSelector": matching.queue_label("DoesNotExist", kueue),
        "reinvocationPolicy": "Never",
    }
    kueue_hooks = []
    if kueue_queue_label:
        kueue_job = job_hook(
            MUTATE_KUEUE_LABELLED_JOB, names.WEBHOOK_PATH_MUTATE_JOB, ["CREATE"], fail=True
        )
        kueue_job |= {
            "objectSelector": matching.queue_label("DoesNotExist", "Exists"),
            "reinvocationPolicy": "Never",
        }
        kueue_hooks.append(kueue_job)
    validate_job = job_hook(
        VALIDATE_QUEUED_JOB, names.WEBHOOK_PATH_VALIDATE_JOB, ["CREATE", "UPDATE"], fail=True
    )
    validate_job |= {"objectSelector": matching.queue_label("Exists")}
    # A queued job's children carry no queue label (their owner is queued): judged against
    # their owner (`jobs.validate_job`, children_only). Only objects some controller owns are
    # sent (old or new: dropping the reference is judged too), so the rest of the cluster's
    # Jobs never wait on queuectl; it fails open, like the unlabelled-Job mutation, and the
    # controller's drift check and pod accounting stand behind it while it is down.
    owned_job = job_hook(
        VALIDATE_OWNED_JOB, names.WEBHOOK_PATH_VALIDATE_OWNED_JOB, ["CREATE", "UPDATE"], fail=False
    )
    owned_job |= {
        "objectSelector": matching.queue_label("DoesNotExist"),
        "matchConditions": [
            {
                "name": "controlled",
                "expression": matching.CONTROLLED.format(o="object")
                + " || (oldObject != null && "
                + matching.CONTROLLED.format(o="oldObject")
                + ")",
            }
        ],
    }
    resources = _webhook(
        VALIDATE_RESOURCES,
        client.client_config(names.WEBHOOK_PATH_VALIDATE_QUEUECTL, ca_bundle),
        [
            {
                "apiGroups": [names.GROUP],
                "apiVersions": [names.VERSION],
                "resources": matching.QUEUECTL_RESOURCES,
                "operations": ["CREATE", "UPDATE"],
                "scope": "*",
            }
        ],
        fail=True,
    )
    workloads = _webhook(
        VALIDATE_WORKLOADS,
        client.client_config(names.WEBHOOK_PATH_VALIDATE_WORKLOAD, ca_bundle),
        [
            {
                "apiGroups": [names.GROUP],
                "apiVersions": [names.VERSION],
                "resources": ["workloads", "workloads/status"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }
        ],
        fail=True,
    )
    # Plain pod groups: only pods carrying the queue label are sent (objectSelector), so the rest
    # of the cluster's pods never wait on queuectl; those fail closed like queued Jobs.
    pod_hooks = []
    for name, path in (
        (MUTATE_QUEUED_POD, names.WEBHOOK_PATH_MUTATE_POD),
        (VALIDATE_QUEUED_POD, names.WEBHOOK_PATH_VALIDATE_POD),
    ):
        hook = _webhook(name, client.client_config(path, ca_bundle), matching.POD_RULES, fail=True)
        hook |= {
            "namespaceSelector": matching.namespace_selector(namespace),
            "objectSelector": matching.queue_label("Exists"),
        }
        pod_hooks.append(hook)
    # A pod of an admitted sliced job: only pods carrying the pin annotation are sent, so the
    # rest of the cluster's pods never wait on queuectl; fails closed, so such a pod is never
    # created unpinned (its Job controller retries the create).
    pinned = _webhook(
        MUTATE_PINNED_POD,
        client.client_config(names.WEBHOOK_PATH_MUTATE_PINNED_POD, ca_bundle),
        [{**matching.POD_RULES[0], "operations": ["CREATE"]}],
        fail=True,
    )
    pinned |= {
        "namespaceSelector": matching.namespace_selector(namespace),
        "matchConditions": [{"name": "carries-pins", "expression": matching.CARRIES_PINS}],
        "reinvocationPolicy": "IfNeeded",
    }
    # LWS's own pod webhook adds the group index to a leader pod: ours runs again after it.
    pod_hooks[0]["reinvocationPolicy"] = "IfNeeded"
    lws = _webhook(
        MUTATE_QUEUED_LWS,
        client.client_config(names.WEBHOOK_PATH_MUTATE_LWS, ca_bundle),
        matching.LWS_RULES,
        fail=True,
    )
    lws |= {
        "namespaceSelector": matching.namespace_selector(namespace),
        "objectSelector": matching.queue_label("Exists"),
        "reinvocationPolicy": "IfNeeded",
    }
    not_the_controller = {
        "name": "not-the-controller",
        "expression": f"request.userInfo.username != {user!r}",
    }
    workloads["matchConditions"] = [not_the_controller]
    # `kubectl scale` on a job kind: the review carries a Scale (no labels, so no
    # objectSelector could tell a queued job's from any other; the route reads the job). Every
    # scale of a registered kind is sent, and it fails closed like the queued-job hook: a
    # queued job scaled while the webhook is down would run more pods than it was admitted.
    scale = job_hook(VALIDATE_SCALE, names.WEBHOOK_PATH_VALIDATE_SCALE, [], fail=True)
    scale |= {
        "rules": matching.job_rules(kinds, ["UPDATE"], subresource="scale"),
        "matchConditions": [not_the_controller],
    }

    # Our keys are ours on every object queuectl reads, labelled or not (the queued hooks
    # above see the labelled ones); fail closed like them.
    def unlabelled(
        name: str, path: str, rules: list[dict[str, Any]], when: dict[str, str]
    ) -> dict[str, Any]:
        """A fail-closed hook for objects without the queue label, sent only `when` (CEL)."""
        hook = _webhook(name, client.client_config(path, ca_bundle), rules, fail=True)
        return hook | {
            "namespaceSelector": matching.namespace_selector(namespace),
            "objectSelector": matching.queue_label("DoesNotExist"),
            "matchConditions": [not_the_controller, when],
        }

    owned_hooks = [
        unlabelled(
            VALIDATE_OWNED_KEYS_JOB,
            names.WEBHOOK_PATH_VALIDATE_JOB,
            matching.job_rules(kinds, ["CREATE", "UPDATE"]),
            {"name": "carries-our-keys", "expression": matching.carries_our_keys(False)},
        ),
        unlabelled(
            VALIDATE_OWNED_KEYS_POD,
            names.WEBHOOK_PATH_VALIDATE_POD,
            matching.POD_RULES,
            {"name": "carries-our-keys", "expression": matching.carries_our_keys(True)},
        ),
    ]
    # A pod claiming a queued Job that its selector does not match would be released by the
    # Job controller and run outside the queue, and one claiming a Kubeflow job without the
    # workload label was not made by its operator; fail closed like the hooks above (only such
    # claims, and pods of Jobs with a manual selector, are sent).
    job_pod = unlabelled(
        VALIDATE_JOB_POD,
        names.WEBHOOK_PATH_VALIDATE_POD,
        matching.POD_RULES,
        {
            "name": "claims-a-job-unselected",
            "expression": f"({matching.CLAIMS_A_JOB_UNSELECTED}) || "
            f"({matching.CLAIMS_A_KUBEFLOW_JOB_UNLABELLED})",
        },
    )
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": mutating_name, "labels": {"app.kubernetes.io/name": "queuectl"}},
        "webhooks": [queued, default, *kueue_hooks, pod_hooks[0], pinned, lws],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": validating_name, "labels": {"app.kubernetes.io/name": "queuectl"}},
        "webhooks": [
            validate_job,
            owned_job,
            scale,
            resources,
            workloads,
            pod_hooks[1],
            *owned_hooks,
            job_pod,
        ],
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
