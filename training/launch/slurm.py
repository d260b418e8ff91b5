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
* **trains in chunks** (:class:`~training.launch.slurm.RunChunk`, a
  ``submitit.helpers.Checkpointable``): each job trains its runs through the one executor
  (:func:`training.launch.executor.execute`) until twice the signal delay before its time
  limit (the time left read from Slurm), or :attr:`SlurmOptions.chunk_seconds` after it
  started; the runs checkpoint and the job requeues itself (submitit calls
  :meth:`RunChunk.checkpoint` and ``scontrol requeue`` s the job).  Its log says where each
  run resumes, how long the chunk trains and how it ended; Slurm's early warning, ``scancel``
  and a warning after the runs ended are answered there (:mod:`training.launch.slurm`).
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
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from interp_init.config import check_int
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus, write_json
from training.launch.base import Job, JobReturn, Launcher, SubmissionError, register_launcher
from training.launch.executor import Stopped, execute, record_failure, signals_raise

__all__ = [
    "CLUSTERS",
    "JOBS_FILE",
    "RunChunk",
    "SBATCH_LAUNCHER",
    "SBATCH_OWNED",
    "SLURM_FLAGS",
    "SLURM_FOLDER",
    "SlurmLauncher",
    "SlurmOptions",
    "check_sbatch_option",
    "live_jobs",
    "slurm_options_from",
    "slurm_time_left",
    "study_folder",
    "submitted_line",
]

# ------------------------------------------------------------------ slurm_options
# What a Slurm launch asks the cluster for: :class:`SlurmOptions` (each field names the
# ``sbatch`` option it sets) and the command line's ``--slurm-*`` options
# (:data:`SLURM_FLAGS`, read by :func:`slurm_options_from`).  Imports neither torch nor submitit.

CLUSTERS = ("slurm", "local")
#: The command line's --slurm-* options: name -> (kind, default, help naming the sbatch option it sets).
SLURM_FLAGS: dict[str, tuple[str, Any, str]] = {
    "partition": ("str", None, "Slurm partition (sbatch --partition) [default: the cluster's default]."),
    "time": (
        "int1",
        60,
        "Minutes one job may run (sbatch --time): a chunk's limit, not the run's; a longer run checkpoints and is requeued.",
    ),
    "gpus": ("int0", 0, "GPUs per job (sbatch --gpus-per-node)."),
    "cpus": ("int1", 1, "CPUs per job (sbatch --cpus-per-task), also each run's torch threads."),
    "mem": ("float", None, "Memory per job in GB (sbatch --mem) [default: the partition's]."),
    "array_parallelism": ("int1", 256, "At most this many jobs of the array at once (the %N of sbatch --array)."),
    "account": ("str", None, "Account to charge (sbatch --account)."),
    "qos": ("str", None, "Quality of service (sbatch --qos)."),
    "constraint": ("str", None, "Node features, e.g. a GPU type (sbatch --constraint)."),
    "signal_delay": (
        "int1",
        90,
        "Seconds before the time limit Slurm warns a job (sbatch --signal=USR2@S); a chunk ends twice this before the limit.",
    ),
    "chunk_seconds": (
        "float",
        None,
        "Seconds a job trains before it checkpoints and requeues itself [default: until twice --slurm-signal-delay before --slurm-time].",
    ),
    "ensemble_size": (
        "int1",
        None,
        "Train up to this many same-shape runs together in one job (GPUs) [default: one run per job].",
    ),
}

#: The sbatch options (long and short names) a --slurm-* option sets: --slurm-sbatch may not set them again.
SBATCH_OWNED = {
    "partition": "--slurm-partition",
    "p": "--slurm-partition",
    "time": "--slurm-time",
    "t": "--slurm-time",
    "gpus-per-node": "--slurm-gpus",
    "cpus-per-task": "--slurm-cpus",
    "c": "--slurm-cpus",
    "mem": "--slurm-mem",
    "account": "--slurm-account",
    "A": "--slurm-account",
    "qos": "--slurm-qos",
    "q": "--slurm-qos",
    "constraint": "--slurm-constraint",
    "C": "--slurm-constraint",
    "signal": "--slurm-signal-delay",
    "array": "--slurm-array-parallelism",
    "a": "--slurm-array-parallelism",
}
#: The sbatch options the launcher sets itself (where the jobs' logs go, the job's name).
SBATCH_LAUNCHER = {"output", "o", "error", "e", "open-mode", "job-name", "J"}


def check_sbatch_option(key: str, value: str) -> None:
    """Refuse an extra sbatch option (``--slurm-sbatch KEY=VALUE``) that a ``--slurm-*``
    option or the launcher itself sets: given twice, one of the two would silently win."""
    name = key.strip("-")
    name = name if len(name) == 1 else name.replace("_", "-")
    if name in SBATCH_OWNED:
        flag = SBATCH_OWNED[name]
        raise ValueError(f"--slurm-sbatch {key}={value} sets what {flag} sets; give it once, with {flag}")
    if name in SBATCH_LAUNCHER:
        raise ValueError(
            f"--slurm-sbatch {key}={value} sets what the launcher sets itself (the jobs' logs in STUDY/.slurm/logs, "
            "their name); leave it out"
        )


@dataclass(frozen=True)
class SlurmOptions:
    """What a Slurm launch asks the cluster for (each field names the ``sbatch`` option it sets).

    ``partition`` (``--partition``), ``time_min`` (``--time``, minutes: each chunk's time
    limit, not the run's: a longer run is requeued), ``gpus`` (``--gpus-per-node``),
    ``cpus`` (``--cpus-per-task``, also each run's torch threads), ``mem_gb`` (``--mem``),
    ``array_parallelism`` (the ``%P`` of ``--array``: at most this many jobs at once),
    ``account`` (``--account``), ``qos`` (``--qos``), ``constraint`` (``--constraint``),
    ``signal_delay_s`` (``--signal=USR2@S``: the warning before the time limit),
    ``sbatch_args`` (any other ``sbatch`` option, ``(("reservation", "x"),)`` for
    ``--reservation=x``) and ``setup`` (shell lines run before each job, e.g.
    ``module load cuda``).

    A job trains until twice ``signal_delay_s`` before its time limit (an epoch that ends
    past that still ends before Slurm's signal, unless one epoch takes longer than the
    signal delay), or for ``chunk_seconds`` from its process's start if that is sooner;
    then it checkpoints and requeues itself.  ``ensemble_size``: train up
    to this many same-shape runs together in one job (GPUs) [default: one run per job].
    ``max_requeues``: how many times one job may be requeued.  ``device``: where a job
    trains (``auto``: its GPU when it has one).  ``wait``: wait for the jobs (else return
    once they are submitted); ``poll_s``: how often to look while waiting.  ``cluster``:
    ``slurm``, or ``local`` for submitit's local executor (tests).
    """

    partition: str | None = None
    time_min: int = 60
    gpus: int = 0
    cpus: int = 1
    mem_gb: float | None = None
    array_parallelism: int = 256
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    signal_delay_s: int = 90
    sbatch_args: tuple[tuple[str, str], ...] = ()
    setup: tuple[str, ...] = ()
    chunk_seconds: float | None = None
    ensemble_size: int | None = None
    max_requeues: int = 1000
    device: str = "auto"
    wait: bool = True
    poll_s: float = 10.0
    cluster: str = "slurm"

    def __post_init__(self) -> None:
        for name in ("time_min", "cpus", "array_parallelism", "signal_delay_s", "max_requeues"):
            check_int(f"slurm {name}", getattr(self, name))
        check_int("slurm gpus", self.gpus, 0)
        check_int("slurm ensemble_size", self.ensemble_size, hint=" (or None: one run per job)", optional=True)
        for name in ("mem_gb", "chunk_seconds", "poll_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"slurm {name} must be a positive number, got {value!r}")
        if self.cluster not in CLUSTERS:
            raise ValueError(f"slurm cluster must be one of {CLUSTERS}, got {self.cluster!r}")
        if self.chunk_seconds is None and self.time_min * 60 <= 2 * self.signal_delay_s:
            raise ValueError(
                f"slurm time_min {self.time_min} leaves no chunk: a chunk ends twice the signal delay ({self.signal_delay_s} s) "
                "before the time limit; give a longer --slurm-time or a shorter --slurm-signal-delay"
            )
        for pair in self.sbatch_args:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair)):
                raise ValueError(
                    f"slurm sbatch_args must be (option, value) pairs such as ('reservation', 'gpu-day'), got {pair!r}"
                )
            check_sbatch_option(*pair)
        keys = [pair[0].strip("-").replace("_", "-") for pair in self.sbatch_args]
        if len(set(keys)) < len(keys):
            twice = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"--slurm-sbatch sets {twice} twice; give each sbatch option once")

    def executor_parameters(self) -> dict[str, Any]:
        """The submitit executor's parameters (``SlurmExecutor``'s are ``sbatch`` options)."""
        if self.cluster == "local":
            return {"timeout_min": self.time_min, "gpus_per_node": self.gpus, "signal_delay_s": self.signal_delay_s}
        params: dict[str, Any] = {
            "time": self.time_min,
            "cpus_per_task": self.cpus,
            "signal_delay_s": self.signal_delay_s,
            "array_parallelism": self.array_parallelism,
            "job_name": "interp-init",
        }
        if self.gpus:
            params["gpus_per_node"] = self.gpus
        optional = {
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "constraint": self.constraint,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        if self.mem_gb is not None:
            params["mem"] = f"{max(1, round(self.mem_gb * 1024))}M"
        if self.setup:
            params["setup"] = list(self.setup)
        if self.sbatch_args:
            params["additional_parameters"] = dict(self.sbatch_args)
        return params


def slurm_options_from(backend: str, device: str, flags: dict[str, Any]) -> SlurmOptions | None:
    """The :class:`SlurmOptions` of the command line's ``--slurm-*`` options (popped from
    ``flags``); None unless ``backend`` is ``slurm`` (where any --slurm-* given is refused)."""
    values = {k[len("slurm_") :]: flags.pop(k) for k in list(flags) if k.startswith("slurm_")}
    if backend != "slurm":
        defaults = {k: v[1] for k, v in SLURM_FLAGS.items()} | {
            "setup": (),
            "sbatch": (),
            "no_wait": False,
            "cluster": "slurm",
        }
        given = sorted(k for k, v in values.items() if v != defaults[k])
        if given:
            raise ValueError(f"--slurm-{given[0].replace('_', '-')} applies to --backend slurm only")
        return None
    pairs = []
    for item in values["sbatch"]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip("-") or not value:
            raise ValueError(f"--slurm-sbatch takes OPTION=VALUE (e.g. reservation=gpu-day), got {item!r}")
        pairs.append((key.strip("-"), value))
    return SlurmOptions(
        partition=values["partition"],
        time_min=values["time"],
        gpus=values["gpus"],
        cpus=values["cpus"],
        mem_gb=values["mem"],
        array_parallelism=values["array_parallelism"],
        account=values["account"],
        qos=values["qos"],
        constraint=values["constraint"],
        signal_delay_s=values["signal_delay"],
        sbatch_args=tuple(pairs),
        setup=tuple(values["setup"]),
        chunk_seconds=values["chunk_seconds"],
        ensemble_size=values["ensemble_size"],
        device=device,
        wait=not values["no_wait"],
        cluster=values["cluster"],
    )


# ------------------------------------------------------------------ slurm_chunk
# One Slurm job's work (:class:`RunChunk`): train its runs for one chunk through the one
# executor, say in the job's log what it does, and requeue itself until the runs are done.
#
# The job's log (``STUDY/.slurm/logs/JOB_0_log.out``) says these, each in a line that starts
# with ``interp-init``, the command's name:
#
# * each run's start: ``run NAME resumes from epoch E of N`` (its checkpoint), ``starts at
#   epoch 0 of N``, or that it has ended already;
# * how long the chunk trains and on what that depends: the time the job has left
#   (``squeue -o %L``) less twice ``--slurm-signal-delay``, or ``--slurm-chunk-seconds``;
# * how the chunk ended: the runs ended; the chunk's time was up, each run checkpointed at
#   epoch E, and the job requeues itself; or Slurm stopped the job, each run ``interrupted``
#   at its last checkpoint.
#
# While the runs train, this process answers three signals:
#
# * **Slurm's warning** (``--signal=USR2@S``, ``S`` = ``--slurm-signal-delay``).  Slurm sends it
#   up to 60 s before its time (its event resolution, sbatch(1); on the test's single-node
#   Slurm 22.05 it came between S and S + 30 s before the limit), so it may come before the
#   chunk's announced end: then the chunk trains on to its end, and the requeue the warning
#   stands for is armed for S s before the time limit (an epoch that overshoots the chunk's
#   end is cut there, the run resuming from its last checkpoint).  A warning after the
#   chunk's end requeues the job at once (submitit: :meth:`checkpoint`, ``scontrol requeue``).
# * **SIGTERM** (``scancel``, preemption, the time limit reached), SIGINT (submitit's local
#   executor cancels with it) and SIGHUP stop the runs at once: their locks are released and
#   their ``metrics.json`` say ``interrupted``; the job then ends (submitit itself only logs a
#   SIGTERM, and Slurm kills the job ``KillWait`` seconds later).
# * **After the runs are done**, Slurm's warning is ignored: a job whose runs completed ends
#   ``COMPLETED`` (Python restores SIGUSR2's default action as it exits, and a late warning
#   then killed the job: ``FAILED``, exit code 140).

#: When this module was imported: in a job, as its process unpickles its :class:`RunChunk`,
#: seconds after the job started; a chunk's clock starts here (torch's import counts).
_IMPORTED = time.monotonic()
SUBMITIT_MISSING = "the slurm backend needs submitit: pip install 'interp-init[slurm]'"


def say(line: str) -> None:
    """One line of the job's log (stdout, flushed: Slurm's log file follows it)."""
    print(f"interp-init: {line}", flush=True)


def positions(jobs: tuple[Job, ...]) -> str:
    """Where each run stands, as the job's log says it: ``run NAME resumes from epoch E of N``."""
    from training.launch.backends import resume_epoch

    said = []
    for job in jobs:
        status, total = RunFolder(job.run_dir).status(), job.config.train.epochs
        if status in FINISHED_STATUSES:
            said.append(f"run {job.name} has ended ({status})")
        elif (epoch := resume_epoch(job.run_dir)) > 0:
            said.append(f"run {job.name} resumes from epoch {epoch} of {total}")
        else:
            said.append(f"run {job.name} starts at epoch 0 of {total}")
    return "; ".join(said)


class RunChunk:
    """One Slurm job's work: train its runs for one chunk, then requeue itself until they are done.

    A ``submitit.helpers.Checkpointable`` (``training.launch.slurm`` makes the class once
    submitit is imported): its ``checkpoint`` resubmits the same call, which resumes every
    run from its folder's checkpoint.  The chunk ends twice ``signal_delay_s`` before the
    job's time limit (the time left read from Slurm, ``squeue -o %L``; else ``time_s`` from
    this process's start), or ``chunk_s`` after this process started if that is sooner.
    """

    def __init__(
        self,
        jobs: tuple[Job, ...],
        device: str,
        threads: int,
        time_s: float,
        signal_delay_s: float,
        chunk_s: float | None,
    ) -> None:
        self.jobs, self.device, self.threads = jobs, device, threads
        self.time_s, self.signal_delay_s, self.chunk_s = time_s, signal_delay_s, chunk_s

    def limit(self) -> tuple[float, bool]:
        """The ``time.monotonic()`` of the job's time limit, and whether Slurm said it (else
        it is ``time_s`` after this process started: later than the true one)."""
        left = slurm_time_left()
        return (time.monotonic() + left, True) if left is not None else (_IMPORTED + self.time_s, False)

    def deadline(self, limit: float) -> tuple[float, str]:
        """The ``time.monotonic()`` at which this chunk's runs checkpoint and stop, and what set it."""
        end, why = (
            limit - 2 * self.signal_delay_s,
            f"until {2 * self.signal_delay_s:g} s before the job's time limit, twice --slurm-signal-delay",
        )
        if self.chunk_s is not None and _IMPORTED + self.chunk_s < end:
            return _IMPORTED + self.chunk_s, f"--slurm-chunk-seconds {self.chunk_s:g} from the job's start"
        return end, why

    def __call__(self) -> list[JobReturn]:
        start = time.monotonic()
        limit, known = self.limit()
        deadline, why = self.deadline(limit)
        say(positions(self.jobs))
        say(
            f"this chunk trains for up to {max(0.0, deadline - start):.0f} s ({why}); then each run checkpoints after its epoch and the job requeues itself"
        )
        warning = _usr_sig()
        try:
            with signals_raise(), self._warning(warning, deadline, limit if known else None):
                returns = execute(
                    self.jobs, self.device, self.threads, deadline
                )  # one run alone, several as one ensemble
        except Stopped as stop:
            signal.signal(warning, signal.SIG_IGN)
            say(
                f"a {signal.Signals(stop.signum).name} stopped the job after {time.monotonic() - start:.0f} s (scancel, preemption or the time limit): "
                f"each run is interrupted at its last checkpoint ({positions(self.jobs)}); launch again to resume"
            )
            return [JobReturn(j.name, str(RunFolder(j.run_dir).status())) for j in self.jobs]
        if any(r.status == RunStatus.INTERRUPTED for r in returns):
            say(
                f"the chunk's time is up after {time.monotonic() - start:.0f} s, the runs checkpointed ({positions(self.jobs)}): requeueing"
            )
            self.requeue()
        signal.signal(
            warning, signal.SIG_IGN
        )  # done: a late warning must neither requeue the job nor kill it as it exits
        say(
            f"the runs ended after {time.monotonic() - start:.0f} s: {', '.join(f'{r.name} {r.status}' for r in returns)}"
        )
        return returns

    @contextlib.contextmanager
    def _warning(self, warning: int, deadline: float, limit: float | None) -> Iterator[None]:
        """Within the block, Slurm's warning (the signal ``warning``) arms the requeue for
        ``signal_delay_s`` before the time limit ``limit`` (the chunk trains on to its
        ``deadline`` meanwhile), or requeues at once from then on (or when the limit is not
        known): submitit's handler, which the block restores."""
        requeue = signal.getsignal(warning)
        if not callable(requeue):  # not in a submitit job: nothing to requeue
            yield
            return

        def now(signum: int, frame: Any) -> None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the requeue's own SIGTERM must not stop the unwinding
            say(f"requeueing now, from each run's last checkpoint ({positions(self.jobs)})")
            requeue(warning, frame)  # exits this process

        def warned(signum: int, frame: Any) -> None:
            at = time.monotonic()
            if limit is None:  # squeue did not say the time left: the true limit may be as near as the warning's delay
                say(
                    "Slurm's warning (SIGUSR2) came and this chunk could not read its time limit from squeue: it requeues at once"
                )
                now(signum, frame)
                return
            if at >= limit - self.signal_delay_s:
                now(signum, frame)
                return
            say(
                f"Slurm's warning (SIGUSR2) came {limit - at:.0f} s before the time limit, not the {self.signal_delay_s:g} s asked "
                f"(Slurm may send it up to 60 s early): the chunk trains on to its end ({max(0.0, deadline - at):.0f} s more), "
                f"and requeues itself {self.signal_delay_s:g} s before the time limit at the latest"
            )
            signal.signal(signal.SIGALRM, now)
            signal.setitimer(signal.ITIMER_REAL, limit - self.signal_delay_s - at)

        alarm = signal.getsignal(signal.SIGALRM)
        signal.signal(warning, warned)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)
            signal.signal(warning, requeue)

    def requeue(self) -> None:
        """Hand this job to submitit's requeue: the signal Slurm sends before the time limit
        (submitit calls :meth:`checkpoint`, requeues the job and exits)."""
        os.kill(os.getpid(), _usr_sig())
        time.sleep(60)  # the handler runs on the next bytecode; it exits this process
        raise RuntimeError("submitit did not requeue the job after its chunk")


def _usr_sig() -> int:
    """The signal submitit treats as Slurm's warning (SIGUSR2 unless ``SUBMITIT_PREEMPT_SIGNAL`` says otherwise)."""
    try:
        import submitit
    except ImportError as err:
        raise ValueError(SUBMITIT_MISSING) from err
    return submitit.JobEnvironment._usr_sig()


def slurm_time_left() -> float | None:
    """Seconds this Slurm job has left before its time limit (``squeue -o %L``), or None
    outside a Slurm job or when Slurm does not say."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        text = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
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
