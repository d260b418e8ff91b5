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
* **trains in chunks** (:class:`~training.launch.slurm_chunk.RunChunk`, a
  ``submitit.helpers.Checkpointable``): each job trains its runs through the one executor
  (:func:`training.launch.executor.execute`) until twice the signal delay before its time
  limit (the time left read from Slurm), or :attr:`SlurmOptions.chunk_seconds` after it
  started; the runs checkpoint and the job requeues itself (submitit calls
  :meth:`RunChunk.checkpoint` and ``scontrol requeue`` s the job).  Its log says where each
  run resumes, how long the chunk trains and how it ended; Slurm's early warning, ``scancel``
  and a warning after the runs ended are answered there (:mod:`training.launch.slurm_chunk`).
  The chunks end with the same weights as one uninterrupted run;
* **waits** (:attr:`SlurmOptions.wait`) until every submitted run is finished or its job
  has ended, and returns each run's status read from its folder; ``SlurmLauncher._ended``
  judges a job that ended with its run unfinished: cancelled, preempted, timed out or its
  node lost, the run is ``interrupted`` (launching again resumes it); the job raised, or
  ended ``FAILED`` or ``OUT_OF_MEMORY``, it is ``failed``
  (:func:`~training.launch.executor.record_failure`);
* **refuses in one line** a submission Slurm does not take (``sbatch``'s or ``squeue``'s
  words quoted, a :class:`~training.launch.base.SubmissionError`), the files it made for it
  removed.

``SlurmOptions(cluster="local")`` runs the same jobs through submitit's local executor
(processes on this machine, the time limit and the requeue simulated): the tests use it
where no Slurm is installed.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus, write_json
from training.launch.base import Job, JobReturn, Launcher, SubmissionError, register_launcher
from training.launch.executor import record_failure
from training.launch.slurm_chunk import SUBMITIT_MISSING, RunChunk, slurm_time_left
from training.launch.slurm_options import SlurmOptions

__all__ = [
    "JOBS_FILE",
    "SLURM_FOLDER",
    "RunChunk",
    "SlurmLauncher",
    "SlurmOptions",
    "live_jobs",
    "slurm_time_left",
    "study_folder",
    "submitted_line",
]

#: Where a launch keeps submitit's files and its record of submitted jobs, inside the study folder.
SLURM_FOLDER = ".slurm"
#: The record of which Slurm job trains which run (run name -> job id).
JOBS_FILE = "jobs.json"


def submitted_line(pending: int, total: int, out: str | Path, rerun: str) -> str:
    """What a launch that only submitted (``--slurm-no-wait``) says: how many of its ``total``
    runs wait in Slurm jobs (``pending``), where their logs are, and the command (``rerun``)
    that collects them."""
    return (
        f"submitted: {pending} of {total} runs are in Slurm jobs, not finished (logs in {Path(out) / SLURM_FOLDER}); "
        f"to collect them (and see where they stand) run again: {rerun}"
    )


#: Slurm job states in which a job still holds (or will hold) its run.
LIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "CONFIGURING",
        "COMPLETING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESIZING",
        "SUSPENDED",
        "SIGNALING",
        "STAGE_OUT",
    }
)


def study_folder(jobs: Sequence[Job]) -> Path:
    """The study folder of ``jobs``: each job's folder less its name (a relative path), else
    the folders' common parent."""
    roots = set()
    for job in jobs:
        parts = Path(job.name).parts
        run_dir = Path(job.run_dir).absolute()
        roots.add(
            run_dir.parents[len(parts) - 1] if parts and run_dir.parts[-len(parts) :] == parts else run_dir.parent
        )
    return roots.pop() if len(roots) == 1 else Path(os.path.commonpath([str(r) for r in roots]))


def _checkpointable() -> type:
    """:class:`RunChunk` as a ``submitit.helpers.Checkpointable`` (submitit imported here, not at import time)."""
    try:
        import submitit
    except ImportError as err:
        raise ValueError(SUBMITIT_MISSING) from err

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
        out = subprocess.run(
            ["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-u", getpass.getuser()],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as err:
        raise RuntimeError(
            f"cannot read Slurm's queue: {scheduler_words(err.stderr or err.stdout or str(err))}"
        ) from err
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
        _executor_class(self.options.cluster)  # submitit, and Slurm's commands: refused before anything is written
        missing = [
            c for c in ("sbatch", "srun", "squeue") if self.options.cluster == "slurm" and shutil.which(c) is None
        ]
        if missing:
            raise ValueError(
                f"the slurm backend needs Slurm's commands ({', '.join(missing)} not found on PATH): launch from a login node "
                "of your Slurm cluster, or try the same path on this machine with --slurm-cluster local"
            )

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
        try:
            live = self._live(list(set(record.values())))
        except RuntimeError as err:  # Slurm does not answer: nothing is submitted
            raise SubmissionError(f"{err}; nothing was submitted; {_CHECK}") from None
        todo = []
        for job in jobs:
            folder = RunFolder(job.run_dir)
            status = folder.status()
            if status in FINISHED_STATUSES:
                returns[job.name] = JobReturn(job.name, str(status))
            elif folder.is_busy():
                returns[job.name] = JobReturn(
                    job.name, RunStatus.RUNNING, f"{job.run_dir} is being trained by another process"
                )
            elif record.get(job.name) in live:
                returns[job.name] = JobReturn(
                    job.name, RunStatus.RUNNING, f"Slurm job {record[job.name]} already holds it"
                )
            else:
                todo.append(job)
        submitted = self._submit(executor_class, todo)
        record.update({job.name: s.job_id for s in submitted for job in s.jobs})
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(self.folder / JOBS_FILE, record)
        if submitted:
            print(
                f"slurm: submitted {len(todo)} runs as {len(submitted)} jobs ({', '.join(s.job_id for s in submitted[:4])}"
                f"{', ...' if len(submitted) > 4 else ''}); logs in {self.folder}",
                file=sys.stderr,
                flush=True,
            )
        if self.options.wait:
            self._wait(submitted)
        for s in submitted:
            for job in s.jobs:
                returns[job.name] = s.returns.get(job.name) or JobReturn(
                    job.name, RunStatus.RUNNING, f"submitted as Slurm job {s.job_id}"
                )
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
        """Submit ``jobs`` as one array; if the scheduler refuses them or does not answer, the
        files this submission made are removed and a :class:`SubmissionError` quotes its words."""
        if not jobs:
            return []
        logs = self.folder / "logs"
        made = [p for p in (logs, self.folder) if not p.exists()]
        before = set(os.listdir(logs)) if logs.is_dir() else set()
        groups = self._groups(jobs)
        o = self.options
        try:
            executor = executor_class(folder=logs, max_num_timeout=o.max_requeues)
            executor.update_parameters(**o.executor_parameters())
            chunk_class = _checkpointable()
            calls = [
                chunk_class(group, o.device, o.cpus, o.time_min * 60, o.signal_delay_s, o.chunk_seconds)
                for group in groups
            ]
            with (
                contextlib.redirect_stderr(io.StringIO()),
                executor.batch(),
            ):  # submitit prints sbatch's error too: it is quoted once, below
                handles = [executor.submit(call) for call in calls]
        except (
            RuntimeError,
            OSError,
            subprocess.SubprocessError,
        ) as err:  # submitit's FailedJobError is a RuntimeError
            _remove_submission(logs, before, made)
            raise SubmissionError(
                f"Slurm did not take the jobs: {scheduler_words(str(err))}; nothing was submitted; {_CHECK}"
            ) from None
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
        """The one judge of a run whose Slurm job has ended.  Its folder says it ended
        (``completed``, ``diverged``) or ``failed`` (the run raised: ``error.txt``); else the
        job raised outside the run, or Slurm says it ended ``FAILED`` or ``OUT_OF_MEMORY``:
        ``failed`` (:func:`~training.launch.executor.record_failure`), since launching again
        would meet the same end; else (cancelled, preempted, timed out, its node lost) the
        run is ``interrupted``, its ``metrics.json`` saying so and its checkpoint kept:
        launching again resumes it."""
        folder = RunFolder(job.run_dir)
        status = folder.status()
        if status in FINISHED_STATUSES:
            return JobReturn(job.name, str(status))
        if status == RunStatus.FAILED:
            text = folder.error_path.read_text(errors="replace").strip().splitlines()
            return JobReturn(job.name, RunStatus.FAILED, text[0] if text else f"see {folder.error_path}")
        log = self.folder / "logs" / f"{job_id}_0_log.err"
        raised = _job_exception(handle)
        if raised:
            return record_failure(
                job, f"Slurm job {job_id} raised {raised}; its log: {log}; launch again to retry (from its checkpoint)"
            )
        state, code = (None, None) if self.options.cluster == "local" else job_end_state(job_id) or (None, None)
        if state in FAILING_STATES:
            return record_failure(
                job,
                f"Slurm job {job_id} ended {state} (exit code {code}) before the run finished: {FAILING_STATES[state]}; its log: {log}",
            )
        folder.mark_interrupted()
        from training.launch.backends import resume_epoch

        where = (
            f"at epoch {resume_epoch(job.run_dir)} of {job.config.train.epochs}, its checkpoint kept"
            if folder.checkpoint_path.exists()
            else "before its first checkpoint"
        )
        ended = f"ended {state}" if state else "ended"
        return JobReturn(
            job.name,
            str(folder.status()),
            f"Slurm job {job_id} {ended} before the run finished: interrupted {where}; its log: {log}; launch again to resume it",
        )


#: Slurm's end states of a job that make its unfinished run ``failed`` (launching again would meet the same end), with what to do.
FAILING_STATES = {
    "OUT_OF_MEMORY": "it ran out of memory; ask for more with --slurm-mem",
    "FAILED": "the job's script or process failed (a --slurm-setup line, the environment, a signal)",
}


def job_end_state(job_id: str) -> tuple[str, str] | None:
    """Slurm's record of how the job ``job_id`` ended: its state (``COMPLETED``,
    ``CANCELLED``, ``TIMEOUT``, ``FAILED``, ``OUT_OF_MEMORY``, ...) and exit code, from
    ``sacct`` (the accounting database), else ``scontrol show job`` (the controller keeps
    an ended job ``MinJobAge`` seconds); None when neither says."""
    for command in (
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"],
        ["scontrol", "-o", "show", "job", job_id],
    ):
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if command[0] == "sacct" and "|" in out:
            state, _, code = out.strip().splitlines()[-1].partition("|")
            return state.split()[0], code
        found = dict(re.findall(r"\b(JobState|ExitCode)=(\S+)", out))
        if "JobState" in found:
            return found["JobState"], found.get("ExitCode", "?")
    return None


#: What a user checks when Slurm does not take the jobs.
_CHECK = (
    "check that Slurm answers (sinfo) and that this cluster accepts the --slurm-* options, then run the command again"
)
#: The files submitit writes for a submission before sbatch answers: the jobs' pickles and the script.
_SUBMISSION_FILE = re.compile(r"^(?:[0-9a-f]{32}\.pkl|\.submission_file_[0-9a-f]{32}\.sh)$")


def scheduler_words(text: str) -> str:
    """The scheduler's own words in ``text`` (``sbatch``'s or ``squeue``'s stderr, an exception's
    text): its error lines, else its last line, on one line, quoted."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines[-1:] or ["(it said nothing)"]
    words = " / ".join(dict.fromkeys(errors))
    return f'"{words[:400]}"'


def _remove_submission(logs: Path, before: set[str], made: list[Path]) -> None:
    """Remove the files a failed submission made in ``logs`` (those not in ``before``; another
    job's files are named by its id, not these), then the folders ``made`` if empty."""
    if logs.is_dir():
        for name in set(os.listdir(logs)) - before:
            if _SUBMISSION_FILE.match(name):
                (logs / name).unlink(missing_ok=True)
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return


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
        raise ValueError(SUBMITIT_MISSING) from err
    return submitit.SlurmExecutor if cluster == "slurm" else submitit.LocalExecutor


def __getattr__(name: str) -> Any:
    """``SubmititRunChunk`` on first use (how a job's process unpickles its :class:`RunChunk`)."""
    if name == "SubmititRunChunk":
        return _checkpointable()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
