"""What a sweep is: its options, the shipped presets and the one-sweep-per-folder rule.

A sweep is a :class:`training.studies.study.StudySpec` with a grid (``base``: flat train options
plus ``preset`` and ``task``; ``grid``: flat option -> list of values), each point trained
into its own run folder ``DIR/<name>``; the spec file's format is in :mod:`training.studies.study`.

One sweep per folder: ``DIR/sweep.json`` records the spec, and another spec into ``DIR``
is refused unless it is a part of the recorded one or extends it with the same base and
grid keys (``extend=True``, ``--extend``); see :func:`check_sweep_folder`.

This module imports neither torch nor TransformerLens: the command line's options are
built from its constants.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_init.tasks.registry import registered_tasks, task_class
from training.launch.backends import backend_names
from training.launch.base import check_count
from training.config import check_cores
from training.studies.study import StudySpec, format_value

#: The file of a sweep folder that records its spec.
SPEC_FILE = "sweep.json"
#: The shipped sweep presets, one ``NAME.json`` spec each.
PRESETS_FOLDER = Path(__file__).with_name("presets")


def preset_names() -> list[str]:
    """The shipped sweep presets (``training/studies/sweep/presets/*.json``)."""
    return sorted(p.name[: -len(".json")] for p in PRESETS_FOLDER.iterdir() if p.name.endswith(".json"))


def load_preset(name: str) -> StudySpec:
    """A shipped sweep preset by name (see :func:`preset_names`)."""
    names = preset_names()
    if name not in names:
        raise ValueError(f"unknown sweep preset {name!r}; choose one of {names}")
    text = (PRESETS_FOLDER / f"{name}.json").read_text()
    return StudySpec.from_dict(json.loads(text), where=f"sweep preset {name!r}")


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs: backend, parallelism, device.

    ``workers``: for ``local``, 1 = sequential in this process, N > 1 = a process pool,
    ``None`` = one process per CPU core; for ``ray`` with no ``address``, the CPUs of the
    local Ray instance (``None``: Ray's default).  ``threads``: torch threads per run
    (``None``: ``cores // workers`` in a pool, 1 per Ray task, unchanged when sequential).
    ``ensemble_size``: for ``ensemble``, at most this many models per ensemble (``None``:
    every same-shape point at once).
    """

    backend: str = "local"
    workers: int | None = 1
    address: str | None = None
    device: str = "auto"
    threads: int | None = None
    progress: bool = True
    ensemble_size: int | None = None
    #: A backend's own options (e.g. a Slurm launcher's partition), passed to its constructor.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        backends = backend_names()
        if self.backend not in backends:
            raise ValueError(f"backend must be one of {backends}, got {self.backend!r}")
        for name in ("workers", "threads", "ensemble_size"):
            check_count(name, getattr(self, name))
        if self.backend in ("local", "ensemble") or (
            self.backend == "ray" and self.address is None
        ):  # this machine's cores
            check_cores(self.threads, "--threads", "torch threads per run")
            check_cores(self.workers, "--workers", "worker processes")
        if self.ensemble_size is not None and self.backend != "ensemble":
            raise ValueError(f"ensemble_size applies to the ensemble backend only, got backend {self.backend!r}")
        if self.address is not None and self.backend != "ray":
            raise ValueError(f"address applies to the ray backend only, got backend {self.backend!r}")


# ------------------------------------------------------------ one sweep per folder


def _grid_names(spec: StudySpec) -> dict[str, list[str]]:
    return {key: [format_value(v) for v in values] for key, values in spec.grid.items()}


def _base_of(spec: StudySpec) -> dict[str, Any]:
    return {**spec.base, "preset": spec.preset}


def _spec_difference(recorded: StudySpec, new: StudySpec) -> str:
    """How ``new`` differs from ``recorded`` in a few words ("" when they are the same sweep)."""
    if set(recorded.grid) != set(new.grid):
        return f"grid keys {sorted(recorded.grid)} there, {sorted(new.grid)} here"
    old_base, new_base = _base_of(recorded), _base_of(new)
    if old_base != new_base:
        keys = sorted(k for k in {*old_base, *new_base} if old_base.get(k, "(unset)") != new_base.get(k, "(unset)"))
        return "base " + "; ".join(
            f"{k}: {old_base.get(k, '(unset)')!r} there, {new_base.get(k, '(unset)')!r} here" for k in keys[:3]
        )
    old_names, new_names = _grid_names(recorded), _grid_names(new)
    keys = sorted(k for k in old_names if set(old_names[k]) != set(new_names[k]))
    if keys:
        return "grid " + "; ".join(
            f"{k}: {list(recorded.grid[k])!r} there, {list(new.grid[k])!r} here" for k in keys[:3]
        )
    return ""


def check_sweep_folder(spec: StudySpec, out: str | Path, extend: bool = False) -> StudySpec:
    """The spec to record in ``out/sweep.json`` for running ``spec`` there; writes nothing.

    One sweep per folder: a folder whose ``sweep.json`` records another spec is refused
    (``ValueError`` naming the folder, what differs and the fix) unless

    * ``spec`` is the recorded sweep or a part of it (same base, same grid keys, values
      among the recorded ones): the recorded spec is kept;
    * ``extend`` is true and ``spec`` has the same base and grid keys: the recorded grid
      gets ``spec``'s new values (the union of both, the recorded values first).

    A folder without ``sweep.json`` takes ``spec``.
    """
    out = Path(out)
    path = out / SPEC_FILE
    if not path.is_file():
        return spec
    try:
        recorded = StudySpec.from_file(path)
    except (ValueError, OSError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{path} does not hold a readable sweep spec ({' '.join(str(err).split())}); the folder's sweep is unknown: "
            f"use another --out, or restore or remove {path} if you know what the folder holds"
        ) from err
    difference = _spec_difference(recorded, spec)
    if not difference:
        return spec
    same_shape = set(recorded.grid) == set(spec.grid) and _base_of(recorded) == _base_of(spec)
    old_names, new_names = _grid_names(recorded), _grid_names(spec)
    if same_shape and all(set(new_names[k]) <= set(old_names[k]) for k in spec.grid):
        return recorded  # a part of the recorded sweep (a retry of some points)
    if extend and same_shape:
        grid = {
            k: [
                *recorded.grid[k],
                *(v for v, n in zip(spec.grid[k], new_names[k], strict=True) if n not in old_names[k]),
            ]
            for k in recorded.grid
        }
        merged = StudySpec(recorded.base, grid, description=recorded.description or spec.description)
        merged.points()  # every point of the extended grid is valid (raises naming the one that is not)
        return merged
    if extend:
        raise ValueError(
            f"{out} holds another sweep ({difference}): --extend adds grid values to a sweep with the same base "
            f"and grid keys only; use another --out for this one"
        )
    raise ValueError(
        f"{out} holds another sweep ({difference}; see {path}): one sweep per folder, so that results.csv "
        f"describes one grid; use another --out, or pass --extend to add grid values to that sweep (same base and grid keys)"
    )


# ------------------------------------------------------------------ columns
# The metric columns of a sweep's results table and the thresholds of its ``epochs_to_*``
# columns: plain constants and the tasks' column names, no pandas, no torch.
#
# The metric columns are every registered task's (:meth:`interp_init.tasks.base.TaskMetrics.column_names`,
# in registration order) and, per group a task's metrics name (the anchor pairs: ``"4,3"``),
# the first epoch its training accuracy reaches :data:`PAIR_ACC_THRESHOLD`
# (``epochs_to_acc_4_3``).  A user's task adds its own columns to the tables of its sweeps.

#: Training loss below which a run counts as fitted (``epochs_to_loss``).
LOSS_THRESHOLD = 0.05
#: Per-group training accuracy at or above which a group counts as learned (``epochs_to_acc_*``).
PAIR_ACC_THRESHOLD = 0.6
#: Columns from the run's history and weights, after the tasks' metric columns.
RUN_COLUMNS = ("final_loss", "epochs_run", "epochs_to_loss", "stable_rank_wq0", "stable_rank_we")


def task_metric_columns(tasks: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The metric columns of ``tasks`` (default: every registered task), in order, without repeats."""
    names = registered_tasks() if tasks is None else tasks
    return tuple(dict.fromkeys(c for name in names for c in task_class(name).metrics_class.column_names()))


def group_column(group: str) -> str:
    """The results-table column of a group's epochs to :data:`PAIR_ACC_THRESHOLD` (``"4,3"`` -> ``epochs_to_acc_4_3``)."""
    return "epochs_to_acc_" + group.replace(",", "_")


def task_group_columns(tasks: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The ``epochs_to_acc_*`` columns of ``tasks`` (default: every registered task)."""
    names = registered_tasks() if tasks is None else tasks
    groups = (g for name in names for g in task_class(name).group_names)
    return tuple(dict.fromkeys(group_column(g) for g in groups))
