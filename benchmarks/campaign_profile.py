"""``gpu_campaign.py --profile``: a ``torch.profiler`` window of a part's training, summarized into its records.

The window is 20 training steps around the end of the second epoch (so it holds the steps
and the evaluation between two epochs), or what a shorter part has.  The summary is small
(the top operators by device time, else CPU time; the device's busy time over the window's
wall time; the number of kernels), so it travels in ``part.json``: enough for the next lease
to say where the time goes.  No trace file is kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

#: Steps recorded, and the rows of the operator table kept.
ACTIVE_STEPS, TABLE_ROWS = 20, 15


def window(steps_per_epoch: int, total_steps: int) -> dict[str, int]:
    """The profiler's schedule: ``ACTIVE_STEPS`` steps whose middle is the end of epoch 2
    (after 2 warm-up steps), or all but the first step of a shorter part."""
    wait = 2 * steps_per_epoch - ACTIVE_STEPS // 2 - 2
    if wait < 0 or wait + 2 + ACTIVE_STEPS > total_steps:
        return {"wait": 0, "warmup": 1, "active": max(1, min(ACTIVE_STEPS, total_steps - 1))}
    return {"wait": wait, "warmup": 2, "active": ACTIVE_STEPS}


def summarize(prof: profile, cuda: bool) -> dict[str, Any]:
    """The window's top operators and totals (see the module docstring)."""
    averages = prof.key_averages()
    sort = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = [e for e in prof.events() if e.time_range.end > e.time_range.start]
    wall_us = (max(e.time_range.end for e in events) - min(e.time_range.start for e in events)) if events else 0.0
    device_us = sum(getattr(e, "self_device_time_total", 0.0) for e in averages)
    kernels = sum(e.count for e in averages if e.device_type == DeviceType.CUDA)
    try:
        table = averages.table(sort_by=sort, row_limit=TABLE_ROWS, max_name_column_width=60)
    except (AttributeError, KeyError, ValueError):  # a torch that names device time cuda time
        table = averages.table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total", row_limit=TABLE_ROWS)
    return {"wall_s": wall_us / 1e6, "device_busy_s": device_us / 1e6, "device_busy_fraction": device_us / wall_us if cuda and wall_us else None,
            "cpu_self_s": sum(e.self_cpu_time_total for e in averages) / 1e6, "kernels": kernels, "table": table}  # fmt: skip


@contextlib.contextmanager
def profiler_for(enabled: bool, dev: torch.device, steps_per_epoch: int, epochs: int, summary: dict[str, Any]) -> Iterator[profile | None]:
    """A profiler to step once per training step (None unless ``enabled``); its summary goes into ``summary``."""
    if not enabled:
        yield None
        return
    cuda = dev.type == "cuda"
    sched = window(steps_per_epoch, steps_per_epoch * epochs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def ready(prof: profile) -> None:
        summary.update(summarize(prof, cuda), schedule=sched)

    with profile(activities=activities, schedule=schedule(**sched, repeat=1), on_trace_ready=ready) as prof:
        yield prof
