"""The ``interp-init`` command line's shared options: the run-config flags (one per
field of the config dataclasses), the run and ``--slurm-*`` options, ``--carry-recipe``
(the commands themselves: :mod:`training.cli`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from interp_init.tasks.base import DEFAULT_TASK
from interp_init.tasks.registry import registered_tasks
from training.config import FIELDS, PRESETS, check_device
from training.studies.recipe import CARRY_HELP, DEFAULT_HOLD, check_hold

#: The registered tasks and the run presets, as the options list them (a task of one's own
#: is given as package.module:ClassName).
TASK_CHOICES: tuple[str, ...] = registered_tasks()
PRESET_CHOICES: tuple[str, ...] = tuple(sorted(PRESETS))


class RegistryChoice(click.Choice):
    """A ``click.Choice`` of the names a registry holds when the command runs (``names()``), so
    that a plug-in registered after this module was imported is a choice too."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        self.names = names
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return tuple(self.names())

    @choices.setter
    def choices(self, value: Any) -> None:  # click.Choice sets it once; the registry says
        pass


class Number(click.ParamType):
    """A finite number (``float``, or ``int`` with ``integer=True``) within bounds, the type of
    every number option of ``interp-init`` and of the scripts in ``experiments/`` and
    ``benchmarks/``: ``nan``, ``inf`` and a value out of bounds are refused naming the flag, the
    bounds and the value (click's ``FloatRange`` lets ``nan`` through, which no comparison
    refuses).  ``minimum``/``maximum`` are inclusive unless ``min_open``/``max_open``; ``maximum``
    defaults to 1e12 (a number no option means), so every number is bounded."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float = 1e12,
        *,
        min_open: bool = False,
        max_open: bool = False,
        integer: bool = False,
    ) -> None:
        self.minimum, self.maximum, self.min_open, self.max_open, self.integer = (
            minimum,
            maximum,
            min_open,
            max_open,
            integer,
        )
        self.name = "integer" if integer else "number"

    def bounds(self) -> str:
        """The bounds as a message states them (``a number > 0 and <= 1``)."""
        low = "" if self.minimum is None else f"{'>' if self.min_open else '>='} {self.minimum:g}"
        high = f"{'<' if self.max_open else '<='} {self.maximum:g}"
        return f"{'an integer' if self.integer else 'a finite number'} {low + ' and ' if low else ''}{high}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        if isinstance(value, bool):
            self.fail(f"{value!r} is not {self.bounds()}", param, ctx)
        try:
            number = (
                (int(value) if isinstance(value, int) else int(str(value).strip())) if self.integer else float(value)
            )
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not {self.bounds()}", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number: give {self.bounds()}", param, ctx)
        low_bad = self.minimum is not None and (number <= self.minimum if self.min_open else number < self.minimum)
        high_bad = number >= self.maximum if self.max_open else number > self.maximum
        if low_bad or high_bad:
            self.fail(f"{value!r} is out of bounds: give {self.bounds()}", param, ctx)
        return number

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:  # type: ignore[override]
        return "INTEGER" if self.integer else "NUMBER"


_CLICK_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str}
_METAVARS: dict[str, str] = {"int": "INTEGER", "float": "NUMBER", "str": "NAME"}


def config_options(func: Any) -> Any:
    """Decorate a click command with one ``--flag`` per run-config field (default: the preset's)."""
    for name, (_section, kind, meaning, choices) in reversed(list(FIELDS.items())):
        flag = "--" + name.replace("_", "-")
        if kind == "bool":
            func = click.option(f"{flag}/--no-{name.replace('_', '-')}", name, default=None, help=meaning)(func)
            continue
        # Choices are listed, not enforced by click: the config's own validation names the
        # field and the allowed values in one line (docs/bad-input.md).
        metavar = "[" + "|".join(choices) + "]" if choices else _METAVARS[kind]
        func = click.option(flag, name, type=_CLICK_TYPES[kind], default=None, metavar=metavar, help=meaning)(func)
    return func


_TASK_HELP = (
    "Task: symmetric (anchor pair (4,3) held out; does the model infer x - 10 or copy the symmetric x - 6?), "
    "id-ood (pairs (3,4) and (4,3) held out: in- and out-of-distribution accuracy), complexity (all 16 pairs, "
    "k groups with non-inferential targets), addition (a + b = c with a held-out square of (a, b) pairs), "
    "scan (SCAN's turn-left or jump split, --split; exact match in and out of distribution), cogs (COGS, in "
    "distribution only: its generalization set is not shipped), prontoqa (k-hop true/false questions, --hops), "
    "code-lm (a byte-level language model on the standard library's sources: perplexity), "
    "or your own task class as package.module:ClassName (importable; see docs/tasks.md)."
)


def _cpu_time() -> str:
    """The cpu preset's minutes a model, from the shipped models' records (interp_init.pretrained)."""
    from interp_init.pretrained import training_time

    time = training_time("cpu")
    return "minutes a model" if time is None else f"{time.span}, on {time.where}, as the shipped models trained"


_PRESET_HELP = (
    f"Run size, the defaults of every option below: tiny (seconds, for smoke tests), cpu ({_cpu_time()}) "
    "or paper (the papers' scale: d_model 400, 210 epochs, the released code's sets, e.g. 759,375 training samples on symmetric; hours, for a GPU). "
    "Default: paper where a CUDA GPU is used, else cpu."
)
_DEVICE_HELP = "Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N."


def run_options(func: Any) -> Any:
    """The options every training command shares: task, preset, seed, device, progress."""
    func = click.option("--quiet", is_flag=True, help="No progress bar.")(func)
    func = click.option(
        "--device", default="auto", show_default=True, metavar="[auto|cpu|cuda|cuda:N]", help=_DEVICE_HELP
    )(func)
    func = click.option(
        "--data-seed",
        type=int,
        default=None,
        metavar="INTEGER",
        help="Seed of the data alone (sample sets and order) [default: derived from --seed].",
    )(func)
    func = click.option(
        "--init-seed",
        type=int,
        default=None,
        metavar="INTEGER",
        help="Seed of the init's draw alone [default: derived from --seed].",
    )(func)
    func = click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        metavar="INTEGER",
        help="Run seed; every random source (init, data, shuffling) derives from it.",
    )(func)
    func = click.option("--preset", default=None, metavar="[" + "|".join(PRESET_CHOICES) + "]", help=_PRESET_HELP)(func)
    func = click.option(
        "--task",
        default=DEFAULT_TASK,
        show_default=True,
        metavar="[" + "|".join(TASK_CHOICES) + "|package.module:ClassName]",
        help=_TASK_HELP,
    )(func)
    return func


_SLURM_TYPES: dict[str, Any] = {
    "str": str,
    "int0": click.IntRange(min=0),
    "int1": click.IntRange(min=1),
    "float": Number(0, min_open=True),
}


def slurm_options(func: Any) -> Any:
    """Decorate a command with the ``--slurm-*`` options (:data:`training.launch.slurm.SLURM_FLAGS`;
    read back by :func:`training.launch.slurm.slurm_options_from`)."""
    from training.launch.slurm import SLURM_FLAGS

    func = click.option(
        "--slurm-cluster",
        type=click.Choice(["slurm", "local"]),
        default="slurm",
        show_default=True,
        help="local: submitit's local executor (this machine, the time limit simulated), to try the Slurm path without a cluster.",
    )(func)
    func = click.option(
        "--slurm-no-wait",
        is_flag=True,
        help="Submit the jobs and return without waiting (run the same command again to see where they stand).",
    )(func)
    func = click.option(
        "--slurm-setup",
        multiple=True,
        metavar="LINE",
        help="A shell line each job runs first, e.g. 'module load cuda' (repeatable).",
    )(func)
    func = click.option(
        "--slurm-sbatch",
        multiple=True,
        metavar="OPTION=VALUE",
        help="Any other sbatch option, e.g. reservation=gpu-day for --reservation=gpu-day (repeatable).",
    )(func)
    for name, (kind, default, meaning) in reversed(SLURM_FLAGS.items()):
        func = click.option(
            "--slurm-" + name.replace("_", "-"),
            "slurm_" + name,
            type=_SLURM_TYPES[kind],
            default=default,
            show_default=default is not None,
            help=meaning,
        )(func)
    return func


def on_this_machine(backend: str | None, address: str | None) -> bool:
    """Whether ``--backend`` trains on this machine (its devices and cores are the ones to
    check): every backend but slurm, and ray only when it starts a local Ray (no ``--address``)."""
    return backend not in ("ray", "slurm") or (backend == "ray" and address is None)


def backend_options(backend: str | None, device: str, address: str | None, slurm: dict[str, Any]) -> dict[str, Any]:
    """The chosen launcher's own options (``--address``, the ``--slurm-*`` ones, each refused
    for another backend); ``--device`` is checked here unless the runs train on a cluster."""
    from training.launch.slurm import slurm_options_from

    if on_this_machine(backend, address):  # a cluster's devices are not this machine's
        check_device(device)
    slurm_opts = slurm_options_from(backend or "", device, slurm)
    if address is not None and backend != "ray":
        raise ValueError("--address applies to --backend ray only")
    return {"address": address} if backend == "ray" else {"slurm": slurm_opts} if backend == "slurm" else {}


def carry_option(func: Any) -> Any:
    """``--carry-recipe [QUANTITIES]`` (train and reproduce; training/studies/recipe.py)."""
    default = ",".join(h.replace("_", "-") for h in DEFAULT_HOLD)
    return click.option(
        "--carry-recipe",
        "carry",
        is_flag=False,
        flag_value=default,
        default=None,
        metavar="[QUANTITIES]",
        help=CARRY_HELP,
    )(func)


def parse_carry(carry: str | None) -> tuple[str, ...] | None:
    """``--carry-recipe``'s value as the quantities to hold (None: not given)."""
    return None if carry is None else check_hold(carry.split(","))
