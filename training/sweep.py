"""Resumable sweeps over a grid of runs, on one machine or a Ray cluster, and their results table.

A sweep is a :class:`SweepSpec`: ``base`` (flat train options, plus ``preset`` and
``task``, the names of the ``train`` command's flags with underscores) and ``grid`` (flat
option -> list of values).  Every point of the grid's cartesian product is one
:class:`~training.config.RunConfig`, trained by :func:`training.train` into its own run
folder ``DIR/<name>``, the name made of the grid values in key order
(``gamma=0.8__n_layers=2__seed=0``).  Because :func:`training.train` skips a finished run
folder and resumes an interrupted one, running the same sweep again after a kill
finishes what was left and never trains a run twice.

Spec file (JSON, or TOML with the same two tables)::

    {"base": {"preset": "cpu", "task": "symmetric", "epochs": 20},
     "grid": {"gamma": [0.3, 0.5, 0.8], "n_layers": [2, 3], "seed": [0, 1, 2]}}

The whole spec is validated before anything trains: every grid point's config is built
up front, so an unknown key, an empty list or a value of the wrong type fails at once
with a message naming the key.

Backends (:class:`SweepOptions`):

* ``local``: in this process one run after the other (``workers=1``), or a
  ``concurrent.futures.ProcessPoolExecutor`` with ``workers`` processes, each using
  ``cores // workers`` torch threads, that never outlive the sweep process
  (:func:`worker_pool`: SIGKILL, SIGTERM or SIGINT of the sweep leaves no worker).
* ``ray``: one Ray task per run, on a local Ray instance or the cluster at ``address``
  (``pip install 'interp-init[ray]'``).  The run folders must be on storage every node
  sees at the same path (see ``docs/sweeps.md``).
* ``ensemble``: points with the same shape trained together by
  ``training.ensemble.train_ensemble`` (many models at once with ``torch.func``; for GPUs).

One sweep per folder: ``DIR/sweep.json`` records the spec, and another spec into ``DIR``
is refused unless it is a part of the recorded one or extends it with the same base and
grid keys (``extend=True``, ``--extend``); see :func:`check_sweep_folder`.

A run that raises is recorded as ``failed`` (``error.txt`` in its folder, with the
traceback) and the sweep goes on; the next sweep over the same folder retries it.  A run
whose loss went non-finite is ``diverged`` (``metrics.json`` says so) and is not retried.

After a sweep, :func:`collect_results` rebuilds ``DIR/results.csv`` from the run folders
(one row per folder: grid parameters, status, final metrics, epochs-to-threshold, stable
ranks); :func:`load_results` reads it as a ``pandas.DataFrame``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import signal
import sys
import threading
import time
import tomllib
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import click
import pandas as pd
import torch
from tqdm.auto import tqdm

from training.config import OPTIONS, PRESETS, RunConfig, make_run_config, preset_options
from interp_init.tasks import ALL_PAIRS, TASKS
from training.loop import atomic_write_json, atomic_write_text, read_metrics

SPEC_FILE = "sweep.json"
RESULTS_FILE = "results.csv"
ERROR_FILE = "error.txt"
RANKS_FILE = "ranks.json"
BACKENDS = ("local", "ray", "ensemble")
#: Keys of a spec's ``base`` besides the flat options.
BASE_EXTRA_KEYS = ("preset",)
#: Training-loss threshold of NeurIPS Fig. 6 / journal Fig. 8A (the released code used 0.1).
LOSS_THRESHOLD = 0.05
#: Per-pair training-accuracy threshold of journal Fig. 8B (the released code used 0.99).
PAIR_ACC_THRESHOLD = 0.6
#: Columns of the results table that depend on the machine, not on the runs' content.
TIMING_COLUMNS = ("elapsed_s",)
#: Config values always in the results table (the figures' axes), besides the grid keys.
CONTEXT_COLUMNS = ("preset", "task", "gamma", "n_layers", "d_model", "n_heads", "weight_decay", "lr", "k", "epochs", "seed")
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._+-]")
_RAY_MISSING = "the ray backend needs Ray: pip install 'interp-init[ray]'"


# ------------------------------------------------------------------------------ spec

def format_value(value: Any) -> str:
    """A grid value as it appears in a run folder's name (``0.8``, ``1e-05``, ``id-ood``)."""
    if isinstance(value, bool) or value is None:
        text = str(value).lower()
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    return _NAME_SAFE.sub("_", text)


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: its run-folder name, its grid values and its validated config."""

    name: str
    params: Mapping[str, Any]
    config: RunConfig


@dataclass(frozen=True)
class SweepSpec:
    """A grid of runs: ``base`` options shared by all, ``grid`` options varied (cartesian product).

    ``base`` holds flat options (:data:`training.config.OPTIONS`) and ``preset`` (a run
    preset of :data:`training.config.PRESETS`, default ``"paper"``); ``grid`` maps flat
    options to non-empty lists of distinct values.  A key may not be in both.
    """

    base: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.base, Mapping):
            raise ValueError(f"spec 'base' must be a mapping of options, got {type(self.base).__name__}")
        if not isinstance(self.grid, Mapping) or not self.grid:
            raise ValueError("spec 'grid' must be a non-empty mapping of option -> list of values, e.g. {\"gamma\": [0.3, 0.8]}")
        allowed = sorted(OPTIONS)
        for key in self.base:
            if key not in OPTIONS and key not in BASE_EXTRA_KEYS:
                raise ValueError(f"spec base: unknown option {key!r}; allowed: preset, {', '.join(allowed)}")
        preset = self.base.get("preset", "paper")
        if preset not in PRESETS:
            raise ValueError(f"spec base: unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
        for key, values in self.grid.items():
            if key not in OPTIONS:
                hint = " (the run preset goes in 'base')" if key == "preset" else ""
                raise ValueError(f"spec grid: unknown option {key!r}{hint}; allowed: {', '.join(allowed)}")
            if key in self.base:
                raise ValueError(f"spec: option {key!r} is in both 'base' and 'grid'; keep it in one")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise ValueError(f"spec grid[{key!r}] must be a list of values, got {values!r}")
            if len(values) == 0:
                raise ValueError(f"spec grid[{key!r}] is empty; give at least one value")
            names = [format_value(v) for v in values]
            if len(set(names)) != len(names):
                raise ValueError(f"spec grid[{key!r}] has duplicate values {list(values)!r}")
        if not isinstance(self.description, str):
            raise ValueError(f"spec 'description' must be a string, got {self.description!r}")

    @property
    def preset(self) -> str:
        return self.base.get("preset", "paper")

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.grid.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"base": dict(self.base), "grid": {k: list(v) for k, v in self.grid.items()}}
        if self.description:
            out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "spec") -> SweepSpec:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping with 'base' and 'grid'")
        unknown = sorted(set(data) - {"base", "grid", "description"})
        if unknown:
            raise ValueError(f"{where}: unknown top-level key(s) {unknown}; use 'base', 'grid' (and 'description')")
        if "grid" not in data:
            raise ValueError(f"{where} has no 'grid'")
        return cls(base=dict(data.get("base", {})), grid=dict(data["grid"]), description=data.get("description", ""))

    @classmethod
    def from_file(cls, path: str | Path) -> SweepSpec:
        """Read a spec from a ``.json`` or ``.toml`` file."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"sweep spec {path} does not exist (or is not a file)")
        try:
            if path.suffix.lower() == ".toml":
                data = tomllib.loads(path.read_text())
            else:
                data = json.loads(path.read_text())
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
            raise ValueError(f"sweep spec {path} is not valid {path.suffix.lstrip('.').upper() or 'JSON'} ({err})") from err
        return cls.from_dict(data, where=f"sweep spec {path}")

    def smoke_test(self, axes: Sequence[str] = ()) -> SweepSpec:
        """A seconds-long copy for smoke runs: the ``tiny`` run preset, the first 2 values
        of each key in ``axes`` (so a figure still has two cells along it), 1 of the rest."""
        grid = {key: list(values)[: 2 if key in axes else 1] for key, values in self.grid.items()}
        task = self.base.get("task", "symmetric")
        sized = set(preset_options("tiny", task if task in TASKS else "symmetric"))
        # the tiny preset's sizes and schedule replace the spec's own (a spec that pins e.g.
        # n_train or epochs would otherwise keep its full-scale values)
        base = {key: value for key, value in self.base.items() if key not in sized}
        return SweepSpec(description=self.description, base={**base, "preset": "tiny"}, grid={**self.grid, **grid})

    def with_overrides(self, base: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None) -> SweepSpec:
        """A copy with ``base`` options and ``grid`` lists replaced or added (validated)."""
        new_base = {**self.base, **(base or {})}
        new_grid = {**self.grid, **(grid or {})}
        for key in base or {}:
            new_grid.pop(key, None)
        for key in grid or {}:
            new_base.pop(key, None)
        return SweepSpec(new_base, new_grid, self.description)

    def points(self) -> list[SweepPoint]:
        """Every grid point with its validated config (raises ``ValueError`` naming the bad key)."""
        base = {k: v for k, v in self.base.items() if k != "preset"}
        preset = self.preset
        # The base alone, then each grid value alone, so that the error names the bad key.
        if not set(self.grid) & {"task", "k"}:  # a grid task or k may be what makes the base valid
            try:
                make_run_config(preset, **base)
            except ValueError as err:
                task = {"task": base["task"]} if "task" in base else {}
                for key, value in base.items():
                    try:
                        make_run_config(preset, **{**task, key: value})
                    except ValueError as key_err:
                        raise ValueError(f"spec base[{key!r}] value {value!r} is invalid: {key_err}") from key_err
                raise ValueError(f"spec base is invalid: {err}") from err
        coupled = {"task", "k"} if {"task", "k"} <= set(self.grid) else set()  # valid only together
        for key, values in self.grid.items():
            if key in coupled:
                continue
            for value in values:
                try:
                    make_run_config(preset, **{**base, key: value})
                except ValueError as err:
                    raise ValueError(f"spec grid[{key!r}] value {value!r} is invalid: {err}") from err
        keys = sorted(self.grid)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in self.grid)):
            params = dict(zip(self.grid, combo, strict=True))
            name = "__".join(f"{k}={format_value(params[k])}" for k in keys)
            try:
                cfg = make_run_config(preset, **base, **params)
            except ValueError as err:
                raise ValueError(f"spec grid point {name} is invalid: {err}") from err
            out.append(SweepPoint(name, {k: params[k] for k in keys}, cfg))
        return out


def preset_names() -> list[str]:
    """The shipped sweep presets (``training/sweep_presets/*.json``)."""
    folder = resources.files("training") / "sweep_presets"
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def load_preset(name: str) -> SweepSpec:
    """A shipped sweep preset by name (see :func:`preset_names`)."""
    names = preset_names()
    if name not in names:
        raise ValueError(f"unknown sweep preset {name!r}; choose one of {names}")
    text = (resources.files("training") / "sweep_presets" / f"{name}.json").read_text()
    return SweepSpec.from_dict(json.loads(text), where=f"sweep preset {name!r}")


# ---------------------------------------------------------------------------- runner

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

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        for name in ("workers", "threads", "ensemble_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 (or None for automatic), got {value!r}")
        if self.ensemble_size is not None and self.backend != "ensemble":
            raise ValueError(f"ensemble_size applies to the ensemble backend only, got backend {self.backend!r}")
        if self.address is not None and self.backend != "ray":
            raise ValueError(f"address applies to the ray backend only, got backend {self.backend!r}")


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: run name -> status, and which runs it skipped as already done."""

    statuses: Mapping[str, str]
    skipped: tuple[str, ...]
    results: pd.DataFrame

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)


def run_status(run_dir: str | Path) -> str:
    """``completed``, ``diverged``, ``failed``, ``interrupted`` or ``pending`` from a run folder."""
    run_dir = Path(run_dir)
    try:
        metrics = read_metrics(run_dir)
    except ValueError:
        metrics = None
    status = metrics.get("status") if metrics else None
    if status in ("completed", "diverged") and (run_dir / "model.safetensors").exists():
        return status
    if (run_dir / ERROR_FILE).exists():
        return "failed"
    if status == "running":
        return "interrupted"
    return "pending"


def run_point(cfg: RunConfig, run_dir: str | Path, device: str = "auto", threads: int | None = None) -> tuple[str, str]:
    """Train one grid point into ``run_dir``; never raises for a failed run.

    Returns ``(status, error)``: the ``metrics.json`` status, or ``"failed"`` with the
    exception (also written, with its traceback, to ``run_dir/error.txt``).  Also caches
    the run's stable ranks (:func:`run_stable_ranks`).
    """
    from training.loop import train

    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    run_dir = Path(run_dir)
    try:
        result = train(cfg, run_dir, device=device, progress=False)
        status = str(result.metrics.get("status"))
        del result
        run_stable_ranks(run_dir)
    except Exception as err:  # noqa: BLE001 - any failure of one run is recorded, the sweep goes on
        torch.set_num_threads(previous_threads)
        run_dir.mkdir(parents=True, exist_ok=True)
        if not (run_dir / "config.json").exists():  # so the failed run has its row in the table
            atomic_write_json(run_dir / "config.json", cfg.to_dict())
        atomic_write_text(run_dir / ERROR_FILE, f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}")
        return "failed", f"{type(err).__name__}: {err}"
    torch.set_num_threads(previous_threads)
    (run_dir / ERROR_FILE).unlink(missing_ok=True)
    return status, ""


#: How often a pool worker checks that the sweep process that started it is still alive.
PARENT_POLL_S = 0.5


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a process pool was training: raised by the sweep's handler so
    that the pool is shut down and its workers are stopped before the process exits
    (``interp-init`` then exits with :attr:`signal_exit_code`)."""

    signal_exit_code = 128 + signal.SIGTERM


def watch_parent(parent_pid: int, poll_s: float = PARENT_POLL_S) -> None:
    """Make this (worker) process exit as soon as ``parent_pid`` is no longer its parent.

    A parent killed by SIGKILL cannot stop its workers; they would be re-parented and
    finish the queue.  On Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel kill
    this process when its parent dies; everywhere a daemon thread also polls
    ``os.getppid()`` every ``poll_s`` seconds and calls ``os._exit`` when it changes (the
    check right after ``prctl`` covers a parent that died before it).
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the thread below still watches
            pass
    if os.getppid() != parent_pid:
        os._exit(1)

    def poll() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=poll, name="interp-init-watch-parent", daemon=True).start()


def _pool_init(threads: int, parent_pid: int | None = None) -> None:
    # Ctrl-C reaches the whole process group: the sweep process handles it and stops the
    # workers, which must not die on their own halfway through a write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent_pid is not None:
        watch_parent(parent_pid)
    torch.set_num_threads(threads)


@contextlib.contextmanager
def _sigterm_raises() -> Any:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (so the
    pool's cleanup runs); the previous handler is restored after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop_pool(pool: ProcessPoolExecutor, timeout_s: float = 10.0) -> None:
    """Cancel what has not started, terminate the running workers and reap them."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + timeout_s
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():  # pragma: no cover - SIGTERM is not ignored by the workers
                process.kill()
                process.join(1.0)


@contextlib.contextmanager
def worker_pool(workers: int, threads: int) -> Any:
    """A ``ProcessPoolExecutor`` (spawn) of ``workers`` processes with ``threads`` torch
    threads each, whose workers never outlive this process.

    The workers watch this process (:func:`watch_parent`: they exit when it is killed, by
    SIGKILL too) and ignore SIGINT; within the block SIGTERM raises :class:`Terminated`;
    on any exception (``KeyboardInterrupt`` from Ctrl-C or SIGINT, :class:`Terminated`,
    an error) the pending work is cancelled and the workers are terminated before the
    exception goes on.  On a normal exit it waits for the work as ``with`` does.
    """
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_pool_init, initargs=(threads, os.getpid()))
    try:
        with _sigterm_raises():
            yield pool
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def _check_existing(points: Sequence[SweepPoint], out: Path) -> None:
    """Refuse, before training, run folders that hold another config than their point's."""
    from training.loop import _config_diff  # the loop's own comparison

    for point in points:
        path = out / point.name / "config.json"
        if not path.exists():
            continue
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON ({err}); remove that run folder") from err
        diffs = _config_diff(saved, point.config.to_dict())
        if diffs:
            raise ValueError(
                f"{out / point.name} holds a run with another config than this sweep's point "
                f"({'; '.join(diffs[:3])}); use another --out, or remove that folder"
            )


def _grid_names(spec: SweepSpec) -> dict[str, list[str]]:
    return {key: [format_value(v) for v in values] for key, values in spec.grid.items()}


def _base_of(spec: SweepSpec) -> dict[str, Any]:
    return {**spec.base, "preset": spec.preset}


def _spec_difference(recorded: SweepSpec, new: SweepSpec) -> str:
    """How ``new`` differs from ``recorded`` in a few words ("" when they are the same sweep)."""
    if set(recorded.grid) != set(new.grid):
        return f"grid keys {sorted(recorded.grid)} there, {sorted(new.grid)} here"
    old_base, new_base = _base_of(recorded), _base_of(new)
    if old_base != new_base:
        keys = sorted(k for k in {*old_base, *new_base} if old_base.get(k, "(unset)") != new_base.get(k, "(unset)"))
        return "base " + "; ".join(f"{k}: {old_base.get(k, '(unset)')!r} there, {new_base.get(k, '(unset)')!r} here" for k in keys[:3])
    old_names, new_names = _grid_names(recorded), _grid_names(new)
    keys = sorted(k for k in old_names if set(old_names[k]) != set(new_names[k]))
    if keys:
        return "grid " + "; ".join(f"{k}: {list(recorded.grid[k])!r} there, {list(new.grid[k])!r} here" for k in keys[:3])
    return ""


def check_sweep_folder(spec: SweepSpec, out: str | Path, extend: bool = False) -> SweepSpec:
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
        recorded = SweepSpec.from_file(path)
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
        grid = {k: [*recorded.grid[k], *(v for v, n in zip(spec.grid[k], new_names[k], strict=True) if n not in old_names[k])] for k in recorded.grid}
        merged = SweepSpec(recorded.base, grid, recorded.description or spec.description)
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


def run_sweep(spec: SweepSpec, out: str | Path, options: SweepOptions | None = None, *, extend: bool = False) -> SweepSummary:
    """Run every point of ``spec`` under ``out`` (skipping finished ones), then rebuild the table.

    Validates the whole spec first (nothing trains if any point is invalid), refuses a
    folder that holds another sweep (:func:`check_sweep_folder`; ``extend``: add ``spec``'s
    grid values to the folder's sweep, same base and grid keys only), writes the spec to
    ``out/sweep.json``, trains the pending points with the chosen backend and returns
    their statuses with the rebuilt results table (also ``out/results.csv``).
    """
    options = options or SweepOptions()
    points = spec.points()
    out = Path(out)
    record_spec = check_sweep_folder(spec, out, extend=extend)
    _check_existing(points, out)
    train_ensemble = _import_ensemble() if options.backend == "ensemble" else None
    ray = _import_ray() if options.backend == "ray" else None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the sweep folder {out}: {err.strerror}") from err
    atomic_write_json(out / SPEC_FILE, record_spec.to_dict())

    statuses: dict[str, str] = {}
    skipped = []
    pending = []
    for point in points:
        status = run_status(out / point.name)
        if status in ("completed", "diverged"):
            statuses[point.name] = status
            skipped.append(point.name)
        else:
            pending.append(point)

    bar = tqdm(total=len(points), initial=len(skipped), desc="sweep", unit="run", disable=not options.progress)

    def record(name: str, status: str, error: str = "") -> None:
        statuses[name] = status
        bar.update(1)
        counts = {s: sum(1 for v in statuses.values() if v == s) for s in ("completed", "diverged", "failed")}
        bar.set_postfix({k: v for k, v in counts.items() if v})
        if error:
            bar.write(f"run {name} failed: {error}")

    try:
        if not pending:
            pass
        elif options.backend == "local":
            _run_local(pending, out, options, record)
        elif options.backend == "ray":
            _run_ray(ray, pending, out, options, record)
        else:
            _run_ensemble(train_ensemble, pending, out, options, record)
    finally:
        bar.close()
    results = collect_results(out)
    return SweepSummary(statuses, tuple(skipped), results)


def _run_local(pending: list[SweepPoint], out: Path, options: SweepOptions, record: Callable) -> None:
    cores = os.cpu_count() or 1
    workers = options.workers if options.workers is not None else cores
    if workers == 1:
        for point in pending:
            record(point.name, *run_point(point.config, out / point.name, options.device, options.threads))
        return
    threads = options.threads or max(1, cores // workers)
    with worker_pool(workers, threads) as pool:
        futures = {pool.submit(run_point, p.config, out / p.name, options.device, threads): p for p in pending}
        for future in as_completed(futures):
            point = futures[future]
            try:
                record(point.name, *future.result())
            except Exception as err:  # noqa: BLE001 - e.g. a worker killed by the OS
                record(point.name, "failed", f"{type(err).__name__}: {err}")
                atomic_write_text(out / point.name / ERROR_FILE, f"{type(err).__name__}: {err}\n")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ValueError(_RAY_MISSING) from err
    return ray


def _run_ray(ray: Any, pending: list[SweepPoint], out: Path, options: SweepOptions, record: Callable) -> None:
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": options.address, "include_dashboard": False, "log_to_driver": False}
        if options.address is None and options.workers is not None:
            kwargs["num_cpus"] = options.workers
        ray.init(**kwargs)
        started = True
    try:
        threads = options.threads or 1
        gpus = 1 if options.device.startswith("cuda") else 0
        task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(run_point)
        out_abs = out.resolve()
        refs = {task.remote(p.config, str(out_abs / p.name), options.device, threads): p for p in pending}
        remaining = list(refs)
        while remaining:
            done, remaining = ray.wait(remaining, num_returns=1)
            point = refs[done[0]]
            try:
                record(point.name, *ray.get(done[0]))
            except Exception as err:  # noqa: BLE001 - the worker itself died (node lost, OOM)
                atomic_write_text(out / point.name / ERROR_FILE, f"{type(err).__name__}: {err}\n")
                record(point.name, "failed", f"{type(err).__name__}: {err}")
    finally:
        if started:
            ray.shutdown()


def _import_ensemble() -> Callable:
    try:
        from training.ensemble import train_ensemble
    except ImportError as err:
        raise ValueError(
            "the ensemble backend needs training.ensemble.train_ensemble, which this install does not have; "
            "use --backend local or ray"
        ) from err
    return train_ensemble


def ensemble_key(cfg: RunConfig, run_dir: str | Path | None = None) -> tuple:
    """Points with equal keys can be trained together by the ensemble backend.

    They must agree on every option outside ``training.ensemble.ENSEMBLE_VARYING`` (the
    init, the learning-rate schedule, weight decay, clipping and the seed may differ) and,
    when ``run_dir`` holds an interrupted run, on the epoch it resumes from.
    """
    from training.ensemble import ENSEMBLE_VARYING

    fixed = tuple(sorted((k, v) for k, v in cfg.flat().items() if k not in ENSEMBLE_VARYING))
    start = 0
    if run_dir is not None and (Path(run_dir) / "checkpoint.pt").exists():
        try:
            history = (read_metrics(run_dir) or {}).get("history") or []
        except ValueError:
            history = []
        start = int(history[-1]["epoch"]) if history else 0
    return (*fixed, ("resume_epoch", start))


def _run_ensemble(train_ensemble: Callable, pending: list[SweepPoint], out: Path, options: SweepOptions, record: Callable) -> None:
    groups: dict[Any, list[SweepPoint]] = {}
    for point in pending:
        groups.setdefault(ensemble_key(point.config, out / point.name), []).append(point)
    size = options.ensemble_size
    chunks = [g[i : i + size] for g in groups.values() for i in range(0, len(g), size)] if size else list(groups.values())
    for group in chunks:
        dirs = [out / p.name for p in group]
        try:
            results = train_ensemble([p.config for p in group], dirs, device=options.device, progress=False)
        except Exception as err:  # noqa: BLE001 - the group fails, the sweep goes on
            text = f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}"
            for point, folder in zip(group, dirs, strict=True):
                folder.mkdir(parents=True, exist_ok=True)
                if not (folder / "config.json").exists():
                    atomic_write_json(folder / "config.json", point.config.to_dict())
                atomic_write_text(folder / ERROR_FILE, text)
                record(point.name, "failed", f"{type(err).__name__}: {err}")
            continue
        for point, folder, result in zip(group, dirs, results, strict=True):
            (folder / ERROR_FILE).unlink(missing_ok=True)
            run_stable_ranks(folder)
            record(point.name, str(result.metrics.get("status")))


# --------------------------------------------------------------------------- results

def run_stable_ranks(run_dir: str | Path) -> dict[str, float]:
    """Stable ranks of the first layer's W_Q (heads merged) and of W_E, cached in ``ranks.json``.

    The cache is keyed by the weights file's size and modification time, so it is
    recomputed only when the weights change.  Empty when the folder has no weights.
    """
    from interp_init import load_model
    from interp_init.model import WEIGHTS_FILE
    from probes import merged_weight, stable_rank

    run_dir = Path(run_dir)
    weights = run_dir / WEIGHTS_FILE
    if not weights.exists():
        return {}
    stat = weights.stat()
    stamp = {"weights_size": stat.st_size, "weights_mtime_ns": stat.st_mtime_ns}
    cache = run_dir / RANKS_FILE
    if cache.exists():
        try:
            data = json.loads(cache.read_text())
        except json.JSONDecodeError:
            data = {}
        if data.get("stamp") == stamp:
            return data["ranks"]
    model = load_model(run_dir, device="cpu")
    ranks = {
        "stable_rank_wq0": stable_rank(merged_weight(model, "W_Q", 0)),
        "stable_rank_we": stable_rank(merged_weight(model, "W_E")),
    }
    atomic_write_json(cache, {"stamp": stamp, "ranks": ranks})
    return ranks


def epochs_to_loss(history: Sequence[Mapping[str, Any]], threshold: float = LOSS_THRESHOLD) -> float:
    """The first epoch whose mean training loss is below ``threshold`` (NaN if none)."""
    for record in history:
        if record.get("loss") is not None and record["loss"] < threshold:
            return float(record["epoch"])
    return math.nan


def epochs_to_pair_accuracy(history: Sequence[Mapping[str, Any]], threshold: float = PAIR_ACC_THRESHOLD) -> dict[str, float]:
    """Per anchor pair (``"a1,a2"``), the first evaluated epoch with accuracy >= ``threshold`` (NaN if none)."""
    out: dict[str, float] = {}
    for record in history:
        for pair, acc in record.get("per_pair", {}).items():
            out.setdefault(pair, math.nan)
            if math.isnan(out[pair]) and acc >= threshold:
                out[pair] = float(record["epoch"])
    return out


def pair_column(pair: str | tuple[int, int]) -> str:
    """The results-table column of a pair's epochs to :data:`PAIR_ACC_THRESHOLD` (``epochs_to_acc_4_3``)."""
    a1, a2 = pair.split(",") if isinstance(pair, str) else pair
    return f"epochs_to_acc_{a1}_{a2}"


PAIR_COLUMNS = tuple(pair_column(p) for p in ALL_PAIRS)
METRIC_COLUMNS = (
    "train_acc", "id_acc", "heldout_inferential", "heldout_symmetric", "ood_acc", "commutativity",
    "final_loss", "epochs_run", "epochs_to_loss", "stable_rank_wq0", "stable_rank_we",
)  # fmt: skip


def _grid_keys(name: str) -> list[str]:
    keys = []
    for part in name.split("__"):
        key, sep, _ = part.partition("=")
        if sep and key in OPTIONS:
            keys.append(key)
    return keys


def run_row(
    run_dir: str | Path, loss_threshold: float = LOSS_THRESHOLD, pair_threshold: float = PAIR_ACC_THRESHOLD
) -> dict[str, Any]:
    """One results-table row of a run folder (config values, status, flattened metrics)."""
    run_dir = Path(run_dir)
    try:
        saved = json.loads((run_dir / "config.json").read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{run_dir / 'config.json'} is not valid JSON ({err})") from err
    cfg = RunConfig.from_dict(saved, where=str(run_dir / "config.json"))
    flat = cfg.flat()
    row: dict[str, Any] = {"run": run_dir.name}
    for key in _grid_keys(run_dir.name):
        row[key] = flat[key]
    for key in CONTEXT_COLUMNS:
        row.setdefault(key, cfg.preset if key == "preset" else flat[key])
    status = run_status(run_dir)
    row["status"] = status
    try:
        metrics = read_metrics(run_dir) or {}
    except ValueError:
        metrics = {}
    final = metrics.get("final") or {}
    history = metrics.get("history") or []
    for col in METRIC_COLUMNS:
        row[col] = math.nan
    for col in ("train_acc", "id_acc", "ood_acc", "commutativity"):
        if final.get(col) is not None:
            row[col] = float(final[col])
    heldout = final.get("heldout") or {}
    for target in ("inferential", "symmetric"):
        values = [accs[target] for accs in heldout.values() if target in accs]
        if values:
            row[f"heldout_{target}"] = sum(values) / len(values)
    if history:
        row["final_loss"] = float(history[-1]["loss"])
        row["epochs_run"] = float(history[-1]["epoch"])
        row["epochs_to_loss"] = epochs_to_loss(history, loss_threshold)
    if status in ("completed", "diverged"):
        row.update(run_stable_ranks(run_dir))
    pair_epochs = epochs_to_pair_accuracy(history, pair_threshold)
    for pair in ALL_PAIRS:
        row[pair_column(pair)] = pair_epochs.get(f"{pair[0]},{pair[1]}", math.nan)
    row["elapsed_s"] = float(metrics["elapsed_s"]) if "elapsed_s" in metrics else math.nan
    error = run_dir / ERROR_FILE
    row["error"] = error.read_text().splitlines()[0] if status == "failed" and error.exists() else ""
    return row


def collect_results(
    out: str | Path, loss_threshold: float = LOSS_THRESHOLD, pair_threshold: float = PAIR_ACC_THRESHOLD, *, write: bool = True
) -> pd.DataFrame:
    """Rebuild ``out/results.csv`` from the run folders under ``out`` and return it
    (``write=False``: return it without writing it; :func:`write_results` writes it later).

    One row per run folder (a sub-folder with a ``config.json``), sorted by the grid
    values: the folder name, its grid parameters and the configs' :data:`CONTEXT_COLUMNS`,
    ``status``, the final metrics (``heldout_*`` averaged over held-out pairs), the first
    epoch with training loss < ``loss_threshold`` (``epochs_to_loss``), per anchor pair the
    first epoch with training accuracy >= ``pair_threshold`` (``epochs_to_acc_A_B``), the
    stable ranks of layer-0 W_Q (heads merged) and W_E, and ``elapsed_s``.
    """
    out = Path(out)
    if isinstance(loss_threshold, bool) or not isinstance(loss_threshold, (int, float)) or not 0 < loss_threshold < math.inf:
        raise ValueError(f"loss_threshold must be a finite number > 0, got {loss_threshold!r}")
    if isinstance(pair_threshold, bool) or not isinstance(pair_threshold, (int, float)) or not 0 < pair_threshold <= 1:
        raise ValueError(f"pair_threshold must be a number in (0, 1], got {pair_threshold!r}")
    if not out.is_dir():
        raise ValueError(f"sweep folder {out} does not exist")
    rows = []
    for folder in sorted(out.iterdir()):
        if not (folder / "config.json").is_file():
            continue
        try:
            rows.append(run_row(folder, loss_threshold, pair_threshold))
        except (ValueError, KeyError, TypeError) as err:  # a damaged folder gets a row that says so
            rows.append({"run": folder.name, "status": "unreadable", "error": f"{type(err).__name__}: {err}"})
    grid_cols: list[str] = sorted({k for d in rows for k in _grid_keys(d["run"])})
    head = ["run", *grid_cols, *(c for c in CONTEXT_COLUMNS if c not in grid_cols), "status"]
    columns = [*head, *METRIC_COLUMNS, *PAIR_COLUMNS, *TIMING_COLUMNS, "error"]
    df = pd.DataFrame(rows, columns=columns)
    sort_cols = [*grid_cols, "run"]
    df = df.sort_values(sort_cols, kind="stable", na_position="last").reset_index(drop=True)
    if write:
        write_results(df, out)
    return _typed(df)


def write_results(df: pd.DataFrame, out: str | Path) -> Path:
    """Write a :func:`collect_results` table to ``out/results.csv`` atomically; return the path."""
    out = Path(out)
    tmp = out / f".{RESULTS_FILE}.tmp{os.getpid()}"
    try:
        df.to_csv(tmp, index=False)
        os.replace(tmp, out / RESULTS_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    return out / RESULTS_FILE


#: The order in which :func:`problem_summary` counts what did not complete.
PROBLEM_STATUSES = ("failed", "diverged", "interrupted", "pending", "absent", "unreadable")


def incomplete_runs(out: str | Path, results: pd.DataFrame | None = None) -> dict[str, str]:
    """Run name -> status of every run of the sweep folder ``out`` that did not complete:
    the rows of ``results`` (default: :func:`collect_results` without writing) whose status
    is not ``completed``, and the points of ``out/sweep.json`` with no run folder
    (``absent``: never started, or removed).  Reads only."""
    out = Path(out)
    if results is None:
        results = collect_results(out, write=False)
    bad = {str(r): str(s) for r, s in zip(results["run"], results["status"], strict=True) if s != "completed"}
    spec_path = out / SPEC_FILE
    if spec_path.is_file():
        try:
            names = [p.name for p in SweepSpec.from_file(spec_path).points()]
        except (ValueError, OSError, UnicodeDecodeError):
            names = []  # a damaged spec names no runs; its run folders still have their rows
        present = set(results["run"])
        bad.update({name: "absent" for name in names if name not in present})
    return bad


def problem_summary(statuses: Mapping[str, str], total: int, where: str | Path) -> str | None:
    """One line saying how many of ``total`` runs did not complete and where to look
    (``None`` when every run completed): ``2 of 6 runs failed: see OUT/results.csv``,
    ``3 of 6 runs did not complete (2 failed, 1 diverged): see ...``."""
    counts = {s: sum(1 for v in statuses.values() if v == s) for s in PROBLEM_STATUSES}
    counts.update({s: sum(1 for v in statuses.values() if v == s) for s in set(statuses.values()) - {"completed", *PROBLEM_STATUSES}})
    counts = {s: n for s, n in counts.items() if n}
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


# ------------------------------------------------------------------------------- CLI

def _parse_workers(value: str) -> int | None:
    if value == "auto":
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {value!r}") from None
    if number < 1:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {value!r}")
    return number


@click.command("sweep")
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), metavar="DIR", help="Sweep folder: one run folder per grid point, sweep.json (the spec), results.csv. One sweep per folder.")
@click.option("--preset-name", metavar="NAME", help="A shipped sweep preset instead of SPEC (names: --list-presets).")
@click.option("--run-preset", metavar="[" + "|".join(sorted(PRESETS)) + "]", help="Replace the spec's base run preset (tiny: a smoke test in seconds).")
@click.option("--extend", is_flag=True, help="Add this spec's grid values to the sweep already in --out (same base and grid keys only); without it a folder holding another sweep is refused.")
@click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True, help="local: this machine (in this process or a process pool); ray: one Ray task per run; ensemble: same-shape runs trained together (for GPUs).")
@click.option("--workers", default=None, metavar="[N|auto]", help="local: 1 = sequential (default), N = process pool, 'auto' = one per core; ray without --address: the local Ray's CPUs (default: all).")
@click.option("--threads", type=int, default=None, metavar="N", help="Torch threads per run (default: cores // workers; 1 per Ray task).")
@click.option("--address", default=None, metavar="ADDRESS", help="Ray cluster address (e.g. 'auto' or 'ray://head:10001'); default: start a local Ray.")
@click.option("--device", default="auto", show_default=True, metavar="[auto|cpu|cuda|cuda:N]", help="Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N.")
@click.option("--ensemble-size", type=int, default=None, metavar="N", help="ensemble backend: at most this many models trained at once (default: all same-shape points).")
@click.option("--dry-run", is_flag=True, help="Validate the spec (and, with --out, that the folder takes it) and list the runs; train nothing, write nothing.")
@click.option("--list-presets", is_flag=True, help="List the shipped sweep presets and exit.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def sweep_command(
    spec: str | None, out: str | None, preset_name: str | None, run_preset: str | None, extend: bool, backend: str,
    workers: str | None, threads: int | None, address: str | None, device: str, ensemble_size: int | None, dry_run: bool,
    list_presets: bool, quiet: bool,
) -> None:  # fmt: skip
    """Train every point of a grid SPEC (JSON or TOML) into --out; resumable; writes results.csv.

    Exits with code 1, after a line saying how many, when any run failed or diverged.
    """
    if list_presets:
        for name in preset_names():
            click.echo(f"{name}: {load_preset(name).description}")
        return
    if (spec is None) == (preset_name is None):
        raise ValueError("give exactly one of SPEC (a .json or .toml file) and --preset-name NAME")
    sweep_spec = SweepSpec.from_file(spec) if spec is not None else load_preset(preset_name)
    if run_preset is not None:
        sweep_spec = sweep_spec.with_overrides(base={"preset": run_preset})
    points = sweep_spec.points()
    if dry_run:
        if out is not None:
            check_sweep_folder(sweep_spec, out, extend=extend)
        for point in points:
            click.echo(point.name)
        click.echo(f"{len(points)} runs; spec valid" + (f"; {out} takes it" if out is not None else ""))
        return
    if out is None:
        raise ValueError("--out DIR is required (the sweep folder)")
    options = SweepOptions(
        backend=backend, address=address, device=device, threads=threads,
        workers=_parse_workers(workers) if workers is not None else (1 if backend == "local" else None),
        progress=not quiet, ensemble_size=ensemble_size,
    )  # fmt: skip
    summary = run_sweep(sweep_spec, out, options, extend=extend)
    counts = ", ".join(f"{summary.count(s)} {s}" for s in ("completed", "diverged", "failed") if summary.count(s))
    click.echo(f"{len(points)} runs ({len(summary.skipped)} already done): {counts}; results: {Path(out) / RESULTS_FILE}")
    problem = problem_summary(summary.statuses, len(summary.statuses), Path(out) / RESULTS_FILE)
    if problem:
        click.echo(f"interp-init: {problem}", err=True)
        raise click.exceptions.Exit(1)
