"""The ``interp-init`` command line: a thin layer over the library's dataclasses.

``main(argv)`` is the testable entry point; it returns the exit code.  Bad input prints
one line naming the problem (``interp-init: error: ...``) and exits non-zero, without a
traceback.  The ``train`` command's options are generated from the config dataclasses,
one flag per field (``--d-model``, ``--weight-decay``, ...), so every preset option can be
overridden and the names match a sweep spec's keys (with underscores).
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Sequence
from dataclasses import MISSING, fields
from typing import Any

import click

from training.config import OPTION_SECTION, PRESETS, SECTIONS, make_run_config
from training.data import TASKS

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def _click_type(annotation: Any) -> Any:
    """The click type of a dataclass field annotation (strings under postponed evaluation)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    base = text.split("|")[0].strip()
    if base in _TYPES:
        return _TYPES[base]
    if isinstance(annotation, types.UnionType):  # pragma: no cover - runtime annotations
        return typing.get_args(annotation)[0]
    return str


def config_options(func: Any) -> Any:
    """Decorate a click command with one ``--flag`` per run-config field (default: the preset's)."""
    for section, cls in reversed(list(SECTIONS.items())):
        for f in reversed(fields(cls)):
            if f.name == "task":
                continue  # its own option, with choices
            default = f.default if f.default is not MISSING else None
            kind = _click_type(f.type)
            flag = "--" + f.name.replace("_", "-")
            if kind is bool:
                func = click.option(flag + "/--no-" + f.name.replace("_", "-"), f.name, default=None, help=f"[{section}]")(func)
            else:
                func = click.option(flag, f.name, type=kind, default=None, help=f"[{section}] (default: preset's, else {default})")(func)
    return func


def run_options(func: Any) -> Any:
    """The options every training command shares: task, preset, seed, device, progress."""
    func = click.option("--quiet", is_flag=True, help="No progress bar.")(func)
    func = click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")(func)
    func = click.option("--seed", type=int, default=0, show_default=True, help="Run seed; every random source derives from it.")(func)
    func = click.option("--preset", default="paper", show_default=True, help=f"One of {sorted(PRESETS)}.")(func)
    func = click.option("--task", default="symmetric", show_default=True, help=f"One of {TASKS}.")(func)
    return func


def overrides_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The flat run options a user actually gave (those not left at None)."""
    return {k: v for k, v in kwargs.items() if k in OPTION_SECTION and v is not None}


#: Subcommands implemented in other modules, imported only when used (click's lazy-group
#: pattern), so that ``interp-init train`` does not pay for plotting or Ray imports.
LAZY_COMMANDS: dict[str, str] = {
    "reproduce": "training.reproduce:reproduce_command",
    "sweep": "training.sweep:sweep_command",
    "phase-diagram": "training.phase:phase_diagram_command",
    "report": "training.report:report_command",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            import importlib

            module_name, _, attr = LAZY_COMMANDS[name].partition(":")
            self.add_command(getattr(importlib.import_module(module_name), attr), name)
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Train gamma-initialized transformers on anchor functions and probe what they learned."""


@cli.command("train")
@run_options
@config_options
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Run folder (resumed if it exists).")
def train_command(task: str, preset: str, seed: int, device: str, quiet: bool, out: str, **kwargs: Any) -> None:
    """Train one model into a run folder (config.json, metrics.json, model.safetensors)."""
    from training.loop import train

    cfg = make_run_config(preset, task=task, seed=seed, **overrides_from(kwargs))
    result = train(cfg, out, device=device, progress=not quiet)
    final = result.metrics["final"]
    summary = {k: v for k, v in final.items() if k in ("train_acc", "id_acc", "ood_acc", "commutativity", "heldout")}
    click.echo(f"{result.metrics['status']}: {out}  {summary}")


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot write or read {exc.filename}: {exc.strerror}"
    return " ".join(str(exc).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=args, prog_name="interp-init", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("interp-init: aborted", err=True)
        return 130
    except (ValueError, OSError) as exc:
        click.echo(f"interp-init: error: {_one_line(exc)}", err=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
