"""Assemble CustomResourceDefinitions from the models and read back the committed files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from queuectl.api import names
from queuectl.crds.kinds import CATEGORIES, KIND_INFOS, Column, KindInfo
from queuectl.crds.schema import structural

CRD_DIR: Final = Path(__file__).parent
HEADER: Final = (
    "# Generated from queuectl/api by `python -m queuectl.crds`. Do not edit by hand:\n"
    "# change the models and regenerate (a unit test fails when this file drifts).\n"
)


class _Dumper(yaml.SafeDumper):
    """No &anchors/*aliases: a CRD file should read top to bottom."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _column(col: Column) -> dict[str, Any]:
    out: dict[str, Any] = {"name": col.name, "type": col.type, "jsonPath": col.json_path}
    if col.description:
        out["description"] = col.description
    if col.priority:
        out["priority"] = col.priority
    return out


def crd(info: KindInfo) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind, as a plain dict."""
    version: dict[str, Any] = {
        "name": names.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": structural(info.model)},
    }
    if info.has_status:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = [_column(c) for c in info.columns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.crd_name},
        "spec": {
            "group": names.GROUP,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.kind.lower(),
                "shortNames": list(info.short_names),
                "categories": list(CATEGORIES),
            },
            "scope": "Namespaced" if info.model.NAMESPACED else "Cluster",
            "versions": [version],
        },
    }


def file_name(info: KindInfo) -> str:
    return f"{info.crd_name}.yaml"


def render() -> dict[str, str]:
    """File name -> YAML text, for every kind; deterministic so drift is a plain diff."""
    return {
        file_name(info): HEADER + yaml.dump(crd(info), Dumper=_Dumper, sort_keys=False, width=100)
        for info in KIND_INFOS
    }


def write(directory: Path = CRD_DIR) -> list[Path]:
    """Regenerate the YAML files; returns the paths written."""
    written = []
    for name, text in render().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def drifted(directory: Path = CRD_DIR) -> list[str]:
    """Names of committed files that differ from what the models generate now."""
    return [
        name
        for name, text in render().items()
        if not (directory / name).exists() or (directory / name).read_text() != text
    ]


def load(directory: Path = CRD_DIR) -> list[dict[str, Any]]:
    """The committed CRDs as dicts, in install order (for testenv, the controller, kustomize)."""
    return [yaml.safe_load((directory / file_name(info)).read_text()) for info in KIND_INFOS]
