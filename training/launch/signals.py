"""Signals that end a command, turned into exceptions so that every clean-up runs.

Python's default SIGTERM (and SIGHUP) kills the process at once: ``finally`` blocks do
not run, so a run folder's ``.lock`` and a half-written temporary file would stay.
Within :func:`signals_raise` (the command line's whole command) SIGTERM, SIGINT and
SIGHUP raise a :class:`Stopped` exception instead: the locks are released and removed,
temporary files unlinked, process pools stopped, and ``interp-init`` then prints one line
and exits with ``128 + signal``.  :class:`Stopped` is a ``BaseException`` (like
``KeyboardInterrupt``), so ``except Exception`` never swallows it.

This module imports neither torch nor click.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any, ClassVar


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
