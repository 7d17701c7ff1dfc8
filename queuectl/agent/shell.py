"""The agent's async shell: NVML off the event loop, one pass at a time, Node writes when needed.

A pass: refresh discovery when due, wait for NVML events (this is the loop's pacing), sample
every GPU (each call under its own timeout, so a wedged GPU reads as "not answering" instead of
stalling the agent), step the health state machine, publish metrics, patch the Node if it differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from queuectl import metrics
from queuectl.agent import health, nodestate
from queuectl.agent.discovery import Inventory, read_inventory
from queuectl.agent.gpuuse import ContainerDevices, GpuUse, UseWindow, join
from queuectl.agent.health import GpuState, HealthPolicy, NodeHealth
from queuectl.agent.kube import Conflict, NodeClient
from queuectl.agent.nodestate import DesiredNode, NodePatch, NodeView
from queuectl.agent.observe import observation, sample_gpu
from queuectl.agent.reader import GpuEvent, GpuReader, GpuSample, NvmlUnavailable
from queuectl.agent.sharing import Sharing
from queuectl.api import gpuuse, names

log = logging.getLogger(__name__)
T = TypeVar("T")
StateListener = Callable[[Inventory, Mapping[str, GpuState]], None]
DeviceLister = Callable[[], Awaitable[list[ContainerDevices]]]

STATUS_STARTING = "starting"
STATUS_OK = "ok"
STATUS_NVML_UNAVAILABLE = "nvml-unavailable"


@dataclass(frozen=True)
class AgentConfig:
    node_name: str
    policy: HealthPolicy = field(default_factory=HealthPolicy)
    poll_s: float = 10.0  # how long a pass waits for NVML events: the loop's period
    discovery_s: float = 300.0  # re-read the inventory this often
    call_timeout_s: float = 15.0  # one NVML call longer than this: that GPU is not answering
    heartbeat_s: float = 300.0  # refresh the condition's heartbeat at least this often
    resync_s: float = 60.0  # re-read the Node (others may have changed it) this often
    gfd_labels: bool = True
    sharing: Sharing = field(default_factory=Sharing)
    use_report_s: float = 60.0  # one GPU-use report (Node annotation) per this many seconds


@dataclass(frozen=True)
class PassResult:
    """Everything one pass found and did, for `--once` output and for tests."""

    now: float
    inventory: Inventory
    state: dict[str, GpuState]
    node_health: NodeHealth
    samples: dict[int, GpuSample | str]
    events: tuple[GpuEvent, ...]
    desired: DesiredNode
    patch: NodePatch | None  # None without a Node to compare with
    written: bool
    gpu_use: tuple[GpuUse, ...] = ()  # who holds each GPU (empty without the kubelet's devices)


async def call_blocking(fn: Callable[..., T], *args: Any, timeout: float) -> T:
    """Run `fn(*args)` on a fresh daemon thread and wait at most `timeout` seconds.

    A daemon thread (not an executor) so that an NVML call that never returns neither blocks the
    next call nor keeps the process from exiting.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def work() -> None:
        try:
            result: Any = fn(*args)
            ok = True
        except BaseException as exc:  # handed to the awaiting task
            result, ok = exc, False
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting any more
            loop.call_soon_threadsafe(settle, ok, result)

    threading.Thread(target=work, name="nvml", daemon=True).start()
    return await asyncio.wait_for(future, timeout)


class Agent:
    """One node's agent. `node_client` None: compute, never read or write the Node; `write`
    False: read the Node and compute the patch, but do not send it (`--once` without `--write`)."""

    def __init__(
        self,
        reader: GpuReader,
        config: AgentConfig,
        node_client: NodeClient | None = None,
        *,
        write: bool = True,
        clock: Callable[[], float] = time.time,
        collector: metrics.GpuCollector = metrics.GPU_COLLECTOR,
        on_state: StateListener | None = None,
        devices: DeviceLister | None = None,
    ) -> None:
        """`on_state` hears the inventory and health after start and after every pass (the
        device plugin advertises from it); `devices` asks the kubelet which container holds
        which device (None: GPU use per container is not reported)."""
        self.reader = reader
        self.config = config
        self.node_client = node_client
        self.write = write
        self.clock = clock
        self.collector = collector
        self.on_state = on_state
        self.status = STATUS_STARTING
        self.unavailable: NvmlUnavailable | None = None
        self.inventory = Inventory(())
        self.state: dict[str, GpuState] = {}
        self._inventory_at: float | None = None
        self._node: NodeView | None = None
        self._node_at: float | None = None
        self.devices = devices
        self._use_window: UseWindow | None = None
        self._use_annotation: str | None = None
        self._devices_trouble: str | None = None

    # --- lifecycle -------------------------------------------------------------------------
    async def start(self) -> NvmlUnavailable | None:
        """Open NVML and read the inventory; restore unhealthy GPUs a previous agent recorded."""
        node = self.config.node_name
        self.unavailable = await call_blocking(self.reader.open, timeout=self.config.call_timeout_s)
        metrics.AGENT_NVML_AVAILABLE.labels(node).set(0 if self.unavailable else 1)
        if self.unavailable is not None:
            self.status = STATUS_NVML_UNAVAILABLE
            log.warning("NVML unavailable on %s: %s", node, self.unavailable.reason)
            return self.unavailable
        await self._refresh_inventory(self.clock())
        if self.node_client is not None:
            try:
                view = await self._read_node(self.clock())
            except Exception as exc:  # e.g. a wrong --node-name: keep going, passes will retry
                log.warning("cannot read Node %s (%s); starting with no health history", node, exc)
            else:
                restored = health.decode(
                    view.annotations.get(names.ANNOTATION_GPU_HEALTH), self.clock()
                )
                known = {g.uuid for g in self.inventory.gpus}
                self.state = {u: s for u, s in restored.items() if u in known}
                if self.state:
                    log.info("restored %d unhealthy GPU(s) from the Node", len(self.state))
        self._tell()
        self.status = STATUS_OK
        return None

    async def close(self) -> None:
        try:
            await call_blocking(self.reader.close, timeout=self.config.call_timeout_s)
        except TimeoutError:
            log.warning("NVML shutdown did not return")

    async def report_unavailable(self) -> NodePatch | None:
        """Write GPUHealthy=Unknown (reason NVMLUnavailable) once, leaving labels and taints."""
        if self.unavailable is None or self.node_client is None:
            return None
        now = self.clock()
        view = await self._read_node(now)
        patch = nodestate.diff(
            view,
            nodestate.desired_unavailable(self.unavailable.reason),
            now,
            self.config.heartbeat_s,
        )
        if not patch.empty and self.write:
            await self._write(patch, now)
        return patch

    # --- one pass --------------------------------------------------------------------------
    async def _refresh_inventory(self, now: float) -> None:
        try:
            self.inventory = await call_blocking(
                read_inventory, self.reader, timeout=self.config.call_timeout_s * 4
            )
            self._inventory_at = now
        except TimeoutError:
            log.warning("GPU discovery did not finish; keeping the previous inventory")

    async def _read_node(self, now: float) -> NodeView:
        assert self.node_client is not None
        self._node = await self.node_client.get(self.config.node_name)
        self._node_at = now
        return self._node

    async def _write(self, patch: NodePatch, now: float) -> bool:
        assert self.node_client is not None
        node = self.config.node_name
        for change in patch.changes:  # the GPU-use report changes every window: not news
            quiet = names.ANNOTATION_GPU_USE in change.split("=", 1)[0]
            log.log(logging.DEBUG if quiet else logging.INFO, "%s: %s", node, change)
        try:
            self._node = await self.node_client.patch(node, patch)
        except Conflict:
            metrics.AGENT_NODE_WRITES.labels(node, "conflict").inc()
            self._node = None  # re-read and retry on the next pass
            return False
        except Exception:
            metrics.AGENT_NODE_WRITES.labels(node, "error").inc()
            log.exception("patching Node %s failed", node)
            self._node = None
            return False
        metrics.AGENT_NODE_WRITES.labels(node, "ok").inc()
        return True

    async def _sample_all(self) -> dict[int, GpuSample | str]:
        results: dict[int, GpuSample | str] = {}
        for gpu in self.inventory.gpus:
            try:
                results[gpu.index] = await call_blocking(
                    sample_gpu, self.reader, gpu.index, timeout=self.config.call_timeout_s
                )
            except TimeoutError:
                results[gpu.index] = f"no answer within {self.config.call_timeout_s:g} s"
        return results

    async def run_pass(self, *, wait_s: float | None = None) -> PassResult:
        """One discovery-and-health pass; writes to the Node only what changed."""
        cfg = self.config
        if self._inventory_at is None or self.clock() - self._inventory_at >= cfg.discovery_s:
            await self._refresh_inventory(self.clock())
        wait = cfg.poll_s if wait_s is None else wait_s
        try:
            events = await call_blocking(
                self.reader.wait_events, wait, timeout=wait + cfg.call_timeout_s
            )
        except TimeoutError:
            log.warning("waiting for NVML events did not return")
            events = []
        samples = await self._sample_all()
        now = self.clock()
        self.state = health.step(
            cfg.policy, self.state, observation(now, self.inventory, samples, events)
        )
        node_health = health.summarize(self.state)
        use = await self._gpu_use(samples, now)
        self._publish(samples, use)
        self._tell()
        desired = nodestate.desired_node(
            self.inventory,
            node_health,
            health.encode(self.state),
            gfd_labels=cfg.gfd_labels,
            shared=cfg.sharing,
            gpu_use=self._use_annotation,
        )
        patch, written = None, False
        if self.node_client is not None:
            if self._node is None or self._node_at is None or now - self._node_at >= cfg.resync_s:
                await self._read_node(now)
            assert self._node is not None
            patch = nodestate.diff(self._node, desired, now, cfg.heartbeat_s)
            if not patch.empty and self.write:
                written = await self._write(patch, now)
        metrics.AGENT_PASSES.labels(cfg.node_name).inc()
        return PassResult(
            now,
            self.inventory,
            dict(self.state),
            node_health,
            samples,
            tuple(events),
            desired,
            patch,
            written,
            tuple(use or ()),
        )

    async def _gpu_use(
        self, samples: Mapping[int, GpuSample | str], now: float
    ) -> list[GpuUse] | None:
        """Join the kubelet's devices with this pass's samples; close the report window when
        it is due (the Node annotation then changes, once per window). None: not known."""
        if self.devices is None:
            return None
        try:
            containers = await asyncio.wait_for(self.devices(), self.config.call_timeout_s)
        except Exception as exc:  # the kubelet restarting, its socket not mounted, a timeout
            trouble = f"{type(exc).__name__}: {exc}"
            if trouble != self._devices_trouble:
                log.warning("cannot read the kubelet's pod resources: %s", trouble)
            self._devices_trouble = trouble
            return None
        self._devices_trouble = None
        by_uuid = {s.uuid: s for s in samples.values() if isinstance(s, GpuSample)}
        rows = join(containers, self.inventory.gpus, by_uuid)
        if self._use_window is None:
            self._use_window = UseWindow(now)
        self._use_window.add(rows)
        if now - self._use_window.start >= self.config.use_report_s:
            report = self._use_window.close(now)
            self._use_annotation = gpuuse.encode(report) if report.containers else None
        return rows

    def _tell(self) -> None:
        if self.on_state is not None:
            self.on_state(self.inventory, self.state)

    def _publish(self, samples: dict[int, GpuSample | str], use: list[GpuUse] | None) -> None:
        rows = []
        by_uuid = {s.uuid: s for s in self.state.values()}
        holders: dict[str, list[tuple[str, str, str]]] = {}
        for row in use or ():
            held = holders.setdefault(row.uuid, [])
            if row.held:
                held.append((row.namespace, row.pod, row.container))
        for gpu in self.inventory.gpus:
            s = samples.get(gpu.index)
            sample = s if isinstance(s, GpuSample) else GpuSample(gpu.index, gpu.uuid)
            state = by_uuid.get(gpu.uuid)
            rows.append(
                metrics.GpuMetricSample(
                    node=self.config.node_name,
                    gpu=gpu.index,
                    uuid=gpu.uuid,
                    model=gpu.name,
                    healthy=state.healthy if state else True,
                    last_xid=state.last_xid if state else 0,
                    utilization_ratio=sample.utilization_ratio,
                    memory_utilization_ratio=sample.memory_utilization_ratio,
                    memory_used_bytes=sample.memory_used_bytes,
                    memory_free_bytes=sample.memory_free_bytes,
                    temperature_c=sample.temperature_c,
                    power_w=sample.power_w,
                    ecc_sbe_total=sample.ecc_sbe_volatile,
                    ecc_dbe_total=sample.ecc_dbe_volatile,
                    holders=None if use is None else tuple(holders.get(gpu.uuid, ())),
                )
            )
        self.collector.update(rows)

    # --- the loop --------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Start, then pass after pass until `stop` is set. Without NVML: report once, stay idle
        (the DaemonSet pod stays Running with /healthz saying so; exiting would crash-loop it)."""
        if await self.start() is not None:
            log.warning(
                "no NVML: the agent stays idle (pod Running, /healthz says %s)", self.status
            )
            try:
                await self.report_unavailable()
            except Exception:
                log.exception("could not report NVMLUnavailable on the Node")
            await stop.wait()
            return
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    await self.run_pass()
                except Exception:
                    log.exception("agent pass failed; trying again next period")
                # A reader that returns early (no event support) must not spin the loop.
                rest = self.config.poll_s - (time.monotonic() - started)
                if rest > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), rest)
        finally:
            await self.close()
