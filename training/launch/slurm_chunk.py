"""One Slurm job's work (:class:`RunChunk`): train its runs for one chunk through the one
executor, say in the job's log what it does, and requeue itself until the runs are done.

The job's log (``STUDY/.slurm/logs/JOB_0_log.out``) says these, each in a line that starts
with ``interp-init``, the command's name:

* each run's start: ``run NAME resumes from epoch E of N`` (its checkpoint), ``starts at
  epoch 0 of N``, or that it has ended already;
* how long the chunk trains and on what that depends: the time the job has left
  (``squeue -o %L``) less twice ``--slurm-signal-delay``, or ``--slurm-chunk-seconds``;
* how the chunk ended: the runs ended; the chunk's time was up, each run checkpointed at
  epoch E, and the job requeues itself; or Slurm stopped the job, each run ``interrupted``
  at its last checkpoint.

While the runs train, this process answers three signals:

* **Slurm's warning** (``--signal=USR2@S``, ``S`` = ``--slurm-signal-delay``).  Slurm sends it
  up to 60 s before its time (its event resolution, sbatch(1); on the test's single-node
  Slurm 22.05 it came between S and S + 30 s before the limit), so it may come before the
  chunk's announced end: then the chunk trains on to its end, and the requeue the warning
  stands for is armed for S s before the time limit (an epoch that overshoots the chunk's
  end is cut there, the run resuming from its last checkpoint).  A warning after the
  chunk's end requeues the job at once (submitit: :meth:`checkpoint`, ``scontrol requeue``).
* **SIGTERM** (``scancel``, preemption, the time limit reached), SIGINT (submitit's local
  executor cancels with it) and SIGHUP stop the runs at once: their locks are released and
  their ``metrics.json`` say ``interrupted``; the job then ends (submitit itself only logs a
  SIGTERM, and Slurm kills the job ``KillWait`` seconds later).
* **After the runs are done**, Slurm's warning is ignored: a job whose runs completed ends
  ``COMPLETED`` (Python restores SIGUSR2's default action as it exits, and a late warning
  then killed the job: ``FAILED``, exit code 140).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus
from training.launch.base import Job, JobReturn
from training.launch.executor import execute
from training.launch.signals import Stopped, signals_raise

__all__ = ["RunChunk", "slurm_time_left"]

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
            if limit is None or at >= limit - self.signal_delay_s:
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
