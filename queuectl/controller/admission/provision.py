"""The built-in `queuectl.io/provisioning` admission check: queued demand grows the fleet.

For a Workload that reserved quota in a queue listing this check: if the nodes there now can
hold its pods (`core.provision.unplaced`), Ready at once. Otherwise ask an autoscaler:
- no parameters: placeholder pods of the pod sets' exact shape at the lowest, never-preempting
  PriorityClass; an autoscaler that acts on pending pods (Karpenter, cluster-autoscaler) adds
  nodes, the kube-scheduler binds them, and when every placeholder has a node the check is
  Ready and they are deleted, so the Job's pods (started in the same reconcile) take their
  places;
- parameters naming a ProvisioningRequest class: PodTemplates and a ProvisioningRequest
  (cluster-autoscaler's API); Ready when it says Provisioned, Retry when it failed or its
  booking ran out.
No capacity within PROVISION_TIMEOUT_S of the reservation: Retry (quota released, requeued with
back-off, the request withdrawn). docs/design/provisioning.md records the decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from queuectl import convert, metrics
from queuectl.api import names
from queuectl.api.resource import Resource
from queuectl.api.views import ObjectView, WorkloadView
from queuectl.controller.admission import checks
from queuectl.controller.admission import provision_objects as objs
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.core.provision import gpu_demand, unplaced
from queuectl.core.types import CheckState

PROVISIONING_REQUESTS: Final = Resource(
    names.PROVREQ_GROUP, "v1", "provisioningrequests", True, "ProvisioningRequest"
)
POD_TEMPLATES: Final = Resource("", "v1", "podtemplates", True, "PodTemplate")
PROVISION_TIMEOUT_S: Final = 600.0
"""From the reservation: an autoscaler that has not delivered by then is not going to soon, and
the quota is better released to others (Retry backs the workload off and asks again)."""
POLL_S: Final = 5.0  # ProvisioningRequests are not watched: their state is read this often

Decision = tuple[CheckState, str] | None
MODE_PODS: Final = "placeholders"
MODE_REQUEST: Final = "provisioningrequest"


@dataclass
class Asked:
    """What was asked for one Workload, so it can be withdrawn and counted."""

    mode: str
    namespace: str
    pods: tuple[str, ...] = ()
    request: str = ""
    templates: tuple[str, ...] = ()
    gpus: dict[tuple[str, str], int] = field(default_factory=dict)
    provisioned: bool = False


class ProvisionCheck:
    """Decides the check; keeps what it asked for per Workload key; cleans up after it."""

    def __init__(
        self, kube: Kube, cache: Cache, clock: Callable[[], float], at: Callable[[float, str], None]
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.clock = clock
        self.at = at
        self.asked: dict[str, Asked] = {}
        self._orphans: set[str] = set()  # Workload keys with placeholders to delete
        self._priority_class_ok = False
        cache.store(k.PODS).listeners.append(self._on_pod)
        cache.store(k.WORKLOADS).listeners.append(self._on_workload)

    # --- the CheckController protocol ------------------------------------------------------
    def activity(self, check: Obj) -> tuple[bool, str]:
        params = ObjectView(check).spec.get("parameters")
        issue = objs.parameters_issue(params)
        if issue is not None:
            return False, issue
        how = objs.request_class(params)
        return True, (
            f"{names.CHECK_PROVISIONING}: ProvisioningRequests of class {how}"
            if how
            else f"{names.CHECK_PROVISIONING}: placeholder pods at priority class "
            f"{names.PRIORITY_CLASS_PLACEHOLDER}"
        )

    async def decide(self, check: Obj, wl: Obj) -> Decision:
        if not WorkloadView(wl).holds_quota:
            return None
        flavors = {f["metadata"]["name"]: f for f in self.cache.store(k.RESOURCE_FLAVORS).values()}
        klass = objs.request_class(ObjectView(check).spec.get("parameters"))
        if klass is not None:
            return await self._by_request(check, wl, klass, flavors)
        return await self._by_placeholders(wl, flavors)

    # --- placeholder pods -------------------------------------------------------------------
    def _fits_now(self, wl: Obj, flavors: Mapping[str, Obj]) -> bool:
        nodes = [convert.node(n) for n in self.cache.store(k.NODES).values()]
        used: dict[str, dict[str, int]] = {}
        for pod in self.cache.store(k.PODS).values():  # bound, unfinished pods (cache.py)
            labels = ObjectView(pod).labels
            node = ObjectView(pod).spec.get("nodeName")
            if not node or names.LABEL_PLACEHOLDER_FOR in labels:
                continue  # a placeholder gives way to anything
            total = used.setdefault(str(node), {})
            for res, v in convert.pod_requests(ObjectView(pod).spec).items():
                total[res] = total.get(res, 0) + v
        return not unplaced(nodes, used, objs.shapes(wl, flavors))

    async def _by_placeholders(self, wl: Obj, flavors: Mapping[str, Obj]) -> Decision:
        key, meta, now = WorkloadView(wl).key, wl["metadata"], self.clock()
        asked = self.asked.get(key)
        bound = objs.bound_placeholders(
            list(self.cache.store(k.PODS).values()), meta["namespace"], meta["name"]
        )
        if asked is None and not bound:
            if self._fits_now(wl, flavors):
                metrics.CONTROLLER_PROVISION_DECISIONS.labels(MODE_PODS, "Fits").inc()
                return "Ready", "the nodes there now hold every pod; nothing to provision"
            pods = objs.placeholder_pods(wl, flavors)
            await self._ensure_priority_class()
            for pod in pods:
                await self._create(k.PODS, pod)
            asked = self._remember(key, wl, Asked(MODE_PODS, meta["namespace"], pods=_names(pods)))
            self.at(self._deadline(wl), key)
        if asked is None:  # restarted while its placeholders stood: take them up again
            pods = objs.placeholder_pods(wl, flavors)
            asked = self._remember(key, wl, Asked(MODE_PODS, meta["namespace"], pods=_names(pods)))
        have = {p["metadata"]["name"] for p in bound}
        if set(asked.pods) <= have:
            nodes = sorted({str(p["spec"]["nodeName"]) for p in bound})
            await self._withdraw(key)
            metrics.CONTROLLER_PROVISION_DECISIONS.labels(MODE_PODS, "Provisioned").inc()
            return "Ready", (
                f"capacity is there: {len(asked.pods)} placeholder pod(s) bound on "
                f"{', '.join(nodes)}, removed for the job's own pods"
            )
        if now >= self._deadline(wl):
            await self._withdraw(key)
            metrics.CONTROLLER_PROVISION_DECISIONS.labels(MODE_PODS, "Retry").inc()
            return "Retry", (
                f"no capacity within {PROVISION_TIMEOUT_S:.0f}s: {len(have & set(asked.pods))}"
                f" of {len(asked.pods)} placeholder pod(s) found a node"
            )
        return "Pending", (
            f"asked an autoscaler for capacity: {len(have & set(asked.pods))} of "
            f"{len(asked.pods)} placeholder pod(s) have a node"
        )

    async def _ensure_priority_class(self) -> None:
        if not self._priority_class_ok:
            await self._create(k.PRIORITY_CLASSES, objs.priority_class())
            self._priority_class_ok = True

    # --- ProvisioningRequest --------------------------------------------------------------
    async def _by_request(
        self, check: Obj, wl: Obj, klass: str, flavors: Mapping[str, Obj]
    ) -> Decision:
        key, meta = WorkloadView(wl).key, wl["metadata"]
        templates, request = objs.provisioning_objects(
            wl, check["metadata"]["name"], klass, flavors
        )
        name = request["metadata"]["name"]
        try:
            current: Obj | None = await self.kube.get(
                PROVISIONING_REQUESTS, name, meta["namespace"]
            )
        except KubeError as err:
            if not err.not_found:
                raise
            current = None
        asked = self.asked.get(key) or self._remember(
            key,
            wl,
            Asked(
                MODE_REQUEST,
                meta["namespace"],
                request=name,
                templates=_names(templates),
            ),
        )
        if current is None:  # always asked: the autoscaler, not us, knows what it can book
            for template in templates:
                await self._create(POD_TEMPLATES, template)
            await self._create(PROVISIONING_REQUESTS, request)
            self.at(self.clock() + POLL_S, key)
            return "Pending", f"ProvisioningRequest {name} (class {klass}) created"
        said = objs.request_state(current)
        if said is None:
            if self.clock() >= self._deadline(wl):
                await self._withdraw(key)
                metrics.CONTROLLER_PROVISION_DECISIONS.labels(MODE_REQUEST, "Retry").inc()
                return "Retry", f"ProvisioningRequest {name} not provisioned within " + (
                    f"{PROVISION_TIMEOUT_S:.0f}s"
                )
            self.at(self.clock() + POLL_S, key)
            return "Pending", f"waiting for ProvisioningRequest {name} (class {klass})"
        if said[0] == "Retry":
            await self._withdraw(key)
        else:
            asked.provisioned = True  # kept until the workload leaves: its booking holds nodes
            asked.gpus = {}
            self._publish()
        outcome = "Provisioned" if said[0] == "Ready" else "Retry"
        metrics.CONTROLLER_PROVISION_DECISIONS.labels(MODE_REQUEST, outcome).inc()
        return said

    # --- bookkeeping and cleanup ----------------------------------------------------------
    def _deadline(self, wl: Obj) -> float:
        cond = WorkloadView(wl).condition(names.COND_QUOTA_RESERVED) or {}
        since = convert.parse_time(cond.get("lastTransitionTime")) or self.clock()
        return since + PROVISION_TIMEOUT_S

    def _remember(self, key: str, wl: Obj, asked: Asked) -> Asked:
        asked.gpus = gpu_demand(
            objs.shapes(wl, _flavor_objs(self.cache)), objs.gpu_flavors(wl), objs.is_gpu
        )
        self.asked[key] = asked
        self._publish()
        return asked

    def _publish(self) -> None:
        """The gauges, recomputed from what is asked for now (bounded labels: flavors,
        resources, two modes, two states)."""
        gpus: dict[tuple[str, str], int] = {}
        states: dict[tuple[str, str], int] = {}
        for asked in self.asked.values():
            for fr, n in asked.gpus.items():
                gpus[fr] = gpus.get(fr, 0) + n
            state = "Provisioned" if asked.provisioned else "Pending"
            states[(asked.mode, state)] = states.get((asked.mode, state), 0) + 1
        metrics.CONTROLLER_PROVISION_PENDING_GPUS.clear()
        for (flavor, resource), n in gpus.items():
            metrics.CONTROLLER_PROVISION_PENDING_GPUS.labels(flavor, resource).set(n)
        metrics.CONTROLLER_PROVISION_REQUESTS.clear()
        for mode in (MODE_PODS, MODE_REQUEST):
            for state in ("Pending", "Provisioned"):
                metrics.CONTROLLER_PROVISION_REQUESTS.labels(mode, state).set(
                    states.get((mode, state), 0)
                )

    async def _withdraw(self, key: str) -> None:
        """Delete what was asked for this Workload (gone already is fine)."""
        asked = self.asked.pop(key, None)
        self._publish()
        if asked is None:
            return
        targets: list[tuple[Resource, str]] = [(k.PODS, n) for n in asked.pods]
        if asked.request:
            targets.append((PROVISIONING_REQUESTS, asked.request))
        targets += [(POD_TEMPLATES, n) for n in asked.templates]
        for res, name in targets:
            await self._delete(res, name, asked.namespace)

    async def _create(self, res: Resource, body: Obj) -> None:
        try:
            await self.kube.create(res, body, body["metadata"].get("namespace"))
        except KubeError as err:
            if err.status != 409:  # there already: asked before (or by a previous run)
                raise

    def _waiting_on_us(self, wl: Obj | None) -> bool:
        """Whether the Workload still waits for one of our checks (its requests stay)."""
        if wl is None or not WorkloadView(wl).holds_quota:
            return False
        for entry in checks.entries(wl):
            obj = self.cache.get(k.ADMISSION_CHECKS, str(entry["name"]))
            ctl = ObjectView(obj or {}).spec.get("controllerName")
            if ctl == names.CHECK_PROVISIONING and entry.get("state") in ("Pending", "Ready"):
                return entry.get("state") == "Pending" or self._provisioned(wl)
        return False

    def _provisioned(self, wl: Obj) -> bool:
        asked = self.asked.get(WorkloadView(wl).key)
        return (
            asked is not None
            and asked.provisioned
            and not WorkloadView(wl).is_true(names.COND_FINISHED)
        )

    async def tidy(self, key: str, wl: Obj | None) -> None:
        """Withdraw what was asked for a Workload that no longer waits for us (finished,
        evicted, deleted, another check said Retry), and delete placeholders the pod watch
        found for one (e.g. left from before a restart). Run by the leader's reconcile only."""
        if (key not in self.asked and key not in self._orphans) or self._waiting_on_us(wl):
            return  # the common case costs two set lookups
        if key in self.asked:
            await self._withdraw(key)
        if key in self._orphans:
            self._orphans.discard(key)
            ns, name = key.split("/", 1)
            for pod in list(self.cache.store(k.PODS).values()):
                meta = ObjectView(pod).meta
                owners = {r.get("name") for r in meta.get("ownerReferences") or ()}
                labels = meta.get("labels") or {}
                if (
                    meta.get("namespace") == ns
                    and names.LABEL_PLACEHOLDER_FOR in labels
                    and (name in owners)
                ):
                    await self._delete(k.PODS, str(meta["name"]), ns)

    def _on_workload(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = WorkloadView(obj).key
        if key in self.asked and (kind == "DELETED" or not self._waiting_on_us(obj)):
            self.at(self.clock(), key)  # its reconcile withdraws (tidy)

    def _on_pod(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """A placeholder got a node: its Workload decides again. One whose Workload no
        longer waits for us: its reconcile deletes it (tidy). Listeners never write: a
        follower sees the same events, and only the leader's reconciles run."""
        meta = ObjectView(obj).meta
        if kind == "DELETED" or names.LABEL_PLACEHOLDER_FOR not in (meta.get("labels") or {}):
            return
        owners = [r for r in meta.get("ownerReferences") or () if r.get("kind") == "Workload"]
        if not owners:
            return
        key = f"{meta.get('namespace') or ''}/{owners[0].get('name')}"
        ns, name = key.split("/", 1)
        if not self._waiting_on_us(self.cache.get(k.WORKLOADS, name, ns)):
            self._orphans.add(key)
        self.at(self.clock(), key)

    async def _delete(self, res: Resource, name: str, namespace: str) -> None:
        try:
            await self.kube.delete(res, name, namespace)
        except KubeError as err:
            if not err.not_found:
                raise


def _names(objs_: Iterable[Obj]) -> tuple[str, ...]:
    return tuple(str(o["metadata"]["name"]) for o in objs_)


def _flavor_objs(cache: Cache) -> dict[str, Obj]:
    return {f["metadata"]["name"]: f for f in cache.store(k.RESOURCE_FLAVORS).values()}
