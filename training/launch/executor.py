"""The one executor: :func:`execute` trains one job, or a same-shape group together, under the
one failure policy; every launcher only decides where and when it runs (as Hydra's
launchers all call one ``run_job``).  The policy:

* a run another process trains (its folder held) is ``running``, never ``failed``, and untouched;
* a run that ended (``completed`` or ``diverged``) is read, never trained again;
* a retry starts clean: opening a run folder to train removes an earlier try's ``error.txt``
  (:func:`training.launch.folders.open_run_folder`), so that a retry stopped at a deadline
  reads ``interrupted`` and is resumed;
* a full disk stops the whole study (every run would fail alike; exit 2, as ``train``);
* a run that raises is ``failed``, its traceback in ``error.txt`` (:func:`record_failure`,
  the file's one writer), and the study goes on; a group that raises fails each of its runs;
* a deadline passed: the run checkpoints and is ``interrupted``; a non-finite loss: ``diverged``;
* signals propagate (locks and temporary files are removed).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from interp_init.fileio import is_disk_full
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunFolderBusy, RunStatus, atomic_write
from training.launch.base import Job, JobReturn, kind_trainer, run_kind

__all__ = [
    "HungUp",
    "Interrupted",
    "STOPPING",
    "Stopped",
    "Terminated",
    "execute",
    "ignore_stopping",
    "record_failure",
    "signals_raise",
]

# ------------------------------------------------------------------ signals
# Signals that end a command, turned into exceptions so that every clean-up runs.
#
# Python's default SIGTERM (and SIGHUP) kills the process at once: ``finally`` blocks do
# not run, so a run folder's ``.lock`` and a half-written temporary file would stay.
# Within :func:`signals_raise` (the command line's whole command) SIGTERM, SIGINT and
# SIGHUP raise a :class:`Stopped` exception instead: the locks are released and removed,
# temporary files unlinked, process pools stopped, and ``interp-init`` then prints one line
# and exits with ``128 + signal``.  :class:`Stopped` is a ``BaseException`` (like
# ``KeyboardInterrupt``), so ``except Exception`` never swallows it.
#
# This module imports neither torch nor click.


class Stopped(BaseException):  # noqa: N818 - a signal, not an error
    """A signal ended the command; :attr:`exit_code` is ``128 + signal``."""

    signum: ClassVar[int] = signal.SIGTERM
    #: The one line ``interp-init`` prints (after ``interp-init: ``).
    message: ClassVar[str] = "terminated (SIGTERM)"

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Terminated(Stopped):
    """SIGTERM (``kill PID``, a job scheduler's stop)."""


class Interrupted(Stopped):
    """SIGINT (Ctrl-C)."""

    signum = signal.SIGINT
    message = "aborted"


class HungUp(Stopped):
    """SIGHUP (the terminal closed)."""

    signum = signal.SIGHUP
    message = "terminated (SIGHUP)"


#: The signals :func:`signals_raise` turns into exceptions.
STOPPING: dict[int, type[Stopped]] = {signal.SIGTERM: Terminated, signal.SIGINT: Interrupted, signal.SIGHUP: HungUp}


@contextlib.contextmanager
def signals_raise(which: tuple[int, ...] = tuple(STOPPING)) -> Iterator[None]:
    """Within the block, the signals ``which`` raise their :class:`Stopped` exception in the
    main thread; the previous handlers are restored after it (elsewhere than the main
    thread the block changes nothing).  A signal whose handler is ``SIG_IGN`` (a process
    started with SIGINT ignored, ``nohup``) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise STOPPING[signum]()

    previous = {}
    for signum in which:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def ignore_stopping() -> None:
    """Ignore the stopping signals from now on (in the main thread): a process whose work
    is done and whose exit code is decided is not turned into a false 130 by a late Ctrl-C."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOPPING:
            signal.signal(signum, signal.SIG_IGN)


#: What a run a deadline stopped says.
STOPPED = "stopped at its deadline, its checkpoint written; a later launch resumes it"


def record_failure(job: Job, err: BaseException | str, tb: str | None = None) -> JobReturn:
    """Record ``err`` (an exception, or one line saying what ended the run) as ``job``'s
    failure: ``error.txt`` with the traceback ``tb``, and ``config.json`` so that the run has
    a row in the tables; return its ``failed`` :class:`~training.launch.base.JobReturn`."""
    line = err if isinstance(err, str) else f"{type(err).__name__}: {err}"
    folder = RunFolder(job.run_dir)
    folder.path.mkdir(parents=True, exist_ok=True)
    if not folder.config_path.exists():
        folder.write_config(job.config.to_dict())
    atomic_write(folder.error_path, f"{line}\n\n{tb}" if tb else f"{line}\n")
    return JobReturn(job.name, RunStatus.FAILED, line)


def execute(
    jobs: Sequence[Job],
    device: str = "auto",
    threads: int | None = None,
    deadline: float | None = None,
    progress: bool = False,
    logits_fn: Any = None,
    step: Any = None,
    data_fn: Any = None,
) -> list[JobReturn]:
    """Train ``jobs`` into their folders under the one failure policy (see the module): one
    job alone (:func:`training.train`), several same-shape jobs as one ensemble
    (:func:`training.train_ensemble`); one :class:`~training.launch.base.JobReturn` per job,
    in order.  Never raises for a run.  ``threads``: torch threads while they train
    (restored after); ``deadline``: a ``time.monotonic()`` value past which the runs
    checkpoint and stop; ``logits_fn``: the trainer's (e.g. a ``torch.compile``'d one);
    ``step`` and ``data_fn``: the ensemble trainer's (:func:`training.train_ensemble`; given
    either, even one job trains as an ensemble of one).  A job of another kind of run
    (:func:`training.launch.base.run_kind`, e.g. ``concept-diffusion``) is trained by its
    kind's registered trainer, one job after another, under the same policy."""
    import torch

    from training.launch.folders import train, train_ensemble

    returns: dict[str, JobReturn] = {}
    todo = []
    for job in jobs:
        folder = RunFolder(job.run_dir)
        if folder.is_busy():
            returns[job.name] = JobReturn(
                job.name, RunStatus.RUNNING, f"{job.run_dir} is being trained by another process"
            )
        elif (status := folder.status()) in FINISHED_STATUSES:
            returns[job.name] = JobReturn(job.name, str(status))
        else:
            todo.append(job)
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        options = {"device": device, "progress": progress, "logits_fn": logits_fn, "deadline": deadline}
        others = [job for job in todo if run_kind(job.config) != "transformer"]
        if others and (step is not None or data_fn is not None or logits_fn is not None):
            raise ValueError(
                f"{others[0].name} is a {run_kind(others[0].config)!r} run: step, data_fn and logits_fn are the transformer trainer's"
            )
        if others:  # another kind of run: its registered trainer, one job after another
            results = [
                (train if run_kind(job.config) == "transformer" else kind_trainer(job.config))(
                    job.config, job.run_dir, device=device, progress=progress, deadline=deadline
                )
                for job in todo
            ]
        elif len(todo) == 1 and step is None and data_fn is None:
            results = [train(todo[0].config, todo[0].run_dir, **options)]
        else:
            ensemble = {"step": step, "data_fn": data_fn}
            results = (
                train_ensemble([j.config for j in todo], [j.run_dir for j in todo], **options, **ensemble)
                if todo
                else []
            )
        for job, result in zip(todo, results, strict=True):
            stopped = not result.finished
            returns[job.name] = (
                JobReturn(job.name, RunStatus.INTERRUPTED, STOPPED)
                if stopped
                else JobReturn(job.name, str(result.metrics["status"]))
            )
    except RunFolderBusy as err:  # another process took a folder meanwhile: not a failure, and not ours to record
        for job in todo:
            busy = RunFolder(job.run_dir).is_busy()
            returns[job.name] = JobReturn(
                job.name, RunStatus.RUNNING if busy else str(RunFolder(job.run_dir).status()), str(err)
            )
    except Exception as err:  # noqa: BLE001 - a failed run is recorded, the study goes on
        if is_disk_full(
            err
        ):  # every run would fail alike: the study stops, as train does (exit 2), and resumes once space is freed
            raise
        tb = traceback.format_exc()
        returns.update((job.name, record_failure(job, err, tb)) for job in todo)
    finally:
        torch.set_num_threads(previous)
    return [returns[job.name] for job in jobs]
