"""The pre-registered GPU campaign's cells (docs/campaign.md): what each trains, at paper or toy size.

A :class:`Cell` is a question at paper scale and the runs that answer it: fixed run options
over the ``paper`` preset, a grid (seeds, peak lrs, gammas, depths), the epochs trained of
the papers' 210-epoch schedule (the warm-up and cosine stay the schedule's: 25 epochs are its
first 25), whether fp32 products may use TF32, and the evaluation cadence.  :data:`CELLS`
holds them in the campaign's order; their decision rules are in docs/campaign.md and, as
code, in ``campaign_records.py``.  The last cell has no grid of its own: it retrains for the
whole 210 epochs the runs of the earlier cells that are still moving at their last epoch
(``campaign_records.still_moving``), so its runs are known only once those cells are done.

``--scale tiny`` runs the same cells (same grids, names and rules) on the ``tiny`` preset's
model with a few hundred samples and a few epochs, for tests on a CPU.

The seeds are 9001-9003 (and 9004-9008 for cells 07 and 08), used by no CPU study of this project for choosing anything (the CPU
studies used 0-6, 11-13, 21, 31-33, 101-108, 201-208, 301-306, 401-403, 501-504, 601-608 and
7003-7006).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from training.config import RunConfig, make_run_config

#: The campaign's seeds (see the module docstring).
SEEDS: tuple[int, ...] = (9001, 9002, 9003)
#: Five more seeds for Fig. 2's contrast (cells 07 and 08, added 2026-11-29 before any campaign
#: result): with 3 seeds an init no rank test can separate the inits (the smallest two-sided
#: exact Mann-Whitney p is 0.1), with 8 it can (p < 0.05 from 6 of 8 ranks in order).
MORE_SEEDS: tuple[int, ...] = (9004, 9005, 9006, 9007, 9008)
#: NeurIPS Fig. 2's learning rates: 9 peak lrs evenly spaced in [1e-4, 3e-4].
PAPER_LRS: tuple[float, ...] = (1e-4, 1.25e-4, 1.5e-4, 1.75e-4, 2e-4, 2.25e-4, 2.5e-4, 2.75e-4, 3e-4)
#: Three of them, for the cells whose grid is otherwise too costly for the leases.
COARSE_LRS: tuple[float, ...] = (1e-4, 2e-4, 3e-4)
#: The papers' schedule length, and the epochs a first look at a cell trains of it.
FULL_EPOCHS, SHORT_EPOCHS = 210, 25
#: The extension's evaluation cadence: every epoch of the first 25, then every 5th.
EXTENSION_EVAL = {"eval_dense_epochs": SHORT_EPOCHS, "eval_every": 5}
#: At ``--scale tiny``: the ``tiny`` preset with a few hundred samples; short cells train 3
#: epochs of a 6-epoch schedule (1 of warm-up, 5 of cosine), the extension all 6.
TINY_DATA = {
    "n_train": 512,
    "n_test": 128,
    "eval_samples": 128,
    "batch_size": 256,
    "warmup_start_lr": 1e-5,
    "min_lr": 1e-5,
}
TINY_EPOCHS = {SHORT_EPOCHS: 3, FULL_EPOCHS: 6}
TINY_SCHEDULE = {"warmup_epochs": 1.0, "cosine_epochs": 5.0}
SCALES: tuple[str, ...] = ("paper", "tiny")


@dataclass(frozen=True)
class Cell:
    """One cell of the campaign (see the module docstring)."""

    name: str  #: its folder under the campaign's results, ``NN-slug``
    question: str  #: one line; the rule is in docs/campaign.md, section of the same number
    task: str
    options: Mapping[str, Any] = field(default_factory=dict)  #: flat run options over the paper preset
    grid: Sequence[
        tuple[str, Sequence[Any]]
    ] = ()  #: option -> values, outermost first (a part takes whole seeds first)
    epochs: int = SHORT_EPOCHS
    tf32: bool = True  #: fp32 matrix products may use TF32 (``torch.set_float32_matmul_precision("high")``)
    extends: Sequence[str] = ()  #: cells whose still-moving runs this one retrains for the whole schedule
    tiny: Mapping[str, Any] = field(default_factory=dict)  #: options that replace ``options`` at ``--scale tiny``
    precision_from: str | None = None  #: a cell whose decision may switch this one to fp32 without TF32

    def __post_init__(self) -> None:
        keys = [k for k, _ in self.grid]
        if self.grid and keys[0] != "seed":
            raise ValueError(f"cell {self.name}: the grid's first (outermost) option must be the seed, got {keys}")
        if bool(self.grid) == bool(self.extends):
            raise ValueError(f"cell {self.name}: give a grid or the cells it extends, one of the two")

    def spec(self) -> dict[str, Any]:
        """The cell as ``cell.json`` records it."""
        return {
            "name": self.name,
            "question": self.question,
            "task": self.task,
            "options": dict(self.options),
            "grid": {k: list(v) for k, v in self.grid},
            "epochs": self.epochs,
            "tf32": self.tf32,
            "extends": list(self.extends),
            "precision_from": self.precision_from,
            "rules": f"docs/campaign.md, cell {self.name[:2]}",
        }


@dataclass(frozen=True)
class Run:
    """One run of a cell: its name (its folder in a part) and config."""

    name: str
    config: RunConfig
    tf32: bool

    @property
    def seed(self) -> int:
        return self.config.seed


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def point_name(point: Mapping[str, Any]) -> str:
    """A grid point's folder name: ``seed=9001__lr=0.0001``."""
    return "__".join(f"{k}={_value(v)}" for k, v in point.items())


def scale_options(scale: str, epochs: int) -> dict[str, Any]:
    """What a scale adds to every run: the paper preset's first ``epochs`` (the evaluation
    after each, a checkpoint only where a deadline stops the run), or the tiny equivalent."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {list(SCALES)}")
    if scale == "paper":
        return {"epochs": epochs, "checkpoint_every": epochs}
    tiny_epochs = TINY_EPOCHS[epochs]
    dense = {"eval_dense_epochs": TINY_EPOCHS[SHORT_EPOCHS], "eval_every": 2} if epochs == FULL_EPOCHS else {}
    return {**TINY_DATA, **TINY_SCHEDULE, **dense, "epochs": tiny_epochs, "checkpoint_every": tiny_epochs}


def grid_runs(cell: Cell, scale: str, fp32: bool = False) -> list[Run]:
    """A cell's grid as runs, in the grid's order (seed outermost); bf16 autocast unless the
    cell says fp32; ``fp32``: in fp32 without TF32 whatever the cell says (cell 02's rule
    can ask it of the later cells)."""
    keys = [k for k, _ in cell.grid]
    base = {"precision": "bf16", **cell.options, **(cell.tiny if scale == "tiny" else {})}
    tf32 = cell.tf32
    if fp32:
        base["precision"], tf32 = "fp32", False
    preset = "paper" if scale == "paper" else "tiny"
    runs = []
    for values in product(*(v for _, v in cell.grid)):
        point = dict(zip(keys, values))
        cfg = make_run_config(preset, task=cell.task, **base, **point, **scale_options(scale, cell.epochs))
        runs.append(Run(point_name(point), cfg, tf32))
    return runs


def extended(run: Run, source: str, scale: str) -> Run:
    """``run`` (of the cell ``source``) retrained for the whole schedule, evaluated every epoch
    of the first 25 and every 5th after (:data:`EXTENSION_EVAL`)."""
    options = scale_options(scale, FULL_EPOCHS)
    if scale == "paper":
        options.update(EXTENSION_EVAL)
    return Run(f"{source}__{run.name}", run.config.with_options(**options), run.tf32)


#: The campaign, in order (docs/campaign.md says why this order and what each outcome means).
CELLS: tuple[Cell, ...] = (
    Cell(
        "01-fig2-small-init",
        "NeurIPS Fig. 2 at depth 2, gamma 0.8, under the papers' own selection (best of 9 lrs and of the epochs): does small init infer?",
        "symmetric",
        {"gamma": 0.8},
        (("seed", SEEDS), ("lr", PAPER_LRS)),
    ),
    Cell(
        "02-fp32-control",
        "The same cell in fp32 without TF32 at lr 2.5e-4: does bf16 (and TF32) change what a run answers?",
        "symmetric",
        {"gamma": 0.8, "precision": "fp32"},
        (("seed", SEEDS), ("lr", (2.5e-4,))),
        tf32=False,
    ),
    Cell(
        "03-large-init",
        "Large init (gamma 0.5) on the same lr grid: does the papers' selection find the symmetric answer, and does it also find the inferential one?",
        "symmetric",
        {"gamma": 0.5},
        (("seed", SEEDS), ("lr", PAPER_LRS)),
        precision_from="02-fp32-control",
    ),
    Cell(
        "04-depth-3-4",
        "The rest of Fig. 2's inferential region, depth 3 and 4 x gamma 0.8, 0.9, 1.0 (3 lrs): is there a cell where small init infers?",
        "symmetric",
        {},
        (("seed", SEEDS), ("n_layers", (3, 4)), ("gamma", (0.8, 0.9, 1.0)), ("lr", COARSE_LRS)),
        precision_from="02-fp32-control",
    ),
    Cell(
        "05-journal-fig3",
        "The journal's Fig. 3 on its 10-layer, 10-head model (id-ood, gamma 0.8 and 0.5, lr 1.5e-4): small init composes, large init does not?",
        "id-ood",
        {"n_layers": 10, "n_heads": 10, "d_head": 40},
        (("seed", SEEDS), ("gamma", (0.8, 0.5))),
        precision_from="02-fp32-control",
        tiny={"n_layers": 3, "n_heads": 2, "d_head": 16},
    ),
    Cell(  # 07 and 08 were added 2026-11-29, before any campaign result; they run before 06, whose length is open
        "07-fig2-small-more-seeds",
        "Fig. 2's contrast needs more seeds: cell 01 on seeds 9004-9008 (small init, gamma 0.8, the 9 lrs).",
        "symmetric",
        {"gamma": 0.8},
        (("seed", MORE_SEEDS), ("lr", PAPER_LRS)),
        precision_from="02-fp32-control",
    ),
    Cell(
        "08-fig2-large-more-seeds",
        "Fig. 2's contrast needs more seeds: cell 03 on seeds 9004-9008 (large init, gamma 0.5, the 9 lrs).",
        "symmetric",
        {"gamma": 0.5},
        (("seed", MORE_SEEDS), ("lr", PAPER_LRS)),
        precision_from="02-fp32-control",
    ),
    Cell(
        "06-full-schedule",
        "The whole 210 epochs of the runs still moving at epoch 25: does a run's answer change later in the schedule?",
        "symmetric",
        epochs=FULL_EPOCHS,
        extends=("01-fig2-small-init", "02-fp32-control", "03-large-init", "04-depth-3-4", "05-journal-fig3"),
    ),
)
CELL_NAMES: tuple[str, ...] = tuple(c.name for c in CELLS)


def cell_named(name: str) -> Cell:
    """The cell ``name`` (a ``ValueError`` listing them otherwise)."""
    for cell in CELLS:
        if cell.name == name:
            return cell
    raise ValueError(f"unknown cell {name!r}; the campaign's cells are {list(CELL_NAMES)}")
