"""Turning reader answers into one pass's `Observation` (blocking helpers, no asyncio)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from queuectl.agent.discovery import Inventory
from queuectl.agent.health import Observation
from queuectl.agent.reader import GpuEvent, GpuNotAnswering, GpuReader, GpuSample


def sample_gpu(reader: GpuReader, index: int) -> GpuSample | str:
    """One GPU's sample, or why it did not answer (the health logic's 'not answering' input)."""
    try:
        return reader.sample(index)
    except GpuNotAnswering as exc:
        return exc.detail


def observation(
    now: float,
    inventory: Inventory,
    results: Mapping[int, GpuSample | str],
    events: Sequence[GpuEvent],
) -> Observation:
    """The `Observation` for GPUs of `inventory`, given each index's sample or failure text.
    An index missing from `results` counts as 'no longer listed'."""
    samples: dict[str, GpuSample] = {}
    not_answering: dict[str, str] = {}
    for gpu in inventory.gpus:
        result = results.get(gpu.index)
        if isinstance(result, GpuSample):
            samples[gpu.uuid] = result
        elif isinstance(result, str):
            not_answering[gpu.uuid] = result
    expected = [(g.index, g.uuid) for g in inventory.gpus]
    return Observation(now, expected, samples, not_answering, tuple(events))


def observe(
    reader: GpuReader, inventory: Inventory, now: float, wait_s: float = 0.0
) -> Observation:
    """A whole pass, synchronously: wait for events up to `wait_s`, then sample every GPU."""
    events = reader.wait_events(wait_s)
    results = {g.index: sample_gpu(reader, g.index) for g in inventory.gpus}
    return observation(now, inventory, results, events)
