"""Admission check controllers built into queuectl, found by `spec.controllerName`.

A check controller does two things (docs/design/admission-checks.md): it sets its
AdmissionCheck's Active condition, and it writes a state into `status.admissionChecks` of the
Workloads that reserved quota in a queue listing the check. Checks owned by anyone else are
left alone. `REGISTRY` is the seam for the built-ins, each made from the controller's API
client, cache, clock and timer: `queuectl.io/always-ready`, trivial and meant for demos and
tests (Active, Ready for every workload), and `queuectl.io/provisioning`, which asks an
autoscaler for the capacity a reservation needs (controller/admission/provision.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from queuectl import convert
from queuectl.api import names
from queuectl.api.views import ObjectView
from queuectl.controller.admission import checks, status
from queuectl.controller.admission.provision import ProvisionCheck
from queuectl.controller.watch import kube as k
from queuectl.controller.watch.cache import Cache
from queuectl.controller.watch.kube import Kube, KubeError, Obj
from queuectl.core.types import CheckState


class CheckController(Protocol):
    def activity(self, check: Obj) -> tuple[bool, str]:
        """(Active, message) for its AdmissionCheck (e.g. not Active while misconfigured)."""
        ...

    async def decide(self, check: Obj, wl: Obj) -> tuple[CheckState, str] | None:
        """The state (and message) for a Workload whose state of this check is Pending; None:
        nothing to say yet. Saying Pending again with a new message only updates it."""
        ...

    async def tidy(self, key: str, wl: Obj | None) -> None:
        """Clean up after a Workload (None: deleted) that may no longer need what the check
        made for it; every reconcile of the leader calls it, so it must be cheap when there
        is nothing to do."""
        ...


class AlwaysReady:
    """Lets every workload in: two-phase admission with nothing to wait for."""

    def activity(self, check: Obj) -> tuple[bool, str]:
        return True, f"{names.CHECK_ALWAYS_READY} is built into queuectl"

    async def decide(self, check: Obj, wl: Obj) -> tuple[CheckState, str] | None:
        return "Ready", f"{names.CHECK_ALWAYS_READY} lets every workload in"

    async def tidy(self, key: str, wl: Obj | None) -> None:
        return None  # it makes nothing


Clock = Callable[[], float]
Timer = Callable[[float, str], None]  # (when, workload key): reconcile it then
Factory = Callable[[Kube, Cache, Clock, Timer], CheckController]
REGISTRY: Mapping[str, Factory] = {
    names.CHECK_ALWAYS_READY: lambda *_: AlwaysReady(),
    names.CHECK_PROVISIONING: ProvisionCheck,
}


class BuiltinChecks:
    """Runs the registered check controllers from the controller's cache and writes."""

    def __init__(
        self,
        kube: Kube,
        cache: Cache,
        clock: Clock,
        at: Timer = lambda *_: None,
        registry: Mapping[str, Factory] = REGISTRY,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.clock = clock
        self.registry = {name: make(kube, cache, clock, at) for name, make in registry.items()}

    async def tidy(self, key: str, wl: Obj | None) -> None:
        """Let each built-in that made objects for Workloads clean up after this one."""
        for ctl in self.registry.values():
            await ctl.tidy(key, wl)

    def _owned(self, name: str) -> tuple[Obj, CheckController] | None:
        obj = self.cache.get(k.ADMISSION_CHECKS, name)
        ctl = self.registry.get(str(ObjectView(obj or {}).spec.get("controllerName") or ""))
        return None if obj is None or ctl is None else (obj, ctl)

    async def sync_check(self, name: str) -> None:
        """Set the Active condition of a check we own (nothing for anyone else's)."""
        owned = self._owned(name)
        if owned is None:
            return
        obj, ctl = owned
        active, message = ctl.activity(obj)
        view = ObjectView(obj)
        conds: list[dict[str, Any]] = copy.deepcopy(list(view.status.get("conditions") or []))
        reason = names.REASON_READY if active else names.REASON_INACTIVE
        gen = view.meta.get("generation")
        if not status.set_condition(
            conds, names.COND_ACTIVE, active, reason, message, self.clock(), gen
        ):
            return
        body = {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
            "status": {"conditions": conds},
        }
        try:
            written = await self.kube.patch(k.ADMISSION_CHECKS, name, body, sub="status")
        except KubeError as err:
            if err.not_found or err.conflict:
                return  # gone, or changed: its event brings us back
            raise
        self.cache.store(k.ADMISSION_CHECKS).upsert_local(written)

    async def decide(self, wl: Obj) -> Obj | None:
        """Write our checks' states on a Workload where they are Pending; the written Workload,
        or None when none of its Pending checks is ours (or the write lost a race)."""
        entries = checks.entries(wl)
        now = convert.format_time(self.clock())
        changed = False
        for entry in entries:
            owned = self._owned(str(entry["name"]))
            if entry.get("state") != "Pending" or owned is None:
                continue
            said = await owned[1].decide(owned[0], wl)
            if said is not None and (said[0], said[1]) != (
                entry.get("state"),
                entry.get("message"),
            ):
                entry.update(state=said[0], message=said[1], lastTransitionTime=now)
                changed = True
        if not changed:
            return None
        meta = wl["metadata"]
        body = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": {"admissionChecks": entries},
        }
        try:
            written = await self.kube.patch(
                k.WORKLOADS, meta["name"], body, meta.get("namespace"), sub="status"
            )
        except KubeError as err:
            if err.not_found or err.conflict:
                return None
            raise
        self.cache.store(k.WORKLOADS).upsert_local(written)
        return written
