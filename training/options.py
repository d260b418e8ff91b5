"""The command line's option values, without click: the table of run options (one per
config field), the default preset, and the parsing and checking of option values
(``training.cli`` builds the options and commands from them).

It imports neither torch nor click at import time (``--help`` stays fast).
"""

from __future__ import annotations

import errno
import os
from dataclasses import fields
from typing import Any

from training.config import SECTIONS

#: The click type of a config field, by its annotation (fields with choices are strings).
_KINDS: dict[str, str] = {
    "int": "int",
    "int | None": "int",
    "float": "float",
    "float | None": "float",
    "bool": "bool",
    "str": "str",
}


def _option_table() -> dict[str, tuple[str, str, str, tuple[str, ...] | None]]:
    """Every run-config field but ``task`` (its own option): flat name -> (section, type,
    what it means, choices or None), read from the config dataclasses' fields
    (:func:`interp_init.config.option`)."""
    table = {}
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            if f.name == "task":
                continue
            choices = f.metadata.get("choices")
            kind = "str" if choices else _KINDS[str(f.type)]
            table[f.name] = (section, kind, f.metadata["help"], tuple(choices) if choices else None)
    return table


FIELDS = _option_table()


def check_device(device: str) -> None:
    """Refuse a device this machine lacks (or ``meta``) before anything is written."""
    from interp_init.model import resolve_device  # torch: only here, --help must not pay for it

    resolve_device(device)


def default_preset(device: str) -> tuple[str, str]:
    """The run preset ``train`` uses without ``--preset``, and why: ``paper`` on a CUDA GPU,
    ``cpu`` otherwise (never a paper-scale run on a CPU by default)."""
    if device == "cpu":
        return "cpu", "--device cpu"
    if device.startswith("cuda"):
        return "paper", f"--device {device}"
    import torch  # only here: --help must not pay for it

    if torch.cuda.is_available():
        return "paper", "a CUDA GPU is available"
    return "cpu", "no CUDA GPU found; --preset paper would take hours on a CPU"


def parse_workers(value: str) -> int | None:
    """``--workers``: a positive integer, or ``auto`` (None: one per core)."""
    if value == "auto":
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {value!r}") from None
    if number < 1:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {value!r}")
    return number


def machine_cores() -> int:
    """The CPU cores this process may run on (its affinity; every core where that is not known)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def check_cores(value: int | None, option: str, what: str) -> None:
    """Refuse a count of ``what`` (``torch threads per run``, ``worker processes``) above
    this machine's cores, before any work: more only contend for them (and a huge one
    exhausts the OpenMP runtime or the process table, leaving the command half done)."""
    cores = machine_cores()
    if value is not None and not isinstance(value, bool) and isinstance(value, int) and value > cores:
        raise ValueError(
            f"{option} {value:,} asks for more {what} than this machine's {cores} CPU core(s); give {option} at most {cores}"
        )


def parse_list(text: str, kind: type, name: str) -> tuple[Any, ...]:
    """A comma-separated command-line list (``31,32,33``, ``1e-4,2e-4``) as a tuple of ``kind``."""
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts) and any(parts):
        raise ValueError(
            f"{name} has an empty entry in {text!r} (two commas in a row, or one at an end); give each value once, e.g. {'31,32,33' if kind is int else '1e-4,2e-4,3e-4'}"
        )
    try:
        values = tuple(kind(p) for p in parts if p)
    except ValueError:
        raise ValueError(
            f"{name} must be a comma-separated list of {kind.__name__}s, e.g. {'31,32,33' if kind is int else '1e-4,2e-4,3e-4'}; got {text!r}"
        ) from None
    if not values:
        raise ValueError(f"{name} is empty; give at least one value")
    return values


def one_line(exc: BaseException) -> str:
    """An error as the one line ``interp-init: error: ...`` prints."""
    from interp_init.fileio import temporary_target

    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        return f"the path {name[:60]}{'...' if len(name) > 60 else ''} is longer than the file system takes (a name over 255 bytes, or the whole over 4,096); choose a shorter one"
    if isinstance(exc, OSError) and exc.filename is not None:
        name = temporary_target(exc.filename) or exc.filename  # never a temporary file's name
        return f"cannot write or read {name}: {exc.strerror or exc}"
    return " ".join(str(exc).split())
