"""A platform team moves its Kueue objects to queuectl: what carries over, what is reported.

The conversion is pure (dicts in, dicts and a report out), so each scenario is a Kueue
document and what queuectl makes of it. Every object produced must read as queuectl's own
model (the same rules as the CRDs); tests/integration/test_kueue_import_cluster.py has the
real API server accept the converted samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from queuectl.api import KINDS, Resource, names
from queuectl.kueue import Action, ImportFailed, Result, Source, convert

DATA = Path(__file__).resolve().parents[2] / "data" / "kueue"
SAMPLES = sorted(DATA.glob("*.yaml"))
MODELS: dict[str, type[Resource]] = {m.model_fields["kind"].default: m for m in KINDS}
V1 = "kueue.x-k8s.io/v1beta1"
V2 = "kueue.x-k8s.io/v1beta2"


def run(*docs: Any) -> Result:
    return convert([Source("in.yaml", i, d) for i, d in enumerate(docs, 1)])


def one(*docs: Any) -> dict[str, Any]:
    result = run(*docs)
    assert len(result.objects) == 1, result.objects
    return result.objects[0]


def notes(result: Result) -> dict[str, tuple[Action, str]]:
    """field -> (action, reason) of every note."""
    return {n.field: (n.action, n.reason) for n in result.report.notes}


def cq(spec: dict[str, Any], version: str = V1, name: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": version, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


GROUPS = [
    {
        "coveredResources": ["cpu", "nvidia.com/gpu"],
        "flavors": [
            {
                "name": "h100",
                "resources": [
                    {"name": "cpu", "nominalQuota": 64},
                    {
                        "name": "nvidia.com/gpu",
                        "nominalQuota": 8,
                        "borrowingLimit": 4,
                        "lendingLimit": 2,
                    },
                ],
            }
        ],
    }
]


# --- Kueue's own samples ------------------------------------------------------------------


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_every_published_sample_converts_to_objects_queuectl_accepts(path: Path) -> None:
    docs = list(yaml.safe_load_all(path.read_text()))
    result = convert([Source(path.name, i, d) for i, d in enumerate(docs, 1)])
    assert result.objects
    for obj in result.objects:
        assert obj["apiVersion"] == names.API_VERSION
        MODELS[obj["kind"]].model_validate(obj)
    kueue_docs = [d for d in docs if d and d["apiVersion"].startswith("kueue.x-k8s.io/")]
    accounted = len(result.objects) + sum(
        1
        for n in result.report.notes
        if n.field == "" and n.action in (Action.SKIPPED, Action.FOLDED)
    )
    assert accounted == len(kueue_docs), "every Kueue document is converted or reported"


def test_the_single_clusterqueue_setup_maps_field_for_field() -> None:
    docs = list(yaml.safe_load_all((DATA / "single-clusterqueue-setup.yaml").read_text()))
    result = convert([Source("setup.yaml", i, d) for i, d in enumerate(docs, 1)])
    flavor, queue, local = result.objects
    assert flavor == {
        "apiVersion": names.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": "default-flavor"},
        "spec": {},
    }
    assert queue["spec"] == docs[1]["spec"]  # namespaceSelector {} kept: all namespaces
    assert local["metadata"] == {"name": "user-queue", "namespace": "default"}
    assert local["spec"] == {"clusterQueue": "cluster-queue"}
    assert result.report.notes == []


def test_whole_directory_of_separate_examples_is_refused_as_defined_twice() -> None:
    sources = [
        Source(p.name, i, d)
        for p in SAMPLES
        for i, d in enumerate(yaml.safe_load_all(p.read_text()), 1)
    ]
    with pytest.raises(ImportFailed) as err:
        convert(sources)
    assert any(
        "quick-start-setup.yaml#1 ResourceFlavor/default-flavor: defined again" in p
        for p in err.value.problems
    )


# --- ClusterQueue and Cohort ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kueue", "queuectl"),
    [
        pytest.param(
            cq({"cohort": "research", "resourceGroups": GROUPS}),
            {"cohortName": "research", "resourceGroups": GROUPS},
            id="v1beta1 cohort -> cohortName",
        ),
        pytest.param(
            cq({"cohortName": "research", "resourceGroups": GROUPS}, V2),
            {"cohortName": "research", "resourceGroups": GROUPS},
            id="v1beta2 cohortName",
        ),
        pytest.param(
            cq(
                {
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "queueingStrategy": "StrictFIFO",
                }
            ),
            {"namespaceSelector": {"matchLabels": {"team": "a"}}, "queueingStrategy": "StrictFIFO"},
            id="selector and strategy",
        ),
        pytest.param(cq({}), {}, id="no namespaceSelector stays none: no namespace"),
        pytest.param(
            cq(
                {
                    "cohort": "org",
                    "preemption": {
                        "withinClusterQueue": "LowerOrNewerEqualPriority",
                        "reclaimWithinCohort": "Any",
                        "borrowWithinCohort": {"policy": "Never"},
                    },
                    "stopPolicy": "Hold",
                    "fairSharing": {"weight": "0.5"},
                }
            ),
            {
                "cohortName": "org",
                "preemption": {
                    "withinClusterQueue": "LowerOrNewerEqualPriority",
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "Never"},
                },
                "stopPolicy": "Hold",
                "fairSharing": {"weight": "0.5"},
            },
            id="preemption, stop policy, weight",
        ),
        pytest.param(
            cq({"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}),
            {
                "flavorFungibility": {
                    "whenCanBorrow": "MayStopSearch",
                    "whenCanPreempt": "MayStopSearch",
                }
            },
            id="v1beta1 fungibility names renamed",
        ),
        pytest.param(
            cq({"admissionChecks": ["capacity"]}),
            {"admissionChecks": ["capacity"]},
            id="admissionChecks list",
        ),
        pytest.param(
            cq(
                {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 0.5}]}
                            ],
                        }
                    ]
                }
            ),
            {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "0.5"}]}
                        ],
                    }
                ]
            },
            id="an unquoted 0.5 becomes the quantity '0.5'",
        ),
    ],
)
def test_cluster_queue_fields(kueue: dict[str, Any], queuectl: dict[str, Any]) -> None:
    assert one(kueue)["spec"] == queuectl


@pytest.mark.parametrize(
    ("spec", "field", "action", "says"),
    [
        ({}, "spec.namespaceSelector", Action.KEPT, "queuectl refuses to create such a LocalQueue"),
        (
            {"fairSharing": {"weight": "2"}},
            "spec.fairSharing.weight",
            Action.KEPT,
            "only when fair sharing is enabled in its Configuration",
        ),
        (
            {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}},
            "spec.admissionScope",
            Action.DROPPED,
            "no admission fair sharing",
        ),
        (
            {"excludeResourcePrefixes": ["example.com"]},
            "spec.excludeResourcePrefixes",
            Action.DROPPED,
            "no per-queue exclusion",
        ),
        (
            {"concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}}},
            "spec.concurrentAdmissionPolicy",
            Action.DROPPED,
            "does not migrate",
        ),
        (
            {
                "flavorFungibility": {
                    "whenCanBorrow": "TryNextFlavor",
                    "whenCanPreempt": "TryNextFlavor",
                    "preference": "PreemptionOverBorrowing",
                }
            },
            "spec.flavorFungibility.preference",
            Action.DROPPED,
            "BorrowingOverPreemption",
        ),
        (
            {"flavorFungibility": {"whenCanBorrow": "Borrow"}},
            "spec.flavorFungibility.whenCanBorrow",
            Action.CHANGED,
            "deprecated name of MayStopSearch",
        ),
        (
            {
                "cohort": "org",
                "preemption": {
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                },
            },
            "spec.preemption.borrowWithinCohort",
            Action.KEPT,
            "only under classic preemption",
        ),
        (
            {
                "admissionChecksStrategy": {
                    "admissionChecks": [{"name": "prov", "onFlavors": ["spot"]}]
                }
            },
            "spec.admissionChecksStrategy.admissionChecks[0].onFlavors",
            Action.CHANGED,
            "every workload",
        ),
        (
            {"flavorFallbackStrategy": {"rules": [{"name": "spot"}]}},
            "spec.flavorFallbackStrategy",
            Action.DROPPED,
            "not a field of Kueue ClusterQueue v1beta1 that this importer knows",
        ),
        (
            {
                "resourceGroups": [
                    {
                        "coveredResources": ["pods"],
                        "flavors": [
                            {"name": "a", "resources": [{"name": "pods", "nominalQuota": 5}]}
                        ],
                    }
                ]
            },
            "spec.resourceGroups[0].coveredResources.pods",
            Action.KEPT,
            "limits nothing",
        ),
        (
            {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu_credits"],
                        "flavors": [
                            {
                                "name": "a",
                                "resources": [{"name": "cpu_credits", "nominalQuota": 14}],
                            }
                        ],
                    }
                ]
            },
            "spec.resourceGroups[0].coveredResources.cpu_credits",
            Action.KEPT,
            "resource transformations",
        ),
    ],
)
def test_what_a_cluster_queue_cannot_carry_is_reported(
    spec: dict[str, Any], field: str, action: Action, says: str
) -> None:
    result = run(cq(spec))
    MODELS["ClusterQueue"].model_validate(result.objects[0])
    got = notes(result)
    assert field in got, got
    assert got[field][0] == action
    assert says in got[field][1]


def test_a_v1beta1_queue_spelling_cohortName_loses_it_as_kueue_would_and_says_so() -> None:
    """Kueue's v1beta1 API server prunes `cohortName`; so does the import, loudly."""
    result = run(cq({"cohortName": "org"}))
    assert "cohortName" not in result.objects[0]["spec"]
    assert notes(result)["spec.cohortName"][0] == Action.DROPPED


@pytest.mark.parametrize(
    ("version", "parent_key"),
    [("kueue.x-k8s.io/v1alpha1", "parent"), (V1, "parent"), (V2, "parentName")],
)
def test_cohort_tree_with_own_quota_and_weight(version: str, parent_key: str) -> None:
    cohort = {
        "apiVersion": version,
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {parent_key: "org", "resourceGroups": GROUPS, "fairSharing": {"weight": "0.75"}},
    }
    assert one(cohort)["spec"] == {
        "parentName": "org",
        "resourceGroups": GROUPS,
        "fairSharing": {"weight": "0.75"},
    }


# --- the other kinds ------------------------------------------------------------------------


def test_flavor_keeps_labels_taints_tolerations_topology_and_reports_resource_weights() -> None:
    spec = {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "topologyName": "fabric",
        "resourceWeights": {"nvidia.com/gpu": "4"},
    }
    result = run(
        {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": spec}
    )
    assert result.objects[0]["spec"] == {k: v for k, v in spec.items() if k != "resourceWeights"}
    assert notes(result)["spec.resourceWeights"][0] == Action.DROPPED


def test_local_queue_keeps_queue_and_stop_policy_and_reports_kueue_only_fields() -> None:
    lq = {
        "apiVersion": V2,
        "kind": "LocalQueue",
        "metadata": {"name": "training"},
        "spec": {
            "clusterQueue": "team-a",
            "stopPolicy": "HoldAndDrain",
            "fairSharing": {"weight": "2"},
            "wallTimePolicy": {"wallTimeAllocatedHours": 100},
        },
    }
    result = run(lq)
    assert result.objects[0]["spec"] == {"clusterQueue": "team-a", "stopPolicy": "HoldAndDrain"}
    got = notes(result)
    assert got["spec.fairSharing"][0] == got["spec.wallTimePolicy"][0] == Action.DROPPED
    assert got["metadata.namespace"][0] == Action.KEPT  # no namespace: kubectl's current one


def test_priority_class_and_topology() -> None:
    wpc = {
        "apiVersion": V1,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 10000,
        "description": "production",
    }
    assert one(wpc) == {
        "apiVersion": names.API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 10000,
        "description": "production",
    }
    levels = [
        {"nodeLabel": "cloud.provider.com/topology-block"},
        {"nodeLabel": names.LABEL_HOSTNAME},
    ]
    topo = {
        "apiVersion": V1,
        "kind": "Topology",
        "metadata": {"name": "fabric"},
        "spec": {"levels": levels},
    }
    assert one(topo)["spec"] == {"levels": levels}


def test_kueue_provisioning_check_becomes_queuectls_with_the_configs_class() -> None:
    check = {
        "apiVersion": V1,
        "kind": "AdmissionCheck",
        "metadata": {"name": "capacity"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "retryDelayMinutes": 15,
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": "cfg",
            },
        },
    }
    config = {
        "apiVersion": V1,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "cfg"},
        "spec": {
            "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "managedResources": ["nvidia.com/gpu"],
        },
    }
    result = run(config, check)  # the config may come first or last
    assert result.objects[0]["spec"] == {
        "controllerName": names.CHECK_PROVISIONING,
        "parameters": {
            "apiGroup": names.PROVREQ_GROUP,
            "kind": names.PROVREQ_PARAMETERS_KIND,
            "name": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        },
    }
    got = notes(result)
    assert got["spec.retryDelayMinutes"][0] == Action.DROPPED
    assert got["spec.managedResources"][0] == Action.DROPPED
    assert got[""][0] == Action.FOLDED


def test_provisioning_check_without_its_config_falls_back_to_placeholders_and_says_how_to_fix() -> (
    None
):
    check = {
        "apiVersion": V2,
        "kind": "AdmissionCheck",
        "metadata": {"name": "capacity"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": "elsewhere",
            },
        },
    }
    result = run(check)
    assert result.objects[0]["spec"] == {"controllerName": names.CHECK_PROVISIONING}
    action, reason = notes(result)["spec.parameters"]
    assert action == Action.CHANGED
    assert "placeholder pods" in reason and "ProvisioningRequestClass" in reason


def test_multikueue_check_is_kept_and_its_queues_are_told_they_admit_nothing() -> None:
    check = {
        "apiVersion": V2,
        "kind": "AdmissionCheck",
        "metadata": {"name": "mk"},
        "spec": {"controllerName": "kueue.x-k8s.io/multikueue"},
    }
    queue = cq({"admissionChecksStrategy": {"admissionChecks": [{"name": "mk"}]}}, V2)
    result = run(check, queue)
    converted_check, converted_queue = result.objects
    assert converted_check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue"}
    assert converted_queue["spec"] == {"admissionChecks": ["mk"]}
    queue_notes = {n.field: n for n in result.report.notes if "ClusterQueue" in n.document}
    assert "admits nothing" in queue_notes["spec.admissionChecks"].reason


# --- what is not converted ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}},
            "not a Kueue object",
        ),
        ({"apiVersion": V2, "kind": "Workload", "metadata": {"name": "w"}}, names.LABEL_QUEUE_NAME),
        ({"apiVersion": V2, "kind": "MultiKueueCluster", "metadata": {"name": "w"}}, "MultiKueue"),
        (
            {"apiVersion": V2, "kind": "FutureKind", "metadata": {"name": "f"}},
            "queuectl has no FutureKind",
        ),
    ],
)
def test_other_objects_are_skipped_and_named_never_dropped_silently(
    doc: dict[str, Any], says: str
) -> None:
    result = run(doc, {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "a"}})
    assert [o["kind"] for o in result.objects] == ["ResourceFlavor"]
    skipped = [n for n in result.report.notes if n.action == Action.SKIPPED]
    assert len(skipped) == 1 and says in skipped[0].reason
    assert skipped[0].document == f"in.yaml#1 {doc['kind']}/{doc['metadata']['name']}"


def test_server_metadata_status_and_kueue_labels_are_left_out_and_reported() -> None:
    flavor = {
        "apiVersion": V1,
        "kind": "ResourceFlavor",
        "metadata": {
            "name": "a",
            "uid": "1234",
            "resourceVersion": "99",
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"team": "a", "kueue.x-k8s.io/x": "y"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        },
        "status": {"something": 1},
    }
    result = run(flavor)
    assert result.objects[0]["metadata"] == {"name": "a", "labels": {"team": "a"}}
    got = notes(result)
    assert "uid, resourceVersion, finalizers" in got["metadata"][1]
    assert {
        "status",
        "metadata.labels.kueue.x-k8s.io/x",
        "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
    } <= set(got)


def test_a_list_is_opened_and_its_items_named() -> None:
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "a"}},
            {
                "apiVersion": V2,
                "kind": "ResourceFlavor",
                "metadata": {"name": "b", "namespace": "x"},
            },
        ],
    }
    result = run(listing)
    assert [o["metadata"]["name"] for o in result.objects] == ["a", "b"]
    assert result.report.notes[0].document == "in.yaml#1 items[1] ResourceFlavor/b"


def test_objects_come_out_in_apply_order() -> None:
    docs = [
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "n"},
            "spec": {"clusterQueue": "team-a"},
        },
        cq({}, V2),
        {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "a"}},
        {
            "apiVersion": V1,
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "rack"}]},
        },
    ]
    assert [o["kind"] for o in run(*docs).objects] == [
        "Topology",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    ]


# --- bad input: one clear error per problem, all at once -------------------------------------


@pytest.mark.parametrize(
    ("docs", "says"),
    [
        pytest.param(["just a string"], "in.yaml#1: not a Kubernetes object", id="not an object"),
        pytest.param(
            [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}],
            "no Kueue object in the input",
            id="nothing of Kueue's",
        ),
        pytest.param(
            [{"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {}}],
            "in.yaml#1 ResourceFlavor: metadata.name is missing",
            id="no name",
        ),
        pytest.param(
            [{"apiVersion": V2, "kind": "LocalQueue", "metadata": {"name": "q"}, "spec": {}}],
            "in.yaml#1 LocalQueue/q: spec.clusterQueue: Field required",
            id="LocalQueue without its ClusterQueue",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1alpha1",
                    "kind": "ClusterQueue",
                    "metadata": {"name": "q"},
                }
            ],
            "clusterqueues.v1beta2.kueue.x-k8s.io",
            id="an unsupported version says how to export",
        ),
        pytest.param(
            [
                cq(
                    {
                        "cohort": "org",
                        "resourceGroups": [
                            {
                                "coveredResources": ["nvidia.com/gpu"],
                                "flavors": [
                                    {
                                        "name": "a",
                                        "resources": [
                                            {
                                                "name": "nvidia.com/gpu",
                                                "nominalQuota": 4,
                                                "lendingLimit": 8,
                                            }
                                        ],
                                    }
                                ],
                            }
                        ],
                    }
                )
            ],
            "lendingLimit must not exceed nominalQuota",
            id="queuectl's own rule, in its own words",
        ),
        pytest.param(
            [
                {
                    "apiVersion": V1,
                    "kind": "Topology",
                    "metadata": {"name": "t"},
                    "spec": {"levels": [{"nodeLabel": f"level-{i}"} for i in range(12)]},
                }
            ],
            "spec.levels: List should have at most 8 items",
            id="more topology levels than queuectl allows",
        ),
        pytest.param(
            [{"apiVersion": V1, "kind": "ResourceFlavor", "metadata": {"name": "a"}, "spec": []}],
            "spec must be a mapping",
            id="spec not a mapping",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_document_and_what_to_do(
    docs: list[Any], says: str
) -> None:
    with pytest.raises(ImportFailed) as err:
        run(*docs)
    assert any(says in p for p in err.value.problems), err.value.problems


def test_every_problem_is_reported_in_one_go() -> None:
    bad = [
        {"apiVersion": V2, "kind": "LocalQueue", "metadata": {"name": "q1"}, "spec": {}},
        {"apiVersion": V2, "kind": "LocalQueue", "metadata": {"name": "q2"}, "spec": {}},
    ]
    with pytest.raises(ImportFailed) as err:
        run(*bad)
    assert len(err.value.problems) == 2


# --- the invariant: nothing vanishes ---------------------------------------------------------

PLAIN_GROUPS = [
    {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
    }
]
CARRIED = {
    "cohort": ("cohortName", st.just("org")),
    "namespaceSelector": ("namespaceSelector", st.sampled_from([{}, {"matchLabels": {"a": "b"}}])),
    "queueingStrategy": ("queueingStrategy", st.sampled_from(["StrictFIFO", "BestEffortFIFO"])),
    "resourceGroups": ("resourceGroups", st.just(PLAIN_GROUPS)),
    "stopPolicy": ("stopPolicy", st.sampled_from(["None", "Hold", "HoldAndDrain"])),
    "admissionChecks": ("admissionChecks", st.just(["a"])),
    "admissionChecksStrategy": (
        "admissionChecks",
        st.just({"admissionChecks": [{"name": "b", "onFlavors": ["h100"]}]}),
    ),
    "admissionScope": (None, st.just({"admissionMode": "NoAdmissionFairSharing"})),
    "excludeResourcePrefixes": (None, st.just(["example.com"])),
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(
    known=st.lists(st.sampled_from(sorted(CARRIED)), unique=True),
    unknown=st.dictionaries(
        st.from_regex(r"[a-z][a-zA-Z]{2,12}", fullmatch=True).filter(
            lambda k: (
                k not in CARRIED
                and k not in {"cohortName", "preemption", "flavorFungibility", "fairSharing"}
            )
        ),
        JSON,
        max_size=3,
    ),
    data=st.data(),
)
def test_every_field_of_a_queue_is_carried_or_reported(
    known: list[str], unknown: dict[str, Any], data: st.DataObject
) -> None:
    spec = {k: data.draw(CARRIED[k][1]) for k in known} | unknown
    result = run(cq(spec))
    out = result.objects[0]["spec"]
    reported = {n.field for n in result.report.notes}
    for key in spec:
        target = CARRIED[key][0] if key in CARRIED else None
        carried = target is not None and target in out
        noted = any(f == f"spec.{key}" or f.startswith(f"spec.{key}.") for f in reported)
        assert carried or noted, (key, out, reported)
