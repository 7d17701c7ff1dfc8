"""Create a run's queue tree (and a topology scenario's Topology and Nodes), wait until the
nodes are Ready and the controller serves the tree, and remove it all afterwards."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.cluster import apimetrics, objects
from bench.cluster.kubeapi import Api, ApiError
from bench.cluster.objects import Layout
from queuectl.api import names

OURS = f"/apis/{names.API_VERSION}"


def _plural(kind: str) -> str:
    return {
        "ResourceFlavor": "resourceflavors",
        "Topology": "topologies",
        "Cohort": "cohorts",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
    }[kind]


async def _create(api: Api, obj: dict[str, Any]) -> None:
    if obj["kind"] == "Namespace":
        path = "/api/v1/namespaces"
    elif obj["kind"] == "Node":
        path = "/api/v1/nodes"
    elif obj["metadata"].get("namespace"):
        path = f"{OURS}/namespaces/{obj['metadata']['namespace']}/{_plural(obj['kind'])}"
    else:
        path = f"{OURS}/{_plural(obj['kind'])}"
    for attempt in range(30):
        try:
            await api.request("POST", path, obj)
            return
        except ApiError as err:
            if err.status == 409:
                return
            # a CRD just installed may not be served for a moment; a webhook may be starting
            if err.status not in (404, 429, 500, 503) or attempt == 29:
                raise
        await asyncio.sleep(0.2)


async def create(api: Api, lay: Layout) -> None:
    await _create(api, objects.namespace(lay))
    if lay.scenario.fleet is not None:
        await _create(api, objects.topology(lay))
        await asyncio.gather(*(_create(api, node) for node in objects.nodes(lay)))
    await _create(api, objects.flavor(lay))
    s = lay.scenario
    await asyncio.gather(*(_create(api, objects.cohort(lay, c)) for c in range(s.cohorts)))
    await asyncio.gather(*(_create(api, objects.cluster_queue(lay, c, q)) for c, q in lay.queues()))
    await asyncio.gather(*(_create(api, objects.local_queue(lay, c, q)) for c, q in lay.queues()))


def _usable(node: dict[str, Any]) -> bool:
    """Ready, and no start-up taint left (the core would not place on it otherwise)."""
    status = node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    taints = (node.get("spec") or {}).get("taints") or ()
    return ready and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)


async def wait_nodes(api: Api, lay: Layout, timeout: float = 300.0) -> float:
    """Until every node of the run is Ready and untainted; returns the seconds it took."""
    started = time.monotonic()
    wanted = lay.scenario.fleet.nodes if lay.scenario.fleet is not None else 0
    selector = f"{objects.LABEL_BENCH}={lay.run_id}"
    while wanted:
        listed = await api.request("GET", "/api/v1/nodes", params={"labelSelector": selector})
        usable = sum(1 for n in listed.get("items") or () if _usable(n))
        if usable >= wanted:
            break
        if time.monotonic() - started > timeout:
            raise TimeoutError(
                f"{wanted - usable} of {wanted} nodes not Ready and untainted after "
                f"{timeout:.0f}s; the cluster needs kwok managing nodes annotated "
                f"{names.ANNOTATION_KWOK_NODE}={names.KWOK_NODE_FAKE} (testenv runs it)"
            )
        await asyncio.sleep(1.0)
    return time.monotonic() - started


NODE_START_UP = frozenset({("pods", "LIST"), ("leases", "POST")})
"""What kwok does once per node it takes on (its Lease created, the node's pods listed): not
the load's cost, so the load starts once it has stopped."""


async def settle(api: Api, quiet_s: float = 2.0, timeout: float = 120.0) -> float:
    """Until no node start-up request was served for `quiet_s`; returns the seconds it took."""
    started = time.monotonic()

    async def served() -> int:
        counts = apimetrics.request_counts(await api.text("/metrics"))
        return sum(counts[key] for key in NODE_START_UP)

    last = await served()
    while time.monotonic() - started < timeout:
        await asyncio.sleep(quiet_s)
        now = await served()
        if now == last:
            break
        last = now
    return time.monotonic() - started


async def wait_active(api: Api, lay: Layout, timeout: float = 120.0) -> float:
    """Until the controller reports every ClusterQueue Active; returns the seconds it took."""
    started = time.monotonic()
    wanted = {lay.cluster_queue(c, q) for c, q in lay.queues()}
    selector = f"{objects.LABEL_BENCH}={lay.run_id}"
    while True:
        listed = await api.request(
            "GET", f"{OURS}/clusterqueues", params={"labelSelector": selector}
        )
        active = {
            cq["metadata"]["name"]
            for cq in listed.get("items") or ()
            if any(
                c.get("type") == names.COND_ACTIVE and c.get("status") == "True"
                for c in (cq.get("status") or {}).get("conditions") or ()
            )
        }
        if wanted <= active:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            missing = sorted(wanted - active)[:5]
            raise TimeoutError(
                f"{len(wanted - active)} ClusterQueues not Active after {timeout:.0f}s "
                f"(e.g. {missing}); is the controller running? read its log"
            )
        await asyncio.sleep(0.5)


async def delete(api: Api, lay: Layout) -> None:
    """Remove the run's objects: its namespace (Workloads, LocalQueues) and its cluster-scoped
    queue tree, Topology and Nodes, found by the run label."""
    selector = {"labelSelector": f"{objects.LABEL_BENCH}={lay.run_id}"}
    with_ns = f"{OURS}/namespaces/{lay.namespace}"
    for path in (f"{with_ns}/workloads", f"{with_ns}/localqueues"):
        try:
            await api.request("DELETE", path, params=selector)
        except ApiError as err:
            if err.status != 404:
                raise
    for kind in ("ClusterQueue", "Cohort", "ResourceFlavor", "Topology"):
        try:
            await api.request("DELETE", f"{OURS}/{_plural(kind)}", params=selector)
        except ApiError as err:
            if err.status != 404:
                raise
    try:
        await api.request("DELETE", "/api/v1/nodes", params=selector)
    except ApiError as err:
        if err.status != 404:
            raise
    try:
        await api.request("DELETE", f"/api/v1/namespaces/{lay.namespace}")
    except ApiError as err:
        if err.status != 404:
            raise
