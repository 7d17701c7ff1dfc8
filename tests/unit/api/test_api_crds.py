"""The committed CRDs are exactly what the models generate, and are structural."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from queuectl.api import KINDS, Rule, flavor, names, queues, quota, workload
from queuectl.crds import CRD_DIR, drifted, load, render
from queuectl.crds.__main__ import main
from queuectl.crds.kinds import KIND_INFOS


def test_committed_crds_match_the_models() -> None:
    stale = drifted()
    assert not stale, f"{stale} drifted from queuectl/api: run `python -m queuectl.crds`"
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(render())


def test_check_mode_reports_drift(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        out.append((path, node))
        for key in ("properties",):
            for name, child in node.get(key, {}).items():
                out += walk(child, f"{path}.{name}")
        if "items" in node:
            out += walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            out += walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("crd", load(), ids=lambda c: c["metadata"]["name"])
def test_schemas_are_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    text = yaml.safe_dump(schema)
    assert "$ref" not in text and "$defs" not in text and "null" not in text
    for path, node in walk(schema):
        int_or_string = node.get("x-kubernetes-int-or-string")
        assert (
            "type" in node or int_or_string or node.get("x-kubernetes-preserve-unknown-fields")
        ), path
        if "anyOf" in node:
            assert int_or_string and node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
        if node.get("type") == "array":
            assert "maxItems" in node, f"{path}: unbounded lists make CEL cost unbounded"


def test_names_scope_and_status() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in load()}
    assert set(by_kind) == {m.model_fields["kind"].default for m in KINDS}
    short = {k: c["spec"]["names"]["shortNames"][0] for k, c in by_kind.items()}
    assert short == {
        "ResourceFlavor": "rf",
        "Topology": "topo",
        "Cohort": "co",
        "ClusterQueue": "cq",
        "LocalQueue": "lq",
        "WorkloadPriorityClass": "wpc",
        "Workload": "wl",
        "AdmissionCheck": "ac",
    }
    for kind, c in by_kind.items():
        assert c["spec"]["group"] == names.GROUP
        assert c["spec"]["versions"][0]["name"] == names.VERSION
        assert "queuectl" in c["spec"]["names"]["categories"]
        namespaced = kind in {"LocalQueue", "Workload"}
        assert c["spec"]["scope"] == ("Namespaced" if namespaced else "Cluster")
        has_status = kind in {"Cohort", "ClusterQueue", "LocalQueue", "Workload", "AdmissionCheck"}
        assert ("subresources" in c["spec"]["versions"][0]) == has_status, kind


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("ClusterQueue", ["Cohort", "Strategy", "Pending", "Admitted", "Active", "Bank", "Age"]),
        ("LocalQueue", ["ClusterQueue", "Pending", "Admitted", "Age"]),
        ("Workload", ["Queue", "Reserved in", "Admitted", "Finished", "Age"]),
        ("WorkloadPriorityClass", ["Value", "Grace", "MinRuntime", "Age"]),
    ],
)
def test_printer_columns_a_kubectl_user_wants(kind: str, columns: list[str]) -> None:
    crd = next(c for c in load() if c["spec"]["names"]["kind"] == kind)
    shown = [
        c["name"]
        for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]
        if not c.get("priority")
    ]
    assert shown == columns


# Every Rule constant of the API modules: a new rule is checked without editing this test.
RULES = [
    value
    for module in (quota, queues, flavor, workload)
    for value in vars(module).values()
    if isinstance(value, Rule)
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.message[:40])
def test_every_rule_reaches_a_crd_with_its_message(rule: Rule) -> None:
    found = [
        v
        for crd in load()
        for _, node in walk(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        for v in node.get("x-kubernetes-validations", [])
    ]
    assert rule.schema() in found


def test_cluster_queue_immutability_uses_old_self() -> None:
    lq = next(c for c in load() if c["spec"]["names"]["kind"] == "LocalQueue")
    field = lq["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["clusterQueue"]
    assert field["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"


def test_priority_class_is_shaped_like_a_priority_class() -> None:
    wpc = next(c for c in load() if c["spec"]["names"]["kind"] == "WorkloadPriorityClass")
    props = wpc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert "spec" not in props
    assert props["preemptionGracePeriodSeconds"]["default"] == 0
    assert {"value", "description", "minimumRuntimeSeconds"} <= set(props)


def test_install_order_puts_referenced_kinds_first() -> None:
    assert [i.model for i in KIND_INFOS] == list(KINDS)
