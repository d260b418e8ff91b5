"""Trained models shipped with the package: open one in one line, offline.

The models a README reader meets, trained by ``interp-init reproduce --preset cpu --seed 201``
(small and large init on each task of the flip, seed 201, one of the verification seeds),
are package data: each a run folder (``config.json``, ``metrics.json`` with its history,
``model.safetensors``: weights only, no optimizer state), about 1.3 MB.  ``index.json``
holds, per model, the SHA-256 of its three files, and for all of them the command, the
commit, the machine and what ran beside it (``experiments/package_pretrained.py`` wrote it
from the run folders)::

    >>> import interp_init
    >>> interp_init.list_pretrained()
    ['id-ood-large-init', 'id-ood-small-init', 'symmetric-large-init', 'symmetric-small-init']
    >>> model = interp_init.from_pretrained("symmetric-small-init")  # a HookedTransformer, eval mode
    >>> interp_init.pretrained_info("symmetric-small-init").metrics()["final"]["id_acc"]  # doctest: +SKIP

:func:`from_pretrained` checks every file against ``index.json`` before it reads it, then
loads the folder as :func:`interp_init.load_model` does (the weights bound to their config
and metrics), on the device asked for; nothing is fetched from a network.
"""

from __future__ import annotations

import fnmatch
import json
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.fileio import file_sha256

if TYPE_CHECKING:
    import torch
    from transformer_lens import HookedTransformer

#: Where the shipped models lie: this package's folder.
PRETRAINED_DIR = Path(__file__).resolve().parent
#: The record of the shipped models (``experiments/package_pretrained.py`` writes it).
INDEX_FILE = "index.json"
#: The files of a shipped model, each checked against its SHA-256 in the index.
MODEL_FILES = ("config.json", "metrics.json", "model.safetensors")


class PretrainedError(ValueError):
    """A shipped model that cannot be opened: an unknown name, or a file that is not the one shipped."""


@dataclass(frozen=True)
class Pretrained:
    """One shipped model: its name, what it is, where its run folder lies, its files' SHA-256.

    Attributes:
        name: what :func:`from_pretrained` takes (``"symmetric-small-init"``).
        task, regime: the task it was trained on and its init (``"small-init"``, ``"large-init"``).
        gamma, seed, preset: its init scale, run seed and preset.
        path: its run folder inside the installed package.
        sha256: each of :data:`MODEL_FILES` with its SHA-256.
        elapsed_s: the seconds its training took (its ``metrics.json``), on the index's machine.
        compared: how it compares with the stored record of the same run, where the index
            says (``record``, ``weights_sha256_equal``, ``final_equal``,
            ``largest_final_difference``), else None.
    """

    name: str
    task: str
    regime: str
    gamma: float
    seed: int
    preset: str
    path: Path
    sha256: Mapping[str, str]
    elapsed_s: float
    compared: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        missing = [f for f in MODEL_FILES if f not in self.sha256]
        if missing:
            raise PretrainedError(
                f"{PRETRAINED_DIR / INDEX_FILE}: model {self.name!r} lists no SHA-256 for {missing}; reinstall interp-init"
            )

    def check(self) -> None:
        """Every file present and the one shipped (its SHA-256 as the index says), else a
        :class:`PretrainedError` naming the file."""
        for file in MODEL_FILES:
            path = self.path / file
            if not path.is_file():
                raise PretrainedError(
                    f"{path}: the shipped model {self.name!r} lacks this file; reinstall interp-init (pip install --force-reinstall interp-init)"
                )
            if file_sha256(path) != self.sha256[file]:
                raise PretrainedError(
                    f"{path}: not the file shipped (its SHA-256 differs from {INDEX_FILE}'s); reinstall interp-init (pip install --force-reinstall interp-init)"
                )

    def config(self) -> dict[str, Any]:
        """Its run config (``config.json``) as a dict."""
        return json.loads((self.path / "config.json").read_text(encoding="utf-8"))

    def metrics(self) -> dict[str, Any]:
        """Its metrics (``metrics.json``: ``final``, ``history``, ``elapsed_s``, ...) as a dict."""
        return json.loads((self.path / "metrics.json").read_text(encoding="utf-8"))

    def load(self, device: str | torch.device | None = "cpu") -> HookedTransformer:
        """The trained model, in eval mode, after :meth:`check`."""
        from interp_init.runfolder import load_model

        self.check()
        return load_model(self.path, device)


@cache
def _index() -> dict[str, Any]:
    path = PRETRAINED_DIR / INDEX_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise PretrainedError(
            f"{path}: the record of the shipped models cannot be read ({err}); reinstall interp-init"
        ) from None


def _entries() -> dict[str, Pretrained]:
    return {
        name: Pretrained(
            name,
            entry["task"],
            entry["regime"],
            float(entry["gamma"]),
            int(entry["seed"]),
            entry["preset"],
            PRETRAINED_DIR / name,
            dict(entry["sha256"]),
            float(entry["elapsed_s"]),
            entry.get("compared"),
        )
        for name, entry in _index()["models"].items()
    }


def list_pretrained(pattern: str = "*") -> list[str]:
    """The names of the shipped models (sorted), those matching ``pattern`` (a shell-style
    wildcard, as ``timm.list_models`` takes: ``"symmetric-*"``)."""
    return sorted(name for name in _entries() if fnmatch.fnmatchcase(name, pattern))


def pretrained_info(name: str) -> Pretrained:
    """What the shipped model ``name`` is (:class:`Pretrained`): its task, init, seed, folder,
    config and metrics; a :class:`PretrainedError` naming the shipped ones for another name."""
    entries = _entries()
    if name not in entries:
        close = get_close_matches(str(name), entries, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise PretrainedError(
            f"no shipped model is called {name!r}: {hint}interp_init.list_pretrained() names them ({', '.join(sorted(entries))})"
        )
    return entries[name]


def from_pretrained(name: str, device: str | torch.device | None = "cpu") -> HookedTransformer:
    """The shipped trained model ``name`` (:func:`list_pretrained`), a TransformerLens
    ``HookedTransformer`` in eval mode on ``device``, its files checked against their SHA-256
    first.  Offline: the weights come with the package."""
    return pretrained_info(name).load(device)


@dataclass(frozen=True)
class TrainingTime:
    """How long the shipped models took to train, and where: for the command line's help and
    the report's header, which state it instead of a typed number.

    Attributes:
        minutes: each shipped model's training minutes, in :func:`list_pretrained`'s order.
        machine: the machine they trained on; ``beside``: what else ran on it meanwhile.
    """

    minutes: tuple[float, ...]
    machine: str
    beside: str

    @property
    def span(self) -> str:
        """``"4.6-9.9 minutes a model, median 6.1"``, or ``"4.6 minutes a model"`` for one value."""
        low, high = min(self.minutes), max(self.minutes)
        if f"{low:.1f}" == f"{high:.1f}":
            return f"{low:.1f} minutes a model"
        return f"{low:.1f}-{high:.1f} minutes a model, median {statistics.median(self.minutes):.1f}"

    @property
    def where(self) -> str:
        """The machine in a few words, with the load the record names: ``"a 2-core x86-64 CPU at load average 4-7"``."""
        load = re.search(r"load average [0-9.]+(?:-[0-9.]+)?", self.beside)
        return f"a {self.machine.split(' (')[0].split(',')[0]}" + (f" at {load.group()}" if load else "")


def training_time(preset: str = "cpu") -> TrainingTime | None:
    """The training minutes of the shipped models of ``preset`` with their machine and load,
    from the package's records; None where no shipped model is of that preset."""
    entries = [e for e in _entries().values() if e.preset == preset]
    if not entries:
        return None
    index = _index()
    return TrainingTime(
        tuple(e.elapsed_s / 60 for e in sorted(entries, key=lambda e: e.name)), index["machine"], index["beside"]
    )
