"""What a sweep is: its spec, its options, the shipped presets and the one-sweep-per-folder rule.

A sweep is a :class:`SweepSpec`: ``base`` (flat train options, plus ``preset`` and
``task``, the names of the ``train`` command's flags with underscores) and ``grid`` (flat
option -> list of values).  Every point of the grid's cartesian product is one
:class:`~training.config.RunConfig`, trained into its own run folder ``DIR/<name>``, the
name made of the grid values in key order (``gamma=0.8__n_layers=2__seed=0``).

Spec file (JSON, or TOML with the same two tables)::

    {"base": {"preset": "cpu", "task": "symmetric", "epochs": 20},
     "grid": {"gamma": [0.3, 0.5, 0.8], "n_layers": [2, 3], "seed": [0, 1, 2]}}

The whole spec is validated before anything trains: every grid point's config is built
up front, so an unknown key, an empty list or a value of the wrong type fails at once
with a message naming the key.

One sweep per folder: ``DIR/sweep.json`` records the spec, and another spec into ``DIR``
is refused unless it is a part of the recorded one or extends it with the same base and
grid keys (``extend=True``, ``--extend``); see :func:`check_sweep_folder`.

This module imports neither torch nor TransformerLens: the command line's options are
built from its constants.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_init.fileio import check_name_length, parse_json
from interp_init.tasks.base import DEFAULT_TASK
from training.config import OPTIONS, PRESETS, RunConfig, make_run_config, preset_options
from training.launch import Job, launcher_names
from training.launch.base import check_count

#: The file of a sweep folder that records its spec.
SPEC_FILE = "sweep.json"
#: Where the grid's points are trained (:class:`SweepOptions`): ``local`` (serial with one
#: worker, else a process pool) or any registered launcher (:mod:`training.launch`).
BACKENDS: tuple[str, ...] = ("local", *launcher_names())
#: Keys of a spec's ``base`` besides the flat options.
BASE_EXTRA_KEYS = ("preset",)
#: The most points a sweep's grid may have (checked before any config is built).
MAX_POINTS = 10_000
#: The shipped sweep presets, one ``NAME.json`` spec each.
PRESETS_FOLDER = Path(__file__).with_name("presets")
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def format_value(value: Any) -> str:
    """A grid value as it appears in a run folder's name (``0.8``, ``1e-05``, ``id-ood``)."""
    if isinstance(value, bool) or value is None:
        text = str(value).lower()
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    return _NAME_SAFE.sub("_", text)


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: its run-folder name, its grid values and its validated config."""

    name: str
    params: Mapping[str, Any]
    config: RunConfig


@dataclass(frozen=True)
class SweepSpec:
    """A grid of runs: ``base`` options shared by all, ``grid`` options varied (cartesian product).

    ``base`` holds flat options (:data:`training.config.OPTIONS`) and ``preset`` (a run
    preset of :data:`training.config.PRESETS`, default ``"paper"``); ``grid`` maps flat
    options to non-empty lists of distinct values.  A key may not be in both.
    """

    base: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.base, Mapping):
            raise ValueError(f"spec 'base' must be a mapping of options, got {type(self.base).__name__}")
        if not isinstance(self.grid, Mapping) or not self.grid:
            raise ValueError("spec 'grid' must be a non-empty mapping of option -> list of values, e.g. {\"gamma\": [0.3, 0.8]}")
        allowed = sorted(OPTIONS)
        for key in self.base:
            if key not in OPTIONS and key not in BASE_EXTRA_KEYS:
                raise ValueError(f"spec base: unknown option {key!r}; allowed: preset, {', '.join(allowed)}")
        preset = self.base.get("preset", "paper")
        if preset not in PRESETS:
            raise ValueError(f"spec base: unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
        for key, values in self.grid.items():
            if key not in OPTIONS:
                hint = " (the run preset goes in 'base')" if key == "preset" else ""
                raise ValueError(f"spec grid: unknown option {key!r}{hint}; allowed: {', '.join(allowed)}")
            if key in self.base:
                raise ValueError(f"spec: option {key!r} is in both 'base' and 'grid'; keep it in one")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise ValueError(f"spec grid[{key!r}] must be a list of values, got {values!r}")
            if len(values) == 0:
                raise ValueError(f"spec grid[{key!r}] is empty; give at least one value")
            names = [format_value(v) for v in values]
            numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
            if len(set(names)) != len(names) or len(set(numbers)) != len(numbers):  # 1 and 1.0 are one point
                raise ValueError(f"spec grid[{key!r}] has duplicate values {list(values)!r} (values equal as numbers are one point); give each once")
        if not isinstance(self.description, str):
            raise ValueError(f"spec 'description' must be a string, got {self.description!r}")
        if self.size > MAX_POINTS:  # counted before a single config is built
            shape = " x ".join(f"{len(v)} {k}" for k, v in self.grid.items())
            raise ValueError(
                f"spec grid has {self.size:,} points ({shape}), more than the {MAX_POINTS:,} a sweep may have; "
                "split it into smaller sweeps or give fewer values"
            )

    @property
    def preset(self) -> str:
        return self.base.get("preset", "paper")

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.grid.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"base": dict(self.base), "grid": {k: list(v) for k, v in self.grid.items()}}
        if self.description:
            out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "spec") -> SweepSpec:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping with 'base' and 'grid'")
        unknown = sorted(set(data) - {"base", "grid", "description"})
        if unknown:
            raise ValueError(f"{where}: unknown top-level key(s) {unknown}; use 'base', 'grid' (and 'description')")
        if "grid" not in data:
            raise ValueError(f"{where} has no 'grid'")
        for key, example in (("base", '{"preset": "tiny"}'), ("grid", '{"gamma": [0.3, 0.8]}')):
            if key in data and not isinstance(data[key], Mapping):
                raise ValueError(f"{where}: '{key}' must be a table of option -> value such as {example}, got {type(data[key]).__name__} {data[key]!r:.60}")
        return cls(base=dict(data.get("base", {})), grid=dict(data["grid"]), description=data.get("description", ""))

    @classmethod
    def from_file(cls, path: str | Path) -> SweepSpec:
        """Read a spec from a ``.json`` or ``.toml`` file."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"sweep spec {path} does not exist (or is not a file)")
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"sweep spec {path} is not UTF-8 text (byte {err.start}); save it as UTF-8 JSON or TOML") from None
        if path.suffix.lower() in (".yaml", ".yml"):
            raise ValueError(f"sweep spec {path} is a YAML file, which is not read; write the spec as JSON (.json) or TOML (.toml)")
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        try:
            data = tomllib.loads(text) if kind == "TOML" else parse_json(text)  # a key given twice is refused
        except (ValueError, tomllib.TOMLDecodeError) as err:
            raise ValueError(f"sweep spec {path} is not valid {kind} ({err})") from err
        try:
            return cls.from_dict(data, where=f"sweep spec {path}")
        except ValueError as err:  # every message names the file
            if str(path) in str(err):
                raise
            raise ValueError(f"sweep spec {path}: {err}") from None

    def smoke_test(self, axes: Sequence[str] = ()) -> SweepSpec:
        """A seconds-long copy for smoke runs: the ``tiny`` run preset, the first 2 values
        of each key in ``axes`` (so a figure still has two cells along it), 1 of the rest."""
        grid = {key: list(values)[: 2 if key in axes else 1] for key, values in self.grid.items()}
        try:
            sized = set(preset_options("tiny", self.base.get("task", DEFAULT_TASK)))
        except ValueError:  # an unknown task: points() names it
            sized = set(preset_options("tiny"))
        # the tiny preset's sizes and schedule replace the spec's own (a spec that pins e.g.
        # n_train or epochs would otherwise keep its full-scale values)
        base = {key: value for key, value in self.base.items() if key not in sized}
        return SweepSpec(description=self.description, base={**base, "preset": "tiny"}, grid={**self.grid, **grid})

    def with_overrides(self, base: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None) -> SweepSpec:
        """A copy with ``base`` options and ``grid`` lists replaced or added (validated)."""
        new_base = {**self.base, **(base or {})}
        new_grid = {**self.grid, **(grid or {})}
        for key in base or {}:
            new_grid.pop(key, None)
        for key in grid or {}:
            new_base.pop(key, None)
        return SweepSpec(new_base, new_grid, self.description)

    def seeded_from(self, seed: int) -> SweepSpec:
        """A copy whose seeds start at ``seed``: a ``seed`` grid of n values becomes
        ``seed .. seed + n - 1``; without one, the base seed is ``seed``."""
        if "seed" in self.grid:
            return self.with_overrides(grid={"seed": [seed + i for i in range(len(self.grid["seed"]))]})
        return self.with_overrides(base={"seed": seed})

    def points(self, source: str | Path | None = None) -> list[SweepPoint]:
        """Every grid point with its validated config (raises ``ValueError`` naming the bad
        key, and ``source``, the spec's file, where given)."""
        if source is None:
            return self._points()
        try:
            return self._points()
        except ValueError as err:
            raise ValueError(f"sweep spec {source}: {err}") from err

    def _points(self) -> list[SweepPoint]:
        base = {k: v for k, v in self.base.items() if k != "preset"}
        preset = self.preset
        # The base alone, then each grid value alone, so that the error names the bad key.
        if not set(self.grid) & {"task", "k"}:  # a grid task or k may be what makes the base valid
            try:
                make_run_config(preset, **base)
            except ValueError as err:
                task = {"task": base["task"]} if "task" in base else {}
                for key, value in base.items():
                    try:
                        make_run_config(preset, **{**task, key: value})
                    except ValueError as key_err:
                        raise ValueError(f"spec base[{key!r}] value {value!r} is invalid: {key_err}") from key_err
                raise ValueError(f"spec base is invalid: {err}") from err
        coupled = {"task", "k"} if {"task", "k"} <= set(self.grid) else set()  # valid only together
        for key, values in self.grid.items():
            if key in coupled:
                continue
            for value in values:
                try:
                    make_run_config(preset, **{**base, key: value})
                except ValueError as err:
                    raise ValueError(f"spec grid[{key!r}] value {value!r} is invalid: {err}") from err
        keys = sorted(self.grid)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in self.grid)):
            params = dict(zip(self.grid, combo, strict=True))
            name = "__".join(f"{k}={format_value(params[k])}" for k in keys)
            check_name_length(name, "sweep point folder")  # the dry run and the sweep refuse alike
            try:
                cfg = make_run_config(preset, **base, **params)
            except ValueError as err:
                raise ValueError(f"spec grid point {name} is invalid: {err}") from err
            out.append(SweepPoint(name, {k: params[k] for k in keys}, cfg))
        return out


    def jobs(self, out: str | Path) -> list[Job]:
        """Every grid point as a job: run folder ``out/<point name>``."""
        return [Job(p.name, p.config, Path(out) / p.name) for p in self.points()]


def preset_names() -> list[str]:
    """The shipped sweep presets (``training/sweep/presets/*.json``)."""
    return sorted(p.name[: -len(".json")] for p in PRESETS_FOLDER.iterdir() if p.name.endswith(".json"))


def load_preset(name: str) -> SweepSpec:
    """A shipped sweep preset by name (see :func:`preset_names`)."""
    names = preset_names()
    if name not in names:
        raise ValueError(f"unknown sweep preset {name!r}; choose one of {names}")
    text = (PRESETS_FOLDER / f"{name}.json").read_text()
    return SweepSpec.from_dict(json.loads(text), where=f"sweep preset {name!r}")


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs: backend, parallelism, device.

    ``workers``: for ``local``, 1 = sequential in this process, N > 1 = a process pool,
    ``None`` = one process per CPU core; for ``ray`` with no ``address``, the CPUs of the
    local Ray instance (``None``: Ray's default).  ``threads``: torch threads per run
    (``None``: ``cores // workers`` in a pool, 1 per Ray task, unchanged when sequential).
    ``ensemble_size``: for ``ensemble``, at most this many models per ensemble (``None``:
    every same-shape point at once).
    """

    backend: str = "local"
    workers: int | None = 1
    address: str | None = None
    device: str = "auto"
    threads: int | None = None
    progress: bool = True
    ensemble_size: int | None = None
    #: A backend's own options (e.g. a Slurm launcher's partition), passed to its constructor.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        backends = ("local", *launcher_names())
        if self.backend not in backends:
            raise ValueError(f"backend must be one of {backends}, got {self.backend!r}")
        for name in ("workers", "threads", "ensemble_size"):
            check_count(name, getattr(self, name))
        if self.ensemble_size is not None and self.backend != "ensemble":
            raise ValueError(f"ensemble_size applies to the ensemble backend only, got backend {self.backend!r}")
        if self.address is not None and self.backend != "ray":
            raise ValueError(f"address applies to the ray backend only, got backend {self.backend!r}")


# ------------------------------------------------------------ one sweep per folder

def _grid_names(spec: SweepSpec) -> dict[str, list[str]]:
    return {key: [format_value(v) for v in values] for key, values in spec.grid.items()}


def _base_of(spec: SweepSpec) -> dict[str, Any]:
    return {**spec.base, "preset": spec.preset}


def _spec_difference(recorded: SweepSpec, new: SweepSpec) -> str:
    """How ``new`` differs from ``recorded`` in a few words ("" when they are the same sweep)."""
    if set(recorded.grid) != set(new.grid):
        return f"grid keys {sorted(recorded.grid)} there, {sorted(new.grid)} here"
    old_base, new_base = _base_of(recorded), _base_of(new)
    if old_base != new_base:
        keys = sorted(k for k in {*old_base, *new_base} if old_base.get(k, "(unset)") != new_base.get(k, "(unset)"))
        return "base " + "; ".join(f"{k}: {old_base.get(k, '(unset)')!r} there, {new_base.get(k, '(unset)')!r} here" for k in keys[:3])
    old_names, new_names = _grid_names(recorded), _grid_names(new)
    keys = sorted(k for k in old_names if set(old_names[k]) != set(new_names[k]))
    if keys:
        return "grid " + "; ".join(f"{k}: {list(recorded.grid[k])!r} there, {list(new.grid[k])!r} here" for k in keys[:3])
    return ""


def check_sweep_folder(spec: SweepSpec, out: str | Path, extend: bool = False) -> SweepSpec:
    """The spec to record in ``out/sweep.json`` for running ``spec`` there; writes nothing.

    One sweep per folder: a folder whose ``sweep.json`` records another spec is refused
    (``ValueError`` naming the folder, what differs and the fix) unless

    * ``spec`` is the recorded sweep or a part of it (same base, same grid keys, values
      among the recorded ones): the recorded spec is kept;
    * ``extend`` is true and ``spec`` has the same base and grid keys: the recorded grid
      gets ``spec``'s new values (the union of both, the recorded values first).

    A folder without ``sweep.json`` takes ``spec``.
    """
    out = Path(out)
    path = out / SPEC_FILE
    if not path.is_file():
        return spec
    try:
        recorded = SweepSpec.from_file(path)
    except (ValueError, OSError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{path} does not hold a readable sweep spec ({' '.join(str(err).split())}); the folder's sweep is unknown: "
            f"use another --out, or restore or remove {path} if you know what the folder holds"
        ) from err
    difference = _spec_difference(recorded, spec)
    if not difference:
        return spec
    same_shape = set(recorded.grid) == set(spec.grid) and _base_of(recorded) == _base_of(spec)
    old_names, new_names = _grid_names(recorded), _grid_names(spec)
    if same_shape and all(set(new_names[k]) <= set(old_names[k]) for k in spec.grid):
        return recorded  # a part of the recorded sweep (a retry of some points)
    if extend and same_shape:
        grid = {k: [*recorded.grid[k], *(v for v, n in zip(spec.grid[k], new_names[k], strict=True) if n not in old_names[k])] for k in recorded.grid}
        merged = SweepSpec(recorded.base, grid, recorded.description or spec.description)
        merged.points()  # every point of the extended grid is valid (raises naming the one that is not)
        return merged
    if extend:
        raise ValueError(
            f"{out} holds another sweep ({difference}): --extend adds grid values to a sweep with the same base "
            f"and grid keys only; use another --out for this one"
        )
    raise ValueError(
        f"{out} holds another sweep ({difference}; see {path}): one sweep per folder, so that results.csv "
        f"describes one grid; use another --out, or pass --extend to add grid values to that sweep (same base and grid keys)"
    )
