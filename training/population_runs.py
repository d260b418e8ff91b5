"""Train a population: every regime of both tasks for every seed (and lr), then read it.

:func:`reproduce_population` is ``interp-init reproduce --seeds``.  Its folder layout::

    DIR/summary.json                 the population (training.population.Population.to_dict)
    DIR/summary-P.json               the same, kept per protocol P (strict, paper): both
                                     protocols read from one folder stay side by side
    DIR/report.html                  the first seed's runs, and the population in the verdict
    DIR/seed-S/summary.json          strict protocol: what `reproduce --seed S --out DIR/seed-S` writes
    DIR/seed-S/<task>/<regime>       the run at the preset's lr: where `reproduce --seed S` puts it
    DIR/seed-S/<task>/<regime>__lr=X the paper protocol's other learning rates

so one seed's runs are where ``interp-init reproduce --seed S --out DIR/seed-S`` would
have put them (a rerun of either reads them, not retrains).  A population that varies one
random source only (:attr:`PopulationPlan.vary`) names its members ``init-S_data-F`` or
``init-F_data-S`` (F: the fixed seed), since their configs differ from ``--seed S``'s.

Runs train two at a time on a 2-core CPU (the sweep's worker pool, one torch thread
each), and on a CUDA GPU as ensembles of same-shape runs
(:func:`training.ensemble.train_ensemble`: each task's regimes, seeds and lrs together).
Finished runs are read, not retrained; an unfinished one resumes.
"""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_init.outputs import output_folder
from interp_init.runfolder import RunFolder, write_json
from training.config import PRECISIONS, RunConfig, check_seed
from training.population import VARY, Population, SeedRow, regime_result
from training.protocol import check_protocol, targets
from training.reproduce import REGIME_NAMES, REPRODUCE_BUSY, REPRODUCE_TASKS, _train_run, check_workers, default_workers, on_gpu, regime_config, summary_row


class PopulationFailed(RuntimeError):
    """Some runs of a population failed; the others are kept in their folders."""


@dataclass(frozen=True)
class Job:
    """One run of a population: which seed, task, regime and lr, its config and folder."""

    seed: int
    task: str
    regime: str
    lr: float | None
    config: RunConfig
    run_dir: Path


def _check_distinct(name: str, values: Any) -> None:
    if not isinstance(values, tuple) or not values:
        raise ValueError(f"{name} must be a non-empty tuple, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} has duplicates: {list(values)}; give each once")


@dataclass(frozen=True)
class PopulationPlan:
    """What a population trains: ``preset`` on ``seeds`` under ``protocol``.

    ``lrs``: the learning-rate grid of the ``paper`` protocol (required there, refused
    under ``strict``, which reads each preset's own lr).  ``vary``: ``both`` (each seed
    seeds everything, as ``--seed``), ``init`` (the data seeded by ``fixed_seed``) or
    ``data`` (the init seeded by ``fixed_seed``)."""

    preset: str
    seeds: tuple[int, ...]
    protocol: str = "strict"
    lrs: tuple[float, ...] | None = None
    vary: str = "both"
    fixed_seed: int | None = None
    precision: str = "fp32"
    tasks: tuple[str, ...] = REPRODUCE_TASKS

    def __post_init__(self) -> None:
        _check_distinct("seeds", self.seeds)
        _check_distinct("tasks", self.tasks)
        for task in self.tasks:
            targets(task)
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

    def member_dir(self, out: str | Path, seed: int) -> Path:
        """The folder of one seed's runs (see the module's layout)."""
        name = {"both": f"seed-{seed}", "init": f"init-{seed}_data-{self.fixed_seed}", "data": f"init-{self.fixed_seed}_data-{seed}"}[self.vary]
        return Path(out) / name

    def seed_overrides(self) -> dict[str, int]:
        """The seed option that holds one source fixed (none when both vary)."""
        return {"both": {}, "init": {"data_seed": self.fixed_seed}, "data": {"init_seed": self.fixed_seed}}[self.vary]

    def jobs(self, out: str | Path) -> list[Job]:
        """Every run, seed by seed, task by task, regime by regime, lr by lr."""
        from training.sweep.spec import format_value

        jobs = []
        for seed in self.seeds:
            member = self.member_dir(out, seed)
            for task in self.tasks:
                for regime in REGIME_NAMES:
                    base = regime_config(self.preset, regime, task, seed, self.precision).with_options(**self.seed_overrides())
                    for lr in self.lrs or (None,):
                        cfg = base if lr is None else base.with_options(lr=float(lr))
                        name = regime if cfg.train.lr == base.train.lr else f"{regime}__lr={format_value(float(lr))}"
                        jobs.append(Job(seed, task, regime, lr, cfg, member / task / name))
        return jobs


def train_jobs(jobs: list[Job], device: str = "auto", workers: int | None = None, progress: bool = True, ensemble: bool | None = None) -> dict[str, str]:
    """Train (or read, or resume) every job's run; return run folder -> error of those that failed.

    ``ensemble`` (default: on a CUDA GPU): same-shape runs train together
    (:func:`training.ensemble.train_ensemble`); otherwise ``workers`` runs at once in
    worker processes of one torch thread (default :func:`default_workers`), or, with one
    worker, here one after another.  A run that fails does not stop the others."""
    failed: dict[str, str] = {}
    ensemble = on_gpu(device) if ensemble is None else ensemble
    workers = (1 if ensemble else default_workers(device)) if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")

    def fail(job_dirs: list[Path], err: BaseException) -> None:
        for d in job_dirs:
            failed[str(d)] = f"{type(err).__name__}: {err}"
        if progress:
            print(f"failed: {', '.join(map(str, job_dirs))}: {type(err).__name__}: {err}\n{traceback.format_exc()}", file=sys.stderr, flush=True)

    if ensemble:
        from training.ensemble import train_ensemble
        from training.sweep.runner import ensemble_key

        groups: dict[Any, list[Job]] = {}
        for job in jobs:
            groups.setdefault(ensemble_key(job.config, job.run_dir), []).append(job)
        for group in groups.values():
            if progress:
                print(f"ensemble of {len(group)} runs ({group[0].task})", file=sys.stderr, flush=True)
            try:
                train_ensemble([j.config for j in group], [j.run_dir for j in group], device=device, progress=progress)
            except Exception as err:  # noqa: BLE001 - the group fails, the other groups go on
                fail([j.run_dir for j in group], err)
    elif workers == 1:
        for job in jobs:
            try:
                _train_run(job.config, job.run_dir, device, progress, None)
            except Exception as err:  # noqa: BLE001 - one run fails, the others go on
                fail([job.run_dir], err)
    else:
        from training.sweep import worker_pool

        if progress:
            print(f"training {len(jobs)} runs, {workers} at a time, one torch thread each", file=sys.stderr, flush=True)
        with worker_pool(workers, 1) as pool:
            futures = [(job, pool.submit(_train_run, job.config, job.run_dir, device, False, 1)) for job in jobs]
            for job, future in futures:
                try:
                    future.result()
                except Exception as err:  # noqa: BLE001
                    fail([job.run_dir], err)
    return failed


def read_population(plan: PopulationPlan, out: str | Path) -> Population:
    """The population of ``plan`` from the run folders under ``out``, under its protocol."""
    jobs = plan.jobs(out)
    rows = []
    for seed in plan.seeds:
        results = []
        for task in plan.tasks:
            for regime in REGIME_NAMES:
                mine = [j for j in jobs if (j.seed, j.task, j.regime) == (seed, task, regime)]
                results.append(regime_result(task, regime, mine[0].config.init.gamma, list(dict.fromkeys(j.run_dir for j in mine)), plan.protocol))
        overrides = plan.seed_overrides()
        rows.append(SeedRow(seed, tuple(results), overrides.get("init_seed"), overrides.get("data_seed")))
    return Population(plan.preset, plan.protocol, tuple(rows), plan.lrs, plan.vary, plan.fixed_seed)


def write_member_summaries(plan: PopulationPlan, out: str | Path) -> None:
    """Under ``strict``, each seed's ``summary.json`` in the single-seed shape (what
    ``reproduce --seed S --out DIR/seed-S`` writes)."""
    if plan.protocol != "strict":
        return
    for seed in plan.seeds:
        member = plan.member_dir(out, seed)
        summary: dict[str, dict[str, Any]] = {task: {} for task in plan.tasks}
        for job in (j for j in plan.jobs(out) if j.seed == seed):
            metrics = RunFolder(job.run_dir).read_metrics() or {}
            summary[job.task][job.regime] = summary_row(job.task, job.config, metrics, job.run_dir)
        write_json(member / "summary.json", summary)


def reproduce_population(
    plan: PopulationPlan, out: str | Path, device: str = "auto", workers: int | None = None, progress: bool = True
) -> Population:
    """Train every run of ``plan`` into ``out`` (resumable), read the population, write
    ``out/summary.json`` and ``out/summary-<protocol>.json`` (and each member's, under
    ``strict``); raise
    :class:`PopulationFailed` naming the runs that failed (the others stay done)."""
    if workers is not None:
        check_workers(workers)
    with output_folder(out, "a reproduction", "reproduction", REPRODUCE_BUSY):  # never nested in other runs' folders
        return _reproduce_population_held(plan, out, device, workers, progress)


def _reproduce_population_held(plan: PopulationPlan, out: str | Path, device: str, workers: int | None, progress: bool) -> Population:
    """:func:`reproduce_population` while this process holds ``out``."""
    jobs = list({job.run_dir: job for job in plan.jobs(out)}.values())
    if progress:
        print(f"{len(jobs)} runs: {len(plan.seeds)} seeds x {len(plan.tasks)} tasks x {len(REGIME_NAMES)} regimes"
              + (f" x {len(plan.lrs)} lrs" if plan.lrs else "") + f" -> {out}", file=sys.stderr, flush=True)  # fmt: skip
    failed = train_jobs(jobs, device, workers, progress)
    if failed:
        listed = "; ".join(f"{d}: {e}" for d, e in list(failed.items())[:3]) + ("; ..." if len(failed) > 3 else "")
        raise PopulationFailed(f"{len(failed)} of {len(jobs)} runs failed ({listed}); the others are kept: rerun to resume")
    population = read_population(plan, out)
    write_member_summaries(plan, out)
    write_json(Path(out) / f"summary-{plan.protocol}.json", population.to_dict())
    write_json(Path(out) / "summary.json", population.to_dict())
    return population


def parse_list(text: str, kind: type, name: str) -> tuple[Any, ...]:
    """A comma-separated command-line list (``31,32,33``, ``1e-4,2e-4``) as a tuple of ``kind``."""
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts) and any(parts):
        raise ValueError(f"{name} has an empty entry in {text!r} (two commas in a row, or one at an end); give each value once, e.g. {'31,32,33' if kind is int else '1e-4,2e-4,3e-4'}")
    try:
        values = tuple(kind(p) for p in parts if p)
    except ValueError:
        raise ValueError(f"{name} must be a comma-separated list of {kind.__name__}s, e.g. {'31,32,33' if kind is int else '1e-4,2e-4,3e-4'}; got {text!r}") from None
    if not values:
        raise ValueError(f"{name} is empty; give at least one value")
    return values


def population_plan(
    preset: str, seeds: str, protocol: str, lrs: str | None, vary: str, fixed_seed: int | None, precision: str, tasks: Sequence[str] | None = None
) -> PopulationPlan:
    """The :class:`PopulationPlan` of ``reproduce --seeds`` (``--fixed-seed`` defaults to
    the first seed when one source is varied)."""
    seed_list = parse_list(seeds, int, "--seeds")
    if vary != "both" and fixed_seed is None:
        fixed_seed = seed_list[0]
    lr_list = parse_list(lrs, float, "--lrs") if lrs is not None else None
    return PopulationPlan(preset, seed_list, protocol, lr_list, vary, fixed_seed, precision, REPRODUCE_TASKS if tasks is None else tuple(tasks))


def run_population_cli(plan: PopulationPlan, out: str | Path, device: str, workers: int | None, progress: bool) -> tuple[str, str | None]:
    """``interp-init reproduce --seeds``: train, read, write the summary and the report;
    return the text to print and one line on what did not complete (None if all did)."""
    import time

    from training.report import write_report

    start = time.perf_counter()
    try:
        population = reproduce_population(plan, out, device=device, workers=workers, progress=progress)
    except PopulationFailed as err:
        return "", str(err)
    first = [str(j.run_dir) for j in plan.jobs(out) if j.seed == plan.seeds[0]]
    report = write_report(list(dict.fromkeys(first)), Path(out) / "report.html")
    lines = [
        f"preset {plan.preset}, seeds {list(plan.seeds)}, {plan.precision}, {time.perf_counter() - start:.0f} s in this call",
        population.format(),
        f"summary: {Path(out) / 'summary.json'} (this protocol's also kept as {Path(out) / f'summary-{plan.protocol}.json'})",
        f"report: {report} (the runs of seed {plan.seeds[0]}; the population in its verdict)",
    ]
    bad = [f"seed {r.seed} {x.task}/{x.regime}: {x.status}" for r in population.rows for x in r.results if x.status != "completed"]
    n_runs = len(population.rows) * len(plan.tasks) * len(REGIME_NAMES)
    problem = f"{len(bad)} of {n_runs} regimes did not complete ({'; '.join(bad[:3])}): see {Path(out) / 'summary.json'}" if bad else None
    return "\n".join(lines), problem


def single_seed_cli(
    preset: str, seed: int, out: str | Path, device: str, precision: str, workers: int | None, progress: bool, tasks: Sequence[str] | None = None
) -> tuple[str, str | None]:
    """``interp-init reproduce --seed S``: the four runs, their table, the flip's verdict on
    this one draw, the report; return the text and one line on the runs that did not complete."""
    import time

    from training.report import write_report
    from training.reproduce import check_flip, failed_criteria, format_table, reproduce

    start = time.perf_counter()
    summary = reproduce(preset, seed, out, device=device, progress=progress, precision=precision, workers=workers, tasks=tasks)
    checks = check_flip(summary)
    run_dirs = [row["run_dir"] for regimes in summary.values() for row in regimes.values()]
    lines = [
        f"preset {preset}, seed {seed}, {precision}, {time.perf_counter() - start:.0f} s in this call",
        format_table(summary),
        "flip reproduced (all criteria met)" if checks["all"] else f"flip NOT reproduced; failed: {failed_criteria(checks)}",
        f"this is one draw (seed {seed}): how often each criterion holds over seeds is what --seeds 31,32,33,... measures (docs/faithful-models.md)",
        f"summary: {Path(out) / 'summary.json'}",
        f"report: {write_report(run_dirs, Path(out) / 'report.html')}",
    ]
    bad = [f"{task}/{regime}: {row['status']}" for task, regimes in summary.items() for regime, row in regimes.items() if row["status"] != "completed"]
    problem = f"{len(bad)} of {len(run_dirs)} runs did not complete ({'; '.join(bad)}): see {Path(out) / 'summary.json'}" if bad else None
    return "\n".join(lines), problem


def reproduce_job(
    preset: str, seed: int | None, seeds: str | None, protocol: str, lrs: str | None, vary: str, fixed_seed: int | None,
    out: str | Path, device: str, precision: str, workers: int | None, progress: bool, tasks: Sequence[str] | None = None,
) -> tuple[str, str | None]:  # fmt: skip
    """``interp-init reproduce``: one draw (``seed``, default 0) or a population (``seeds``,
    a comma list); return the text to print and one line on what did not complete."""
    if seeds is not None and seed is not None:
        raise ValueError("give --seed S (one draw) or --seeds S1,S2,... (a population), not both")
    if seeds is None:
        if (protocol, lrs, vary, fixed_seed) != ("strict", None, "both", None):
            raise ValueError("--protocol paper, --lrs, --vary and --fixed-seed describe a population: give --seeds S1,S2,...")
        return single_seed_cli(preset, 0 if seed is None else seed, out, device, precision, workers, progress, tasks)
    plan = population_plan(preset, seeds, protocol, lrs, vary, fixed_seed, precision, tasks)
    return run_population_cli(plan, out, device, workers, progress)
