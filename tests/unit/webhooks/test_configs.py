"""The rendered webhook configurations: safe failure policies, exclusions, both client kinds."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml

from queuectl.api import names, owned
from queuectl.webhooks import configs
from queuectl.webhooks.configs import ServiceClient, UrlClient, render_webhook_configurations

CA = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"


def by_name(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in config["webhooks"]}


@pytest.mark.parametrize("client", [UrlClient("https://127.0.0.1:9443"), ServiceClient()])
def test_every_webhook_is_v1_side_effect_free_and_quick(client: UrlClient | ServiceClient) -> None:
    mutating, validating = render_webhook_configurations(client, CA)
    assert mutating["metadata"]["name"] == names.MUTATING_WEBHOOK_CONFIGURATION
    assert validating["metadata"]["name"] == names.VALIDATING_WEBHOOK_CONFIGURATION
    for hook in mutating["webhooks"] + validating["webhooks"]:
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 5
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == CA


def test_queued_jobs_fail_closed_and_unlabelled_jobs_fail_open() -> None:
    mutating, validating = render_webhook_configurations(ServiceClient(), CA)
    mutate, validate = by_name(mutating), by_name(validating)
    queued = mutate[configs.MUTATE_QUEUED_JOB]
    assert queued["failurePolicy"] == "Fail"
    assert queued["objectSelector"] == {
        "matchExpressions": [{"key": names.LABEL_QUEUE_NAME, "operator": "Exists"}]
    }
    unlabelled = mutate[configs.MUTATE_DEFAULT_QUEUE_JOB]
    assert unlabelled["failurePolicy"] == "Ignore"
    assert unlabelled["rules"][0]["operations"] == ["CREATE"]
    assert unlabelled["objectSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"
    assert unlabelled["clientConfig"]["service"]["path"] == names.WEBHOOK_PATH_MUTATE_UNLABELLED_JOB
    assert queued["clientConfig"]["service"]["path"] == names.WEBHOOK_PATH_MUTATE_JOB
    assert validate[configs.VALIDATE_QUEUED_JOB]["failurePolicy"] == "Fail"
    assert validate[configs.VALIDATE_RESOURCES]["failurePolicy"] == "Fail"
    assert validate[configs.VALIDATE_WORKLOADS]["failurePolicy"] == "Fail"
    assert validate[configs.VALIDATE_RESOURCES]["rules"][0]["resources"] == [
        "clusterqueues",
        "cohorts",
        "localqueues",
    ]


def test_unlabelled_children_are_validated_failing_open() -> None:
    """A queued job's children carry no queue label: a webhook of their own judges them
    against their owner, sent only objects some controller owns (before or after the write),
    so the cluster's other Jobs never wait on queuectl."""
    _, validating = render_webhook_configurations(ServiceClient(), CA)
    owned = by_name(validating)[configs.VALIDATE_OWNED_JOB]
    assert owned["failurePolicy"] == "Ignore"
    assert owned["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert owned["objectSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"
    assert owned["clientConfig"]["service"]["path"] == names.WEBHOOK_PATH_VALIDATE_OWNED_JOB
    (condition,) = owned["matchConditions"]
    assert "object.metadata.ownerReferences" in condition["expression"]
    assert "oldObject.metadata.ownerReferences" in condition["expression"]


def test_system_namespaces_are_excluded_from_job_webhooks() -> None:
    mutating, validating = render_webhook_configurations(ServiceClient())
    job_hooks = mutating["webhooks"] + [by_name(validating)[configs.VALIDATE_QUEUED_JOB]]
    for hook in job_hooks:
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr == {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", names.SYSTEM_NAMESPACE],
        }


def test_client_configs_point_at_each_route() -> None:
    local, _ = render_webhook_configurations(UrlClient("https://127.0.0.1:9443/"))
    assert local["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate-job"}
    _, cluster = render_webhook_configurations(ServiceClient(port=8443))
    assert by_name(cluster)[configs.VALIDATE_RESOURCES]["clientConfig"] == {
        "service": {
            "name": names.WEBHOOK_SERVICE,
            "namespace": names.SYSTEM_NAMESPACE,
            "path": names.WEBHOOK_PATH_VALIDATE_QUEUECTL,
            "port": 8443,
        }
    }


def test_the_module_prints_the_in_cluster_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert configs.main([]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    assert "caBundle" not in docs[0]["webhooks"][0]["clientConfig"]


def test_users_writes_to_workloads_are_validated_but_never_the_controllers() -> None:
    _, validating = render_webhook_configurations(ServiceClient())
    hook = by_name(validating)[configs.VALIDATE_WORKLOADS]
    assert hook["rules"][0]["resources"] == ["workloads", "workloads/status"]
    assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert hook["matchConditions"] == [
        {
            "name": "not-the-controller",
            "expression": f"request.userInfo.username != '{names.CONTROLLER_USERNAME}'",
        }
    ]


def test_installed_in_another_namespace_the_configurations_follow_it() -> None:
    mutating, validating = render_webhook_configurations(
        ServiceClient(namespace="batch-system"), namespace="batch-system"
    )
    hooks = by_name(mutating) | by_name(validating)
    for name in (configs.MUTATE_QUEUED_JOB, configs.MUTATE_DEFAULT_QUEUE_JOB):
        (expr,) = hooks[name]["namespaceSelector"]["matchExpressions"]
        assert expr["values"] == ["kube-system", "batch-system"]
    assert hooks[configs.VALIDATE_WORKLOADS]["matchConditions"][0]["expression"] == (
        "request.userInfo.username != 'system:serviceaccount:batch-system:queuectl-controller'"
    )


def test_objects_carrying_our_keys_are_sent_without_the_queue_label() -> None:
    """Our keys are ours on every object queuectl reads: an unlabelled child Job or pod that
    carries one is validated too, and only such objects (matchConditions), never the
    controller's own writes."""
    _, validating = render_webhook_configurations(UrlClient("https://127.0.0.1:9443"))
    hooks = {h["name"]: h for h in validating["webhooks"]}
    for name, path, kind in (
        (configs.VALIDATE_OWNED_KEYS_JOB, names.WEBHOOK_PATH_VALIDATE_JOB, "jobs"),
        (configs.VALIDATE_OWNED_KEYS_POD, names.WEBHOOK_PATH_VALIDATE_POD, "pods"),
    ):
        hook = hooks[name]
        assert hook["failurePolicy"] == "Fail"
        assert hook["clientConfig"]["url"].endswith(path)
        assert any(kind in r["resources"] for r in hook["rules"])
        assert hook["objectSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"
        conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
        assert names.CONTROLLER_USERNAME in conditions["not-the-controller"]
        for key in owned.OWNED_LABELS | owned.OWNED_ANNOTATIONS:
            assert json.dumps(key) in conditions["carries-our-keys"]
