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

import traceback
from collections.abc import Sequence
from typing import Any

from interp_init.fileio import is_disk_full
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunFolderBusy, RunStatus, atomic_write
from training.launch.base import Job, JobReturn

__all__ = ["execute", "record_failure"]

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
    either, even one job trains as an ensemble of one)."""
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
        if len(todo) == 1 and step is None and data_fn is None:
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
