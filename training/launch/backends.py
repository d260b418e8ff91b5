"""The built-in launchers, registered by name: ``serial`` (here, one run after another),
``pool`` (worker processes that never outlive this one), ``ensemble`` (same-shape runs
trained together, for GPUs) and ``ray`` (one Ray task per run, on this machine or a
cluster).  Each only decides where and when a job trains: the one executor,
:func:`training.launch.executor.execute`, trains it under the one failure policy.

This module imports no torch: a launcher imports what it needs when it launches.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from interp_init.fileio import is_disk_full
from interp_init.runfolder import RunFolder
from training.config import RunConfig
from training.launch.base import (
    Job,
    JobReturn,
    Launcher,
    SubmissionError,
    check_count,
    launcher_names,
    make_launcher,
    register_launcher,
)
from training.launch.executor import Terminated, execute, record_failure, signals_raise

_RAY_MISSING = "the ray backend needs Ray: pip install 'interp-init[ray]'"


@register_launcher
@dataclass
class SerialLauncher(Launcher):
    """Every job here, one after another (``threads``: torch threads; None leaves torch's)."""

    name: ClassVar[str] = "serial"
    device: str = "auto"
    threads: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        check_count("threads", self.threads)

    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:
        return [self.returned(execute([job], self.device, self.threads, progress=self.progress)[0]) for job in jobs]


def gathered(launcher: Launcher, futures: Mapping[Future, Sequence[Job]], jobs: Sequence[Job]) -> list[JobReturn]:
    """The returns of ``jobs`` from their ``futures`` (each :func:`execute` on some of them),
    each handed to ``launcher``'s :meth:`~training.launch.base.Launcher.returned` as it
    completes; a future that raises (its worker died: killed by the OS, a node lost) fails
    its jobs."""
    returns: dict[str, JobReturn] = {}
    for future in as_completed(futures):
        try:
            rets = future.result()
        except Exception as err:  # noqa: BLE001 - the worker itself died
            if is_disk_full(err):  # a worker's full disk stops the study, as train does (exit 2)
                raise
            rets = [record_failure(job, err) for job in futures[future]]
        returns.update((ret.name, launcher.returned(ret)) for ret in rets)
    return [returns[job.name] for job in jobs]


@register_launcher
@dataclass
class PoolLauncher(Launcher):
    """``workers`` processes (None: one per CPU core, at most one per job) of ``threads``
    torch threads each (None: cores // workers); a worker the OS kills fails its run."""

    name: ClassVar[str] = "pool"
    device: str = "auto"
    workers: int | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        check_count("workers", self.workers)
        check_count("threads", self.threads)

    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:

        cores = os.cpu_count() or 1
        workers = min(self.workers or cores, len(jobs))  # no idle process
        threads = self.threads or max(1, cores // workers)
        with worker_pool(workers, threads) as pool:
            return gathered(self, {pool.submit(execute, [job], self.device, threads): [job] for job in jobs}, jobs)


def ensemble_key(cfg: RunConfig, run_dir: str | Path | None = None) -> tuple:
    """Jobs with equal keys can be trained together by the ensemble launcher: they agree on
    every option outside ``training.trainer.ensemble.ENSEMBLE_VARYING`` (the init, the lr schedule,
    weight decay, clipping and the seeds may differ) and, when ``run_dir`` holds an
    interrupted run, on the epoch it resumes from."""
    from training.trainer.ensemble import ENSEMBLE_VARYING

    fixed = tuple(sorted((k, v) for k, v in cfg.flat().items() if k not in ENSEMBLE_VARYING))
    return (*fixed, ("resume_epoch", 0 if run_dir is None else resume_epoch(run_dir)))


def resume_epoch(run_dir: str | Path) -> int:
    """The epoch an interrupted run resumes from (0 without a checkpoint or a readable history)."""
    folder = RunFolder(run_dir)
    if not folder.checkpoint_path.exists():
        return 0
    try:
        history = (folder.read_metrics() or {}).get("history") or []
    except ValueError:
        return 0
    return int(history[-1]["epoch"]) if history else 0


@register_launcher
@dataclass
class EnsembleLauncher(Launcher):
    """Same-shape jobs (:func:`ensemble_key`) trained together, one ensemble per call of
    :func:`execute`, at most ``ensemble_size`` at once (None: all; 1: one by one); a group that
    raises fails each of its runs.

    Under a ``deadline`` (a ``time.monotonic()`` value: a time budget's end) no group is
    started that cannot train one epoch before it (``epoch_seconds``: the predicted seconds of
    one epoch of a group; None: any time left will do): such a group is left as it is,
    resumable, and named in :attr:`refused`; the runs that start stop before an epoch that,
    as long as their last, would pass ``deadline`` less ``margin_epochs`` predicted epochs,
    checkpointed (``interrupted``), so that the same study resumes them.  ``step``,
    ``logits_fn`` and ``data_fn`` are the ensemble trainer's (:func:`training.train_ensemble`:
    a step by name or factory, e.g. ``"batched"``; a compiled logits function; shared data).
    It trains ``transformer`` runs only (:attr:`kinds`): a job of another kind of run (a
    ``concept-diffusion`` run) is refused in one line before anything is written."""

    name: ClassVar[str] = "ensemble"
    kinds: ClassVar[tuple[str, ...] | None] = ("transformer",)
    device: str = "auto"
    ensemble_size: int | None = None
    progress: bool = False
    deadline: float | None = None
    epoch_seconds: Callable[[Sequence[Job]], float] | None = None
    margin_epochs: float = 0.0
    step: Any = None
    logits_fn: Any = None
    data_fn: Any = None
    refused: list[tuple[list[str], float]] = field(
        default_factory=list
    )  #: (the group's job names, its predicted epoch seconds)

    def __post_init__(self) -> None:
        check_count("ensemble_size", self.ensemble_size)
        if not self.margin_epochs >= 0:
            raise ValueError(f"margin_epochs must be a number >= 0, got {self.margin_epochs!r}")
        try:  # refused before anything is written when the ensemble trainer is missing
            from training.trainer.ensemble import fit_ensemble  # noqa: F401
        except ImportError as err:
            raise ValueError(
                "the ensemble backend needs training.trainer.ensemble.fit_ensemble, which this install does not have; use another --backend"
            ) from err

    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:
        self.refuse_kinds(jobs)
        groups: dict[Any, list[Job]] = {}
        for job in jobs:
            groups.setdefault(ensemble_key(job.config, job.run_dir), []).append(job)
        size = self.ensemble_size
        chunks = (
            [g[i : i + size] for g in groups.values() for i in range(0, len(g), size)]
            if size
            else list(groups.values())
        )
        options = {"progress": self.progress, "step": self.step, "logits_fn": self.logits_fn, "data_fn": self.data_fn}
        returns = {}
        for group in chunks:
            deadline = self.deadline
            if deadline is not None:
                epoch_s = self.epoch_seconds(group) if self.epoch_seconds is not None else 0.0
                if deadline - time.monotonic() <= epoch_s:  # not started: left resumable
                    self.refused.append(([j.name for j in group], epoch_s))
                    returns.update((j.name, JobReturn(j.name, str(RunFolder(j.run_dir).status()))) for j in group)
                    continue
                deadline -= self.margin_epochs * epoch_s
            returns.update(
                (r.name, self.returned(r)) for r in execute(group, self.device, deadline=deadline, **options)
            )
        return [returns[job.name] for job in jobs]


def import_ray() -> Any:
    """Ray, or a one-line ``ValueError`` saying how to install it."""
    try:
        import ray
    except ImportError as err:
        raise ValueError(_RAY_MISSING) from err
    return ray


@register_launcher
@dataclass
class RayLauncher(Launcher):
    """One Ray task per job on the cluster at ``address`` (None: a local Ray instance with
    ``workers`` CPUs, Ray's default when None), ``threads`` torch threads each (None: 1).
    The run folders must be on storage every node sees at the same path (docs/sweeps.md)."""

    name: ClassVar[str] = "ray"
    device: str = "auto"
    address: str | None = None
    workers: int | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        check_count("workers", self.workers)
        check_count("threads", self.threads)
        import_ray()  # refused before anything is written when Ray is missing

    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:
        ray = import_ray()
        started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": self.address, "include_dashboard": False, "log_to_driver": False}
            if self.address is None and self.workers is not None:
                kwargs["num_cpus"] = self.workers
            if self.address is not None:
                check_ray_answers(self.address)
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, TimeoutError) as err:
                words = " ".join(str(err).split())[:400]
                raise SubmissionError(
                    f'Ray did not take the jobs: "{words}"; nothing was started; {_RAY_CHECK}'
                ) from None
            started = True
        try:
            threads = self.threads or 1
            task = ray.remote(num_cpus=threads, num_gpus=1 if self.device.startswith("cuda") else 0, max_retries=0)(
                execute
            )
            return gathered(
                self,
                {
                    task.remote([Job(j.name, j.config, j.run_dir.absolute())], self.device, threads).future(): [j]
                    for j in jobs
                },
                jobs,
            )
        finally:
            if started:
                ray.shutdown()


#: What a user checks when Ray does not answer.
_RAY_CHECK = (
    "start the cluster (ray start --head on its head node) or give the address it prints; a cluster with token "
    "authentication also needs RAY_AUTH_MODE=token and its token here (docs/clusters.md); then run the command again"
)


def check_ray_answers(address: str, timeout_s: float = 10.0) -> None:
    """Refuse (:class:`~training.launch.base.SubmissionError`) a Ray address ``HOST:PORT``
    (or ``ray://HOST:PORT``) where nothing answers within ``timeout_s``: ``ray.init``
    itself retries such an address for minutes, printing only warnings.  Other forms
    (``auto``) are left to ``ray.init``, which says what it makes of them."""
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        raise SubmissionError(
            f'Ray at {address} does not answer (connecting to it: "{err.strerror or err}"); nothing was started; {_RAY_CHECK}'
        ) from None


def on_gpu(device: str) -> bool:
    """Whether ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``) trains on a CUDA GPU
    (torch is imported only for ``auto``)."""
    if device == "cpu":
        return False
    if device.startswith("cuda"):
        return True
    import torch

    return device == "auto" and torch.cuda.is_available()


def backend_names() -> tuple[str, ...]:
    """What ``--backend`` takes, read from the registry when asked (a launcher registered
    since import is one): ``local`` (``serial`` with one worker, else a process ``pool``) and
    every registered launcher."""
    return ("local", *launcher_names())


def build_launcher(backend: str, **options: Any) -> Launcher:
    """The launcher ``--backend`` names, from its options: ``local`` is ``serial`` with one
    worker and a process ``pool`` otherwise; any other name is a registered launcher."""
    if backend == "local":
        backend = "serial" if options.get("workers") == 1 else "pool"
    return make_launcher(backend, **options)


def local_launcher(device: str, workers: int | None, progress: bool) -> Launcher:
    """What a reproduction or population trains with unless told: on a CUDA GPU same-shape
    runs as ensembles; else ``workers`` processes of one torch thread (default: one per CPU
    core, at most 4: the fastest use of the cores for models this small), or with one
    worker, here one after another."""
    if on_gpu(device) and workers in (None, 1):
        return EnsembleLauncher(device=device, progress=progress)
    workers = max(1, min(4, os.cpu_count() or 1)) if workers is None else workers
    check_count("workers", workers)
    if workers == 1:
        return SerialLauncher(device=device, progress=progress)
    return PoolLauncher(device=device, workers=workers, threads=1)


# ------------------------------------------------------------------ pool
# Worker processes that never outlive the study: a process pool that SIGKILL, SIGTERM or
# SIGINT of the sweep process leaves no worker behind.
#
# :func:`worker_pool` is the pool (spawned processes, ``threads`` torch threads each); its
# workers watch the process that started them (:func:`watch_parent`) and ignore SIGINT,
# and within the pool's block SIGTERM raises :class:`Terminated`, so that the pool's
# cleanup stops the workers before the process exits.  A worker stopped by SIGTERM (the
# pool's clean-up, or its parent's death) first lets the run it trains remove its lock
# and temporary files.  The ``pool`` launcher (:mod:`training.launch.backends`) uses it.

#: How often a pool worker checks that the sweep process that started it is still alive.
PARENT_POLL_S = 0.5


def watch_parent(parent_pid: int, poll_s: float = PARENT_POLL_S, grace_s: float = 30.0) -> None:
    """Make this (worker) process stop as soon as ``parent_pid`` is no longer its parent.

    A parent killed by SIGKILL cannot stop its workers; they would be re-parented and
    finish the queue.  On Linux ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` has the kernel send
    this process SIGTERM when its parent dies (a pool worker then removes its run's lock
    and temporary files and exits: :func:`_worker_sigterm`); everywhere a daemon thread
    also polls ``os.getppid()`` every ``poll_s`` seconds and sends the same SIGTERM when
    it changes, then calls ``os._exit`` if the process still lives ``grace_s`` later (the
    check right after ``prctl`` covers a parent that died before it).
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the thread below still watches
            pass
    if os.getppid() != parent_pid:
        os._exit(1)

    def poll() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os._exit(1)

    threading.Thread(target=poll, name="interp-init-watch-parent", daemon=True).start()


#: In a pool worker: whether it is running a submitted call now (see :func:`_worker_sigterm`).
_IN_CALL = [False]


def _worker_sigterm(signum: int, frame: Any) -> None:
    """A worker's SIGTERM (from the pool's clean-up, or from the kernel when the sweep
    process died): an idle worker exits at once; a busy one raises :class:`Terminated` in
    its call, so that the run's ``finally`` blocks release and remove its lock and
    temporary files, and :func:`_call` then exits."""
    if not _IN_CALL[0]:
        os._exit(128 + signal.SIGTERM)
    raise Terminated()


def _call(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run a submitted call in a worker; a SIGTERM during it ends the worker after clean-up."""
    _IN_CALL[0] = True
    try:
        return fn(*args, **kwargs)
    except Terminated:
        os._exit(128 + signal.SIGTERM)
    finally:
        _IN_CALL[0] = False


def _pool_init(threads: int, parent_pid: int | None = None) -> None:
    # Ctrl-C reaches the whole process group: the sweep process handles it and stops the
    # workers (SIGTERM), which then clean up what they hold and exit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_sigterm)
    # tqdm's default lock is a multiprocessing semaphore, registered with the parent's
    # resource tracker: a worker stopped mid-run would leave it "leaked" (a warning at
    # the sweep's exit).  The workers print no progress bar, so a thread lock does.
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    if parent_pid is not None:
        watch_parent(parent_pid)
    import torch

    torch.set_num_threads(threads)


class _WorkerPool(ProcessPoolExecutor):
    """A ``ProcessPoolExecutor`` whose workers run each call through :func:`_call`."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return super().submit(_call, fn, *args, **kwargs)


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
    pool = _WorkerPool(max_workers=workers, mp_context=context, initializer=_pool_init, initargs=(threads, os.getpid()))
    try:
        with signals_raise((signal.SIGTERM,)):
            yield pool
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
