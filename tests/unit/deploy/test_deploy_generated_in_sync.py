"""The base installs exactly the CRDs and webhook configurations the package generates.

Kustomize cannot reach the package from the base, so the base holds copies; after regenerating
the CRDs or changing queuectl.webhooks.configs run `python deploy/kustomize/sync_generated.py`.
"""

from __future__ import annotations

import yaml
from deploy_manifests import BASE, REPO, Obj, one

from queuectl.api import names
from queuectl.webhooks.configs import ServiceClient, render_webhook_configurations

GENERATED = REPO / "queuectl" / "crds"
COPIES = BASE / "crds"
FIX = "run: python deploy/kustomize/sync_generated.py"
# DESIGN.md §2: every kind of group queuectl.io.
PLURALS = {
    "resourceflavors",
    "topologies",
    "cohorts",
    "clusterqueues",
    "localqueues",
    "workloadpriorityclasses",
    "admissionchecks",
    "workloads",
}


def test_every_generated_crd_is_copied_unchanged() -> None:
    generated = {p.name: p.read_text() for p in GENERATED.glob("*.yaml")}
    copies = {
        p.name: p.read_text() for p in COPIES.glob("*.yaml") if p.name != "kustomization.yaml"
    }
    assert copies.keys() == generated.keys(), FIX
    for name, text in generated.items():
        assert copies[name] == text, f"base/crds/{name} drifted; {FIX}"


def test_the_crds_kustomization_lists_every_copy() -> None:
    kustomization = yaml.safe_load((COPIES / "kustomization.yaml").read_text())
    listed = kustomization.get("resources") or []
    assert sorted(listed) == sorted(p.name for p in GENERATED.glob("*.yaml")), FIX


def test_the_base_installs_a_crd_for_every_kind(base: list[Obj]) -> None:
    crds = [o for o in base if o["kind"] == "CustomResourceDefinition"]
    assert {c["spec"]["group"] for c in crds} <= {names.GROUP}
    assert {c["spec"]["names"]["plural"] for c in crds} == PLURALS, (
        f"queuectl/crds/ lacks some kinds, or {FIX}"
    )


def test_the_static_webhook_configurations_are_what_the_webhooks_render(base: list[Obj]) -> None:
    """One source of truth: the controller patches, and dev up installs, the same objects."""
    for expected in render_webhook_configurations(ServiceClient()):
        rendered = one(base, expected["kind"], expected["metadata"]["name"])
        labels = rendered["metadata"].get("labels", {})
        assert labels.items() >= expected["metadata"]["labels"].items()
        assert rendered["webhooks"] == expected["webhooks"], FIX
