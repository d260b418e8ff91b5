"""The ``interp-init`` command line: a thin layer over the library's dataclasses.

``main(argv)`` is the testable entry point; it returns the exit code:

* 0: everything the command was asked to do was done;
* 1: the command ran but some of its work failed or diverged (a diverged ``train``, a
  sweep with failed or diverged runs, a report or phase diagram over failed, diverged or
  missing runs); it ends with one line on stderr, ``interp-init: ...``, saying what and
  where to look;
* 2: bad input (one line naming the problem, ``interp-init: error: ...``, no traceback;
  nothing is written) or a usage error;
* 130 / 143 / 129: interrupted by SIGINT / SIGTERM / SIGHUP (one line, after the locks and
  temporary files are removed).

Every command lives here; their shared options in :mod:`training.cli.flags`, and this
package is the only one that imports click.  The ``train``
command has one flag per run-config field (``--d-model``, ``--weight-decay``, ...), named
like a sweep spec's keys (with underscores), its help and choices read from the config
dataclasses' fields (:data:`FIELDS`, :mod:`training.config`).  SIGTERM, SIGINT and
SIGHUP end a command cleanly (:mod:`training.launch.executor`).  The modules imported at the top (the configs, the
task definitions, the sweep spec, the report's and phase diagrams' choices) import
neither torch nor TransformerLens, so ``--help`` is fast; every module that needs torch
is imported inside the command that uses it.  Without ``--preset``, ``train`` and
``reproduce`` take the same default (:func:`default_preset`): ``paper`` on a CUDA GPU,
``cpu`` otherwise.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

import interp_init
from interp_init.runfolder import RunStatus
from training.cli.errors import run_command
from training.cli.flags import (
    PRESET_CHOICES,
    RegistryChoice,
    backend_options,
    carry_option,
    config_options,
    on_this_machine,
    parse_carry,
    run_options,
    slurm_options,
)
from training.cli.summaries import SummaryGroup
from training.config import PRECISIONS, check_cores, check_device, default_preset, parse_workers
from training.launch.backends import backend_names
from training.launch.executor import ignore_stopping
from training.launch.slurm import submitted_line
from training.studies.phase import FIGURE_NAMES, ID_THRESHOLD, LOSS_THRESHOLD, OOD_THRESHOLD, PAIR_ACC_THRESHOLD
from training.studies.population import failed_criteria, protocol_summary, train_study
from training.studies.recipe import recipe_table, train_epilog
from training.studies.records import LOGGED_HELP, PROTOCOLS
from training.studies.report.config import IMAGE_FORMATS, PROJECTIONS, ReportConfig
from training.studies.study import REGIMES, REPRODUCE_TASKS, VARY, StudySpec


@click.group(cls=SummaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    interp_init.__version__,
    "--version",
    prog_name="interp-init",
    message="%(prog)s %(version)s",
    help="Print the installed version (from the package metadata) and exit.",
)
def cli() -> None:
    """Train gamma-initialized transformers on anchor functions and probe what they learned.

    Exit codes: 0 done; 1 some of the work failed or diverged (one line on stderr says
    what); 2 bad input or usage; 130/143/129 interrupted (SIGINT/SIGTERM/SIGHUP).
    """


@cli.command(
    "train",
    short_help="Train one model into a run folder.",
    epilog="Options not given take the --preset's value. A diverged run (non-finite loss) exits with code 1.\n\n"
    + train_epilog(),
)
@run_options
@config_options
@carry_option
@click.option(
    "--show-recipe",
    is_flag=True,
    help="Print the recipe's quantities of the resolved run (after --carry-recipe) beside the paper's, and exit; trains nothing.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Run folder to write (resumed if it holds an unfinished run of the same config). Required unless --show-recipe.",
)
def train_command(
    task: str,
    preset: str | None,
    seed: int,
    init_seed: int | None,
    data_seed: int | None,
    device: str,
    quiet: bool,
    carry: str | None,
    show_recipe: bool,
    out: str | None,
    **kwargs: Any,
) -> None:
    """Train one model into a run folder (config.json, metrics.json, model.safetensors)."""
    from training.studies.study import resolve_run

    if out is None and not show_recipe:
        raise click.UsageError("Missing option '--out'.")
    if not show_recipe:
        check_device(device)
    preset = _preset_or_default(preset, device)
    given = {k: v for k, v in kwargs.items() if v is not None}  # the config flags given (the others take the preset's)
    given.update(seed=seed, init_seed=init_seed, data_seed=data_seed)
    run = resolve_run(preset, task, given, carry=parse_carry(carry))  # the one place a run's settings are decided
    cfg, paper_gamma = run.config, run.uncarried.init.gamma
    if show_recipe:
        click.echo(recipe_table(cfg, paper_gamma=paper_gamma))
        click.echo()
        click.echo(run.table())
        return
    from training import train
    from training.launch.base import Job
    from training.studies.records import RunRecord
    from training.studies.study import refuse_strangers

    assert out is not None
    refuse_strangers([Job(out, cfg, Path(out))], out, "a run")  # a study reads only the runs it names
    train(cfg, out, device=device, progress=not quiet)
    record = RunRecord.read(out)
    summary = {k: round(v, 4) for k, v in record.final_columns().items() if v is not None}
    status = record.recorded_status
    stop = None if record.metrics is None else record.metrics.stopped_early
    ended = (
        ""
        if stop is None
        else f" (stopped after epoch {stop['epoch']}: training loss {stop['loss']:.3g} < --stop-below-loss {stop['stop_below_loss']:g})"
    )
    click.echo(f"{status}{ended}: {out}  {summary}")
    if status != "completed":
        step = None if record.metrics is None else record.metrics.diverged_at_step
        where = f" at step {step}" if step is not None else ""
        click.echo(
            f"interp-init: the run {status}{where} (non-finite training loss): see {out}/metrics.json; "
            "a lower --lr, gradient clipping (--grad-clip) or a larger --gamma may keep it finite",
            err=True,
        )
        raise click.exceptions.Exit(1)


# ---------------------------------------------------------------- reproduce


@cli.command("reproduce")
@click.option(
    "--preset",
    default=None,
    metavar="[" + "|".join(sorted(REGIMES)) + "]",
    help="Run size of the four runs. Default: paper where a CUDA GPU is used, else cpu.",
)
@click.option(
    "--seed", type=int, default=None, help="Run seed of all four runs: one draw [default: 0]. Not with --seeds."
)
@click.option(
    "--seeds",
    default=None,
    metavar="S1,S2,...",
    help="A population: the four runs for each of these seeds (in OUT/seed-S), and per criterion how many seeds meet it, with a 95% exact binomial interval.",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default="strict",
    show_default=True,
    help="With --seeds: strict (final epoch, the preset's lr, each seed on its own) or paper (per seed the best over --lrs and over epochs, each target separately; then the mean over seeds).",
)
@click.option(
    "--lrs",
    default=None,
    metavar="LR1,LR2,...",
    help="The paper protocol's learning-rate grid (one more run per regime, seed and lr), e.g. 1e-4,2e-4,3e-4.",
)
@click.option("--logged-every", type=int, default=None, metavar="K", help=LOGGED_HELP)
@click.option(
    "--vary",
    type=click.Choice(VARY),
    default="both",
    show_default=True,
    help="With --seeds, which random source the seeds draw: both, init (the data seeded by --fixed-seed) or data (the init seeded by --fixed-seed).",
)
@click.option(
    "--fixed-seed",
    type=int,
    default=None,
    help="With --vary init|data: the seed of the source held fixed [default: the first of --seeds].",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder: one run per task and regime (per seed with --seeds), summary.json, report.html.",
)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="fp32",
    show_default=True,
    help="bf16: the forward under bfloat16 autocast.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Runs trained at once, each in its own process with one torch thread [default: one per CPU core (up to 4) on a CPU; on a GPU one at a time, or with --seeds as ensembles of same-shape runs].",
)
@click.option(
    "--backend",
    type=RegistryChoice(backend_names),
    default=None,
    help="The launcher that trains the runs (as sweep's --backend; slurm: one Slurm job per run through submitit, the --slurm-* options, docs/clusters.md) [default: on a GPU ensembles of same-shape runs; else --workers processes].",
)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="TASK",
    help=f"A task to reproduce the flip on (repeatable): one with a small-init / large-init flip, registered or package.module:ClassName [default: {', '.join(REPRODUCE_TASKS)}].",
)
@click.option("--quiet", is_flag=True, help="No progress bars.")
@carry_option
@click.option(
    "--address",
    default=None,
    metavar="ADDRESS",
    help="--backend ray: the Ray cluster's address (e.g. 'auto' or 127.0.0.1:6379); default: start a local Ray.",
)
@slurm_options
def reproduce_command(
    preset: str | None,
    seed: int | None,
    seeds: str | None,
    protocol: str,
    lrs: str | None,
    logged_every: int | None,
    vary: str,
    fixed_seed: int | None,
    out: str,
    device: str,
    precision: str,
    workers: int | None,
    backend: str | None,
    tasks: tuple[str, ...],
    quiet: bool,
    carry: str | None,
    address: str | None,
    **slurm: Any,
) -> None:
    """Train small-init and large-init on the symmetric and id-ood tasks; print the flip.

    Writes OUT/<task>/<regime> run folders, OUT/summary.json and OUT/report.html (the
    offline report of the four runs); with --seeds, OUT/seed-S/<task>/<regime> per seed and
    the population in OUT/summary.json.  A rerun resumes.
    """
    from training.studies.population import reproduction_spec

    options = backend_options(backend, device, address, slurm)
    if on_this_machine(backend, address):  # a cluster's cores are not this machine's
        check_cores(workers, "--workers", "worker processes")
    preset = _preset_or_default(preset, device)
    spec = reproduction_spec(
        preset, seed, seeds, protocol, lrs, vary, fixed_seed, precision, tasks or None, parse_carry(carry), logged_every
    )
    text, problem = run_reproduction_cli(spec, out, device, workers, not quiet, backend, command_line(), **options)
    click.echo(text)
    # Not reproducing the flip is a result; a run that did not complete is a failure.
    _fail_on(problem)


# ---------------------------------------------------------------- concept-graphs


@cli.command(
    "concept-graphs",
    short_help="Train the journal's Fig. 6 concept-graph diffusion study and write its table and figure.",
)
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--out", required=True, help="The study folder: one run folder per gamma and seed, the table and the figure."
)
@click.option("--size", default=None, help="A diffusion size (tiny, cpu, paper) instead of the spec's.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option(
    "--workers",
    type=int,
    default=1,
    show_default=True,
    help="Runs trained at once, each in its own process with one torch thread.",
)
@click.option(
    "--threads", type=int, default=None, help="Torch threads of the one process with --workers 1 [default: torch's]."
)
@click.option(
    "--backend",
    type=RegistryChoice(backend_names),
    default="local",
    show_default=True,
    help="The launcher that trains the runs: local (one process with --workers 1, else a process pool), serial, pool, ray (--address) or slurm (the --slurm-* options, docs/clusters.md); ensemble trains transformer runs only and is refused.",
)
@click.option(
    "--address",
    default=None,
    metavar="ADDRESS",
    help="--backend ray: the Ray cluster's address (e.g. 'auto' or 127.0.0.1:6379); default: start a local Ray.",
)
@slurm_options
@click.option("--no-figure", is_flag=True, help="Write the table only (no sampling for the figure).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def concept_graphs_command(
    spec: str,
    out: str,
    size: str | None,
    device: str,
    workers: int,
    threads: int | None,
    backend: str,
    address: str | None,
    no_figure: bool,
    quiet: bool,
    **slurm: Any,
) -> None:
    """The journal's Fig. 6 at CPU scale: train concept-graph diffusion runs at SPEC's gammas
    and seeds (a JSON file, e.g. experiments/population-specs/concept-graphs-fig6.json), read
    each run's samples of the unseen tuples 010 and 011, and write OUT/fig6-table.md,
    OUT/fig6-summary.json and OUT/fig6b.png (docs/concept-graphs.md).  A rerun resumes.
    """
    from dataclasses import replace

    from training.launch.backends import build_launcher
    from training.studies.concept_graphs import TABLE, ConceptStudySpec, run_concept_study, summarize

    options = backend_options(backend, device, address, slurm)  # --device checked unless on a cluster
    if on_this_machine(backend, address):  # a cluster's cores are not this machine's
        check_cores(workers, "--workers", "worker processes")
        check_cores(threads, "--threads", "torch threads")
    study = ConceptStudySpec.from_file(spec)
    if size is not None:
        try:
            study = replace(study, size=size)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="'--size'") from None
    # local: --threads for the one process with --workers 1, else a pool of one-thread processes
    threads = 1 if backend == "local" and workers != 1 else threads
    launcher = build_launcher(backend, device=device, workers=workers, threads=threads, progress=not quiet, **options)
    returns = run_concept_study(study, out, launcher)
    if not launcher.waits and any(r.status == RunStatus.RUNNING for r in returns):  # --slurm-no-wait: submitted
        pending = sum(r.status == RunStatus.RUNNING for r in returns)
        click.echo(submitted_line(pending, len(returns), out, command_line()))
        return
    summary = summarize(study, out, figure=not no_figure)
    click.echo((Path(out) / TABLE).read_text(encoding="utf-8").rstrip())
    bad = [f"{r.name}: {r.status}" for r in returns if r.status != RunStatus.COMPLETED]
    if bad:
        click.echo(
            f"interp-init: {len(bad)} of {len(returns)} runs did not complete ({'; '.join(bad[:3])}); the table reads the others; a rerun resumes",
            err=True,
        )
        raise click.exceptions.Exit(1)
    del summary


# ---------------------------------------------------------------- sweep


@cli.command("sweep")
@click.argument("spec", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Sweep folder: one run folder per grid point, sweep.json (the spec), results.csv. One sweep per folder.",
)
@click.option("--preset-name", metavar="NAME", help="A shipped sweep preset instead of SPEC (names: --list-presets).")
@click.option(
    "--run-preset",
    metavar="[" + "|".join(PRESET_CHOICES) + "]",
    help="Replace the spec's base run preset (tiny: a smoke test in seconds).",
)
@click.option(
    "--extend",
    is_flag=True,
    help="Add this spec's grid values to the sweep already in --out (same base and grid keys only); without it a folder holding another sweep is refused.",
)
@click.option(
    "--backend",
    type=RegistryChoice(backend_names),
    default="local",
    show_default=True,
    help="local: this machine (in this process or a process pool); ray: one Ray task per run; ensemble: same-shape runs trained together (for GPUs); slurm: one Slurm job per run through submitit (the --slurm-* options; docs/clusters.md).",
)
@click.option(
    "--workers",
    default=None,
    metavar="[N|auto]",
    help="local: 1 = sequential (default), N = process pool, 'auto' = one per core; ray without --address: the local Ray's CPUs (default: all).",
)
@click.option(
    "--threads",
    type=int,
    default=None,
    metavar="N",
    help="Torch threads per run (default: cores // workers; 1 per Ray task).",
)
@click.option(
    "--address",
    default=None,
    metavar="ADDRESS",
    help="Ray cluster address (e.g. 'auto' or 'ray://head:10001'); default: start a local Ray.",
)
@click.option(
    "--device",
    default="auto",
    show_default=True,
    metavar="[auto|cpu|cuda|cuda:N]",
    help="Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N.",
)
@click.option(
    "--ensemble-size",
    type=int,
    default=None,
    metavar="N",
    help="ensemble backend: at most this many models trained at once (default: all same-shape points).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Validate the spec (and, with --out, that the folder takes it) and list the runs; train nothing, write nothing.",
)
@click.option("--list-presets", is_flag=True, help="List the shipped sweep presets and exit.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@slurm_options
def sweep_command(
    spec: str | None,
    out: str | None,
    preset_name: str | None,
    run_preset: str | None,
    extend: bool,
    backend: str,
    workers: str | None,
    threads: int | None,
    address: str | None,
    device: str,
    ensemble_size: int | None,
    dry_run: bool,
    list_presets: bool,
    quiet: bool,
    **slurm: Any,
) -> None:
    """Train every point of a grid SPEC (JSON or TOML) into --out; resumable; writes results.csv.

    Exits with code 1, after a line saying how many, when any run failed or diverged.
    """
    from training.studies.study import StudySpec
    from training.studies.sweep.spec import SweepOptions, check_sweep_folder, load_preset, preset_names

    if list_presets:
        for name in preset_names():
            click.echo(f"{name}: {load_preset(name).description}")
        return
    if (spec is None) == (preset_name is None):
        raise ValueError("give exactly one of SPEC (a .json or .toml file) and --preset-name NAME")
    sweep_spec = StudySpec.from_file(spec) if spec is not None else load_preset(preset_name)
    if run_preset is not None:
        sweep_spec = sweep_spec.with_overrides(base={"preset": run_preset})
    points = sweep_spec.points(source=spec or f"preset {preset_name!r}")
    if dry_run:
        if out is not None:
            from training.studies.sweep.runner import check_sweep_out

            check_sweep_out(out, sweep_spec)
            check_sweep_folder(sweep_spec, out, extend=extend)
        for point in points:
            click.echo(point.name)
        click.echo(f"{len(points)} runs; spec valid" + (f"; {out} takes it" if out is not None else ""))
        return
    if out is None:
        raise ValueError("--out DIR is required (the sweep folder)")
    from training.studies.sweep.results import RESULTS_FILE, problem_summary
    from training.studies.sweep.runner import run_sweep

    extra = {k: v for k, v in backend_options(backend, device, address, slurm).items() if k == "slurm"}
    options = SweepOptions(
        backend=backend,
        address=address,
        device=device,
        threads=threads,
        progress=not quiet,
        ensemble_size=ensemble_size,
        extra=extra,
        workers=parse_workers(workers) if workers is not None else (1 if backend == "local" else None),
    )
    summary = run_sweep(sweep_spec, out, options, extend=extend)
    counts = ", ".join(
        f"{summary.count(s)} {s}" for s in ("completed", "diverged", "failed", "interrupted") if summary.count(s)
    )
    click.echo(
        f"{len(points)} runs ({len(summary.skipped)} already done): {counts}; results: {Path(out) / RESULTS_FILE}"
    )
    statuses = summary.statuses
    if summary.submitted:  # runs only submitted (--slurm-no-wait) are not a failure
        from training.launch.slurm import submitted_line

        click.echo(submitted_line(summary.submitted, len(statuses), out, command_line()))
        statuses = {n: s for n, s in statuses.items() if s != "running"}
    problem = problem_summary(statuses, len(summary.statuses), Path(out) / RESULTS_FILE)
    _fail_on(problem)


# ---------------------------------------------------------------- phase-diagram


@cli.command("phase-diagram")
@click.argument("sweep_dir", type=click.Path(file_okay=False))
@click.option(
    "--out",
    default=None,
    help="An .html file (all figures on one page) or a folder (one file per figure). Default: SWEEP_DIR/phase_diagram.html.",
)
@click.option(
    "--figure",
    "figure_names",
    multiple=True,
    type=click.Choice(list(FIGURE_NAMES)),
    help="Only these figures (repeatable). Default: every figure the table supports.",
)
@click.option(
    "--id-threshold", type=float, default=ID_THRESHOLD, show_default=True, help="Good ID accuracy (hatching, phases)."
)
@click.option(
    "--ood-threshold",
    type=float,
    default=OOD_THRESHOLD,
    show_default=True,
    help="OOD accuracy above which good ID is phase 3.",
)
@click.option(
    "--loss-threshold", type=float, default=LOSS_THRESHOLD, show_default=True, help="Training loss for epochs_to_loss."
)
@click.option(
    "--pair-threshold",
    type=float,
    default=PAIR_ACC_THRESHOLD,
    show_default=True,
    help="Per-pair training accuracy for epochs_to_acc_*.",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default="strict",
    show_default=True,
    help="strict: each run's final epoch, one lr per cell and seed; paper: per seed the best over lrs and evaluated epochs, each metric separately. Then the mean over seeds.",
)
@click.option("--logged-every", type=int, default=None, metavar="K", help=LOGGED_HELP)
def phase_diagram_command(
    sweep_dir: str,
    out: str | None,
    figure_names: tuple[str, ...],
    id_threshold: float,
    ood_threshold: float,
    loss_threshold: float,
    pair_threshold: float,
    protocol: str,
    logged_every: int | None,
) -> None:
    """Rebuild SWEEP_DIR/results.csv and write the papers' figures it supports as offline HTML.

    Exits with code 1, after the figures and a line saying how many, when any run of the
    sweep failed, diverged or is missing; a folder it refuses gets nothing written.
    """
    from training.studies.phase import phase_diagrams

    thresholds = dict(
        id_threshold=id_threshold,
        ood_threshold=ood_threshold,
        loss_threshold=loss_threshold,
        pair_threshold=pair_threshold,
    )
    done = phase_diagrams(sweep_dir, out, figure_names, **thresholds, protocol=protocol, logged_every=logged_every)
    click.echo(
        f"{len(done.figures)} figure(s) ({', '.join(done.figures)}) from {done.n_runs} runs, {protocol} protocol: {', '.join(map(str, done.paths))}"
    )
    if done.strangers:
        click.echo(
            f"interp-init: note: {sweep_dir} holds {len(done.strangers)} run folder(s) its sweep does not name "
            f"({_first_three(done.strangers, ', ')}); the figures leave them out",
            err=True,
        )
    _fail_on(done.problem and f"{done.problem}; the figures leave them out")


# ---------------------------------------------------------------- report


@cli.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    "out",
    default="report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The HTML file to write.",
)
@click.option(
    "--per-pair", default=ReportConfig.per_pair, show_default=True, type=int, help="Probe inputs per anchor pair."
)
@click.option(
    "--projection",
    default=ReportConfig.projection,
    show_default=True,
    type=click.Choice(PROJECTIONS),
    help="2-D projection of the masked outputs.",
)
@click.option("--seed", default=ReportConfig.seed, show_default=True, type=int, help="Seed of the probe inputs.")
@click.option("--device", default=ReportConfig.device, show_default=True, help="Device for the probes.")
@click.option("--title", default=ReportConfig.title, show_default=True, help="Page title.")
@click.option(
    "--images",
    default=None,
    type=click.Path(file_okay=False),
    help="Also write every figure into this folder (needs kaleido and Chromium).",
)
@click.option("--image-format", default="png", show_default=True, type=click.Choice(IMAGE_FORMATS))
def report_command(
    run_dirs: tuple[str, ...],
    out: str,
    per_pair: int,
    projection: str,
    seed: int,
    device: str,
    title: str,
    images: str | None,
    image_format: str,
) -> None:
    """Write one offline HTML page comparing RUN_DIRS (run folders, or folders that hold them).

    Exits with code 1, after writing the page and a line saying which, when any run did
    not complete (failed, diverged, or unfinished).
    """
    from interp_init.runfolder import RunFolder
    from training.studies.report.cells import find_run_dirs
    from training.studies.report.page import StaticExportUnavailable, write_report
    from training.studies.sweep.results import problem_summary

    config = ReportConfig(per_pair=per_pair, projection=projection, seed=seed, device=device, title=title)
    check_device(device)
    try:
        path = write_report(run_dirs, out, config, images=images, image_format=image_format)
    except StaticExportUnavailable as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"report: {path}")
    statuses = {str(run): RunFolder(run).status() for run in find_run_dirs(run_dirs)}
    bad = {run: status for run, status in statuses.items() if status != "completed"}
    problem = problem_summary(bad, len(statuses), path)
    _fail_on(problem and f"{problem} ({_first_three([f'{run}: {status}' for run, status in bad.items()])})")


def _preset_or_default(preset: str | None, device: str) -> str:
    """``preset``, or where none is given the default for ``device`` (:func:`default_preset`), said on stderr."""
    if preset is None:
        preset, why = default_preset(device)
        click.echo(f"interp-init: no --preset given: using --preset {preset} ({why})", err=True)
    return preset


def _fail_on(problem: str | None) -> None:
    """Where ``problem`` (a command's work that failed, diverged or is missing) is given: say it, exit 1."""
    if problem:
        click.echo(f"interp-init: {problem}", err=True)
        raise click.exceptions.Exit(1)


def _first_three(items: Sequence[str], sep: str = "; ") -> str:
    return sep.join(items[:3]) + (f"{sep}..." if len(items) > 3 else "")


def command_line() -> str:
    """The command line of the command running now (``interp-init reproduce ...``), to tell a user what to run again."""
    import shlex

    argv = (click.get_current_context().find_root().obj or {}).get("argv", [])
    return shlex.join(["interp-init", *argv])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    In click's non-standalone mode ``ctx.exit(code)`` and ``raise click.exceptions.Exit(code)``
    come back as ``cli.main``'s return value (commands themselves return ``None``), so an
    integer returned there is the exit code.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    # SIGTERM, SIGINT and SIGHUP raise (training.launch.executor): locks, temporary files and
    # worker processes are cleaned up, then one line and the exit code 128 + signal.
    code = run_command(cli, args, "interp-init", obj={"argv": args})
    if argv is None:  # the process itself: its work is done and its exit code decided
        ignore_stopping()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


# ------------------------------------------------------------------ reproduce
# ``interp-init reproduce``'s text: the runs trained (:func:`training.studies.population.train_study`),
# the table or the population, the flip's verdict and ``report.html``; and what did not complete.


def run_reproduction_cli(
    spec: StudySpec,
    out: str | Path,
    device: str,
    workers: int | None,
    progress: bool,
    backend: str | None = None,
    rerun: str = "the same command",
    **options: Any,
) -> tuple[str, str | None]:
    """``interp-init reproduce``: train ``spec`` with ``backend`` (a launcher's name; None: the
    default) and its ``options``, read, write the summary and the report; return the text to
    print (one seed: its table and the flip's verdict on this one draw; several: the
    population) and one line on the runs that did not complete (None if all did).  Runs only
    submitted (``--slurm-no-wait``) are not a failure: the text says how many and that
    ``rerun`` (the command line) collects them."""
    from training.studies.report import write_report  # imports torch: only when a reproduction runs
    from training.studies.sweep.results import problem_summary  # pandas, likewise

    start = time.perf_counter()
    population, returns = train_study(spec, out, device, workers, progress, backend, **options)
    if population is None:
        return submitted_line(sum(r.status == RunStatus.RUNNING for r in returns), len(returns), out, rerun), None
    first = list(dict.fromkeys(str(r.run_dir) for r in spec.jobs(out) if r.seed == spec.seeds[0]))
    report = write_report(first, Path(out) / "report.html")
    summary = Path(out) / "summary.json"
    if spec.single:
        checks, seed = population.rows[0].checks, spec.seeds[0]
        lines = [
            f"preset {spec.preset}, seed {seed}, {spec.precision}, {time.perf_counter() - start:.0f} s in this call",
            population.format_regimes(),
            "flip reproduced (all criteria met)"
            if checks["all"]
            else f"flip NOT reproduced; failed: {failed_criteria(checks)}",
            f"this is one draw (seed {seed}): how often each criterion holds over seeds is what --seeds 31,32,33,... measures (docs/faithful-models.md)",
            f"summary: {summary}",
            f"report: {report}",
        ]
    else:
        lines = [
            f"preset {spec.preset}, seeds {list(spec.seeds)}, {spec.precision}, {time.perf_counter() - start:.0f} s in this call",
            population.format(),
            f"summary: {summary} (this protocol's also kept as {protocol_summary(spec, out)})",
            f"report: {report} (the runs of seed {spec.seeds[0]}; the population in its verdict)",
        ]
    # the sweep's line on what did not complete, naming the runs
    line = problem_summary({r.name: r.status for r in returns}, len(returns), summary)
    bad = [f"{r.name}: {r.status}" for r in returns if r.status != "completed"]
    problem = None if line is None else f"{line} ({_first_three(bad)}); a rerun resumes"
    return "\n".join(lines), problem
