"""The results table of a sweep folder: one row per run folder, rebuilt from the folders.

After a sweep, :func:`collect_results` rebuilds ``DIR/results.csv`` from the run folders
(one row per folder: grid parameters, status, final metrics, epochs-to-threshold, stable
ranks); :func:`load_results` reads it as a ``pandas.DataFrame``.  :func:`incomplete_runs`
and :func:`problem_summary` say what did not complete.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from interp_init.fileio import folder_is_held
from interp_init.outputs import record_output, recorded_purpose
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus, atomic_write, write_json
from interp_init.tasks.anchor_pairs import AnchorPair
from interp_init.tasks.base import EpochRecord
from training.config import OPTIONS
from training.studies.records import RunRecord
from training.studies.study import StudySpec, named_config_problem, named_runs, run_dirs
from training.studies.sweep.spec import (
    LOSS_THRESHOLD,
    PAIR_ACC_THRESHOLD,
    RUN_COLUMNS,
    SPEC_FILE,
    group_column,
    task_group_columns,
    task_metric_columns,
)

__all__ = ["RANKS_FILE", "cached_stable_ranks", "ranks_record", "run_stable_ranks", "stable_ranks_of"]

#: The results table of a sweep folder.
RESULTS_FILE = "results.csv"
#: Columns of the results table that depend on the machine, not on the runs' content.
TIMING_COLUMNS = ("elapsed_s",)
#: Config values always in the results table (the figures' axes), besides the grid keys.
CONTEXT_COLUMNS = (
    "preset",
    "task",
    "gamma",
    "n_layers",
    "d_model",
    "n_heads",
    "weight_decay",
    "lr",
    "k",
    "epochs",
    "seed",
)


def epochs_to_loss(history: Sequence[EpochRecord], threshold: float = LOSS_THRESHOLD) -> float:
    """The first epoch whose mean training loss is below ``threshold`` (NaN if none)."""
    return next((float(record.epoch) for record in history if record.loss < threshold), math.nan)


def epochs_to_pair_accuracy(history: Sequence[EpochRecord], threshold: float = PAIR_ACC_THRESHOLD) -> dict[str, float]:
    """Per group of the task's metrics (an anchor pair's ``AnchorPair.key``, ``"a1,a2"``),
    the first evaluated epoch with accuracy >= ``threshold`` (NaN if none), from a run's
    typed history (:attr:`training.studies.records.RunRecord.history`)."""
    out: dict[str, float] = {}
    for record in history:
        epoch, groups = record.epoch, ({} if record.metrics is None else record.metrics.groups())
        for group, acc in groups.items():
            out.setdefault(group, math.nan)
            if math.isnan(out[group]) and acc >= threshold:
                out[group] = float(epoch)
    return out


def pair_column(pair: str | tuple[int, int]) -> str:
    """The results-table column of an anchor pair's epochs to :data:`PAIR_ACC_THRESHOLD` (``epochs_to_acc_4_3``)."""
    a1, a2 = pair.split(",") if isinstance(pair, str) else pair
    return group_column(AnchorPair(a1, a2).key)


#: Every registered task's ``epochs_to_acc_*`` columns (the anchor pairs').
PAIR_COLUMNS = task_group_columns()
#: The metric columns every results table has: every registered task's, then the run's own.
METRIC_COLUMNS = (*task_metric_columns(), *RUN_COLUMNS)


def _grid_keys(name: str) -> list[str]:
    return [key for key, sep, _ in (part.partition("=") for part in name.split("__")) if sep and key in OPTIONS]


def run_row(
    run_dir: str | Path, loss_threshold: float = LOSS_THRESHOLD, pair_threshold: float = PAIR_ACC_THRESHOLD
) -> dict[str, Any]:
    """One results-table row of a run folder (config values, status, flattened metrics)."""
    record = RunRecord.read(run_dir, strict=False)
    cfg, run_dir = record.config, record.path
    flat = {**cfg.flat(), "preset": cfg.preset}
    row: dict[str, Any] = {
        "run": run_dir.name,
        **{key: flat[key] for key in (*_grid_keys(run_dir.name), *CONTEXT_COLUMNS)},
    }
    row["status"] = record.status
    row.update(dict.fromkeys(METRIC_COLUMNS, math.nan))
    row.update({k: math.nan if v is None else v for k, v in record.final_columns().items()})
    history = record.history
    if history:
        row["final_loss"] = float(history[-1].loss)
        row["epochs_run"] = float(history[-1].epoch)
        row["epochs_to_loss"] = epochs_to_loss(history, loss_threshold)
    if record.status in FINISHED_STATUSES:
        RunFolder(run_dir).check_bound()  # weights or metrics of another run make the row unreadable
        row.update(run_stable_ranks(run_dir))
    row.update(dict.fromkeys((*PAIR_COLUMNS, *task_group_columns((cfg.data.task,))), math.nan))
    row.update({group_column(g): e for g, e in epochs_to_pair_accuracy(history, pair_threshold).items()})
    row["elapsed_s"] = math.nan if record.elapsed_s is None else float(record.elapsed_s)
    row["error"] = record.error
    return row


def collect_results(
    out: str | Path,
    loss_threshold: float = LOSS_THRESHOLD,
    pair_threshold: float = PAIR_ACC_THRESHOLD,
    *,
    write: bool = True,
) -> pd.DataFrame:
    """Rebuild ``out/results.csv`` from the run folders under ``out`` and return it
    (``write=False``: return it without writing it; :func:`write_results` writes it later).

    One row per run folder the sweep names (:func:`~training.studies.study.run_dirs`: a point of its
    ``sweep.json`` holding a ``config.json``; a folder holding another config than its point's
    is ``unreadable``), sorted by the grid
    values: the folder name, its grid parameters and the configs' :data:`CONTEXT_COLUMNS`,
    ``status``, the final metrics (``heldout_*`` averaged over held-out pairs), the first
    epoch with training loss < ``loss_threshold`` (``epochs_to_loss``), per anchor pair the
    first epoch with training accuracy >= ``pair_threshold`` (``epochs_to_acc_A_B``), the
    stable ranks of layer-0 W_Q (heads merged) and W_E, and ``elapsed_s``.
    """
    out = Path(out)
    if (
        isinstance(loss_threshold, bool)
        or not isinstance(loss_threshold, (int, float))
        or not 0 < loss_threshold < math.inf
    ):
        raise ValueError(f"loss_threshold must be a finite number > 0, got {loss_threshold!r}")
    if isinstance(pair_threshold, bool) or not isinstance(pair_threshold, (int, float)) or not 0 < pair_threshold <= 1:
        raise ValueError(f"pair_threshold must be a number in (0, 1], got {pair_threshold!r}")
    if not out.is_dir():
        raise ValueError(f"sweep folder {out} does not exist")
    rows = []
    names = named_runs(out) or {}
    for folder in run_dirs(out, depth=1):
        problem = named_config_problem(out, names, folder.name)
        if problem is not None:  # a folder at a point's name holding another run is not that point
            rows.append({"run": folder.name, "status": RunStatus.UNREADABLE, "error": f"ValueError: {problem}"})
            continue
        try:
            rows.append(run_row(folder, loss_threshold, pair_threshold))
        except (ValueError, KeyError, TypeError) as err:  # a damaged folder gets a row that says so
            rows.append({"run": folder.name, "status": RunStatus.UNREADABLE, "error": f"{type(err).__name__}: {err}"})
    grid_cols: list[str] = sorted({k for d in rows for k in _grid_keys(d["run"])})
    head = ["run", *grid_cols, *(c for c in CONTEXT_COLUMNS if c not in grid_cols), "status"]
    # a user task's own metrics and groups follow the registered tasks' columns
    known = {*head, *METRIC_COLUMNS, *PAIR_COLUMNS, *TIMING_COLUMNS, "error", "run"}
    extra = list(dict.fromkeys(k for d in rows for k in d if k not in known and not k.startswith("epochs_to_acc_")))
    extra_groups = list(dict.fromkeys(k for d in rows for k in d if k not in known and k.startswith("epochs_to_acc_")))
    metric_cols = [*METRIC_COLUMNS[: -len(RUN_COLUMNS)], *extra, *METRIC_COLUMNS[-len(RUN_COLUMNS) :]]
    columns = [*head, *metric_cols, *PAIR_COLUMNS, *extra_groups, *TIMING_COLUMNS, "error"]
    df = pd.DataFrame(rows, columns=columns)
    sort_cols = [*grid_cols, "run"]
    df = df.sort_values(sort_cols, kind="stable", na_position="last").reset_index(drop=True)
    if write:
        write_results(df, out)
    return _typed(df)


def check_sweep_spec(out: str | Path) -> None:
    """Refuse a sweep folder whose ``sweep.json`` cannot be read (its points, and so which
    runs are missing or strangers, are unknown), as ``sweep`` itself does."""
    path = Path(out) / SPEC_FILE
    if not path.is_file():
        return
    try:
        StudySpec.from_file(path).points()
    except (ValueError, OSError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{path} does not hold a readable sweep spec ({' '.join(str(err).split())}); which runs the sweep names is unknown: "
            f"restore {path} (or run the sweep again with its spec, which rewrites it)"
        ) from None


#: The purpose a results table outside a sweep folder is recorded with (:func:`write_results`).
RESULTS_PURPOSE = "results table"


def check_results_file(out: str | Path, option: str = "--out") -> None:
    """Refuse, before any work, a folder whose ``results.csv`` the toolkit did not write: in a
    sweep folder it is the sweep's; elsewhere (a folder of runs made by hand) only one a
    previous :func:`write_results` recorded, unchanged since, is replaced."""
    path = Path(out) / RESULTS_FILE
    if path.is_file() and not (Path(out) / SPEC_FILE).is_file() and recorded_purpose(path) != RESULTS_PURPOSE:
        raise ValueError(
            f"{path} exists and is a file interp-init did not write (or one changed since it wrote it); it is never overwritten: "
            f"move it away first, or choose another {option}"
        )


def write_results(df: pd.DataFrame, out: str | Path) -> Path:
    """Write a :func:`collect_results` table to ``out/results.csv`` atomically (asking
    :func:`check_results_file` again); return the path.  Outside a sweep folder the file is
    recorded as the toolkit's, so that the next table may replace it."""
    check_results_file(out)
    path = atomic_write(Path(out) / RESULTS_FILE, lambda tmp: df.to_csv(tmp, index=False))
    if not (Path(out) / SPEC_FILE).is_file():
        record_output(path, RESULTS_PURPOSE)
    return path


#: The order in which :func:`problem_summary` counts what did not complete.
PROBLEM_STATUSES: tuple[RunStatus, ...] = (
    RunStatus.FAILED,
    RunStatus.DIVERGED,
    RunStatus.INTERRUPTED,
    RunStatus.PENDING,
    RunStatus.ABSENT,
    RunStatus.UNREADABLE,
)


def incomplete_runs(out: str | Path, results: pd.DataFrame | None = None) -> dict[str, str]:
    """Run name -> status of every run of the sweep folder ``out`` that did not complete:
    the rows of ``results`` (default: :func:`collect_results` without writing) whose status
    is not ``completed``, and the points of ``out/sweep.json`` with no run folder
    (``absent``: never started, or removed; ``pending`` while a sweep process holds the
    folder: it has not reached them yet).  Reads only."""
    out = Path(out)
    if results is None:
        results = collect_results(out, write=False)
    bad = {str(r): str(s) for r, s in zip(results["run"], results["status"], strict=True) if s != "completed"}
    present = set(results["run"])
    missing = RunStatus.PENDING if folder_is_held(out) else RunStatus.ABSENT  # a running sweep has not reached them yet
    bad.update({name: missing for name in named_runs(out) or {} if name not in present})
    return bad


def problem_summary(statuses: Mapping[str, str], total: int, where: str | Path) -> str | None:
    """One line saying how many of ``total`` runs did not complete and where to look
    (``None`` when every run completed): ``2 of 6 runs failed: see OUT/results.csv``,
    ``3 of 6 runs did not complete (2 failed, 1 diverged): see ...``."""
    tally = Counter(s for s in statuses.values() if s != "completed")
    counts = {s: tally.pop(s) for s in PROBLEM_STATUSES if s in tally} | dict(tally)
    if not counts:
        return None
    n_bad = sum(counts.values())
    if len(counts) == 1:
        (status,) = counts
        return f"{n_bad} of {total} runs {status}: see {where}"
    return f"{n_bad} of {total} runs did not complete ({', '.join(f'{n} {s}' for s, n in counts.items())}): see {where}"


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    for col in ("error", "status", "run", "preset", "task"):
        if col in df:
            df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str)
    return df


def load_results(out: str | Path) -> pd.DataFrame:
    """``out/results.csv`` as a DataFrame (rebuilt first with :func:`collect_results` if absent)."""
    out = Path(out)
    path = out / RESULTS_FILE
    if not path.exists():
        return collect_results(out)
    return _typed(pd.read_csv(path, keep_default_na=True))


# ------------------------------------------------------------------ ranks
# The stable ranks a run folder caches, an analysis read after a study, never in the job path.
#
# The results table (:mod:`training.studies.sweep.results`) and the report read the stable
# ranks of a run's first-layer W_Q (heads merged) and of its W_E (journal Fig. 5C's
# complexity measure, :func:`probes.stable_rank`) through :func:`run_stable_ranks`: computed
# from the run's weights on first read and cached in the folder's ``ranks.json``, keyed by the
# weights file's size and modification time, so the model is loaded again only when the
# weights changed since.  A stored record (kept without its weights, :mod:`interp_init.stored`)
# gives the ranks it was stored with; any other folder without weights gives none.
#
# Example::
#
#     >>> from training.studies.sweep.results import run_stable_ranks
#     >>> run_stable_ranks("runs/first-minute/symmetric/small-init")  # doctest: +SKIP
#     {'stable_rank_wq0': 1.9, 'stable_rank_we': 3.2}

if TYPE_CHECKING:
    from transformer_lens import HookedTransformer


#: A run folder's cached stable ranks (:func:`run_stable_ranks`).
RANKS_FILE = "ranks.json"


def _weights_stamp(folder: RunFolder) -> dict[str, int]:
    stat = folder.weights_path.stat()
    return {"weights_size": stat.st_size, "weights_mtime_ns": stat.st_mtime_ns}


def ranks_record(run_dir: str | Path, ranks: dict[str, float]) -> dict[str, Any]:
    """What ``ranks.json`` holds: ``ranks`` keyed by the run folder's weights as they are now."""
    return {"stamp": _weights_stamp(RunFolder(run_dir)), "ranks": ranks}


def stable_ranks_of(model: HookedTransformer) -> dict[str, float]:
    """The stable ranks a run folder caches: the first layer's W_Q (heads merged) and W_E."""
    from probes import merged_weight, stable_rank

    return {
        "stable_rank_wq0": stable_rank(merged_weight(model, "W_Q", 0)),
        "stable_rank_we": stable_rank(merged_weight(model, "W_E")),
    }


def cached_stable_ranks(run_dir: str | Path) -> dict[str, float] | None:
    """The ranks ``ranks.json`` holds for the run folder's weights as they are now (None:
    no cache, a damaged one, or one of other weights).  A stored record
    (:mod:`interp_init.stored`) keeps the ranks of the weights it was stored without."""
    folder = RunFolder(run_dir)
    try:
        data: Any = json.loads((folder.path / RANKS_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not _valid_ranks(data.get("ranks")):
        return None  # a damaged or invalid cache is computed again, never read
    if folder.weights_path.exists():
        return data["ranks"] if data.get("stamp") == _weights_stamp(folder) else None
    return data["ranks"] if folder.status() in FINISHED_STATUSES else None  # without weights: finished only if stored


def _valid_ranks(ranks: Any) -> bool:
    """Whether a cached ``ranks`` object is what :func:`stable_ranks_of` gives: both stable
    ranks, each a finite number >= 0 (a stable rank is 0 or at least 1)."""
    keys = ("stable_rank_wq0", "stable_rank_we")
    return (
        isinstance(ranks, dict)
        and set(ranks) == set(keys)
        and all(
            isinstance(ranks[k], (int, float))
            and not isinstance(ranks[k], bool)
            and math.isfinite(ranks[k])
            and ranks[k] >= 0
            for k in keys
        )
    )


def run_stable_ranks(run_dir: str | Path) -> dict[str, float]:
    """Stable ranks of the first layer's W_Q (heads merged) and of W_E, cached in
    ``ranks.json`` (see the module docstring); empty for a folder without weights that is
    not a stored record."""
    folder = RunFolder(run_dir)
    cached = cached_stable_ranks(folder.path)
    if cached is not None or not folder.weights_path.exists():
        return cached or {}
    ranks = stable_ranks_of(folder.load_model(device="cpu"))
    write_json(folder.path / RANKS_FILE, ranks_record(folder.path, ranks))
    return ranks
