"""The papers' central result in four runs: small init reasons, large init memorizes.

:func:`reproduce` trains the two named init regimes of a preset, ``small-init`` and
``large-init``, on the two tasks that show the flip (docs/science.md):

* ``symmetric``: the held-out pair (4,3) follows the *inferential* target x - 10 under
  small init and the *symmetric* target x - 6 (copied from the seen (3,4)) under large
  init (NeurIPS 2024, Fig. 2);
* ``id-ood``: small init generalizes to the unseen pairs (3,4), (4,3) (OOD accuracy
  > 0.5, the journal's Phase 3); large init fits the seen pairs only (Phase 2).

Each run goes through :func:`training.train` into ``out/<task>/<regime>``, so a killed
reproduction resumes where it stopped and finished runs are not trained again.  The
numbers are gathered into ``out/summary.json``::

    {"symmetric": {"small-init": {"gamma", "id_acc", "heldout_inferential",
                                  "heldout_symmetric", "seconds", "run_dir"},
                   "large-init": {...}},
     "id-ood":    {"small-init": {"gamma", "id_acc", "ood_acc", "commutativity",
                                  "seconds", "run_dir"},
                   "large-init": {...}}}

The regimes are data (:data:`REGIMES`): per preset, per regime, flat run options over
the preset's (see :func:`training.make_run_config`).  A key that names a task holds
options for that task only.  Both regimes of a preset share its model, data and
schedule; they differ in their init (and, where a preset says so, weight decay).

Each task trains on the architecture of the paper it comes from (``neurips`` for
``symmetric``, ``journal`` for ``id-ood``: docs/science.md).

Importing this module imports no torch (the ``interp-init reproduce`` command in
:mod:`training.cli` lists its :data:`REGIMES`); torch comes in when runs train.
Example (CPU: four runs of 7-9 minutes each, two at a time on 2 cores; see
docs/faithful-models.md for what it shows)::

    interp-init reproduce --preset cpu --seed 31 --out runs/reproduce/cpu-31
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.runfolder import write_json
from interp_init.tasks import TASKS, AnchorPair
from training.config import PRESETS, RunConfig, make_run_config

if TYPE_CHECKING:
    import pandas as pd

#: The tasks a reproduction trains, in order.
REPRODUCE_TASKS: tuple[str, ...] = ("symmetric", "id-ood")
#: The regimes, in order.
REGIME_NAMES: tuple[str, ...] = ("small-init", "large-init")

#: preset -> regime -> flat run options (keys naming a task hold that task's options).
#: ``cpu`` and ``paper``: the NeurIPS paper's two sides of the flip (gamma 0.8 small init,
#: gamma 0.5 large init); what ``cpu`` shows is in docs/faithful-models.md.
#: ``tiny``: smoke tests only; it learns too little to show the flip.
REGIMES: dict[str, dict[str, dict[str, Any]]] = {
    "cpu": {
        "small-init": {"gamma": 0.8},
        "large-init": {"gamma": 0.5},
    },
    "paper": {
        "small-init": {"gamma": 0.8},
        "large-init": {"gamma": 0.5},
    },
    "tiny": {
        "small-init": {"gamma": 0.8},
        "large-init": {"gamma": 0.3},
    },
}

#: The thresholds of a reproduced flip, for one seed: both regimes fit (ID >= 0.9); on
#: ``symmetric`` small init infers and large init copies the symmetric target (>= 0.8 of
#: held-out inputs each); on ``id-ood`` small init composes (OOD >= 0.5, the journal's
#: Phase 3) and large init does not (OOD <= 0.3).
CRITERIA: dict[str, float] = {
    "min_id_acc": 0.9,
    "min_small_inferential": 0.8,
    "min_large_symmetric": 0.8,
    "min_small_ood": 0.5,
    "max_large_ood": 0.3,
}


def regime_options(preset: str, regime: str, task: str) -> dict[str, Any]:
    """The flat options a regime adds to ``preset`` for ``task``."""
    if preset not in REGIMES or preset not in PRESETS:
        known = sorted(set(REGIMES) & set(PRESETS))
        raise ValueError(f"unknown preset {preset!r} for reproduce; choose one of {known}")
    regimes = REGIMES[preset]
    if regime not in regimes:
        raise ValueError(f"unknown regime {regime!r} of preset {preset!r}; choose one of {sorted(regimes)}")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    spec = regimes[regime]
    shared = {k: v for k, v in spec.items() if k not in TASKS}
    return {**shared, **spec.get(task, {})}


def regime_config(preset: str, regime: str, task: str, seed: int, precision: str = "fp32") -> RunConfig:
    """The :class:`training.RunConfig` of one regime on one task (``precision``: ``"fp32"``,
    or ``"bf16"`` for the forward under bfloat16 autocast)."""
    return make_run_config(preset, task=task, seed=seed, precision=precision, **regime_options(preset, regime, task))


def summary_row(task: str, cfg: RunConfig, metrics: dict, run_dir: str | Path) -> dict[str, Any]:
    """One run's line of the summary, from its config and ``metrics.json``: gamma, ID
    accuracy, the held-out (4,3) against both targets (``symmetric``) or OOD accuracy and
    commutativity (other tasks), weight decay, precision, status, seconds, run folder."""
    final = metrics["final"]
    row: dict[str, Any] = {"gamma": cfg.init.gamma, "id_acc": final.get("id_acc")}
    if task == "symmetric":
        heldout = final.get("heldout", {}).get(AnchorPair(4, 3).key, {})
        row["heldout_inferential"] = heldout.get("inferential")
        row["heldout_symmetric"] = heldout.get("symmetric")
    else:
        row["ood_acc"] = final.get("ood_acc")
        row["commutativity"] = final.get("commutativity")
    row["weight_decay"] = cfg.train.weight_decay
    row["precision"] = cfg.train.precision
    row["status"] = metrics["status"]
    row["seconds"] = metrics.get("elapsed_s")
    row["run_dir"] = str(run_dir)
    return row


def default_workers(device: str = "auto") -> int:
    """How many runs to train at once: one per CPU core up to the four runs on a CPU (each
    with one torch thread, the fastest use of the cores for models this small); one on a GPU."""
    if device != "cpu" and (device.startswith("cuda") or (device == "auto" and _cuda_available())):
        return 1
    return max(1, min(len(REPRODUCE_TASKS) * len(REGIME_NAMES), os.cpu_count() or 1))


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _train_run(cfg: RunConfig, run_dir: Path, device: str, progress: bool, threads: int | None) -> dict:
    """Train one run (in this process or a worker) and return its metrics."""
    import torch

    from training.loop import train

    if threads is not None:
        torch.set_num_threads(threads)
    return train(cfg, run_dir, device=device, progress=progress).metrics


def reproduce(
    preset: str = "cpu",
    seed: int = 0,
    out: str | Path = "runs/reproduce",
    device: str = "auto",
    progress: bool = True,
    precision: str = "fp32",
    workers: int | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Train both regimes of ``preset`` on both tasks; return and write ``out/summary.json``.

    Runs that already finished in ``out`` are read, not retrained; an unfinished one
    resumes from its checkpoint (a folder trained at another ``precision`` is refused,
    as any checkpoint from another config is).  ``seconds`` is each run's training time
    (summed over resumptions); ``run_dir`` its folder.  ``precision="bf16"`` trains under
    bfloat16 autocast (see benchmarks/README.md for what it trades).

    ``workers`` runs train at once, in worker processes of one torch thread each when it
    is above 1 (default :func:`default_workers`: one per core on a CPU, one on a GPU);
    with one worker the runs train here, one after another, with torch's threads.
    """
    runs = [(task, regime, regime_config(preset, regime, task, seed, precision)) for task in REPRODUCE_TASKS for regime in REGIME_NAMES]
    workers = default_workers(device) if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    root = Path(out)
    summary: dict[str, dict[str, dict[str, Any]]] = {task: {} for task in REPRODUCE_TASKS}

    def record(task: str, regime: str, cfg: RunConfig, metrics: dict) -> None:
        summary[task][regime] = summary_row(task, cfg, metrics, root / task / regime)
        ordered = {t: {r: summary[t][r] for r in REGIME_NAMES if r in summary[t]} for t in REPRODUCE_TASKS}
        write_json(root / "summary.json", ordered)

    if progress:
        for task, regime, cfg in runs:
            print(f"[{task} / {regime}] {cfg.model.architecture}, gamma={cfg.init.gamma} -> {root / task / regime}", file=sys.stderr, flush=True)
    if workers == 1:
        for task, regime, cfg in runs:
            record(task, regime, cfg, _train_run(cfg, root / task / regime, device, progress, None))
    else:
        if progress:
            print(f"training {len(runs)} runs, {workers} at a time, one torch thread each", file=sys.stderr, flush=True)
        # worker_pool: workers that never outlive this process
        from training.sweep import worker_pool

        with worker_pool(workers, 1) as pool:
            futures = [(task, regime, cfg, pool.submit(_train_run, cfg, root / task / regime, device, False, 1)) for task, regime, cfg in runs]
            for task, regime, cfg, future in futures:
                record(task, regime, cfg, future.result())
    return {t: {r: summary[t][r] for r in REGIME_NAMES} for t in REPRODUCE_TASKS}


def check_flip(summary: dict[str, dict[str, dict[str, Any]]], criteria: dict[str, float] = CRITERIA) -> dict[str, bool]:
    """Each of the flip criteria (:data:`CRITERIA`) on one summary, by name, and ``"all"``."""
    sym, ood = summary["symmetric"], summary["id-ood"]

    def ge(value: Any, bound: float) -> bool:
        return value is not None and value >= bound

    checks = {
        "symmetric: both ID >= 0.9": all(ge(sym[r]["id_acc"], criteria["min_id_acc"]) for r in REGIME_NAMES),
        "symmetric: small-init inferential >= 0.8": ge(sym["small-init"]["heldout_inferential"], criteria["min_small_inferential"]),
        "symmetric: large-init symmetric >= 0.8": ge(sym["large-init"]["heldout_symmetric"], criteria["min_large_symmetric"]),
        "id-ood: both ID >= 0.9": all(ge(ood[r]["id_acc"], criteria["min_id_acc"]) for r in REGIME_NAMES),
        "id-ood: small-init OOD >= 0.5": ge(ood["small-init"]["ood_acc"], criteria["min_small_ood"]),
        "id-ood: large-init OOD <= 0.3": ood["large-init"]["ood_acc"] is not None and ood["large-init"]["ood_acc"] <= criteria["max_large_ood"],
    }  # fmt: skip
    checks["all"] = all(checks.values())
    return checks


def failed_criteria(checks: dict[str, bool]) -> str:
    """The criteria of :func:`check_flip` that failed, joined for one line."""
    return "; ".join(name for name, ok in checks.items() if not ok and name != "all")


def summary_table(summary: dict[str, dict[str, dict[str, Any]]]) -> pd.DataFrame:
    """One row per (task, regime): gamma, ID accuracy, the held-out numbers, time."""
    import pandas as pd

    rows = []
    for task, regimes in summary.items():
        for regime, row in regimes.items():
            rows.append(
                {
                    "task": task,
                    "regime": regime,
                    "gamma": row["gamma"],
                    "wd": row.get("weight_decay"),
                    "ID acc": row["id_acc"],
                    "(4,3) inferential": row.get("heldout_inferential"),
                    "(4,3) symmetric": row.get("heldout_symmetric"),
                    "OOD acc": row.get("ood_acc"),
                    "commutativity": row.get("commutativity"),
                    "seconds": row.get("seconds"),
                }
            )
    return pd.DataFrame(rows)


def format_table(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The summary as a plain-text table (what the command prints)."""
    table = summary_table(summary)
    return table.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.2f}")
