"""The real API server accepts our CRDs and every sample, and refuses bad objects in plain words.

Each bad object is refused twice: by the API server (CEL and schema in the generated CRD) and by
the pydantic models, with the same sentence, so `kubectl apply`, the webhooks and the CLI agree.
Cluster-scoped samples are applied with a server-side dry run (full validation, no trace left
for other tests in the session); namespaced ones are created for real in the test namespace.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from pydantic import ValidationError

from queuectl.api import KINDS, Resource, flavor, names, queues, quota, workload
from queuectl.api.quantity import NON_NEGATIVE_QUANTITY_MESSAGE
from queuectl.crds import load
from queuectl.crds.kinds import KIND_INFOS, KindInfo
from queuectl.testenv import eventually

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
FIELD_MANAGER = "queuectl-tests"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SERVER_FIELDS = frozenset({"apiVersion", "kind", "metadata"})
INFO_BY_KIND: dict[str, KindInfo] = {i.kind: i for i in KIND_INFOS}
MODEL_BY_KIND: dict[str, type[Resource]] = {m.model_fields["kind"].default: m for m in KINDS}


class Refused(Exception):
    """The API server said no; `message` is what a kubectl user would read."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def request(
    api: k8s.ApiClient,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    apply: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """One raw REST call returning the JSON body: error bodies and 201s stay visible."""
    query: list[tuple[str, str]] = []
    if dry_run:
        query.append(("dryRun", "All"))
    content_type = "application/json"
    if apply:
        query += [("fieldManager", FIELD_MANAGER), ("force", "true")]
        content_type = "application/apply-patch+yaml"
    elif method == "PATCH":
        content_type = "application/merge-patch+json"
    # param_serialize returns (method, url, headers, body, post_params); its hint says four.
    serialized = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
    )
    resp = api.call_api(
        serialized[0], serialized[1], header_params=serialized[2], body=serialized[3]
    )
    resp.read()  # type: ignore[no-untyped-call]
    data: dict[str, Any] = json.loads(resp.data or b"{}")
    if resp.status >= 300:
        raise Refused(resp.status, str(data.get("message", data)))
    return data


def path_of(obj: dict[str, Any], namespace: str | None = None) -> str:
    """The collection URL of one of our objects."""
    info = INFO_BY_KIND[obj["kind"]]
    base = f"/apis/{names.GROUP}/{names.VERSION}"
    if info.model.NAMESPACED:
        return f"{base}/namespaces/{namespace or obj['metadata']['namespace']}/{info.plural}"
    return f"{base}/{info.plural}"


@pytest.fixture(scope="module")
def crds(k8s_client: k8s.ApiClient) -> list[dict[str, Any]]:
    """Every generated CRD, server-side applied and Established."""
    installed = load()
    for crd in installed:
        url = f"{CRD_PATH}/{crd['metadata']['name']}"
        request(k8s_client, "PATCH", url, crd, apply=True)
    for crd in installed:
        url = f"{CRD_PATH}/{crd['metadata']['name']}"

        def established(url: str = url) -> bool:
            return conditions(request(k8s_client, "GET", url)).get("Established") == "True"

        eventually(established, what=f"{url} Established", timeout=30)
    return installed


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def create(api: k8s.ApiClient, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """Create one of our objects for real; raises Refused."""
    return request(api, "POST", path_of(obj, namespace), obj)


def dry_run_apply(api: k8s.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply with dry run: full validation, idempotent, leaves nothing behind."""
    name = obj["metadata"]["name"]
    url = "/api/v1/namespaces" if obj["kind"] == "Namespace" else path_of(obj)
    return request(api, "PATCH", f"{url}/{name}", obj, apply=True, dry_run=True)


def within(given: Any, served: Any) -> bool:
    """Whether everything given is in served unchanged (served may add defaults)."""
    if isinstance(given, dict):
        return isinstance(served, dict) and all(
            k in served and within(v, served[k]) for k, v in given.items()
        )
    if isinstance(given, list):
        return (
            isinstance(served, list)
            and len(given) == len(served)
            and all(within(g, s) for g, s in zip(given, served, strict=True))
        )
    return bool(given == served)


def sample_docs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc)
        for path in sorted(SAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def test_every_crd_is_established_with_a_structural_schema(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient
) -> None:
    for crd in crds:
        served = request(k8s_client, "GET", f"{CRD_PATH}/{crd['metadata']['name']}")
        conds = conditions(served)
        assert conds.get("Established") == "True"
        assert "NonStructuralSchema" not in conds, served["status"]
        accepted = served["status"]["acceptedNames"]
        assert accepted["shortNames"] == crd["spec"]["names"]["shortNames"]
        assert accepted["categories"] == ["queuectl"]


def test_every_sample_is_accepted(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient, namespace: str
) -> None:
    """In file order, like `kubectl apply -f config/samples/`."""
    accepted = []
    for where, doc in sample_docs():
        doc = copy.deepcopy(doc)
        if doc["kind"] == "Namespace":
            dry_run_apply(k8s_client, doc)
        elif doc["kind"] == "Pod":  # a plain pod group's member
            doc["metadata"]["namespace"] = namespace
            path = f"/api/v1/namespaces/{namespace}/pods"
            pod = request(k8s_client, "POST", path, doc, dry_run=True)
            labels = pod["metadata"]["labels"]
            assert names.LABEL_POD_GROUP_NAME in labels and names.LABEL_QUEUE_NAME in labels, where
        elif doc["kind"] == "Job":
            doc["metadata"]["namespace"] = namespace
            job = request(k8s_client, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", doc)
            assert job["spec"]["suspend"] is True, where
            assert names.LABEL_QUEUE_NAME in job["metadata"]["labels"], where
        else:
            if MODEL_BY_KIND[doc["kind"]].NAMESPACED:  # two samples share the name `default`
                doc["metadata"]["namespace"] = namespace
            out = dry_run_apply(k8s_client, doc)
            given = doc.get("spec", {k: v for k, v in doc.items() if k not in SERVER_FIELDS})
            served = out["spec"] if "spec" in doc else out
            assert within(given, served), where  # nothing pruned or changed, defaults added
            # What the server would store (with its defaults) reads as our model.
            MODEL_BY_KIND[doc["kind"]].model_validate(out)
        accepted.append(where)
    kinds = {w.split(":")[1].split("/")[0] for w in accepted}
    assert kinds >= {"Namespace", "Job", *MODEL_BY_KIND} - {"Workload"}


def test_server_defaults_match_the_model_defaults(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient
) -> None:
    minimal = {
        "apiVersion": names.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": unique("defaults")},
        "spec": {},
    }
    served = request(k8s_client, "POST", path_of(minimal), minimal, dry_run=True)
    model = MODEL_BY_KIND["ClusterQueue"].model_validate(minimal).to_api()
    assert served["spec"] == {k: v for k, v in model["spec"].items() if k != "resourceGroups"}
    wpc = {
        "apiVersion": names.API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": unique("wpc")},
        "value": 1,
    }
    served = request(k8s_client, "POST", path_of(wpc), wpc, dry_run=True)
    assert served["preemptionGracePeriodSeconds"] == 0


# --- bad objects ---------------------------------------------------------------------------


def unique(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:6]}"


def cluster_queue(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": unique("bad-cq")},
        "spec": spec,
    }


def gpu_group(*flavors: str, **quota_fields: Any) -> dict[str, Any]:
    return {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [
            {
                "name": f,
                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, **quota_fields}],
            }
            for f in (flavors or ("h100",))
        ],
    }


def with_cohort(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return cluster_queue({"cohortName": "org", "resourceGroups": list(groups), **spec})


def workload_obj(**spec: Any) -> dict[str, Any]:
    pod_set = {"name": "main", "count": 1, "template": {"spec": {"containers": []}}}
    return {
        "apiVersion": names.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": unique("bad-wl")},
        "spec": {"podSets": [pod_set], "queueName": "default", **spec},
    }


def sliced_workload(count: int, *slices: tuple[str, int]) -> dict[str, Any]:
    """A Workload of `count` pods in one block, in slices (level, size) outermost first."""
    request = {
        "required": names.LABEL_TOPOLOGY_BLOCK,
        "podSetSliceRequiredTopologyConstraints": [{"topology": t, "size": n} for t, n in slices],
    }
    pod_set = {"name": "w", "count": count, "template": {}, "topologyRequest": request}
    return workload_obj(podSets=[pod_set])


BadCase = tuple[str, Callable[[], dict[str, Any]], str]
BAD: list[BadCase] = [
    (
        "lendingLimit above nominalQuota",
        lambda: with_cohort(gpu_group(lendingLimit=9)),
        quota.LENDING_WITHIN_NOMINAL.message,
    ),
    (
        "the same flavor twice",
        lambda: with_cohort(gpu_group("h100", "h100")),
        quota.FLAVOR_ONCE.message,
    ),
    (
        "negative quota",
        lambda: with_cohort(gpu_group(borrowingLimit="-8")),
        NON_NEGATIVE_QUANTITY_MESSAGE,
    ),
    (
        "limits without a cohort",
        lambda: cluster_queue({"resourceGroups": [gpu_group(borrowingLimit=4)]}),
        queues.CQ_LIMITS_NEED_COHORT.message,
    ),
    ("half a GPU", lambda: with_cohort(gpu_group(nominalQuota="0.5")), quota.DEVICES_WHOLE.message),
    (
        "a resource in two groups",
        lambda: with_cohort(gpu_group("h100"), gpu_group("a100")),
        quota.RESOURCE_IN_ONE_GROUP.message,
    ),
    (
        "a resource twice in a flavor",
        lambda: with_cohort(
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}] * 2,
                    }
                ],
            }
        ),
        quota.RESOURCES_ONCE_PER_FLAVOR.message,
    ),
    (
        "a flavor without a covered resource",
        lambda: with_cohort({**gpu_group(), "coveredResources": ["nvidia.com/gpu", "cpu"]}),
        quota.FLAVORS_LIST_COVERED_RESOURCES.message,
    ),
    (
        "a covered resource listed twice",
        lambda: with_cohort(
            {**gpu_group(), "coveredResources": ["nvidia.com/gpu", "nvidia.com/gpu"]}
        ),
        quota.COVERED_RESOURCES_ONCE.message,
    ),
    (
        "borrowing preemption without reclaim",
        lambda: with_cohort(
            gpu_group(), preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}
        ),
        queues.BORROW_PREEMPTION_NEEDS_RECLAIM.message,
    ),
    (
        "a cohort that is its own parent",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "Cohort",
            "metadata": {"name": "loop"},
            "spec": {"parentName": "loop"},
        },
        queues.COHORT_NOT_OWN_PARENT.message,
    ),
    (
        "cohort limits without a parent",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "Cohort",
            "metadata": {"name": unique("root")},
            "spec": {"resourceGroups": [gpu_group(lendingLimit=2)]},
        },
        queues.COHORT_LIMITS_NEED_PARENT.message,
    ),
    (
        "a flavor in a topology without node labels",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": unique("rf")},
            "spec": {"topologyName": "gpu-fabric"},
        },
        flavor.TOPOLOGY_NEEDS_NODE_LABELS.message,
    ),
    (
        "hostname above rack",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "Topology",
            "metadata": {"name": unique("topo")},
            "spec": {
                "levels": [
                    {"nodeLabel": names.LABEL_HOSTNAME},
                    {"nodeLabel": names.LABEL_TOPOLOGY_RACK},
                ]
            },
        },
        flavor.HOSTNAME_LAST.message,
    ),
    (
        "a topology level twice",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "Topology",
            "metadata": {"name": unique("topo")},
            "spec": {"levels": [{"nodeLabel": names.LABEL_TOPOLOGY_RACK}] * 2},
        },
        flavor.LEVELS_UNIQUE.message,
    ),
    (
        "a negative price per GPU-hour",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": unique("priced")},
            "spec": {"cost": {"gpuHourPrice": "-2.50", "currency": "USD"}},
        },
        flavor.PRICE_IS_DECIMAL.message,
    ),
    (
        "two pod sets with one name",
        lambda: workload_obj(podSets=[{"name": "w", "count": 1, "template": {}}] * 2),
        workload.POD_SET_NAMES_UNIQUE.message,
    ),
    (
        "required and preferred topology",
        lambda: workload_obj(
            podSets=[
                {
                    "name": "w",
                    "count": 1,
                    "template": {},
                    "topologyRequest": {
                        "required": names.LABEL_TOPOLOGY_RACK,
                        "preferred": names.LABEL_TOPOLOGY_BLOCK,
                    },
                }
            ]
        ),
        workload.ONE_TOPOLOGY_MODE.message,
    ),
    (
        "slice sizes that do not divide",
        lambda: sliced_workload(16, (names.LABEL_TOPOLOGY_RACK, 8), (names.LABEL_GPU_CLIQUE, 3)),
        workload.SLICE_SIZES_DIVIDE.message,
    ),
    (
        "a slice level twice",
        lambda: sliced_workload(16, (names.LABEL_TOPOLOGY_RACK, 8), (names.LABEL_TOPOLOGY_RACK, 4)),
        workload.SLICE_LEVELS_UNIQUE.message,
    ),
    (
        "hostname as an outer slice level",
        lambda: sliced_workload(16, (names.LABEL_HOSTNAME, 8), (names.LABEL_GPU_CLIQUE, 4)),
        workload.HOSTNAME_SLICE_INNERMOST.message,
    ),
    (
        "a count that is not whole slices",
        lambda: sliced_workload(12, (names.LABEL_TOPOLOGY_RACK, 8)),
        workload.WHOLE_SLICES.message,
    ),
    (
        "a negative grace period",
        lambda: {
            "apiVersion": names.API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": unique("wpc")},
            "value": 1,
            "preemptionGracePeriodSeconds": -1,
        },
        "greater than or equal to 0",
    ),
]


def refusal(api: k8s.ApiClient, obj: dict[str, Any], namespace: str) -> str:
    with pytest.raises(Refused) as err:
        create(api, obj, namespace)
    assert err.value.status == 422, err.value.message
    return err.value.message


@pytest.mark.parametrize(("case", "make", "message"), BAD, ids=[c[0] for c in BAD])
def test_bad_objects_are_refused_with_the_rules_message(
    crds: list[dict[str, Any]],
    k8s_client: k8s.ApiClient,
    namespace: str,
    case: str,
    make: Callable[[], dict[str, Any]],
    message: str,
) -> None:
    obj = make()
    said = refusal(k8s_client, obj, namespace)
    assert message in said, f"{case}: the API server said {said!r}"
    # The models refuse the same object, in the same words where a rule says it.
    with pytest.raises(ValidationError) as err:
        MODEL_BY_KIND[obj["kind"]].model_validate(obj)
    if message != NON_NEGATIVE_QUANTITY_MESSAGE:
        assert message in str(err.value), case


def test_a_local_queue_cannot_be_pointed_at_another_cluster_queue(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient, namespace: str
) -> None:
    lq = {
        "apiVersion": names.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": "research-vision"},
    }
    url = f"{path_of(lq)}/default"
    create(k8s_client, lq, namespace)
    with pytest.raises(Refused) as err:
        request(k8s_client, "PATCH", url, {"spec": {"clusterQueue": "prod-inference"}})
    assert err.value.status == 422
    assert queues.CLUSTER_QUEUE_IMMUTABLE.message in err.value.message
    # Other fields stay mutable, and the queue still points where it did.
    held = request(k8s_client, "PATCH", url, {"spec": {"stopPolicy": "Hold"}})
    assert held["spec"] == {"clusterQueue": "research-vision", "stopPolicy": "Hold"}


def test_status_is_a_subresource(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient, namespace: str
) -> None:
    """A user's write to the main resource cannot set status; the status endpoint can."""
    lq = {
        "apiVersion": names.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": namespace},
        "spec": {"clusterQueue": "cq"},
        "status": {"pendingWorkloads": 5},
    }
    created = create(k8s_client, lq, namespace)
    assert created.get("status", {}).get("pendingWorkloads", 0) == 0
    url = f"{path_of(lq)}/q/status"
    patched = request(k8s_client, "PATCH", url, {"status": {"pendingWorkloads": 5}})
    assert patched["status"]["pendingWorkloads"] == 5


def test_an_admitted_workload_keeps_its_queue_and_pod_sets(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient, namespace: str
) -> None:
    wl = workload_obj()
    wl["metadata"]["namespace"] = namespace
    url = f"{path_of(wl)}/{wl['metadata']['name']}"
    create(k8s_client, wl)
    # Before admission both may change.
    request(k8s_client, "PATCH", url, {"spec": {"queueName": "other"}})
    admission = {
        "clusterQueue": "research-vision",
        "podSetAssignments": [
            {
                "name": "main",
                "count": 1,
                "flavors": {"nvidia.com/gpu": "h100"},
                "resourceUsage": {"nvidia.com/gpu": 8},
            }
        ],
    }
    request(k8s_client, "PATCH", f"{url}/status", {"status": {"admission": admission}})

    with pytest.raises(Refused) as err:
        request(k8s_client, "PATCH", url, {"spec": {"queueName": "default"}})
    assert workload.QUEUE_FIXED_WHILE_RESERVED.message in err.value.message
    grown = [{"name": "main", "count": 2, "template": {"spec": {"containers": []}}}]
    with pytest.raises(Refused) as err:
        request(k8s_client, "PATCH", url, {"spec": {"podSets": grown}})
    assert workload.POD_SETS_FIXED_WHILE_RESERVED.message in err.value.message
    # Deactivating stays possible: it is how a user gives the quota back.
    assert request(k8s_client, "PATCH", url, {"spec": {"active": False}})["spec"]["active"] is False


def test_a_workload_in_three_slice_levels_is_accepted_and_kept_in_order(
    crds: list[dict[str, Any]], k8s_client: k8s.ApiClient, namespace: str
) -> None:
    """64 pods in one block: 16 per rack, 4 per NVLink domain, 2 per node, balanced."""
    obj = sliced_workload(
        64,
        (names.LABEL_TOPOLOGY_RACK, 16),
        (names.LABEL_GPU_CLIQUE, 4),
        (names.LABEL_HOSTNAME, 2),
    )
    obj["spec"]["podSets"][0]["topologyRequest"]["balancedPlacement"] = True
    out = create(k8s_client, obj, namespace)
    request_ = out["spec"]["podSets"][0]["topologyRequest"]
    assert [c["size"] for c in request_["podSetSliceRequiredTopologyConstraints"]] == [16, 4, 2]
    assert request_["balancedPlacement"] is True
    workload.Workload.model_validate(out)
