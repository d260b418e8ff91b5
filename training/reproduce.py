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
Example (CPU: four runs of about 4 minutes each, two at a time on 2 cores; see
docs/faithful-models.md for what it shows)::

    interp-init reproduce --preset cpu --seed 31 --out runs/reproduce/cpu-31

One seed is one draw: :mod:`training.population_runs` trains the same four runs on several
seeds (``interp-init reproduce --seeds 31,32,33``) and :mod:`training.population` reports
per criterion how many seeds meet it, under the ``strict`` or the ``paper`` protocol.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.anchor_tasks import FLIP_CRITERIA
from interp_init.outputs import output_folder
from interp_init.runfolder import write_json
from interp_init.task import read_run_metrics
from interp_init.task_registry import make_task, registered_tasks, task_class
from training.config import PRESETS, RunConfig, make_run_config

if TYPE_CHECKING:
    import pandas as pd

#: The tasks a reproduction trains by default, in order: the registered tasks with a flip
#: (``Task.reproduces``).
REPRODUCE_TASKS: tuple[str, ...] = tuple(name for name in registered_tasks() if task_class(name).reproduces)
#: The regimes, in order.
REGIME_NAMES: tuple[str, ...] = ("small-init", "large-init")

#: preset -> regime -> flat run options (keys naming a task hold that task's options).
#: ``cpu`` and ``paper``: the NeurIPS paper's two sides of the flip (gamma 0.8 small init,
#: gamma 0.5 large init); a task may change a regime's options
#: (:meth:`interp_init.task.Task.regime_overrides`: ``cpu`` takes gamma 0.4 for id-ood's
#: large init); what ``cpu`` shows over seeds is in docs/faithful-models.md.
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

#: What a second ``reproduce`` into a folder another process is reproducing into is told.
REPRODUCE_BUSY = "is being reproduced into by another process ({owner}); wait for it to finish, or choose another --out"

#: The thresholds of a reproduced flip (they live with the tasks:
#: :data:`interp_init.anchor_tasks.FLIP_CRITERIA`).
CRITERIA: dict[str, float] = FLIP_CRITERIA


def regime_options(preset: str, regime: str, task: str) -> dict[str, Any]:
    """The flat options a regime adds to ``preset`` for ``task``."""
    if preset not in REGIMES or preset not in PRESETS:
        known = sorted(set(REGIMES) & set(PRESETS))
        raise ValueError(f"unknown preset {preset!r} for reproduce; choose one of {known}")
    regimes = REGIMES[preset]
    if regime not in regimes:
        raise ValueError(f"unknown regime {regime!r} of preset {preset!r}; choose one of {sorted(regimes)}")
    task_class(task)  # an unknown task is refused here
    spec = regimes[regime]
    shared = {k: v for k, v in spec.items() if k not in registered_tasks()}
    return {**shared, **make_task(task).regime_overrides(preset, regime), **spec.get(task, {})}


def check_workers(workers: Any) -> int:
    """Refuse a ``workers`` count that is not an integer >= 1 (before any folder is made)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return workers


def check_reproducible(task: str) -> None:
    """Refuse a task without the small-init / large-init flip (``Task.reproduces``)."""
    if not task_class(task).reproduces:
        flips = [n for n in registered_tasks() if task_class(n).reproduces]
        raise ValueError(f"task {task!r} has no small-init / large-init flip to reproduce (its class sets no reproduces = True); reproduce takes {flips}")


def regime_config(preset: str, regime: str, task: str, seed: int, precision: str = "fp32") -> RunConfig:
    """The :class:`training.RunConfig` of one regime on one task (``precision``: ``"fp32"``,
    or ``"bf16"`` for the forward under bfloat16 autocast)."""
    return make_run_config(preset, task=task, seed=seed, precision=precision, **regime_options(preset, regime, task))


def summary_row(task: str, cfg: RunConfig, metrics: dict, run_dir: str | Path) -> dict[str, Any]:
    """One run's line of the summary, from its config and ``metrics.json``: gamma, ID
    accuracy, the held-out (4,3) against both targets (``symmetric``) or OOD accuracy and
    commutativity (other tasks), weight decay, precision, status, seconds, run folder."""
    task_obj = cfg.data.make_task()
    final = read_run_metrics(task_obj, metrics).final
    columns = {name: None for name in task_obj.metrics_class.column_names()}
    columns.update({} if final is None else final.columns())
    row: dict[str, Any] = {"gamma": cfg.init.gamma, **{k: v for k, v in columns.items() if k != "train_acc"}}
    row["weight_decay"] = cfg.train.weight_decay
    row["precision"] = cfg.train.precision
    row["status"] = metrics["status"]
    row["seconds"] = metrics.get("elapsed_s")
    row["run_dir"] = str(run_dir)
    return row


def default_workers(device: str = "auto") -> int:
    """How many runs to train at once: one per CPU core up to the four runs on a CPU (each
    with one torch thread, the fastest use of the cores for models this small); one on a GPU."""
    if on_gpu(device):
        return 1
    return max(1, min(len(REPRODUCE_TASKS) * len(REGIME_NAMES), os.cpu_count() or 1))


def on_gpu(device: str) -> bool:
    """Whether ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``) trains on a CUDA GPU
    (torch is imported only for ``auto``)."""
    if device == "cpu":
        return False
    if device.startswith("cuda"):
        return True
    import torch

    return device == "auto" and torch.cuda.is_available()


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
    tasks: Sequence[str] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Train both regimes of ``preset`` on ``tasks`` (default :data:`REPRODUCE_TASKS`, every
    task with a flip); return and write ``out/summary.json``.

    Runs that already finished in ``out`` are read, not retrained; an unfinished one
    resumes from its checkpoint (a folder trained at another ``precision`` is refused,
    as any checkpoint from another config is).  ``seconds`` is each run's training time
    (summed over resumptions); ``run_dir`` its folder.  ``precision="bf16"`` trains under
    bfloat16 autocast (see benchmarks/README.md for what it trades).

    ``workers`` runs train at once, in worker processes of one torch thread each when it
    is above 1 (default :func:`default_workers`: one per core on a CPU, one on a GPU);
    with one worker the runs train here, one after another, with torch's threads.
    """
    tasks = REPRODUCE_TASKS if tasks is None else tuple(tasks)
    for task in tasks:
        check_reproducible(task)
    runs = [(task, regime, regime_config(preset, regime, task, seed, precision)) for task in tasks for regime in REGIME_NAMES]
    workers = default_workers(device) if workers is None else check_workers(workers)
    with output_folder(out, "a reproduction", "reproduction", REPRODUCE_BUSY) as root:  # never nested in other runs' folders
        return _reproduce_held(runs, tasks, root, device, progress, workers)


def _reproduce_held(
    runs: list[tuple[str, str, RunConfig]], tasks: tuple[str, ...], root: Path, device: str, progress: bool, workers: int
) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`reproduce`'s training and summary, while this process holds ``root``."""
    summary: dict[str, dict[str, dict[str, Any]]] = {task: {} for task in tasks}

    def record(task: str, regime: str, cfg: RunConfig, metrics: dict) -> None:
        summary[task][regime] = summary_row(task, cfg, metrics, root / task / regime)
        ordered = {t: {r: summary[t][r] for r in REGIME_NAMES if r in summary[t]} for t in tasks}
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
    return {t: {r: summary[t][r] for r in REGIME_NAMES} for t in tasks}


def check_flip(summary: dict[str, dict[str, dict[str, Any]]], criteria: dict[str, float] = CRITERIA) -> dict[str, bool]:
    """Each of the flip criteria (:data:`CRITERIA`) on one summary, by name, and ``"all"``."""
    checks: dict[str, bool] = {}
    for task, rows in summary.items():
        checks.update(make_task(task).flip_checks(rows["small-init"], rows["large-init"], criteria))
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
