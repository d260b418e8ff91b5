"""Worker processes that never outlive the sweep: a process pool that SIGKILL, SIGTERM or
SIGINT of the sweep process leaves no worker behind.

:func:`worker_pool` is the pool (spawned processes, ``threads`` torch threads each); its
workers watch the process that started them (:func:`watch_parent`) and ignore SIGINT,
and within the pool's block SIGTERM raises :class:`Terminated`, so that the pool's
cleanup stops the workers before the process exits.  The ``local`` sweep backend and the
reproduction's parallel runs use it.
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
