"""Running a sweep: :func:`run_sweep` trains every pending point of a spec with one of the
backends, resumably, and rebuilds the results table.

Each point is trained by :func:`training.train` into its own run folder.  Because
:func:`training.train` skips a finished run folder and resumes an interrupted one,
running the same sweep again after a kill finishes what was left and never trains a run
twice.

Backends (:class:`~training.sweep.spec.SweepOptions`):

* ``local``: in this process one run after the other (``workers=1``), or a
  ``concurrent.futures.ProcessPoolExecutor`` with ``workers`` processes, each using
  ``cores // workers`` torch threads, that never outlive the sweep process
  (:func:`~training.sweep.pool.worker_pool`: SIGKILL, SIGTERM or SIGINT of the sweep
  leaves no worker).
* ``ray``: one Ray task per run, on a local Ray instance or the cluster at ``address``
  (``pip install 'interp-init[ray]'``).  The run folders must be on storage every node
  sees at the same path (see ``docs/sweeps.md``).
* ``ensemble``: points with the same shape trained together by
  ``training.ensemble.train_ensemble`` (many models at once with ``torch.func``; for GPUs).

A run that raises is recorded as ``failed`` (``error.txt`` in its folder, with the
traceback) and the sweep goes on; the next sweep over the same folder retries it.  A run
whose loss went non-finite is ``diverged`` (``metrics.json`` says so) and is not retried.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from interp_init.outputs import looks_like_run, output_folder, refuse_inside_run, refuse_nested
from interp_init.runfolder import RunFolder, RunFolderBusy, RunStatus, atomic_write, write_json
from training.config import RunConfig
from training.sweep.pool import worker_pool
from training.sweep.results import collect_results, record_stable_ranks, run_status
from training.sweep.spec import SPEC_FILE, SweepOptions, SweepPoint, SweepSpec, check_sweep_folder

_RAY_MISSING = "the ray backend needs Ray: pip install 'interp-init[ray]'"


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: run name -> status, and which runs it skipped as already done."""

    statuses: Mapping[str, str]
    skipped: tuple[str, ...]
    results: pd.DataFrame

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)

    def _repr_html_(self) -> str:
        """In Jupyter: how many runs ended how, then the results table."""
        counts = ", ".join(f"{self.count(s)} {s}" for s in sorted(set(self.statuses.values())))
        head = f"<p><b>SweepSummary</b>: {len(self.statuses)} runs ({counts}); {len(self.skipped)} already done before this call</p>"
        return f"{head}\n{self.results.to_html(index=False)}"


def run_point(cfg: RunConfig, run_dir: str | Path, device: str = "auto", threads: int | None = None) -> tuple[str, str]:
    """Train one grid point into ``run_dir``; never raises for a failed run.

    Returns ``(status, error)``: the ``metrics.json`` status, or ``"failed"`` with the
    exception (also written, with its traceback, to ``run_dir/error.txt``).  Also caches
    the run's stable ranks (:func:`~training.sweep.results.run_stable_ranks`).
    """
    from training.loop import train

    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    folder = RunFolder(run_dir)
    try:
        result = train(cfg, folder.path, device=device, progress=False)
        status = str(result.metrics.get("status"))
        record_stable_ranks(folder.path, result.model)
        del result
    except RunFolderBusy as err:  # another process trains it now: not a failure, and not ours to record
        torch.set_num_threads(previous_threads)
        return RunStatus.RUNNING, str(err)
    except Exception as err:  # noqa: BLE001 - any failure of one run is recorded, the sweep goes on
        torch.set_num_threads(previous_threads)
        _record_failure(folder, cfg, f"{type(err).__name__}: {err}\n\n{traceback.format_exc()}")
        return RunStatus.FAILED, f"{type(err).__name__}: {err}"
    torch.set_num_threads(previous_threads)
    folder.error_path.unlink(missing_ok=True)
    return status, ""


def _record_failure(folder: RunFolder, cfg: RunConfig, text: str) -> None:
    """Write a failed run's ``error.txt`` (and its ``config.json``, so that it has a row in the table)."""
    folder.path.mkdir(parents=True, exist_ok=True)
    if not folder.config_path.exists():
        folder.write_config(cfg.to_dict())
    atomic_write(folder.error_path, text)


def check_sweep_out(out: str | Path) -> None:
    """Refuse a sweep folder inside a run folder, or one that is a run folder, naming it."""
    out = Path(out)
    refuse_inside_run(out, "a sweep")
    if looks_like_run(out):
        raise ValueError(f"{out} is a run folder, not a sweep folder; a run folder holds one run and nothing else: choose another --out")
    refuse_nested(out, "a sweep", "sweep")  # nor a reproduction's folder, nor one holding other sweeps


def _check_existing(points: Sequence[SweepPoint], out: Path) -> None:
    """Refuse, before training, run folders that hold another run than their point's (by
    any of their files: :meth:`RunFolder.check_holds`)."""
    for point in points:
        folder = RunFolder(out / point.name)
        if not folder.config_path.exists():
            if folder.path.is_dir():
                folder.check_holds(point.config.to_dict())  # the finished files of another run, config.json missing
            continue
        diffs = folder.config_differences(point.config.to_dict())
        if diffs:
            raise ValueError(
                f"{out / point.name} holds a run with another config than this sweep's point "
                f"({'; '.join(diffs[:3])}); use another --out, or remove that folder"
            )


def run_sweep(spec: SweepSpec, out: str | Path, options: SweepOptions | None = None, *, extend: bool = False) -> SweepSummary:
    """Run every point of ``spec`` under ``out`` (skipping finished ones), then rebuild the table.

    Validates the whole spec first (nothing trains if any point is invalid), refuses a
    folder that holds another sweep (:func:`~training.sweep.spec.check_sweep_folder`;
    ``extend``: add ``spec``'s grid values to the folder's sweep, same base and grid keys
    only), writes the spec to ``out/sweep.json``, trains the pending points with the
    chosen backend and returns their statuses with the rebuilt results table (also
    ``out/results.csv``).
    """
    options = options or SweepOptions()
    points = spec.points()
    out = Path(out)
    check_sweep_out(out)
    record_spec = check_sweep_folder(spec, out, extend=extend)
    _check_existing(points, out)
    train_ensemble = _import_ensemble() if options.backend == "ensemble" else None
    ray = _import_ray() if options.backend == "ray" else None
    # One sweep process per folder: a second one is refused before it trains anything.
    with output_folder(out, "a sweep", "sweep", "is being swept by another process ({owner}); wait for it to finish, or choose another --out"):
        return _run_held(spec, points, out, options, extend, record_spec, train_ensemble, ray)


def _run_held(
    spec: SweepSpec, points: list[SweepPoint], out: Path, options: SweepOptions, extend: bool, record_spec: SweepSpec,
    train_ensemble: Callable | None, ray: Any,
) -> SweepSummary:  # fmt: skip
    """:func:`run_sweep` once it holds the folder: the spec is checked again (another
    process may have changed the folder before this one took it), then trained."""
    record_spec = check_sweep_folder(spec, out, extend=extend)
    write_json(out / SPEC_FILE, record_spec.to_dict())

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
            bar.write(f"run {name} {'failed' if status == RunStatus.FAILED else 'not trained'}: {error}")

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


# ------------------------------------------------------------------------ backends

def _run_local(pending: list[SweepPoint], out: Path, options: SweepOptions, record: Callable) -> None:
    cores = os.cpu_count() or 1
    workers = min(options.workers if options.workers is not None else cores, len(pending))  # no idle process
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
                record(point.name, RunStatus.FAILED, f"{type(err).__name__}: {err}")
                atomic_write(RunFolder(out / point.name).error_path, f"{type(err).__name__}: {err}\n")


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
                atomic_write(RunFolder(out / point.name).error_path, f"{type(err).__name__}: {err}\n")
                record(point.name, RunStatus.FAILED, f"{type(err).__name__}: {err}")
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
    if run_dir is not None and RunFolder(run_dir).checkpoint_path.exists():
        try:
            history = (RunFolder(run_dir).read_metrics() or {}).get("history") or []
        except ValueError:
            history = []
        start = int(history[-1]["epoch"]) if history else 0
    return (*fixed, ("resume_epoch", start))


def _run_ensemble(train_ensemble: Callable, pending: list[SweepPoint], out: Path, options: SweepOptions, record: Callable) -> None:
    groups: dict[Any, list[SweepPoint]] = {}
    for point in pending:
        if RunFolder(out / point.name).is_busy():  # another process trains it: not this group's
            record(point.name, RunStatus.RUNNING, f"{out / point.name} is being trained by another process")
            continue
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
                _record_failure(RunFolder(folder), point.config, text)
                record(point.name, RunStatus.FAILED, f"{type(err).__name__}: {err}")
            continue
        for point, folder, result in zip(group, dirs, results, strict=True):
            RunFolder(folder).error_path.unlink(missing_ok=True)
            record_stable_ranks(folder, result.model)
            record(point.name, str(result.metrics.get("status")))
