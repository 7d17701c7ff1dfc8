"""The Helm chart is generated from the kustomize base, so the two cannot drift.

deploy/helm/generate.py turns what `kubectl kustomize` renders into the chart; these tests
regenerate it and fail on any difference from the committed chart, and check the rules the
generator applies to whatever the base holds (the rendering itself is checked against the base
with a real `helm template` in tests/integration/test_helm.py).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from deploy_manifests import REPO, Obj

CHART = REPO / "deploy" / "helm" / "queuectl"
FIX = "run: python deploy/helm/generate.py"


def _load_generator() -> ModuleType:
    path = REPO / "deploy" / "helm" / "generate.py"
    spec = importlib.util.spec_from_file_location("helm_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


generate = _load_generator()


@pytest.fixture(scope="module")
def chart_files() -> dict[str, str]:
    files: dict[str, str] = generate.desired()
    return files


def test_the_committed_chart_is_what_the_generator_makes_from_the_base(
    chart_files: dict[str, str],
) -> None:
    assert generate.drifted(CHART, chart_files) == [], f"the chart drifted from the base; {FIX}"


def test_check_mode_reports_a_hand_edit_and_a_stray_file(
    tmp_path: Path, chart_files: dict[str, str]
) -> None:
    generate.write(tmp_path / "queuectl", chart_files)
    assert generate.drifted(tmp_path / "queuectl", chart_files) == []
    (tmp_path / "queuectl" / "values.yaml").write_text("image: {}\n")
    (tmp_path / "queuectl" / "templates" / "extra.yaml").write_text("kind: ConfigMap\n")
    assert generate.drifted(tmp_path / "queuectl", chart_files) == [
        "templates/extra.yaml",
        "values.yaml",
    ]


def test_every_object_of_the_base_has_a_template_and_every_crd_goes_to_crds(
    base: list[Obj], chart_files: dict[str, str]
) -> None:
    for obj in base:
        if obj["kind"] == "Namespace":
            continue  # the release namespace: helm install -n NS --create-namespace
        where = "crds" if obj["kind"] == "CustomResourceDefinition" else "templates"
        matches = [
            name for name, text in chart_files.items()
            if name.startswith(f"{where}/")
            and re.search(rf"^kind: {obj['kind']}$", text, re.MULTILINE)
            and re.search(rf"^metadata:\n(?:  .*\n)*?  name: {re.escape(obj['metadata']['name'])}$",
                          text, re.MULTILINE)
        ]  # fmt: skip
        assert len(matches) == 1, f"{obj['kind']}/{obj['metadata']['name']}: {matches}"


def test_the_base_namespace_becomes_the_release_namespace(
    base: list[Obj], chart_files: dict[str, str]
) -> None:
    (namespace,) = [o["metadata"]["name"] for o in base if o["kind"] == "Namespace"]
    for name, text in chart_files.items():
        if name.startswith("templates/"):
            assert not re.search(rf"\b{namespace}\b", text), f"{name} still names {namespace}"
    webhook = chart_files["templates/validating-webhook-configuration-queuectl-validating.yaml"]
    assert "namespace: {{ .Release.Namespace }}" in webhook
    assert "- {{ .Release.Namespace }}" in webhook  # its namespaceSelector skips our namespace


@pytest.mark.parametrize(
    ("component", "condition"),
    [
        ("agent", "{{- if .Values.agent.enabled }}"),
        ("metrics Services", "{{- if .Values.metrics.service.enabled }}"),
        ("cert-manager only", '{{- if eq .Values.certificates.mode "cert-manager" }}'),
    ],
)
def test_optional_parts_sit_behind_their_switch(
    chart_files: dict[str, str], base: list[Obj], cert_manager: list[Obj], component: str,
    condition: str,
) -> None:  # fmt: skip
    if component == "agent":
        chosen = [o for o in base if generate.component(o) == "agent"]
    elif component == "metrics Services":
        chosen = [o for o in base if generate.is_metrics_service(o)]
    else:
        in_base = {generate.key(o) for o in base}
        chosen = [o for o in cert_manager if generate.key(o) not in in_base]
    assert chosen, f"the base has no {component}: this test would prove nothing"
    for obj in chosen:
        text = chart_files[f"templates/{generate.filename(obj)}"]
        assert condition in text.splitlines(), f"{generate.filename(obj)} lacks {condition}"


def test_the_values_default_to_the_base_settings(
    base: list[Obj], chart_files: dict[str, str]
) -> None:
    values: dict[str, Any] = yaml.safe_load(chart_files["values.yaml"])
    deployment = next(o for o in base if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert values["controller"]["replicas"] == deployment["spec"]["replicas"]
    assert values["controller"]["resources"] == container["resources"]
    assert f"{values['image']['repository']}:{values['image']['tag']}" == container["image"]
    assert values["certificates"]["mode"] == "self"
    assert values["agent"]["enabled"] is True


def test_the_values_schema_accepts_the_defaults_and_names_every_value(
    chart_files: dict[str, str],
) -> None:
    """Helm validates values against the schema: a misspelt key is refused, not ignored."""
    schema = json.loads(chart_files["values.schema.json"])
    values = yaml.safe_load(chart_files["values.yaml"])

    def keys(node: dict[str, Any], tree: dict[str, Any]) -> None:
        assert node.get("additionalProperties") is False
        assert set(tree) <= set(node["properties"]), set(tree) - set(node["properties"])
        for name, sub in tree.items():
            if isinstance(sub, dict) and node["properties"][name].get("properties"):
                keys(node["properties"][name], sub)

    keys(schema, values)
    assert schema["properties"]["certificates"]["properties"]["mode"]["enum"] == [
        "self",
        "cert-manager",
    ]


def test_a_base_with_two_images_is_refused_with_a_clear_error(base: list[Obj]) -> None:
    changed = yaml.safe_load(yaml.safe_dump(base))
    daemonset = next(o for o in changed if o["kind"] == "DaemonSet")
    daemonset["spec"]["template"]["spec"]["containers"][0]["image"] = "other:1"
    with pytest.raises(generate.GenerateError, match="one image value"):
        generate.defaults(changed)


@pytest.mark.parametrize(
    ("drop_namespace", "extra_namespace", "outcome"),
    [
        (False, None, "ok"),
        (True, None, "ok"),  # found from the objects' own namespace
        (True, "elsewhere", "one namespace"),
    ],
    ids=["Namespace object", "no Namespace object", "two namespaces"],
)
def test_the_release_namespace_replaces_whatever_namespace_the_base_uses(
    base: list[Obj], monkeypatch: pytest.MonkeyPatch, drop_namespace: bool,
    extra_namespace: str | None, outcome: str,
) -> None:  # fmt: skip
    changed = [o for o in base if not (drop_namespace and o["kind"] == "Namespace")]
    if extra_namespace:
        changed.append({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "x", "namespace": extra_namespace}})  # fmt: skip
    monkeypatch.setattr(generate, "render", lambda path: changed)
    if outcome != "ok":
        with pytest.raises(generate.GenerateError, match=outcome):
            generate.desired()
        return
    files = generate.desired()
    deployment = files["templates/deployment-queuectl-controller.yaml"]
    assert "namespace: {{ .Release.Namespace }}" in deployment
