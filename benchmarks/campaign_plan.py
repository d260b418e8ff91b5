"""The campaign's arithmetic: what a run costs, which runs the next part trains, what a lease holds.

A run's device seconds are its matrix-multiply FLOPs (:func:`gpu_cost.run_flops`: a training
sample's forward and backward, an evaluation sample's forward, times the samples of every
epoch and of every evaluation the cadence asks for) over the device's dense matmul peak in the
run's precision times an efficiency, the fraction of that peak training realizes:
:data:`MEASURED_EFFICIENCY`, what the first GPU run realized, until this campaign's own parts
have measured theirs.  A part adds its set-up (data, models, graph capture or compilation,
the self-check).

A part is a subset of one cell's unfinished runs that trains as one ensemble (runs of one
shape, :data:`training.trainer.ensemble.ENSEMBLE_VARYING`) and fits in the time left: as many whole
seeds as fit, else as many runs (lrs) of the first seed; never a run that cannot finish.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from campaign_cells import CELLS, Cell, Run
from campaign_records import CampaignResults
from gpu_cost import RunFlops, remaining_flops, run_flops

from training.launch import ensemble_key as launcher_key

#: The fraction of the bf16 peak the first GPU run realized (NVIDIA H200, 2026-11-26: six runs as
#: one compiled bf16 ensemble, 1.15M samples/s at 77.55 MFLOP each over a measured 784.88 TFLOP/s,
#: evaluation and per-epoch checkpoints included; benchmarks/README.md).
MEASURED_EFFICIENCY = 0.114
#: The campaign runner's aim (issue 44): 35% of the peak.
AIM_EFFICIENCY = 0.35
#: A part's set-up before its first step, until a part has measured it (the first run's compiled
#: probe warmed up in 16-23 s; data, models, capture and the self-check add to it).
SETUP_PRIOR_S = 60.0
#: What a lease's ``next`` is given: 600 s a command, less the start of Python and the margin.
LEASE_BUDGET_S = 540.0
#: Seconds kept free at the end of a call (records, archive).
MARGIN_S = 15.0


@dataclass(frozen=True)
class Gpu:
    """A GPU kind's dense matmul peaks (FLOP/s) for the plan, and where each number comes from."""

    name: str
    bf16: float
    fp32: float  #: without TF32
    tf32: float
    source: str


#: The GPUs a dry run plans for (``--gpu``).
GPUS: dict[str, Gpu] = {
    "h200": Gpu(
        "NVIDIA H200",
        784.88e12,
        67e12,
        399.13e12,
        "bf16 784.88 and TF32 399.13 TFLOP/s measured beside the first run (2026-11-26); fp32 without TF32 67 TFLOP/s as NVIDIA states it, not measured",
    ),
    "h100": Gpu(
        "NVIDIA H100 80GB HBM3",
        798e12,
        67e12,
        399.13e12,
        "bf16 798 TFLOP/s measured on one 8192^3 product on this workplace's H100 (2026-11-13); TF32 taken as the H200's 399.13 and fp32 without TF32 67 TFLOP/s as NVIDIA states it, neither measured",
    ),
}


@dataclass
class Rate:
    """What the plan predicts with: peaks (FLOP/s), the efficiency per precision, the set-up."""

    peaks: dict[str, float]  #: "bf16", "fp32" (no TF32), "tf32"
    efficiency: dict[str, float] = field(
        default_factory=dict
    )  #: precision -> fraction (default :data:`MEASURED_EFFICIENCY`)
    setup_s: float = SETUP_PRIOR_S

    def peak(self, run: Run) -> float:
        return self.peaks[precision_of(run)]

    def flops_per_s(self, run: Run) -> float:
        return self.peak(run) * self.efficiency.get(precision_of(run), MEASURED_EFFICIENCY)


def precision_of(run: Run) -> str:
    """The peak a run's matrix products run at: bf16, TF32, or fp32 without TF32."""
    return "bf16" if run.config.train.precision == "bf16" else "tf32" if run.tf32 else "fp32"


def ensemble_key(run: Run) -> tuple:
    """Runs of one key train together: the ensemble launcher's groups (:func:`training.launch.ensemble_key`), and TF32."""
    return (*launcher_key(run.config), run.tf32)


class Costs:
    """Each run shape's FLOPs (counted once, on the CPU) and each run's device seconds at a :class:`Rate`."""

    def __init__(self) -> None:
        self._flops: dict[object, RunFlops] = {}

    def flops(self, run: Run) -> RunFlops:
        key = run.config.model  # the count depends on the model alone
        if key not in self._flops:
            self._flops[key] = run_flops(run.config, torch.device("cpu"))
        return self._flops[key]

    def work(self, run: Run) -> float:
        """FLOPs of the whole run: every epoch's training samples, every evaluation's samples."""
        return remaining_flops(run.config, self.flops(run), 0)

    def seconds(self, run: Run, rate: Rate) -> float:
        return self.work(run) / rate.flops_per_s(run)


@dataclass(frozen=True)
class Part:
    """The runs the next part of ``cell`` trains, and their estimated seconds (set-up included)."""

    cell: Cell
    runs: tuple[Run, ...]
    seconds: float

    def describe(self) -> str:
        seeds = sorted({r.seed for r in self.runs})
        return f"{self.cell.name}: {len(self.runs)} runs (seeds {', '.join(map(str, seeds))}), estimated {self.seconds:.0f} s"


def plan_part(cell: Cell, todo: Sequence[Run], costs: Costs, rate: Rate, available_s: float) -> Part | None:
    """The next part of ``cell`` (see the module docstring); None if not one run fits ``available_s``."""
    if not todo:
        return None
    key = ensemble_key(todo[0])
    group = [r for r in todo if ensemble_key(r) == key]
    seeds: dict[int, list[Run]] = {}
    for r in group:
        seeds.setdefault(r.seed, []).append(r)
    chosen: list[Run] = []
    spent = rate.setup_s
    for runs in seeds.values():
        cost = sum(costs.seconds(r, rate) for r in runs)
        if spent + cost > available_s:
            break
        chosen, spent = chosen + runs, spent + cost
    if not chosen:  # fewer lrs of the first seed
        for r in next(iter(seeds.values())):
            cost = costs.seconds(r, rate)
            if spent + cost > available_s:
                break
            chosen, spent = chosen + [r], spent + cost
    return Part(cell, tuple(chosen), spent) if chosen else None


def cell_seconds(runs: Sequence[Run], costs: Costs, rate: Rate) -> float:
    """A cell's device seconds at ``rate``: its runs, and one set-up per ensemble group."""
    return sum(costs.seconds(r, rate) for r in runs) + rate.setup_s * len({ensemble_key(r) for r in runs})


def simulate(
    results: CampaignResults, costs: Costs, rate: Rate, budget_s: float, leases: int = 1000
) -> list[list[Part]]:
    """The parts each coming lease would train at ``rate`` (each part assumed to finish as
    estimated, cells 03-05 in bf16), until every cell whose runs are known is done or none
    fits a lease."""
    done: set[tuple[str, str]] = set()
    out: list[list[Part]] = []
    for _ in range(leases):
        lease, left = [], budget_s - MARGIN_S
        while True:
            part = next_part(results, costs, rate, left, done, assume_bf16=True)
            if part is None:
                break
            lease.append(part)
            left -= part.seconds
            done |= {(part.cell.name, r.name) for r in part.runs}
        if not lease:
            break
        out.append(lease)
    return out


def next_part(
    results: CampaignResults,
    costs: Costs,
    rate: Rate,
    left_s: float,
    done: set[tuple[str, str]] = frozenset(),
    skipped: Callable[[Cell, float], None] | None = None,
    assume_bf16: bool = False,
) -> Part | None:
    """The part the next ``left_s`` seconds train: of the first unfinished cell whose runs are
    known; a cell whose next run cannot fit even a whole lease is passed over (``skipped`` is
    told, with the seconds its first run needs)."""
    for cell in CELLS:
        todo = results.todo(cell, assume_bf16)
        if todo is None:
            return None  # the campaign's order: nothing after a cell whose runs are not known yet
        todo = [r for r in todo if (cell.name, r.name) not in done]
        if not todo:
            continue
        part = plan_part(cell, todo, costs, rate, left_s)
        if part is not None:
            return part
        alone = rate.setup_s + costs.seconds(todo[0], rate)
        if alone <= LEASE_BUDGET_S - MARGIN_S:
            return None  # it fits a fresh lease: the order is kept
        if skipped is not None:
            skipped(cell, alone)
    return None


def leases_needed(seconds: float, budget_s: float = LEASE_BUDGET_S) -> int:
    return math.ceil(seconds / (budget_s - MARGIN_S))
