"""Train runs on a Slurm cluster through submitit: one job per run (an array), in chunks that
requeue themselves from their checkpoint until the run is done.

:class:`SlurmLauncher` takes the :class:`~training.launch.base.Job` s of a study (a sweep, a
population, the GPU suite) and:

* **reads the study folder first**, the single source of truth: a finished run
  (``completed``/``diverged``) is not submitted; nor is one a live process trains now (its
  run folder is held) or one whose recorded Slurm job (``STUDY/.slurm/jobs.json``) is still
  queued or running.  So a second launch after a crash, a ``scancel`` or a lost login node
  submits only what is unfinished;
* **submits the rest as one job array** (``--array=0-N%P``, ``P`` =
  :attr:`SlurmOptions.array_parallelism`), one run per array task (or, with
  :attr:`SlurmOptions.ensemble_size`, groups of same-shape runs trained together by
  one ensemble each: the GPU's way);
* **trains in chunks**: each job trains its runs through the one executor
  (:func:`training.launch.executor.execute`) with a deadline twice the signal delay before its time limit
  (the time left read from Slurm), or :attr:`SlurmOptions.chunk_seconds` after it started.  The run checkpoints
  and stops after the epoch that passes it, and the job hands itself to submitit's
  requeue (:class:`RunChunk` is a ``submitit.helpers.Checkpointable``; the job sends
  itself the signal Slurm sends at ``--signal=USR2@S``, submitit calls
  :meth:`RunChunk.checkpoint` and ``scontrol requeue`` s the job).  If an epoch overshoots
  and Slurm's own signal comes first, the same path requeues the job from the last
  checkpoint on disk.  The chunks end with the same weights as one uninterrupted run;
* **waits** (:attr:`SlurmOptions.wait`) until every submitted run is finished or its job
  has ended, and returns each run's status read from its folder: a job that ended with its
  run unfinished (``scancel``, a node lost, out of memory) is ``failed``, its
  ``error.txt`` saying so (:func:`~training.launch.executor.record_failure`); launching
  again resumes it from its checkpoint.

``SlurmOptions(cluster="local")`` runs the same jobs through submitit's local executor
(processes on this machine, the time limit and the requeue simulated): the tests use it
where no Slurm is installed.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus, write_json
from training.launch.base import Job, JobReturn, Launcher, register_launcher
from training.launch.executor import execute, record_failure
from training.launch.slurm_options import SlurmOptions

__all__ = ["JOBS_FILE", "SLURM_FOLDER", "RunChunk", "SlurmLauncher", "SlurmOptions", "live_jobs", "slurm_time_left", "study_folder", "submitted_line"]

#: Where a launch keeps submitit's files and its record of submitted jobs, inside the study folder.
SLURM_FOLDER = ".slurm"
#: The record of which Slurm job trains which run (run name -> job id).
JOBS_FILE = "jobs.json"


def submitted_line(pending: int, total: int, out: str | Path, rerun: str) -> str:
    """What a launch that only submitted (``--slurm-no-wait``) says: how many of its ``total``
    runs wait in Slurm jobs (``pending``), where their logs are, and the command (``rerun``)
    that collects them."""
    return (f"submitted: {pending} of {total} runs are in Slurm jobs, not finished (logs in {Path(out) / SLURM_FOLDER}); "
            f"to collect them (and see where they stand) run again: {rerun}")  # fmt: skip


#: Slurm job states in which a job still holds (or will hold) its run.
LIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT"}
)
_SUBMITIT_MISSING = "the slurm backend needs submitit: pip install 'interp-init[slurm]'"
#: When this module was imported: in a job, as its process unpickles its :class:`RunChunk`,
#: seconds after the job started; a chunk's clock starts here (torch's import counts).
_IMPORTED = time.monotonic()


class RunChunk:
    """One Slurm job's work: train its runs for one chunk, then requeue itself until they are done.

    A ``submitit.helpers.Checkpointable`` (:func:`_checkpointable` makes the class once
    submitit is imported): its ``checkpoint`` resubmits the same call, which resumes every
    run from its folder's checkpoint.  The chunk ends ``margin_s`` before the job's time
    limit (the time left read from Slurm, ``squeue -o %L``; else ``time_s`` from this
    process's start), or ``chunk_s`` after this process started if that is sooner.
    """

    def __init__(self, jobs: tuple[Job, ...], device: str, threads: int, time_s: float, margin_s: float, chunk_s: float | None) -> None:
        self.jobs, self.device, self.threads = jobs, device, threads
        self.time_s, self.margin_s, self.chunk_s = time_s, margin_s, chunk_s

    def deadline(self) -> float:
        """The ``time.monotonic()`` at which this chunk's runs checkpoint and stop."""
        now = time.monotonic()
        left = slurm_time_left()
        end = now + left - self.margin_s if left is not None else _IMPORTED + self.time_s - self.margin_s
        return end if self.chunk_s is None else min(end, _IMPORTED + self.chunk_s)

    def __call__(self) -> list[JobReturn]:
        deadline = self.deadline()
        print(f"interp-init: {len(self.jobs)} run(s), this chunk trains for up to {max(0.0, deadline - time.monotonic()):.0f} s", flush=True)
        returns = execute(self.jobs, self.device, self.threads, deadline)  # one run alone, several as one ensemble
        if any(r.status == RunStatus.INTERRUPTED for r in returns):
            print("interp-init: the chunk's time is up, the runs checkpointed: requeueing", flush=True)
            self.requeue()
        return returns

    def requeue(self) -> None:
        """Hand this job to submitit's requeue: the signal Slurm sends before the time limit
        (submitit calls :meth:`checkpoint`, requeues the job and exits)."""
        import submitit

        os.kill(os.getpid(), submitit.JobEnvironment._usr_sig())
        time.sleep(60)  # the handler runs on the next bytecode; it exits this process
        raise RuntimeError("submitit did not requeue the job after its chunk")


def slurm_time_left() -> float | None:
    """Seconds this Slurm job has left before its time limit (``squeue -o %L``), or None
    outside a Slurm job or when Slurm does not say."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        text = subprocess.run(["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if not parts or not all(p.isdigit() for p in parts) or (days and not days.isdigit()):
        return None  # UNLIMITED, NOT_SET, INVALID
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + 86400 * int(days or 0)


def study_folder(jobs: Sequence[Job]) -> Path:
    """The study folder of ``jobs``: each job's folder less its name (a relative path), else
    the folders' common parent."""
    roots = set()
    for job in jobs:
        parts = Path(job.name).parts
        run_dir = Path(job.run_dir).absolute()
        roots.add(run_dir.parents[len(parts) - 1] if parts and run_dir.parts[-len(parts) :] == parts else run_dir.parent)
    return roots.pop() if len(roots) == 1 else Path(os.path.commonpath([str(r) for r in roots]))


def _checkpointable() -> type:
    """:class:`RunChunk` as a ``submitit.helpers.Checkpointable`` (submitit imported here, not at import time)."""
    try:
        import submitit
    except ImportError as err:
        raise ValueError(_SUBMITIT_MISSING) from err

    class SubmititRunChunk(RunChunk, submitit.helpers.Checkpointable):
        pass

    SubmititRunChunk.__module__, SubmititRunChunk.__qualname__ = __name__, "SubmititRunChunk"
    globals()["SubmititRunChunk"] = SubmititRunChunk
    return SubmititRunChunk


def live_jobs(job_ids: Sequence[str]) -> dict[str, str]:
    """Job id -> state of those of ``job_ids`` Slurm still holds (queued, running, requeued), from ``squeue``."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-u", getpass.getuser()], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(f"cannot read Slurm's queue (squeue): {err}") from err
    wanted = set(job_ids)
    states = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
    return {i: s for i, s in states.items() if i in wanted and s in LIVE_STATES}


@dataclass
class _Submitted:
    jobs: tuple[Job, ...]
    handle: Any  # the submitit Job
    job_id: str
    returns: dict[str, JobReturn] = field(default_factory=dict)


@register_launcher
class SlurmLauncher(Launcher):
    """Trains jobs on Slurm through submitit (see the module docstring): ``slurm``, what the
    jobs ask the cluster for (the command line's ``--slurm-*`` options reach it through
    :func:`training.launch.make_launcher`); ``study``, the folder that holds the runs, where
    ``.slurm/`` keeps submitit's logs and the job record (default: the jobs' study folder,
    each job's folder less its name)."""

    name: ClassVar[str] = "slurm"

    def __init__(self, slurm: SlurmOptions | None = None, study: str | Path | None = None) -> None:
        self.options = SlurmOptions() if slurm is None else slurm
        if not isinstance(self.options, SlurmOptions):
            raise ValueError(f"the slurm launcher takes a SlurmOptions (slurm=...), got {type(self.options).__name__}")
        self.study = None if study is None else Path(study)

    @property
    def waits(self) -> bool:
        """:attr:`SlurmOptions.wait` (``--slurm-no-wait`` submits and returns)."""
        return self.options.wait

    @property
    def folder(self) -> Path:
        """``STUDY/.slurm``: submitit's logs and the record of submitted jobs."""
        if self.study is None:
            raise ValueError("the slurm launcher's study folder is not known before its first launch")
        return self.study / SLURM_FOLDER

    # ------------------------------------------------------------ the record of submitted jobs

    def _record(self) -> dict[str, str]:
        path = self.folder / JOBS_FILE
        try:
            return {str(k): str(v) for k, v in json.loads(path.read_text()).items()}
        except FileNotFoundError:
            return {}
        except (ValueError, AttributeError):  # damaged: every run is then judged by its folder alone
            return {}

    def _live(self, job_ids: Sequence[str], handles: dict[str, Any] | None = None) -> set[str]:
        if self.options.cluster == "local":  # the local executor's jobs are this process's children
            return {i for i in job_ids if handles and i in handles and not handles[i].done()}
        return set(live_jobs(job_ids))

    # ------------------------------------------------------------ launch

    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:
        """Submit every unfinished job not trained elsewhere; wait for them (``wait``); one
        :class:`JobReturn` per job, in order, from its run folder."""
        executor_class = _executor_class(self.options.cluster)
        if self.study is None and jobs:
            self.study = study_folder(jobs)
        returns: dict[str, JobReturn] = {}
        record = self._record()
        live = self._live(list(set(record.values())))
        todo = []
        for job in jobs:
            folder = RunFolder(job.run_dir)
            status = folder.status()
            if status in FINISHED_STATUSES:
                returns[job.name] = JobReturn(job.name, str(status))
            elif folder.is_busy():
                returns[job.name] = JobReturn(job.name, RunStatus.RUNNING, f"{job.run_dir} is being trained by another process")
            elif record.get(job.name) in live:
                returns[job.name] = JobReturn(job.name, RunStatus.RUNNING, f"Slurm job {record[job.name]} already holds it")
            else:
                todo.append(job)
        submitted = self._submit(executor_class, todo)
        record.update({job.name: s.job_id for s in submitted for job in s.jobs})
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(self.folder / JOBS_FILE, record)
        if submitted:
            print(f"slurm: submitted {len(todo)} runs as {len(submitted)} jobs ({', '.join(s.job_id for s in submitted[:4])}"
                  f"{', ...' if len(submitted) > 4 else ''}); logs in {self.folder}", file=sys.stderr, flush=True)  # fmt: skip
        if self.options.wait:
            self._wait(submitted)
        for s in submitted:
            for job in s.jobs:
                returns[job.name] = s.returns.get(job.name) or JobReturn(job.name, RunStatus.RUNNING, f"submitted as Slurm job {s.job_id}")
        return [self.returned(returns[job.name]) for job in jobs]

    def _groups(self, jobs: list[Job]) -> list[tuple[Job, ...]]:
        size = self.options.ensemble_size
        if size is None:
            return [(job,) for job in jobs]
        from training.launch.backends import ensemble_key

        by_key: dict[Any, list[Job]] = {}
        for job in jobs:
            by_key.setdefault(ensemble_key(job.config, job.run_dir), []).append(job)
        return [tuple(g[i : i + size]) for g in by_key.values() for i in range(0, len(g), size)]

    def _submit(self, executor_class: Any, jobs: list[Job]) -> list[_Submitted]:
        if not jobs:
            return []
        executor = executor_class(folder=self.folder / "logs", max_num_timeout=self.options.max_requeues)
        executor.update_parameters(**self.options.executor_parameters())
        chunk_class = _checkpointable()
        groups = self._groups(jobs)
        o = self.options
        calls = [chunk_class(group, o.device, o.cpus, o.time_min * 60, 2 * o.signal_delay_s, o.chunk_seconds) for group in groups]
        with executor.batch():
            handles = [executor.submit(call) for call in calls]
        return [_Submitted(group, handle, str(handle.job_id)) for group, handle in zip(groups, handles, strict=True)]

    def _wait(self, submitted: list[_Submitted]) -> None:
        """Until every submitted run is finished or its job has ended: then its status from its folder."""
        handles = {s.job_id: s.handle for s in submitted}
        pending = list(submitted)
        while pending:
            live = self._live([s.job_id for s in pending], handles)
            still = []
            for s in pending:
                done = all(RunFolder(j.run_dir).status() in FINISHED_STATUSES for j in s.jobs)
                if done or (s.job_id not in live and not any(RunFolder(j.run_dir).is_busy() for j in s.jobs)):
                    s.returns = {j.name: self._ended(j, s.job_id, s.handle) for j in s.jobs}
                else:
                    still.append(s)
            pending = still
            if pending:
                time.sleep(self.options.poll_s)

    def _ended(self, job: Job, job_id: str, handle: Any = None) -> JobReturn:
        """A run whose job has ended: its folder's status; unfinished, it is ``failed`` (``error.txt``)."""
        folder = RunFolder(job.run_dir)
        status = folder.status()
        if status in FINISHED_STATUSES:
            return JobReturn(job.name, str(status))
        if status == RunStatus.FAILED:
            text = folder.error_path.read_text(errors="replace").strip().splitlines()
            return JobReturn(job.name, RunStatus.FAILED, text[0] if text else f"see {folder.error_path}")
        log = self.folder / "logs" / f"{job_id}_0_log.err"
        raised = _job_exception(handle)
        how = f"raised {raised}" if raised else "ended before the run finished (cancelled, timed out, killed or out of memory)"
        return record_failure(job, f"Slurm job {job_id} {how}; its log: {log}; launch again to resume from its checkpoint")


def _job_exception(handle: Any) -> str | None:
    """The exception a finished submitit job raised (from its result file), one line; None if none."""
    try:
        if handle is None or not handle.paths.result_pickle.exists():
            return None
        err = handle.exception()
    except Exception:  # noqa: BLE001 - an unreadable result says nothing more than the job's end
        return None
    return None if err is None else str(err).strip().splitlines()[-1][:300]


def _executor_class(cluster: str) -> Any:
    try:
        import submitit
    except ImportError as err:
        raise ValueError(_SUBMITIT_MISSING) from err
    return submitit.SlurmExecutor if cluster == "slurm" else submitit.LocalExecutor


def __getattr__(name: str) -> Any:
    """``SubmititRunChunk`` on first use (how a job's process unpickles its :class:`RunChunk`)."""
    if name == "SubmititRunChunk":
        return _checkpointable()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
