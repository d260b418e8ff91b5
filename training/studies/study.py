"""Studies: one spec names a study's runs, one launcher trains them, one reader reads them.

A :class:`StudySpec` is a ``base`` config plus either a ``grid`` (a sweep: one run per point
of the product, ``DIR/gamma=0.8__n_layers=2__seed=0``, the grid values in key order) or
``named`` points (flat options over the base, ``DIR/<name>``: the preset search of
experiments/search_cpu.py) over ``tasks``, ``seeds`` and an lr grid.  A reproduction is the
spec whose named points are the regimes of :mod:`training.studies.study`
(:meth:`StudySpec.reproduction`); a population is that spec over seeds (one seed: a
population of one).  :meth:`StudySpec.jobs` names the runs, :func:`training.launch.run_study`
trains them, :func:`training.studies.population.read_population` reads a reproduction's.  Its folder::

    DIR/summary.json                 the population (Population.to_dict; summary-P.json: per protocol P)
    DIR/<task>/<regime>              one seed (``reproduce --seed S``)
    DIR/seed-S/<task>/<regime>       with --seeds: where `reproduce --seed S --out DIR/seed-S` puts it
    DIR/seed-S/<task>/<regime>__lr=X the paper protocol's other learning rates
    DIR/seed-S/summary.json          strict protocol: what `reproduce --seed S --out DIR/seed-S` writes

Varying one random source only (``vary``) names the members ``init-S_data-F`` or
``init-F_data-S`` (F: the fixed seed).  A sweep's spec file (JSON or TOML; ``sweep.json``)::

    {"base": {"preset": "cpu", "task": "symmetric", "epochs": 20},
     "grid": {"gamma": [0.3, 0.5, 0.8], "n_layers": [2, 3], "seed": [0, 1, 2]}}

Every point's config is built before anything trains, so a bad key or value fails at once,
named.  This module imports neither torch nor TransformerLens.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from interp_init.fileio import BadRunFile, check_name_length, config_digest, parse_json, read_json, write_json
from interp_init.outputs import CONFIG_FILE, STUDY_FILE, STUDY_KINDS, SWEEP_SPEC_FILE, as_given, folder_kind
from interp_init.paths import check_path_names
from interp_init.tasks.base import DEFAULT_TASK
from interp_init.tasks.registry import make_task, registered_tasks, task_class
from training.config import OPTIONS, PRECISIONS, PRESETS, RunConfig, check_seed, make_run_config, preset_options
from training.launch.base import Job
from training.studies.recipe import carry_recipe, check_hold
from training.studies.records import check_protocol, targets

__all__ = [
    "GridPoint",
    "MAX_POINTS",
    "REGIMES",
    "REGIME_NAMES",
    "REPRODUCE_BUSY",
    "REPRODUCE_TASKS",
    "StudyJob",
    "StudySpec",
    "GridSpec",
    "NamedSpec",
    "NAMED_ONLY",
    "VARY",
    "format_value",
    "is_named",
    "named_config_problem",
    "named_runs",
    "record_study",
    "refuse_strangers",
    "regime_config",
    "resolve_run",
    "ResolvedRun",
    "SETTING_LAYERS",
    "regime_options",
    "strangers",
    "run_dirs",
]

# ------------------------------------------------------------------ regimes
# The regimes of a reproduction: small init reasons, large init memorizes (docs/science.md).
#
# The two regimes of a preset, ``small-init`` and ``large-init``, are data (:data:`REGIMES`:
# per preset, per regime, flat run options over the preset's; a key that names a task holds
# that task's options).  They share the preset's model, data and schedule and differ in their
# init; each task trains on its paper's architecture.  On ``symmetric`` the held-out (4,3)
# follows the inferential x - 10 under small init and the symmetric x - 6 under large init
# (NeurIPS 2024, Fig. 2); on ``id-ood`` small init composes the unseen pairs (the journal's
# Phase 3), large init fits the seen ones (Phase 2).  The flip's criteria live with the
# tasks (:meth:`interp_init.tasks.base.Task.flip_checks`).  The regimes are the named points of
# :meth:`training.studies.study.StudySpec.reproduction`; importing this module imports no torch.

#: The tasks a reproduction trains by default, in order: the registered tasks with a flip
#: (``Task.reproduces``).
REPRODUCE_TASKS: tuple[str, ...] = tuple(name for name in registered_tasks() if task_class(name).reproduces)
#: The regimes, in order.
REGIME_NAMES: tuple[str, ...] = ("small-init", "large-init")

#: preset -> regime -> flat run options (keys naming a task hold that task's options).
#: ``cpu`` and ``paper``: the NeurIPS paper's two sides of the flip (gamma 0.8 small init,
#: gamma 0.5 large init); a task may change a regime's options
#: (:meth:`interp_init.tasks.base.Task.regime_overrides`: ``cpu`` takes gamma 0.4 for id-ood's
#: large init); what ``cpu`` shows over seeds is in docs/faithful-models.md.
#: ``tiny``: smoke tests only; it learns too little to show the flip.
REGIMES: dict[str, dict[str, dict[str, Any]]] = {
    "cpu": {"small-init": {"gamma": 0.8}, "large-init": {"gamma": 0.5}},
    "paper": {"small-init": {"gamma": 0.8}, "large-init": {"gamma": 0.5}},
    "tiny": {"small-init": {"gamma": 0.8}, "large-init": {"gamma": 0.3}},
}

#: What a second ``reproduce`` into a folder another process is reproducing into is told.
REPRODUCE_BUSY = "is being reproduced into by another process ({owner}); wait for it to finish, or choose another --out"


def regime_options(preset: str, regime: str, task: str) -> dict[str, Any]:
    """The flat options a regime adds to ``preset`` for ``task``."""
    if preset not in REGIMES or preset not in PRESETS:
        known = sorted(set(REGIMES) & set(PRESETS))
        raise ValueError(f"unknown preset {preset!r} for reproduce; choose one of {known}")
    regimes = REGIMES[preset]
    if regime not in regimes:
        raise ValueError(f"unknown regime {regime!r} of preset {preset!r}; choose one of {sorted(regimes)}")
    task_class(task)  # an unknown task is refused here
    spec = regimes[regime]
    shared = {k: v for k, v in spec.items() if k not in registered_tasks()}
    return {**shared, **make_task(task).regime_overrides(preset, regime), **spec.get(task, {})}


#: Where a run's settings come from, in the order they apply, each layer overriding those
#: before it (:func:`resolve_run`, the one function that applies them; ``--show-recipe``
#: names each value's layer): the dataclass defaults (the papers' values,
#: :class:`training.config.RunConfig`), the task's own (its paper's architecture, its
#: vocabulary and context: ``Task.default_architecture``, ``vocab_size``, ``seq_len``), the
#: named preset (:data:`training.config.PRESETS`), the task's changes to that preset
#: (``Task.preset_overrides``), the regime of a reproduction (:data:`REGIMES`), the task's
#: changes to that regime (``Task.regime_overrides``), the options given (the command
#: line's flags, a spec's options), and last the papers' recipe carried to this run's width
#: and length (``--carry-recipe``, :func:`training.studies.recipe.carry_recipe`: it reads
#: the resolved gamma as the paper's and rescales lr, epochs or weight decay).
SETTING_LAYERS: tuple[str, ...] = (
    "default",
    "task",
    "preset",
    "task's preset",
    "regime",
    "task's regime",
    "given",
    "recipe",
)


@dataclass(frozen=True)
class ResolvedRun:
    """A run's config, per flat option the layer of :data:`SETTING_LAYERS` it came from, and
    the config before the recipe's layer (``uncarried``: its gamma is the paper's gamma the
    recipe was carried from; the config itself where nothing was carried)."""

    config: RunConfig
    sources: Mapping[str, str]
    uncarried: RunConfig

    def table(self) -> str:
        """Each flat option, its value and its layer, one a line (what ``--show-recipe`` prints
        below the recipe)."""
        flat = self.config.flat()
        width = max(map(len, flat))
        values = {name: repr(value) if isinstance(value, str) else str(value) for name, value in flat.items()}
        vwidth = max(map(len, values.values()))
        head = "settings: each option's value and the layer it came from (" + " < ".join(SETTING_LAYERS) + ")"
        return "\n".join([head, *(f"{n.ljust(width)}  {values[n].ljust(vwidth)}  {self.sources[n]}" for n in flat)])


def resolve_run(
    preset: str,
    task: str,
    options: Mapping[str, Any] | None = None,
    regime: str | None = None,
    carry: Sequence[str] | None = None,
) -> ResolvedRun:
    """The one place that decides a run's settings: ``preset`` on ``task``, in ``regime``
    (None: no regime), with the flat ``options`` given, the recipe's quantities ``carry``
    held (None: none), through the layers of :data:`SETTING_LAYERS` in their order.

    Example::

        >>> from training.studies.study import resolve_run
        >>> run = resolve_run("cpu", "symmetric", {"gamma": 0.8})
        >>> run.config.train.lr == run.config.flat()["lr"], run.sources["gamma"], run.sources["d_model"]
        (True, 'given', 'preset')
    """
    given = {k: v for k, v in (options or {}).items() if k != "task"}
    cls = task_class(task)
    regime_layers: dict[str, dict[str, Any]] = {"regime": {}, "task's regime": {}}
    if regime is not None:
        regime_options(preset, regime, task)  # an unknown preset or regime is refused here
        spec = REGIMES[preset][regime]
        regime_layers["regime"] = {k: v for k, v in spec.items() if k not in registered_tasks()}
        regime_layers["task's regime"] = {**make_task(task).regime_overrides(preset, regime), **spec.get(task, {})}
    layers = {
        "task": {
            "task": task,
            "architecture": cls.default_architecture,
            "d_vocab": cls.vocab_size,
            "n_ctx": cls.seq_len,
        },
        "preset": PRESETS[preset]() if preset in PRESETS else {},
        "task's preset": cls().preset_overrides(preset) if preset in PRESETS else {},
        **regime_layers,
        "given": given,
    }
    cfg = make_run_config(preset, task=task, **{**regime_layers["regime"], **regime_layers["task's regime"], **given})
    flat = cfg.flat()
    sources = {name: next((layer for layer in reversed(layers) if name in layers[layer]), "default") for name in flat}
    if carry is None:
        return ResolvedRun(cfg, sources, cfg)
    carried = carry_recipe(cfg, carry)
    sources.update({name: "recipe" for name, value in carried.flat().items() if value != flat[name]})
    return ResolvedRun(carried, sources, cfg)


def regime_config(
    preset: str, regime: str, task: str, seed: int, precision: str = "fp32", carry: Sequence[str] | None = None
) -> RunConfig:
    """The :class:`training.RunConfig` of one regime on one task (``precision``: ``"fp32"``,
    or ``"bf16"`` for the forward under bfloat16 autocast); ``carry``: the recipe's
    quantities to hold (:func:`training.studies.recipe.carry_recipe`, the regime's gamma read as
    the paper's; None: the preset as it is): :func:`resolve_run`."""
    return resolve_run(preset, task, {"seed": seed, "precision": precision}, regime, carry).config


#: Which random source a population varies: both (``seed``), the init's, or the data's.
VARY: tuple[str, ...] = ("both", "init", "data")
#: The most runs a spec's grid may have (checked before any config is built).
MAX_POINTS = 10_000
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


def _check_distinct(name: str, values: Any) -> None:
    if not isinstance(values, tuple) or not values:
        raise ValueError(f"{name} must be a non-empty tuple, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} has duplicates: {list(values)}; give each once")


@dataclass(frozen=True)
class GridPoint:
    """One grid point: its run-folder name, its grid values and its validated config."""

    name: str
    params: Mapping[str, Any]
    config: RunConfig


@dataclass(frozen=True)
class StudyJob(Job):
    """One run of a study: a job with its named point, seed, task and lr (None where the spec
    does not vary them; the lr None: the preset's)."""

    point: str = ""
    seed: int | None = None
    task: str | None = None
    lr: float | None = None


class _OneOfTwoForms(type):
    """``StudySpec(...)`` makes the form its arguments name: a :class:`GridSpec` for a ``grid``,
    a :class:`NamedSpec` for ``named`` points."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is not StudySpec:
            return super().__call__(*args, **kwargs)
        names = ("base", "grid", "named", *NAMED_ONLY, "description")
        if len(args) > len(names):
            raise TypeError(f"StudySpec takes at most {len(names)} arguments ({len(args)} given)")
        given = dict(zip(names, args))
        twice = sorted(set(given) & set(kwargs))
        unknown = sorted(set(kwargs) - set(names))
        if twice or unknown:
            raise TypeError(
                f"StudySpec got {'multiple values for' if twice else 'unexpected'} argument(s) {twice or unknown}"
            )
        given.update(kwargs)
        base = given.pop("base", {})
        if not isinstance(base, Mapping):
            raise ValueError(f"spec 'base' must be a mapping of options, got {type(base).__name__}")
        grid, named = given.pop("grid", {}), given.pop("named", {})
        if not isinstance(grid, Mapping) or not isinstance(named, Mapping) or bool(grid) == bool(named):
            raise ValueError(
                "spec 'grid' must be a non-empty mapping of option -> list of values, e.g. {\"gamma\": [0.3, 0.8]} (or give 'named' points instead, not both)"
            )
        if named:
            return NamedSpec(base, named, **given)
        if any(given.get(key, value) != value for key, value in NAMED_ONLY.items()):
            raise ValueError(
                "spec: seeds, tasks, lrs, fixed_seed, carry, protocol, logged_every, vary and single describe named points; a grid varies its own keys"
            )
        return GridSpec(base, grid, given.get("description", ""))


class StudySpec(metaclass=_OneOfTwoForms):
    """A study: ``base`` options shared by every run (flat options and ``preset``, default
    ``"paper"``), plus either a ``grid`` (:class:`GridSpec`: option -> list of distinct values,
    none of them in ``base``) or ``named`` points (:class:`NamedSpec`: name -> flat options; a
    key that is one of ``tasks`` holds that task's options).  The two forms are two types, each
    with its own fields: ``StudySpec(base, grid)`` makes a :class:`GridSpec`,
    ``StudySpec(base, named=...)`` a :class:`NamedSpec` (both are ``StudySpec``\\ s); a form
    read for the other's fields gives their values when not given (a grid's ``seeds`` are
    ``()``, a named study's ``grid`` is empty: :data:`NAMED_ONLY`)."""

    base: Mapping[str, Any]
    description: str
    grid: Mapping[str, Sequence[Any]] = MappingProxyType({})
    named: Mapping[str, Mapping[str, Any]] = MappingProxyType({})
    seeds: tuple[int, ...] = ()
    tasks: tuple[str, ...] = ()
    lrs: tuple[float, ...] | None = None
    protocol: str = "strict"
    logged_every: int | None = None
    vary: str = "both"
    fixed_seed: int | None = None
    single: bool = False
    carry: tuple[str, ...] | None = None

    def _check_base(self) -> list[str]:
        if not isinstance(self.base, Mapping):
            raise ValueError(f"spec 'base' must be a mapping of options, got {type(self.base).__name__}")
        allowed = sorted(OPTIONS)
        for key in self.base:
            if key not in OPTIONS and key != "preset":
                raise ValueError(f"spec base: unknown option {key!r}; allowed: preset, {', '.join(allowed)}")
        if self.preset not in PRESETS:
            raise ValueError(f"spec base: unknown preset {self.preset!r}; choose one of {sorted(PRESETS)}")
        if not isinstance(self.description, str):
            raise ValueError(f"spec 'description' must be a string, got {self.description!r}")
        return allowed

    def _check_grid(self, allowed: list[str]) -> None:
        if not isinstance(self.grid, Mapping) or not self.grid:
            raise ValueError(
                "spec 'grid' must be a non-empty mapping of option -> list of values, e.g. {\"gamma\": [0.3, 0.8]}"
            )
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
                raise ValueError(
                    f"spec grid[{key!r}] has duplicate values {list(values)!r} (values equal as numbers are one point); give each once"
                )
        if self.size > MAX_POINTS:  # counted before a single config is built
            shape = " x ".join(f"{len(v)} {k}" for k, v in self.grid.items())
            raise ValueError(
                f"spec grid has {self.size:,} points ({shape}), more than the {MAX_POINTS:,} a sweep may have; "
                "split it into smaller sweeps or give fewer values"
            )

    def _check_named(self, allowed: list[str]) -> None:
        if not isinstance(self.named, Mapping) or not self.named:
            raise ValueError("spec 'named' must be a non-empty mapping of point name -> options")
        for name, value in (("seeds", self.seeds), ("tasks", self.tasks)):
            if value != ():
                _check_distinct(name, value)
        for seed in self.seeds:
            check_seed("seeds", seed)
        for task in self.tasks:
            task_class(task)  # an unknown task is refused here
        for name, options in self.named.items():
            if not isinstance(name, str) or not name or format_value(name) != name:
                raise ValueError(
                    f"spec named point {name!r} is not a folder name; use letters, digits and . _ + - only"
                )
            if not isinstance(options, Mapping):
                raise ValueError(f"spec named[{name!r}] must be a mapping of options, got {options!r}")
            for key, value in options.items():
                if key not in OPTIONS and (key not in self.tasks or not isinstance(value, Mapping)):
                    raise ValueError(
                        f"spec named[{name!r}]: unknown option {key!r}; allowed: {', '.join(allowed)} (or one of the spec's tasks)"
                    )
        check_protocol(self.protocol, self.logged_every)
        if self.protocol == "paper" and self.lrs is None:
            raise ValueError("the paper protocol takes the best over an lr grid: give --lrs, e.g. --lrs 1e-4,2e-4,3e-4")
        if self.protocol == "strict" and self.lrs is not None:
            raise ValueError(
                "--lrs is the paper protocol's grid; the strict protocol reads each preset's own lr (use --protocol paper)"
            )
        if self.lrs is not None:
            _check_distinct("lrs", self.lrs)
            for lr in self.lrs:
                if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
                    raise ValueError(f"lrs must be finite positive numbers, got {lr!r}")
        if self.vary not in VARY:
            raise ValueError(f"vary must be one of {list(VARY)}, got {self.vary!r}")
        if (self.vary == "both") != (self.fixed_seed is None) or (self.vary != "both" and not self.seeds):
            raise ValueError("a fixed seed goes with --vary init or data only (it seeds the source held fixed)")
        check_seed("fixed_seed", self.fixed_seed, optional=True)
        if self.carry is not None:
            if not isinstance(self.carry, tuple) or not self.carry:
                raise ValueError(
                    f"carry must be a non-empty tuple of recipe quantities (training.studies.recipe.HOLDABLE), got {self.carry!r}"
                )
            if "adam_step" in check_hold(self.carry) and self.lrs is not None:
                raise ValueError(
                    "--carry-recipe adam-step sets the lr, and so does --lrs: hold other quantities, or drop --lrs"
                )
        if self.single and (len(self.seeds) != 1 or self.protocol != "strict" or self.vary != "both"):
            raise ValueError("a single-seed reproduction is one seed under the strict protocol, varying both sources")

    @classmethod
    def reproduction(
        cls,
        preset: str,
        seeds: tuple[int, ...],
        protocol: str = "strict",
        lrs: tuple[float, ...] | None = None,
        vary: str = "both",
        fixed_seed: int | None = None,
        precision: str = "fp32",
        tasks: tuple[str, ...] = REPRODUCE_TASKS,
        single: bool = False,
        carry: tuple[str, ...] | None = None,
        logged_every: int | None = None,
    ) -> StudySpec:
        """The flip's study: ``preset``'s regimes (:data:`training.studies.study.REGIMES`) as named
        points on ``tasks`` (each with the flip: refused otherwise) for ``seeds``."""
        _check_distinct("tasks", tasks)
        for task in tasks:
            targets(task)  # refuses a task without the flip
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        named = {regime: {task: regime_options(preset, regime, task) for task in tasks} for regime in REGIME_NAMES}
        return NamedSpec(
            {"preset": preset, "precision": precision},
            named=named,
            seeds=seeds,
            tasks=tasks,
            lrs=lrs,
            protocol=protocol,
            vary=vary,
            fixed_seed=fixed_seed,
            single=single,
            carry=carry,
            logged_every=logged_every,
        )

    @property
    def preset(self) -> str:
        return self.base.get("preset", "paper")

    @property
    def precision(self) -> str:
        return self.base.get("precision", "fp32")

    @property
    def size(self) -> int:
        """How many grid points."""
        return math.prod(len(v) for v in self.grid.values())

    # ------------------------------------------------------------------ the runs

    def jobs(self, out: str | Path) -> list[StudyJob]:
        """Every run, each once: a grid point's run folder is ``out/<point name>``; a named
        point's ``out[/<member>][/<task>]/<name>[__lr=X]`` (seed by seed, task by task, point
        by point, lr by lr; the paper protocol's preset lr, if in the grid, once)."""
        if self.grid:
            return [StudyJob(p.name, p.config, Path(out) / p.name, p.name) for p in self.points()]
        return list({job.name: job for job in self.runs(out)}.values())

    def member_dir(self, out: str | Path, seed: int) -> Path:
        """The folder of one seed's runs (see the module's layout)."""
        if self.single:
            return Path(out)
        name = {
            "both": f"seed-{seed}",
            "init": f"init-{seed}_data-{self.fixed_seed}",
            "data": f"init-{self.fixed_seed}_data-{seed}",
        }[self.vary]
        return Path(out) / name

    def seed_overrides(self) -> dict[str, int]:
        """The seed option that holds one source fixed (none when both vary)."""
        return {"both": {}, "init": {"data_seed": self.fixed_seed}, "data": {"init_seed": self.fixed_seed}}[self.vary]

    def runs(self, out: str | Path) -> list[StudyJob]:
        """Every named point's run, one per lr of the grid (the preset's lr may come twice:
        :meth:`jobs` names it once)."""
        root, base, runs = Path(out), {k: v for k, v in self.base.items() if k != "preset"}, []
        for seed in self.seeds or (None,):
            member = root if seed is None else self.member_dir(out, seed)
            for task in self.tasks or (None,):
                for name, options in self.named.items():
                    opts = {
                        **base,
                        **({} if task is None else {"task": task}),
                        **({} if seed is None else {"seed": seed}),
                    }
                    opts.update(
                        {k: v for k, v in options.items() if k not in self.tasks},
                        **options.get(task, {}),
                        **self.seed_overrides(),
                    )
                    try:
                        first = make_run_config(self.preset, **opts)
                    except ValueError as err:
                        raise ValueError(
                            f"spec named point {name!r}{'' if task is None else f' on task {task!r}'}: {err}"
                        ) from err
                    for lr in self.lrs or (None,):
                        cfg = first if lr is None else first.with_options(lr=float(lr))
                        run = name if cfg.train.lr == first.train.lr else f"{name}__lr={format_value(float(lr))}"
                        cfg = cfg if self.carry is None else carry_recipe(cfg, self.carry)
                        run_dir = (member if task is None else member / task) / run
                        runs.append(StudyJob(run_dir.relative_to(root).as_posix(), cfg, run_dir, name, seed, task, lr))
        return runs

    def points(self, source: str | Path | None = None) -> list[GridPoint]:
        """Every grid point with its validated config (raises ``ValueError`` naming the bad
        key, and ``source``, the spec's file, where given)."""
        try:
            return self._points()
        except ValueError as err:
            if source is None:
                raise
            raise ValueError(f"sweep spec {source}: {err}") from err

    def _points(self) -> list[GridPoint]:
        if not self.grid:
            raise ValueError("a spec of named points has no grid points; its runs are jobs(out)")
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
            out.append(GridPoint(name, {k: params[k] for k in keys}, cfg))
        return out

    # ------------------------------------------------------------------ copies

    def smoke_test(self, axes: Sequence[str] = ()) -> StudySpec:
        """A seconds-long copy of a grid for smoke runs: the ``tiny`` run preset, the first 2
        values of each key in ``axes`` (so a figure still has two cells along it), 1 of the rest."""
        grid = {key: list(values)[: 2 if key in axes else 1] for key, values in self.grid.items()}
        try:
            sized = set(preset_options("tiny", self.base.get("task", DEFAULT_TASK)))
        except ValueError:  # an unknown task: points() names it
            sized = set(preset_options("tiny"))
        # the tiny preset's sizes and schedule replace the spec's own (a spec that pins e.g.
        # n_train or epochs would otherwise keep its full-scale values)
        base = {key: value for key, value in self.base.items() if key not in sized}
        return StudySpec({**base, "preset": "tiny"}, {**self.grid, **grid}, description=self.description)

    def with_overrides(
        self, base: Mapping[str, Any] | None = None, grid: Mapping[str, Sequence[Any]] | None = None
    ) -> StudySpec:
        """A copy of a grid with ``base`` options and ``grid`` lists replaced or added (validated)."""
        new_base = {**self.base, **(base or {})}
        new_grid = {**self.grid, **(grid or {})}
        for key in base or {}:
            new_grid.pop(key, None)
        for key in grid or {}:
            new_base.pop(key, None)
        return StudySpec(new_base, new_grid, description=self.description)

    def seeded_from(self, seed: int) -> StudySpec:
        """A copy of a grid whose seeds start at ``seed``: a ``seed`` grid of n values becomes
        ``seed .. seed + n - 1``; without one, the base seed is ``seed``."""
        if "seed" in self.grid:
            return self.with_overrides(grid={"seed": [seed + i for i in range(len(self.grid["seed"]))]})
        return self.with_overrides(base={"seed": seed})

    # ------------------------------------------------------------------ files

    def to_dict(self) -> dict[str, Any]:
        """A grid's spec file: ``base``, ``grid`` and ``description``."""
        out: dict[str, Any] = {"base": dict(self.base), "grid": {k: list(v) for k, v in self.grid.items()}}
        return {**out, "description": self.description} if self.description else out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "spec") -> StudySpec:
        """A grid from its spec file's content (``where``: what the messages name)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping with 'base' and 'grid'")
        unknown = sorted(set(data) - {"base", "grid", "description"})
        if unknown:
            raise ValueError(f"{where}: unknown top-level key(s) {unknown}; use 'base', 'grid' (and 'description')")
        if "grid" not in data:
            raise ValueError(f"{where} has no 'grid'")
        for key, example in (("base", '{"preset": "tiny"}'), ("grid", '{"gamma": [0.3, 0.8]}')):
            if key in data and not isinstance(data[key], Mapping):
                raise ValueError(
                    f"{where}: '{key}' must be a table of option -> value such as {example}, got {type(data[key]).__name__} {data[key]!r:.60}"
                )
        return GridSpec(dict(data.get("base", {})), dict(data["grid"]), description=data.get("description", ""))

    @classmethod
    def from_file(cls, path: str | Path) -> StudySpec:
        """Read a spec from a ``.json`` or ``.toml`` file."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"sweep spec {path} does not exist (or is not a file)")
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"sweep spec {path} is not UTF-8 text (byte {err.start}); save it as UTF-8 JSON or TOML"
            ) from None
        if path.suffix.lower() in (".yaml", ".yml"):
            raise ValueError(
                f"sweep spec {path} is a YAML file, which is not read; write the spec as JSON (.json) or TOML (.toml)"
            )
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


# ------------------------------------------------------------------ study_folder
# A study folder is closed to strangers: the record of the runs a study names, the runs its
# readers read, and the refusal of a run or study written inside it that it does not name.
#
# A sweep names its runs in its spec, ``DIR/sweep.json``; every other study (a reproduction
# or population, the preset search, the GPU suite) records in ``DIR/study.json``
# (:data:`interp_init.outputs.STUDY_FILE`) its kind and the runs it names, each with the
# digest of its config (``{"kind": "reproduction", "runs": {"symmetric/small-init": "<sha256
# of its config.json>", ...}}``), when it holds its folder (:func:`record_study`).  Then:
#
# * a command that writes a run or a study inside a study folder it did not make is refused
#   unless every run it would write is one that study names, with the same config
#   (:func:`refuse_strangers`): ``interp-init train --out SWEEP/seed=7`` is refused,
#   ``reproduce --seed 3 --out POP/seed-3`` (the population's own seed 3) is not;
# * a study's readers read only the runs it names (:func:`named_runs`, :func:`run_dirs`):
#   a run folder it does not name is left out and said so (:func:`strangers`), and a named
#   folder whose ``config.json`` is not the named config is unreadable
#   (:func:`named_config_problem`).
#
# A reproduction made before records existed names no runs: nothing is written inside it.


def _digest(config: RunConfig) -> str:
    return config_digest(config.to_dict())


def record_study(out: str | Path, kind: str, jobs: Iterable[Any], *, merge: bool = True) -> Path:
    """Write ``out/study.json``: ``kind`` (``reproduction`` or ``search``; a sweep's spec is
    its record) and the runs of ``jobs`` (each with ``run_dir`` under ``out`` and
    ``config``) by their path below ``out``.  ``merge``: keep the runs recorded before (a
    population over more seeds, a search's next candidates); else these runs alone."""
    if kind not in STUDY_KINDS:
        raise ValueError(f"kind must be one of {STUDY_KINDS}, got {kind!r}")
    out = Path(out)
    runs = dict(_recorded_runs(out) or {}) if merge else {}
    for job in jobs:
        runs[Path(job.run_dir).absolute().relative_to(out.absolute()).as_posix()] = _digest(job.config)
    return write_json(out / STUDY_FILE, {"kind": kind, "runs": dict(sorted(runs.items()))})


def _recorded_runs(folder: Path) -> dict[str, str] | None:
    try:
        data = read_json(folder / STUDY_FILE, "")
    except (BadRunFile, OSError):
        return None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in runs.items()):
        return None
    return runs


def named_runs(folder: str | Path) -> dict[str, str] | None:
    """The runs the study folder ``folder`` names (path below it -> config digest): a
    sweep's ``sweep.json`` points, another study's record; None where it names none (not
    a study, or its spec or record is missing or damaged)."""
    folder = Path(folder)
    if (folder / SWEEP_SPEC_FILE).is_file():  # a sweep's spec is its record
        try:
            return {p.name: _digest(p.config) for p in StudySpec.from_file(folder / SWEEP_SPEC_FILE).points()}
        except (ValueError, OSError, UnicodeDecodeError):
            return None
    return _recorded_runs(folder)


def _enclosing_studies(path: Path) -> list[tuple[Path, str]]:
    """The study folders above ``path``, nearest first, each written as the user wrote
    ``path`` (relative where it was)."""
    return [
        (as_given(path, parent), kind)
        for parent in path.absolute().parents
        if (kind := folder_kind(parent)) in STUDY_KINDS
    ]


def refuse_strangers(jobs: Iterable[Any], out: str | Path, what: str, option: str = "--out") -> None:
    """Refuse to write ``what`` (the runs ``jobs``: each with ``run_dir`` and ``config``) at
    ``out`` inside a study folder unless the nearest study above ``out`` that records its
    runs names every one of them with the same config; a folder inside a study that names
    no runs (an older reproduction) is refused.  Nothing is read beyond the records."""
    out = Path(out)
    check_path_names(out, option)
    studies = _enclosing_studies(out)
    if not studies:
        return
    jobs = list(jobs)
    for study, kind in studies:
        names = named_runs(study)
        if names is None:
            continue
        for job in jobs:
            name = Path(job.run_dir).absolute().relative_to(study.absolute()).as_posix()
            if name not in names:
                raise ValueError(
                    f"{out} is inside the {kind} folder {study}, which reads only the runs it names, and {name} is not one of them "
                    f"({what} there would be read as part of that {kind}): choose an {option} outside {study}"
                )
            if names[name] != _digest(job.config):
                raise ValueError(
                    f"{out} is inside the {kind} folder {study}, which names {name} as one of its runs with another config than this "
                    f"one ({what} there would be read as that {kind}'s run): choose an {option} outside {study}"
                )
        return
    study, kind = studies[0]
    raise ValueError(
        f"{out} is inside the {kind} folder {study}, whose record of its runs ({STUDY_FILE}) is missing (an older version made it) or "
        f"damaged, so {what} there could be read as part of it: choose an {option} outside {study}"
    )


#: The options only named points take (a grid varies its own keys), with their values when not given.
NAMED_ONLY: dict[str, Any] = {
    name: getattr(StudySpec, name)
    for name in ("seeds", "tasks", "lrs", "protocol", "logged_every", "vary", "fixed_seed", "single", "carry")
}


@dataclass(frozen=True)
class GridSpec(StudySpec):
    """A sweep: ``base`` options and a ``grid`` (option -> list of distinct values), one run per
    point of the product (see :class:`StudySpec`)."""

    base: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        self._check_grid(self._check_base())


@dataclass(frozen=True)
class NamedSpec(StudySpec):
    """Named points over ``base`` (name -> flat options; a key that is one of ``tasks`` holds
    that task's options): ``seeds`` and ``tasks`` (each run once per seed and task; empty: the
    points as they are), ``lrs`` (the ``paper`` protocol's lr grid, required there and refused
    under ``strict``, which reads each preset's own lr; ``logged_every``: it reads only the
    epochs the released scripts log), ``vary`` (``both``: each seed seeds everything; ``init``
    or ``data``: the other source seeded by ``fixed_seed``), ``single`` (one seed whose runs
    lie in the study folder itself: ``reproduce --seed S``), ``carry`` (the paper's recipe
    quantities every run holds, :func:`training.studies.recipe.carry_recipe`, applied after
    the lr; None: the preset as it is)."""

    base: Mapping[str, Any] = field(default_factory=dict)
    named: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] = ()
    tasks: tuple[str, ...] = ()
    lrs: tuple[float, ...] | None = None
    protocol: str = "strict"
    logged_every: int | None = None
    vary: str = "both"
    fixed_seed: int | None = None
    single: bool = False
    carry: tuple[str, ...] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        self._check_named(self._check_base())


def run_dirs(root: str | Path, depth: int | None = None) -> list[Path]:
    """The run folders a reader reads at ``root``, sorted: the one lister of run folders, which
    every reader calls (the results table, the phase diagrams, the report, a stored study,
    ``experiments/``).

    ``root`` itself where it is a run folder (it holds ``config.json``); the runs a study
    folder names that hold a run (a sweep's ``sweep.json`` points, another study's record:
    :func:`named_runs`); in any other folder every run folder below it, ``depth`` levels
    down at most (None: any depth), never into a run folder's own subfolders, a hidden
    folder or a link, leaving out those a study folder between names not (:func:`is_named`).

    Example::

        >>> from training.studies.study import run_dirs
        >>> [p.name for p in run_dirs("runs/sweep-gamma")]  # doctest: +SKIP
        ['gamma=0.5__seed=0', 'gamma=0.8__seed=0']
    """
    root = Path(root)
    if (root / CONFIG_FILE).is_file():
        return [root]
    names = named_runs(root)
    if names is not None:
        return [root / name for name in sorted(names) if (root / name / CONFIG_FILE).is_file()]
    return [run for run in _run_folders_below(root, depth) if is_named(run, root)]


def _run_folders_below(root: Path, depth: int | None) -> list[Path]:
    """Every run folder below ``root`` (``depth`` levels at most, None: any), sorted; a run
    folder's own subfolders, hidden folders and links are not searched."""
    found, level = [], [root]
    while level and depth != 0:
        below = []
        for parent in level:
            try:
                children = sorted(
                    c for c in parent.iterdir() if c.is_dir() and not c.is_symlink() and not c.name.startswith(".")
                )
            except OSError:
                continue
            for child in children:
                (found if (child / CONFIG_FILE).is_file() else below).append(child)
        level, depth = below, None if depth is None else depth - 1
    return sorted(found)


def is_named(run_dir: str | Path, top: str | Path) -> bool:
    """False if a study folder between ``run_dir`` and ``top`` (both included) names runs
    and not this one (its readers leave it out); True otherwise."""
    run_dir, top = Path(run_dir).absolute(), Path(top).absolute()
    for folder in (run_dir.parent, *run_dir.parent.parents):
        names = named_runs(folder)
        if names is not None:
            return run_dir.relative_to(folder).as_posix() in names
        if folder == top or top not in folder.parents:
            return True
    return True


def strangers(folder: str | Path, depth: int = 1) -> list[str]:
    """The run folders in ``folder`` (down to ``depth`` levels) its study does not name: left
    out by its readers (empty when ``folder`` names no runs)."""
    folder = Path(folder)
    names = named_runs(folder)
    if names is None:
        return []
    found = [p.relative_to(folder).as_posix() for p in _run_folders_below(folder, depth)]
    return [name for name in found if name not in names]


def named_config_problem(folder: str | Path, names: Mapping[str, str], name: str) -> str | None:
    """Why the run folder ``folder/name`` is not the run its study names (its
    ``config.json`` has another digest), or None if it is (or the study names none)."""
    want = names.get(name)
    if want is None:
        return None
    try:
        data = read_json(Path(folder) / name / CONFIG_FILE, "")
    except (BadRunFile, OSError) as err:
        return str(err)
    if config_digest(data) != want:
        return f"{Path(folder) / name / CONFIG_FILE} is not the config its study ({Path(folder) / STUDY_FILE}) names for it: the folder holds another run"
    return None
