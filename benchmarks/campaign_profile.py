"""Where a campaign part's time goes: the steps timed, and ``--profile``'s ``torch.profiler`` window.

:class:`TimedStep` wraps the trainer's step (:data:`training.trainer.ensemble.ENSEMBLE_STEPS`)
and records each epoch's steps, the time between epochs (evaluation, bookkeeping) and a probe
window of steps in the first epoch; with a profiler it steps it.  The profiler's window is 20
training steps around the end of the second epoch (so it holds the steps and the evaluation
between two epochs), or what a shorter part has.  The summary is small (the top operators by
device time, else CPU time; the device's busy time over the window's wall time; the number of
kernels), so it travels in ``part.json``: enough for the next lease to say where the time
goes.  No trace file is kept.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

from training.trainer.ensemble import ENSEMBLE_STEPS
from training.trainer.loop import Member

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
    return {
        "wall_s": wall_us / 1e6,
        "device_busy_s": device_us / 1e6,
        "device_busy_fraction": device_us / wall_us if cuda and wall_us else None,
        "cpu_self_s": sum(e.self_cpu_time_total for e in averages) / 1e6,
        "kernels": kernels,
        "table": table,
    }


@contextlib.contextmanager
def profiler_for(
    enabled: bool, dev: torch.device, steps_per_epoch: int, epochs: int, summary: dict[str, Any]
) -> Iterator[profile | None]:
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


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class TimedStep:
    """Wraps a step: times each epoch's steps (synchronized at the epoch's last step) and the
    time between epochs (evaluation, bookkeeping), a probe window of steps in the first epoch,
    and steps a profiler if given."""

    def __init__(self, inner: Callable, members: Sequence[Member], dev: torch.device, profiler: Any = None) -> None:
        self.inner, self.dev, self.profiler = inner, dev, profiler
        self.batch = members[0].cfg.train.batch_size
        self.per_epoch = -(-len(members[0].data.train) // self.batch)
        self.members = len(members)
        self.calls = 0
        self.epoch_start: list[float] = []
        self.epoch_end: list[float] = []
        self.probe_start = min(10, self.per_epoch // 4)
        self.probe_steps = max(0, min(30, self.per_epoch - self.probe_start - 1))
        self.probe: dict[str, float] | None = None
        self.samples = 0
        self.created = time.perf_counter()

    def __call__(self, members: list[Member], idx: Tensor) -> Tensor:
        k = self.calls % self.per_epoch
        if k == 0:
            self.epoch_start.append(time.perf_counter())
        if self.calls == self.probe_start and self.probe_steps:
            _sync(self.dev)
            self._probe_t0 = time.perf_counter()
        out = self.inner(members, idx)
        self.samples += idx.numel()
        if self.probe_steps and self.calls == self.probe_start + self.probe_steps - 1:
            _sync(self.dev)
            seconds = time.perf_counter() - self._probe_t0
            self.probe = {
                "steps": self.probe_steps,
                "seconds": seconds,
                "samples_per_s": self.probe_steps * self.batch * self.members / seconds,
            }
        if k == self.per_epoch - 1:
            _sync(self.dev)
            self.epoch_end.append(time.perf_counter())
        if self.profiler is not None:
            self.profiler.step()
        self.calls += 1
        return out

    def timing(self, end: float) -> dict[str, Any]:
        """Seconds per epoch of steps and between epochs (the last one until ``end``)."""
        starts = self.epoch_start[1:] + [end]
        return {
            "steps_s": [round(b - a, 4) for a, b in zip(self.epoch_start, self.epoch_end)],
            "between_s": [round(b - a, 4) for a, b in zip(self.epoch_end, starts)],
            "probe": self.probe,
        }


def timed(step: str, record: list[TimedStep], profiler: Any = None) -> Callable:
    """A step factory: the trainer's ``step`` (:data:`training.trainer.ensemble.ENSEMBLE_STEPS`)
    wrapped in a :class:`TimedStep`, kept in ``record``."""
    inner = ENSEMBLE_STEPS[step]

    def make(members: list[Member], logits_fn: Callable, dev: torch.device) -> TimedStep:
        step = TimedStep(inner(members, logits_fn, dev), members, dev, profiler)
        record.append(step)
        return step

    return make
