"""One attempt of the bypass fuzzer: apply a mutation as the plain user, watch, classify, and
put the world back (or say it must be rebuilt).

Outcomes: `refused` (the API server or a webhook said no; its message kept), `evicted` (the
controller evicted a Workload of the world after the change), `harmless` (accepted, and nothing
ran that was not admitted), `violation` (GPU pods ran beyond what was admitted, or on another
flavor's nodes, and no eviction followed within the wait).
"""

from __future__ import annotations

import copy
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from bench.bypass.claims import PROBE_PODS, PROBE_QUEUE, charged_objects
from bench.bypass.kinds import BIG_RUNTIME
from bench.bypass.mutations import Mutation
from bench.bypass.world import (
    Pool,
    UserRest,
    World,
    evicted_since,
    json_patch,
    pods,
    running_gpus,
    still_admitted,
    workloads,
)
from bench.chaos.world import Rest, status_message
from queuectl.api import names
from queuectl.testenv.invariants import Sampler
from queuectl.testenv.podgpus import active, holds_quota, is_true, pod_gpus

Obj = dict[str, Any]
COLLECTIONS = {"Pod": "/api/v1/namespaces/{ns}/pods", "Job": "/apis/batch/v1/namespaces/{ns}/jobs"}


@dataclass(frozen=True)
class Timing:
    min_window_s: float = 2.0
    quiet_s: float = 1.5
    max_window_s: float = 10.0
    evict_wait_s: float = 10.0


@dataclass
class Outcome:
    kind: str
    category: str
    role: str
    what: str
    result: str  # refused | evicted | harmless | violation
    detail: str = ""
    rebuild: bool = False


def _owner_ref(obj: Obj, wrong_uid: bool = False) -> Obj:
    meta = obj["metadata"]
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", ""),
        "name": meta["name"],
        "uid": str(uuid.uuid4()) if wrong_uid else meta["uid"],
        "controller": True,
    }


def _resolve(value: Any, world: World, pool: Pool, m: Mutation) -> Any:
    """The mutation's placeholders, for this world."""
    if isinstance(value, dict):
        return {k: _resolve(v, world, pool, m) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, world, pool, m) for v in value]
    table = {
        "$A100_NODE": pool.a100_nodes[0] if pool.a100_nodes else "bypass-a-0",
        "$FREE_CQ": world.free_cq,
        "$OTHER_WORKLOAD": world.queued_workload.get("metadata", {}).get("name", "other"),
        "$BIG_RUNTIME": BIG_RUNTIME,
    }
    if value == "$OWNER":
        return _owner_ref(world.roles[m.role], bool(m.meta.get("wrong_uid")))
    if value == "$OWNER_OF_OBJECT":
        return _owner_ref(world.roles["object"])
    return table.get(value, value) if isinstance(value, str) else value


def _at(obj: Any, ptr: str) -> tuple[bool, Any]:
    """(present, value) at a JSON pointer."""
    for raw in ptr.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return False, None
    return True, obj


def inverse(before: Obj, ops: list[Obj]) -> list[Obj]:
    """The ops that undo `ops` on `before` (applied in order, undone in reverse)."""
    out: list[Obj] = []
    for op in ops:
        path = op["path"]
        if path.endswith("/-"):
            _, seq = _at(before, path[:-2])
            out.append({"op": "remove", "path": f"{path[:-2]}/{len(seq or [])}"})
            continue
        present, old = _at(before, path)
        if present:
            out.append(
                {
                    "op": "replace" if op["op"] != "remove" else "add",
                    "path": path,
                    "value": copy.deepcopy(old),
                }
            )
        else:
            out.append({"op": "remove", "path": path})
    return list(reversed(out))


def _fingerprint(rest: Rest, ns: str) -> tuple[Any, ...]:
    ps = tuple(
        sorted(
            (
                p["metadata"]["name"],
                p["status"].get("phase"),
                p["spec"].get("nodeName"),
                bool(p["spec"].get("schedulingGates")),
                bool(p["metadata"].get("deletionTimestamp")),
            )
            for p in pods(rest, ns)
        )
    )
    ws = tuple(sorted((w["metadata"]["name"], holds_quota(w)) for w in workloads(rest, ns)))
    return ps, ws


def _apply(user: UserRest, world: World, pool: Pool, m: Mutation) -> tuple[str, Any]:
    """Make the change as the user. Returns how to undo it: ('patch', (path, ops)),
    ('scale', (path, replicas)), ('delete', path)."""
    path = world.paths[m.role]
    if m.category == "charge":
        made: list[str] = []
        collection = world.case.path(world.namespace)
        for body in charged_objects(
            world.case.make("c", world.namespace, PROBE_QUEUE, PROBE_PODS), m
        ):
            try:
                user.create(collection, body)
            except ApiException:
                _undo(user, ("delete", made))
                raise
            made.append(f"{collection}/{body['metadata']['name']}")
        return "delete", made
    if m.create is not None:
        body = _resolve(copy.deepcopy(m.create), world, pool, m)
        collection = COLLECTIONS[body["kind"]].format(ns=world.namespace)
        created = user.create(collection, body)
        return "delete", [f"{collection}/{created['metadata']['name']}"]
    if m.subresource == "scale":
        before = user.call("GET", f"{path}/scale")
        user.call("PATCH", f"{path}/scale", {"spec": {"replicas": m.meta["replicas"]}}, patch=True)
        return "scale", (f"{path}/scale", before["spec"].get("replicas"))
    ops = [_resolve(op, world, pool, m) for op in m.ops]
    before = user.call("GET", path)
    target = f"{path}/resize" if m.subresource == "resize" else path
    user.json_patch(target, ops)
    return "patch", (target, inverse(before, ops))


def _undo(rest: Rest, how: tuple[str, Any]) -> bool:
    kind, what = how
    try:
        if kind == "delete":
            for path in what:
                body = {"propagationPolicy": "Background", "gracePeriodSeconds": 0}
                rest.call("DELETE", path, body)
        elif kind == "scale":
            rest.call("PATCH", what[0], {"spec": {"replicas": what[1]}}, patch=True)
        else:
            json_patch(rest, what[0], what[1])
    except ApiException:
        return False
    return True


def _watch(rest: Rest, ns: str, t: Timing, started: float) -> None:
    """Until the namespace has been quiet for `quiet_s` (at least `min_window_s` after the
    change, at most `max_window_s`)."""
    last = _fingerprint(rest, ns)
    changed = time.monotonic()
    while True:
        now = time.monotonic()
        if now - started >= t.max_window_s:
            return
        if now - started >= t.min_window_s and now - changed >= t.quiet_s:
            return
        time.sleep(0.4)
        current = _fingerprint(rest, ns)
        if current != last:
            last, changed = current, time.monotonic()


def _baseline(rest: Rest, world: World) -> bool:
    """The world as it was built: `a` still admitted (same Workload) with its 8 GPUs running
    and nothing more; `b` still waiting."""
    wls = workloads(rest, world.namespace)
    held = [w for w in wls if holds_quota(w)]
    extra = [
        p
        for p in pods(rest, world.namespace)
        if active(p) and pod_gpus(p) and p["status"].get("phase") != "Running"
    ]
    return (
        still_admitted(wls, world.admitted_workload["metadata"]["uid"])
        and len(held) == 1
        and running_gpus(rest, world.namespace) == world.baseline_gpus
        and not extra
    )


def _finished(wls: list[Obj], world: World) -> bool:
    uid = world.admitted_workload["metadata"]["uid"]
    return any(w["metadata"]["uid"] == uid and is_true(w, names.COND_FINISHED) for w in wls)


def _template_change(m: Mutation) -> bool:
    """A change to a pod template, which operators apply only to the pods they make next."""
    return m.category in ("field", "key") and any(
        "template" in str(op["path"]).lower() for op in m.ops
    )


def _recreate_a_pod(user: UserRest, rest: Rest, world: World) -> bool:
    """The user deletes one running GPU pod of the world (a user may delete pods), so its
    owner makes it again from the changed template."""
    running = sorted(
        (p for p in pods(rest, world.namespace) if active(p) and pod_gpus(p)),
        key=lambda p: str(p["metadata"]["name"]),
    )
    if not running:
        return False
    name = running[0]["metadata"]["name"]
    try:
        user.call("DELETE", f"/api/v1/namespaces/{world.namespace}/pods/{name}", {})
    except ApiException:
        return False
    return True


SETTLE_S = 2.0
"""How long a fresh window of samples must show nothing over the admission for an excess that
was seen to count as gone (10 samples at the sampler's 200 ms)."""


def attempt(
    rest: Rest, user: UserRest, pool: Pool, world: World, sampler: Sampler, m: Mutation, t: Timing
) -> Outcome:
    out = Outcome(world.case.name, m.category, m.role, m.what, "harmless")
    since_iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    started = time.monotonic()
    try:
        how = _apply(user, world, pool, m)
    except ApiException as err:
        out.result, out.detail = "refused", f"{err.status}: {status_message(err)}"
        return out
    _watch(rest, world.namespace, t, started)
    seen = sampler.seen_since(started)
    evicted = evicted_since(workloads(rest, world.namespace), since_iso)
    lost = not still_admitted(
        workloads(rest, world.namespace), world.admitted_workload["metadata"]["uid"]
    )
    if not (seen or evicted or lost) and _template_change(m) and _recreate_a_pod(user, rest, world):
        out.detail = "a running pod deleted, to be made again from the changed template"
        _watch(rest, world.namespace, t, time.monotonic())
        seen = sampler.seen_since(started)
        evicted = evicted_since(workloads(rest, world.namespace), since_iso)
    gone = False
    if seen and not evicted:
        deadline = time.monotonic() + t.evict_wait_s
        while not evicted and time.monotonic() < deadline:
            time.sleep(0.5)
            evicted = evicted_since(workloads(rest, world.namespace), since_iso)
        if not evicted:  # is anything still over, in samples taken from now on?
            fresh = time.monotonic()
            time.sleep(SETTLE_S)
            gone = not sampler.seen_since(fresh)
    lost = not still_admitted(
        workloads(rest, world.namespace), world.admitted_workload["metadata"]["uid"]
    )
    excess = "; ".join(f"{v.kind} {v.subject}: {v.detail}" for v in seen[:3])
    then = f"{out.detail}: " if out.detail else ""
    if evicted:
        out.result = "evicted"
        out.detail = then + ", ".join(evicted) + (f" (after {excess})" if excess else "")
    elif seen and gone:
        out.result, out.detail = "transient", then + excess + " (gone without an eviction)"
    elif seen:
        out.result, out.detail = "violation", then + excess
    elif lost and _finished(workloads(rest, world.namespace), world):
        out.detail = then + "the admitted job ended (a world of less, rebuilt)"
        out.rebuild = True
    elif lost:
        out.result, out.detail = "evicted", "the admitted Workload lost its admission"
    if out.result != "harmless" or out.rebuild or not _undo(rest, how):
        out.rebuild = True
        return out
    time.sleep(0.5)
    _watch(
        rest,
        world.namespace,
        Timing(min_window_s=0.5, quiet_s=1.0, max_window_s=8.0),
        time.monotonic(),
    )
    if not _baseline(rest, world) or sampler.seen_since(started):
        late = sampler.seen_since(started)
        if late and out.result == "harmless":
            out.result = "violation"
            out.detail = "; ".join(f"{v.kind} {v.subject}: {v.detail}" for v in late[:3])
        out.rebuild = True
    return out
