"""`python -m bench run SCENARIO [--kubeconfig K]`: one measured run, results JSON printed last.

Without --kubeconfig it starts its own control plane (queuectl.testenv) and stops it after;
either way it starts the controller as a child process (unless --controller none) so its CPU
and peak memory come from /proc. With --kubeconfig the run's objects are removed afterwards.
During the load the runner also watches the controller's Lease, probes its webhook once a
second and, at both ends, scrapes its cycle-time histogram.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.cluster import apimetrics, ideal, ratios, report, setup, watch
from bench.cluster.controller import ControllerProcess
from bench.cluster.kubeapi import Api, ApiError
from bench.cluster.load import Load
from bench.cluster.objects import Layout
from bench.cluster.procstat import try_sample
from bench.cluster.record import Recorder
from bench.cluster.results import results
from bench.cluster.scenario import Scenario, load
from queuectl.api import names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench run", description=__doc__)
    p.add_argument(
        "scenario",
        help="baseline | large-scale | tas | tas-flat | tas-gpu | smoke | tas-smoke, "
        "or a YAML/JSON path",
    )
    p.add_argument("--kubeconfig", help="a running cluster (default: start a testenv)")
    p.add_argument(
        "--controller",
        choices=("start", "none"),
        default="start",
        help="start `queuectl controller` as a child (default), or use one already running",
    )
    p.add_argument("--controller-pid", type=int, help="with --controller none: measure this pid")
    p.add_argument("--out", type=Path, default=report.RESULTS_DIR, help="results directory")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds the load may take")
    p.add_argument("--concurrency", type=int, default=32, help="runner requests in flight")
    p.add_argument(
        "--profile-controller", action="store_true", help="pyinstrument HTML next to the results"
    )
    p.add_argument("--profile-runner", action="store_true", help="pyinstrument the runner too")
    p.add_argument(
        "--lease",
        default=f"{names.SYSTEM_NAMESPACE}/{ControllerProcess.LEASE}",
        help="with --controller none: the controller's Lease to watch, NAMESPACE/NAME",
    )
    p.add_argument(
        "--webhook-url", help="with --controller none: probe this webhook (https://HOST:PORT)"
    )
    p.add_argument("--webhook-ca", help="with --webhook-url: the CA bundle that signs it")
    p.add_argument(
        "--against",
        type=Path,
        help="for a scenario with ratio targets (tas): the results JSON of the run to compare "
        "with (default: the newest <against scenario>-<stamp>.json in --out)",
    )
    return p


def main(argv: list[str]) -> int:
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the controller and testenv are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    return run(parser().parse_args(argv))


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    scenario = load(args.scenario)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    run_id = f"{scenario.name[:6].strip('-')}-{secrets.token_hex(3)}"
    out: Path = args.out
    plane: Any = None
    kubeconfig = args.kubeconfig
    pids: dict[str, int | None] = {"controller": args.controller_pid}
    ctl: ControllerProcess | None = None
    try:
        if kubeconfig is None:
            from queuectl.testenv import ControlPlane
            from queuectl.testenv.components import NODE_LEASE_SECONDS

            lease = NODE_LEASE_S if scenario.fleet is not None else NODE_LEASE_SECONDS
            plane = ControlPlane(progress=_progress, node_lease_seconds=lease).start()
            kubeconfig = plane.kubeconfig
            for rec in plane.supervisor.records:
                pids[rec.name] = rec.pid
        if args.controller == "start":
            stem = f"{scenario.name}-{stamp.replace(':', '').replace('-', '')}"
            profile = out / f"{stem}-controller.pyisession" if args.profile_controller else None
            ctl = ControllerProcess(
                kubeconfig,
                out / "logs" / f"{stem}-controller.log",
                profile,
                namespace=f"bench-{run_id}-controller",
            )
            _progress("starting queuectl controller")
            ctl.start()
            pids["controller"] = ctl.pid
        watched = watch.watched_from(args, ctl)
        lay = Layout(scenario, run_id)
        res, rec = asyncio.run(
            measure(lay, kubeconfig, pids, watched, args, stamp, cleanup=plane is None)
        )
        if ctl is not None:
            res["controller_metrics"] = _controller_metrics(ctl)
    finally:
        if ctl is not None:
            ctl.stop()
            if plane is None and kubeconfig is not None:
                try:
                    asyncio.run(_delete_namespace(kubeconfig, ctl.namespace))
                except (ApiError, OSError) as err:
                    _progress(f"could not delete namespace {ctl.namespace}: {err}")
        if plane is not None:
            plane.stop()
    if ctl is not None and (text := ctl.render_profile()) is not None:
        res["profiles"] = {"controller": str(text)}
    _compare(res, scenario, args)
    report.save(rec, res, out)
    print(json.dumps(res, indent=2))
    return 0 if res["all_finished"] else 1


def _compare(res: dict[str, Any], scenario: Scenario, args: argparse.Namespace) -> None:
    """Ratios to the run named by --against, or to the newest run of the scenario's `against`."""
    against = scenario.ratio_targets.get("against")
    if not against:
        return
    path = args.against or ratios.newest(args.out, str(against))
    if path is None:
        res["ratios"] = None
        res.setdefault("errors", []).append(
            f"no {against} results in {args.out} to compare with: run `python -m bench run "
            f"{against}` just before, or pass --against PATH"
        )
        return
    try:
        base = ratios.read(path)
    except (OSError, ValueError) as err:
        res["ratios"] = None
        res.setdefault("errors", []).append(f"cannot compare with {path}: {err}")
        return
    sizes = {s.cls: s.size_class for s in scenario.streams}
    res["ratios"] = ratios.compare(
        res, base, str(path), sizes, scenario.ratio_targets, scenario.peer_here
    )
    try:
        against_scenario = load(str(base.get("scenario") or against))
    except (OSError, ValueError, KeyError) as err:
        res.setdefault("errors", []).append(f"cannot model the arrivals of {against}: {err}")
        return
    res["ratios"]["arrivals"] = ideal.expected_ratios(
        scenario, against_scenario, base.get("tta_avg_s") or {}
    )


async def _delete_namespace(kubeconfig: str, namespace: str) -> None:
    """The controller's own namespace (its Lease and certificate Secret), once it stopped."""
    api = await Api.connect(kubeconfig, 1)
    try:
        await api.request("DELETE", f"/api/v1/namespaces/{namespace}")
    except ApiError as err:
        if err.status != 404:
            raise
    finally:
        await api.close()


async def measure(
    lay: Layout,
    kubeconfig: str,
    pids: dict[str, int | None],
    watched: watch.Watched,
    args: argparse.Namespace,
    stamp: str,
    *,
    cleanup: bool,
) -> tuple[dict[str, Any], Recorder]:
    scenario = lay.scenario
    api = await Api.connect(kubeconfig, args.concurrency)
    rec = Recorder(scenario.nominal_total)
    try:
        t_setup = time.monotonic()
        _progress(f"creating {scenario.cluster_queues} ClusterQueues in {lay.namespace}")
        if scenario.fleet is not None:
            _progress(f"creating {scenario.fleet.nodes} nodes and a Topology")
        await setup.create(api, lay)
        nodes_ready_s = await setup.wait_nodes(api, lay)
        if scenario.fleet is not None:
            nodes_ready_s += await setup.settle(api)
        await setup.wait_active(api, lay)
        setup_s = time.monotonic() - t_setup
        driver = Load(api, lay, rec)
        procs_before = {n: try_sample(p) for n, p in pids.items()}
        api_before = apimetrics.request_counts(await api.text("/metrics"))
        runner_requests_before = api.requests
        cpu_before = time.process_time()
        loadavg = [round(x, 2) for x in os.getloadavg()]
        _progress(
            f"running {scenario.workloads} Workloads (lower bound {scenario.min_wall_s:.0f}s)"
        )
        metrics_before = await watch.scrape(watched)
        side = watch.SideWatches.start(api, lay, watched)
        profiler = _runner_profiler() if args.profile_runner else None
        try:
            all_done = await driver.run(args.timeout)
        finally:
            load_end = time.time()
            await side.stop()
        metrics_after = await watch.scrape(watched)
        runner_cpu = time.process_time() - cpu_before
        if profiler is not None:
            profiler.stop()
            path = (
                args.out / f"{scenario.name}-{stamp.replace(':', '').replace('-', '')}-runner.txt"
            )
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(profiler.output_text(unicode=False, color=False))
        procs_after = {n: try_sample(p) for n, p in pids.items()}
        api_after = apimetrics.request_counts(await api.text("/metrics"))
        runner_requests = api.requests - runner_requests_before
        if cleanup:
            _progress("removing the run's objects")
            await setup.delete(api, lay)
    finally:
        await api.close()
    res = results(
        scenario, rec, driver, stamp, setup_s, runner_cpu, runner_requests,
        apimetrics.delta(api_before, api_after), procs_before, procs_after, all_done, loadavg,
    )  # fmt: skip
    res["nodes_ready_s"] = round(nodes_ready_s, 3)
    res.update(
        report.rounded(
            watch.controller_watch(
                side.lease_log, load_end, side.probe_log, metrics_before, metrics_after
            )
        )
    )
    return res, rec


_CONTROLLER_SERIES = (
    "queuectl_admitted_workloads_total",
    "queuectl_preempted_workloads_total",
    "queuectl_evicted_workloads_total",
    "queuectl_scheduling_cycle_duration_seconds_sum",
    "queuectl_scheduling_cycle_duration_seconds_count",
    "queuectl_admissions_per_cycle_sum",
)


def _controller_metrics(ctl: ControllerProcess) -> dict[str, float]:
    """The controller's own counters (summed over labels, split by reason for preemptions)."""
    out: dict[str, float] = {}
    try:
        text = ctl.metrics()
    except OSError:
        return out
    for line in text.splitlines():
        name, _, rest = line.partition("{") if "{" in line else line.partition(" ")
        if name not in _CONTROLLER_SERIES:
            continue
        value = float(line.rsplit(" ", 1)[1])
        key = name
        if name == "queuectl_preempted_workloads_total" and 'reason="' in rest:
            key += ":" + rest.split('reason="', 1)[1].split('"', 1)[0]
        out[key] = round(out.get(key, 0.0) + value, 3)
    return out


def _runner_profiler() -> Any:
    from pyinstrument import Profiler

    profiler = Profiler(async_mode="disabled")
    profiler.start()
    return profiler


NODE_LEASE_S = 600
"""A topology scenario's node Lease duration in its own testenv: kwok renews each of its
hundreds of nodes' Leases every 150 s instead of every 10 s. The reference's scenario creates
its nodes as plain objects on an API server with no node lifecycle at all; at the testenv's
default, 640 nodes' heartbeats were 36 requests/s, a third of the API server's work, which
only the scenario with nodes paid (docs/design/bench.md)."""
