"""Studies: a spec names its runs (``jobs(out)``: :class:`training.launch.Job` s), one launcher
trains them (:func:`run_study`), one reader reads them (:mod:`training.records`); docs/pipeline.md.

Specs: a sweep (:class:`training.sweep.SweepSpec`: a base and a grid) and a reproduction
(:class:`ReproductionSpec`: the regimes of :mod:`training.regimes` over seeds and an lr
grid; a single seed is a population of one).  A reproduction's folder::

    DIR/summary.json                 the population (Population.to_dict; summary-P.json: per protocol P)
    DIR/<task>/<regime>              one seed (``reproduce --seed S``)
    DIR/seed-S/<task>/<regime>       with --seeds: where `reproduce --seed S --out DIR/seed-S` puts it
    DIR/seed-S/<task>/<regime>__lr=X the paper protocol's other learning rates
    DIR/seed-S/summary.json          strict protocol: what `reproduce --seed S --out DIR/seed-S` writes

Varying one random source only (:attr:`ReproductionSpec.vary`) names the members
``init-S_data-F`` or ``init-F_data-S`` (F: the fixed seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from interp_init.runfolder import RunStatus, write_json
from training.config import PRECISIONS, RunConfig, check_seed
from training.launch.base import STUDY_BUSY, Job, JobReturn, Launcher, check_jobs, hold_study, launch
from training.population import SUMMARY_FILE, VARY, Population, SeedRow, regime_result
from training.recipe import carry_recipe, check_hold
from training.regimes import REGIME_NAMES, REPRODUCE_BUSY, REPRODUCE_TASKS, regime_config
from training.selection import check_protocol, targets


class StudySpec(Protocol):
    """What every study spec offers: its runs inside a study folder."""

    def jobs(self, out: str | Path) -> list[Job]: ...


def run_study(
    jobs: Sequence[Job], out: str | Path, launcher: Launcher, busy: str = STUDY_BUSY, held: Callable[[], Any] | None = None, kind: str = "reproduction"
) -> list[JobReturn]:
    """Train ``jobs`` into the study folder ``out`` with ``launcher``: refuse a folder that
    holds another run before anything trains, hold ``out`` (a second process is refused with
    ``busy``; ``kind`` the folder's kind, :func:`~training.launch.hold_study`), call ``held`` (checks and records that need the folder held), skip the runs
    that ended, launch the rest; one :class:`~training.launch.JobReturn` per job, in order."""
    check_jobs(jobs)
    with hold_study(out, busy, kind):
        if held is not None:
            held()
        check_jobs(jobs)  # again: another process may have changed the folder before this one held it
        return launch(jobs, launcher)


def _check_distinct(name: str, values: Any) -> None:
    if not isinstance(values, tuple) or not values:
        raise ValueError(f"{name} must be a non-empty tuple, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} has duplicates: {list(values)}; give each once")


@dataclass(frozen=True)
class ReproductionJob(Job):
    """One run of a reproduction: a job with its seed, task, regime and lr (None: the preset's)."""

    seed: int = 0
    task: str = ""
    regime: str = ""
    lr: float | None = None


@dataclass(frozen=True)
class ReproductionSpec:
    """A reproduction: ``preset``'s regimes on ``tasks`` for ``seeds`` under ``protocol``.

    ``lrs``: the learning-rate grid of the ``paper`` protocol (required there, refused
    under ``strict``, which reads each preset's own lr).  ``vary``: ``both`` (each seed
    seeds everything, as ``--seed``), ``init`` (the data seeded by ``fixed_seed``) or
    ``data`` (the init seeded by ``fixed_seed``).  ``single``: one seed whose runs lie in
    the study folder itself (``reproduce --seed S``), not in ``seed-S``.  ``carry``: the
    quantities of the paper's recipe every run holds (:func:`training.recipe.carry_recipe`,
    applied after the lr of the grid is set; ``--carry-recipe``); None: the preset as it is."""

    preset: str
    seeds: tuple[int, ...]
    protocol: str = "strict"
    lrs: tuple[float, ...] | None = None
    vary: str = "both"
    fixed_seed: int | None = None
    precision: str = "fp32"
    tasks: tuple[str, ...] = REPRODUCE_TASKS
    single: bool = False
    carry: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check_distinct("seeds", self.seeds)
        _check_distinct("tasks", self.tasks)
        for task in self.tasks:
            targets(task)  # refuses a task without the flip
        for seed in self.seeds:
            check_seed("seeds", seed)
        check_protocol(self.protocol)
        if self.protocol == "paper" and self.lrs is None:
            raise ValueError("the paper protocol takes the best over an lr grid: give --lrs, e.g. --lrs 1e-4,2e-4,3e-4")
        if self.protocol == "strict" and self.lrs is not None:
            raise ValueError("--lrs is the paper protocol's grid; the strict protocol reads each preset's own lr (use --protocol paper)")
        if self.lrs is not None:
            _check_distinct("lrs", self.lrs)
            for lr in self.lrs:
                if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
                    raise ValueError(f"lrs must be finite positive numbers, got {lr!r}")
        if self.vary not in VARY:
            raise ValueError(f"vary must be one of {list(VARY)}, got {self.vary!r}")
        if (self.vary == "both") != (self.fixed_seed is None):
            raise ValueError("a fixed seed goes with --vary init or data only (it seeds the source held fixed)")
        check_seed("fixed_seed", self.fixed_seed, optional=True)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.carry is not None:
            if not isinstance(self.carry, tuple) or not self.carry:
                raise ValueError(f"carry must be a non-empty tuple of recipe quantities (training.recipe.HOLDABLE), got {self.carry!r}")
            if "adam_step" in check_hold(self.carry) and self.lrs is not None:
                raise ValueError("--carry-recipe adam-step sets the lr, and so does --lrs: hold other quantities, or drop --lrs")
        if self.single and (len(self.seeds) != 1 or self.protocol != "strict" or self.vary != "both"):
            raise ValueError("a single-seed reproduction is one seed under the strict protocol, varying both sources")

    def member_dir(self, out: str | Path, seed: int) -> Path:
        """The folder of one seed's runs (see the module's layout)."""
        if self.single:
            return Path(out)
        name = {"both": f"seed-{seed}", "init": f"init-{seed}_data-{self.fixed_seed}", "data": f"init-{self.fixed_seed}_data-{seed}"}[self.vary]
        return Path(out) / name

    def seed_overrides(self) -> dict[str, int]:
        """The seed option that holds one source fixed (none when both vary)."""
        return {"both": {}, "init": {"data_seed": self.fixed_seed}, "data": {"init_seed": self.fixed_seed}}[self.vary]

    def runs(self, out: str | Path) -> list[ReproductionJob]:
        """Every run, seed by seed, task by task, regime by regime, lr by lr."""
        from training.sweep.spec import format_value

        runs, root = [], Path(out)
        for seed in self.seeds:
            member = self.member_dir(out, seed)
            for task in self.tasks:
                for regime in REGIME_NAMES:
                    base = regime_config(self.preset, regime, task, seed, self.precision).with_options(**self.seed_overrides())
                    for lr in self.lrs or (None,):
                        cfg = base if lr is None else base.with_options(lr=float(lr))
                        name = regime if cfg.train.lr == base.train.lr else f"{regime}__lr={format_value(float(lr))}"
                        cfg = cfg if self.carry is None else carry_recipe(cfg, self.carry)
                        run_dir = member / task / name
                        runs.append(ReproductionJob(run_dir.relative_to(root).as_posix(), cfg, run_dir, seed, task, regime, lr))
        return runs

    def jobs(self, out: str | Path) -> list[Job]:
        """The distinct runs to train (the paper protocol's preset lr, if in the grid, once)."""
        return list({run.name: run for run in self.runs(out)}.values())

    def read(self, out: str | Path, seeds: Sequence[int] | None = None) -> Population:
        """The population (of ``seeds``, default all) from the run folders under ``out``, under the protocol."""
        runs = self.runs(out)
        rows = []
        for seed in self.seeds if seeds is None else seeds:
            results = []
            for task in self.tasks:
                for regime in REGIME_NAMES:
                    mine = [r for r in runs if (r.seed, r.task, r.regime) == (seed, task, regime)]
                    dirs = list(dict.fromkeys(r.run_dir for r in mine))
                    results.append(regime_result(task, regime, mine[0].config.init.gamma, dirs, self.protocol))
            overrides = self.seed_overrides()
            rows.append(SeedRow(seed, tuple(results), overrides.get("init_seed"), overrides.get("data_seed")))
        return Population(self.preset, self.protocol, tuple(rows), self.lrs, self.vary, self.fixed_seed)

    def write_summaries(self, out: str | Path, population: Population) -> None:
        """``out/summary.json`` (and with several seeds ``summary-<protocol>.json`` and,
        under ``strict``, each member's own summary: a population of one)."""
        write_json(Path(out) / SUMMARY_FILE, population.to_dict())
        if self.single:
            return
        write_json(Path(out) / f"summary-{self.protocol}.json", population.to_dict())
        if self.protocol == "strict":
            for row in population.rows:
                one = Population(self.preset, self.protocol, (row,), self.lrs, self.vary, self.fixed_seed)
                write_json(self.member_dir(out, row.seed) / SUMMARY_FILE, one.to_dict())


#: The name the population's plan had before studies were specs.
PopulationPlan = ReproductionSpec


def reproduce_study(spec: ReproductionSpec, out: str | Path, launcher: Launcher) -> tuple[Population | None, list[JobReturn]]:
    """Train every run of ``spec`` into ``out`` (resumable) with ``launcher``, read the
    population and write its summaries; return it with the launch's returns (the population
    None while a launcher that does not wait, :attr:`~training.launch.Launcher.waits`, left
    runs submitted and unfinished: there is nothing to read yet)."""
    returns = run_study(spec.jobs(out), out, launcher, REPRODUCE_BUSY)
    if not launcher.waits and any(r.status == RunStatus.RUNNING for r in returns):
        return None, returns
    population = spec.read(out)
    spec.write_summaries(out, population)
    return population, returns
