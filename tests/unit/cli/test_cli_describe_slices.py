"""`describe` on a gang in slices that no block can hold: what it asked for, and what the
largest domain of each level holds, one line per level."""

from __future__ import annotations

import cli_objects as o

from queuectl.api import names
from queuectl.cli import describe
from queuectl.cli._render import Term
from queuectl.cli._snapshot import Snapshot

BLOCK, RACK = names.LABEL_TOPOLOGY_BLOCK, names.LABEL_TOPOLOGY_RACK


def test_a_failed_sliced_placement_is_explained_level_by_level() -> None:
    """Two racks of one 8-GPU node: a rack holds two 4-GPU pods, so no rack holds a slice of
    three, though quota allows the gang."""
    flavor = o.flavor("h100", "H100")
    flavor["spec"]["topologyName"] = "fabric"
    gang = o.workload("team-llm", "gang", "training", 4, count=3)
    gang["spec"]["podSets"][0]["topologyRequest"] = {
        "required": BLOCK,
        "podSetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 3}],
        "balancedPlacement": True,
    }
    objs = {
        "namespaces": [o.namespace("team-llm")],
        "resourceflavors": [flavor],
        "topologies": [
            {
                "metadata": {"name": "fabric"},
                "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]},
            }
        ],
        "clusterqueues": [o.cluster_queue("llm", None, o.gpu_quota("h100", 64))],
        "localqueues": [o.local_queue("team-llm", "training", "llm")],
        "nodes": [o.node(f"n{i}", "H100") for i in range(2)],
        "workloads": [gang],
    }
    for i, node in enumerate(objs["nodes"]):
        node["metadata"]["labels"].update({BLOCK: "b1", RACK: f"r{i}"})
    snap = Snapshot.from_objects(objs, now=o.NOW)
    text = describe.describe(snap, "workload", "gang", "team-llm", Term(color=False, width=0))
    assert "Reason:      TopologyPlacementFailed" in text
    assert (
        f"Detail:      quota allows flavor h100 for pod set main but no {BLOCK} domain holds "
        f"3 pods in slices of 3 per {RACK}; 4 pods fit over all nodes" in text
    )
    assert f"Per level:   the largest {BLOCK} holds 0 slices of 3 pods\n" in text
    assert f"             the largest {RACK} holds 0 slices of 3 pods\n" in text
    assert f"required {BLOCK}, slices of 3 per {RACK}, balanced" in text
