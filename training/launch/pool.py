"""Worker processes that never outlive the study: a process pool that SIGKILL, SIGTERM or
SIGINT of the sweep process leaves no worker behind.

:func:`worker_pool` is the pool (spawned processes, ``threads`` torch threads each); its
workers watch the process that started them (:func:`watch_parent`) and ignore SIGINT,
and within the pool's block SIGTERM raises :class:`Terminated`, so that the pool's
cleanup stops the workers before the process exits.  A worker stopped by SIGTERM (the
pool's clean-up, or its parent's death) first lets the run it trains remove its lock
and temporary files.  The ``pool`` launcher (:mod:`training.launch.backends`) uses it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

from training.launch.signals import Terminated, signals_raise

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
