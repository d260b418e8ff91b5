"""The command line's one error layer, shared by ``interp-init`` and every click script of
``experiments/`` and ``benchmarks/``.

:func:`run_command` runs a click command and turns what it raises into the exit code and
at most one line on stderr: bad input (a ``ValueError`` or an ``OSError``, a
:class:`~interp_init.fileio.BadRunFile` included) is ``PROG: error: ...`` and exit 2; a usage
error is click's message and exit 2; SIGTERM, SIGINT and SIGHUP raise in the command
(:mod:`training.launch.executor`), so its locks and temporary files are removed, then one line
and 143, 130 or 129.  A script's command is made with ``cls=Script`` (or ``ScriptGroup``):
run as a process (``python experiments/store.py ...``, or click's test runner) it goes
through this layer; ``command.main(args, standalone_mode=False)`` raises as click does.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from training.cli.summaries import SummaryCommand, SummaryGroup
from training.config import one_line
from training.launch.executor import Stopped, ignore_stopping, signals_raise


def run_command(command: click.Command, args: Sequence[str], prog: str, obj: Any = None) -> int:
    """Run ``command`` on ``args`` and return its exit code (0 done, 1 its work failed, 2 bad
    input or usage, 128 + signal when stopped); every error is one line ``PROG: ...``."""
    code: int | None = None  # set once the command has finished
    try:
        with signals_raise():
            rv = command.main(args=list(args), prog_name=prog, standalone_mode=False, obj=obj)
            code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
    except Stopped as exc:
        if code is not None:  # the signal came after the command had finished: its work is whole
            click.echo(
                f"{prog}: {exc.message.split(' (')[0]} after the command had finished; its work is complete", err=True
            )
            return code
        click.echo(f"{prog}: {exc.message}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:  # pragma: no cover - click returns it in non-standalone mode
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:  # a KeyboardInterrupt raised by other means than SIGINT
        click.echo(f"{prog}: aborted", err=True)
        return 130
    except (ValueError, OSError) as exc:
        click.echo(f"{prog}: error: {one_line(exc)}", err=True)
        return 2
    except (RuntimeError, MemoryError) as exc:
        from training.trainer.preflight import out_of_memory_message

        message = out_of_memory_message(exc)
        if message is None:
            raise
        click.echo(f"{prog}: error: {message}", err=True)
        return 2
    return code


class _ThroughTheLayer:
    """A click command whose process runs through :func:`run_command`."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:  # type: ignore[override]
        if not standalone_mode:
            return super().main(args=args, prog_name=prog_name, standalone_mode=False, **extra)  # type: ignore[misc]
        code = run_command(self, list(sys.argv[1:] if args is None else args), script_name(self), extra.get("obj"))  # type: ignore[arg-type]
        if args is None:  # the process itself: its work is done and its exit code decided
            ignore_stopping()
        _exit(code)


def _exit(code: int) -> NoReturn:
    sys.exit(code)


def script_name(command: click.Command) -> str:
    """The name a script's messages begin with: its file's (``store.py``)."""
    callback = command.callback
    if callback is None:
        return command.name or "command"
    try:
        return Path(inspect.getfile(callback)).name
    except TypeError:  # pragma: no cover - a built-in
        return command.name or "command"


class Script(_ThroughTheLayer, SummaryCommand):
    """A script's command (``@click.command(cls=Script)``): its errors through the one layer."""


class ScriptGroup(_ThroughTheLayer, SummaryGroup):
    """A script's group of commands (``@click.group(cls=ScriptGroup)``): errors through the one layer."""
