"""The paper-scale checks, in one command: both tasks on the papers' own models, two inits.

For each task (``symmetric`` on the NeurIPS experiments' ``neurips`` model, ``id-ood`` on
the journal's ``journal`` model), the preset's two regimes (at ``paper``: gamma 0.8 small
init, 0.5 large init) and each seed, it trains the run folders of ``interp-init reproduce
--preset SCALE --seeds ...`` under ``--out`` (``seed-S/TASK/REGIME``, and under ``--protocol
paper`` one more per lr of ``--lrs``: ``REGIME__lr=X``) and writes ``--out/gpu_suite.md``: a
markdown table of what each run learned (ID accuracy, the held-out (4,3) against the
inferential and symmetric targets, OOD accuracy and commutativity), how fast the device
trained it (minutes, samples/s, and that rate's matrix-multiply work as a fraction of the
device's bf16 matmul peak, measured here on one large square product), and the population
under the protocol (:func:`training.studies.population.read_population`, also ``summary.json``):
``strict`` reads each run's final epoch, ``paper`` per seed the best over the lrs and epochs.

**Cost first.**  Every invocation starts by printing the plan: each task's FLOPs still
to do (:mod:`gpu_cost`), the measured matmul peak (or ``--peak-tflops``), and the
predicted minutes at the efficiency measured in the task's earlier chunks, else on a few
throwaway steps (or ``--efficiency``), beside 20% and 40% of the peak.  ``--dry-run`` stops there.

**Chunks.**  ``--budget-seconds S`` trains until S seconds are spent: each run checkpoints
after every epoch, training stops once less than two predicted epochs of the budget, plus
one epoch as long as the last, are left (the loop stops before an epoch that would pass its
deadline, which the suite sets two predicted epochs early), the table so far is written, and the
command exits 0 saying how many runs remain; the same command resumes.  A task whose one
epoch is predicted not to fit in what is left is not started (and if none fits, the
command fails saying what budget would).  The suite is a study like any other: its spec run
by :func:`training.launch.run_study` under :class:`training.launch.EnsembleLauncher` with the
budget's deadline (one by one: ensembles of one), on the trainer's steps.

**The GPU's settings** (each default on CUDA only): the runs of a task train together as
one vectorized ensemble (``--ensemble``); bf16 autocast of the forward (``--precision``,
weights, optimizer and evaluation stay fp32); TF32 for fp32 matrix products (``--tf32``);
``torch.compile`` of the ensemble's vectorized step (``--compile``; if it fails on a node,
the probe's warm-up step shows it before any run trains: ``--no-compile``).  Training data is generated
once per run and kept on the device.  Usage::

    python benchmarks/gpu_suite.py --out runs/gpu-suite --budget-seconds 540   # CUDA: paper scale, one chunk
    python benchmarks/gpu_suite.py --out runs/gpu-suite-paper --protocol paper --lrs 1e-4,2e-4,3e-4 --budget-seconds 540
    python benchmarks/gpu_suite.py --scale paper --dry-run --device cpu --peak-tflops 990
    python benchmarks/gpu_suite.py --out /tmp/suite --scale tiny --device cpu   # a smoke test

**On a Slurm cluster** (``--backend slurm`` and the ``--slurm-*`` options of ``interp-init
sweep``; docs/clusters.md): the runs train in Slurm jobs that requeue themselves from their
checkpoints, each task's runs as one ensemble per job with ``--slurm-gpus 1``; the command
waits, then writes the table.  The plan's peak is this machine's unless ``--peak-tflops``
(``python benchmarks/gpu_cost.py`` lists the stated peaks); ``--compile`` and ``--tf32``
apply to training here only::

    python benchmarks/gpu_suite.py --out runs/gpu-suite --backend slurm --slurm-gpus 1 --slurm-partition gpu --slurm-time 60 --peak-tflops 989
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass
from pathlib import Path


import click
import torch

from interp_init import resolve_device
from interp_init.fileio import atomic_write
from interp_init.outputs import check_output_file, record_output, refuse_nested, write_output
from interp_init.runfolder import FINISHED_STATUSES, RunFolder
from training.cli import slurm_options
from training.cli.errors import Script
from training.cli.flags import Number
from training.config import RunConfig, check_cores, make_run_config
from training.launch import EnsembleLauncher, Job, Launcher, make_launcher, run_study
from training.launch.slurm import slurm_options_from
from training.studies.population import check_summary_file, read_population, reproduction_spec, write_summaries
from training.studies.records import PROTOCOL_TEXT, PROTOCOLS, RunRecord
from training.studies.study import StudySpec, record_study, refuse_strangers
from training.trainer.preflight import check_steps
from training.trainer.step import last_position_logits

from gpu_cost import RunFlops, measured_efficiency, peaks, probe_efficiency, remaining_flops, run_flops

#: The suite's table in ``--out``, and the purpose it is recorded with (a later chunk replaces it).
TABLE_FILE, TABLE_PURPOSE = "gpu_suite.md", "GPU suite table"
#: the tasks, each on its paper's own model (its default architecture: ``neurips`` for
#: ``symmetric``, ``journal`` for ``id-ood``), each regime at its preset's gamma
#: (:data:`training.studies.study.REGIMES`: at ``paper`` and ``cpu`` 0.8 small init, 0.5 large)
TASKS: tuple[str, ...] = ("symmetric", "id-ood")
#: efficiencies (fractions of the peak) every plan also predicts at
REFERENCE_EFFICIENCIES = (0.2, 0.4)


@dataclass
class Run:
    regime: str
    cfg: RunConfig
    folder: Path
    name: str  #: the folder under ``--out`` (the study's job name)

    def started(self) -> bool:
        """Whether the run folder has its config (a run not started has nothing to read)."""
        return RunFolder(self.folder).config_path.exists()

    def record(self) -> RunRecord | None:
        """The run folder, read (:class:`training.studies.records.RunRecord`); None before it has a config."""
        return RunRecord.read(self.folder) if self.started() else None

    def recorded_status(self) -> str | None:
        """The status its ``metrics.json`` records (None before it has one)."""
        record = self.record()
        return None if record is None else record.recorded_status

    def done(self) -> int:
        record = self.record()
        return 0 if record is None else record.epochs_run

    def finished(self) -> bool:
        return self.recorded_status() in FINISHED_STATUSES


@dataclass
class Group:
    """The runs of one task (same shapes): trained together or one by one."""

    task: str
    runs: list[Run]
    flops: RunFlops | None = None
    efficiency: float | None = None

    def todo(self) -> list[Run]:
        return [r for r in self.runs if not r.finished()]

    def remaining(self) -> float:
        return sum(remaining_flops(r.cfg, self.flops, r.done()) for r in self.todo())

    def epoch_seconds(self, jobs: Sequence[Job], peak: float) -> float:
        """Predicted seconds of one epoch of ``jobs`` (runs of this task) at the task's efficiency."""
        return sum(self.flops.epoch(job.config, True) for job in jobs) / (
            peak * (self.efficiency or REFERENCE_EFFICIENCIES[0])
        )


def suite_spec(
    scale: str,
    seeds: tuple[int, ...],
    precision: str = "fp32",
    protocol: str = "strict",
    lrs: str | None = None,
    tasks: tuple[str, ...] = TASKS,
) -> StudySpec:
    """The suite's population: ``interp-init reproduce --preset SCALE --seeds ... --task symmetric
    --task id-ood`` (:func:`training.studies.population.reproduction_spec`), under ``protocol`` (``paper``:
    one run per regime, seed and lr of ``lrs``, a comma list), on ``tasks``."""
    return reproduction_spec(scale, None, ",".join(map(str, seeds)), protocol, lrs, precision=precision, tasks=tasks)


def suite_configs(spec: StudySpec, root: Path, epochs: int | None) -> dict[str, list[Run]]:
    """task -> its runs (the spec's jobs under ``root``), each schedule shortened to ``epochs`` if given."""
    out: dict[str, list[Run]] = {task: [] for task in spec.tasks}
    for job in spec.jobs(root):
        cfg = job.config if epochs is None else job.config.with_options(**_shortened(spec.preset, job.task, epochs))
        out[job.task].append(Run(job.point, cfg, job.run_dir, job.name))
    return out


def _shortened(scale: str, task: str, epochs: int) -> dict[str, float]:
    """The preset's schedule compressed to ``epochs``: warmup and cosine in proportion."""
    base = make_run_config(scale, task=task).train
    ratio = epochs / base.epochs
    return dict(epochs=epochs, warmup_epochs=base.warmup_epochs * ratio, cosine_epochs=base.cosine_epochs * ratio)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _minutes(flops: float, rate: float) -> str:
    return f"{flops / rate / 60:.1f} min"


def run_row(group: Group, run: Run) -> dict:
    """One run's line (its record, :class:`training.studies.records.RunRecord`): gamma, the final
    numbers, or the latest evaluation's while unfinished."""
    record = run.record()
    status = "not started" if record is None or record.metrics is None else record.metrics.status
    columns: dict = dict.fromkeys(run.cfg.data.make_task().metrics_class.column_names())
    if record is not None and record.metrics is not None:
        evaluated = record.metrics.evaluated()
        final = record.metrics.final or (evaluated[-1].metrics if evaluated else None)
        columns.update({} if final is None else final.columns())
    if status in ("running", "interrupted"):  # a chunk's budget leaves its runs interrupted
        status += f" ({record.epochs_run}/{run.cfg.train.epochs} epochs)"
    row = {
        "gamma": run.cfg.init.gamma,
        "lr": run.cfg.train.lr,
        **{k: v for k, v in columns.items() if k != "train_acc"},
        "weight_decay": run.cfg.train.weight_decay,
        "precision": run.cfg.train.precision,
        "seconds": None if record is None else record.elapsed_s,
        "run_dir": str(run.folder),
    }
    return {
        "task": group.task,
        "architecture": run.cfg.model.architecture,
        "regime": run.regime,
        "seed": run.cfg.seed,
        **row,
        "status": status,
    }


def speed_row(group: Group, together: bool, bf16_peak: float, peak: float) -> str:
    """A task's speed over every chunk so far, from its run folders' epochs and ``elapsed_s``."""
    records = [(run, run.record()) for run in group.runs]
    started = [(run, rec) for run, rec in records if rec is not None and rec.metrics is not None]
    samples = sum(rec.epochs_run * run.cfg.data.n_train for run, rec in started)
    elapsed = [rec.elapsed_s or 0.0 for _, rec in started]
    seconds = (max(elapsed) if together else sum(elapsed)) if elapsed else 0.0
    head = f"| {group.task} | {len(group.runs)} {'together' if together else 'one by one'} | {group.flops.train / 1e6:.2f} |"
    if not samples or seconds <= 0:
        return head + " - | - | - | - |"
    rate = samples / seconds
    return (
        head
        + f" {seconds / 60:.2f} | {rate:,.0f} | {rate * group.flops.train / bf16_peak:.1%} | {rate * group.flops.train / peak:.1%} |"
    )


def markdown(
    groups: list[Group], together: bool, header: str, bf16_peak: float, peak: float, population: str | None = None
) -> str:
    """The suite's table: one line per run, then one speed line per task, then the
    population under the suite's protocol (``population``: :meth:`training.studies.population.Population.format`)."""
    lines = [
        header,
        "",
        "| task | architecture | regime | gamma | lr | seed | ID acc | (4,3) inferential | (4,3) symmetric | OOD acc | commutativity | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in groups:
        for run in group.runs:
            r = run_row(group, run)
            lines.append(
                f"| {r['task']} | {r['architecture']} | {r['regime']} | {r['gamma']} | {r['lr']:g} | {r['seed']} | {_fmt(r['id_acc'])} "
                f"| {_fmt(r.get('heldout_inferential'))} | {_fmt(r.get('heldout_symmetric'))} | {_fmt(r.get('ood_acc'))} "
                f"| {_fmt(r.get('commutativity'))} | {r['status']} |"
            )
    lines += [
        "",
        "| task | runs | MFLOP/training sample | minutes (training and evaluation) | samples/s (all runs) | of bf16 matmul peak | of the training precision's peak |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [speed_row(g, together, bf16_peak, peak) for g in groups]
    if population is None:
        lines += ["", "The population (`summary.json`) is read once every run has started."]
    else:
        lines += [
            "",
            "The population (`interp-init reproduce` reads the same folders the same way; a run not completed counts as not meeting a criterion):",
            "",
            "```",
            population,
            "```",
        ]
    return "\n".join(lines) + "\n"


def _clock() -> float:
    return time.monotonic()


def print_plan(
    groups: list[Group],
    dev: torch.device,
    precision: str,
    tf32: bool,
    together: bool,
    peak_tflops: float | None,
    efficiency: float | None,
    probe_steps: int,
    logits_fn: Any,
) -> tuple[float, float]:
    """Print the plan (the peak, each task's efficiency and FLOPs left, the minutes they take)
    and set each group's FLOPs and efficiency; returns the training precision's peak and the bf16 peak."""
    if peak_tflops is None:
        measured = peaks(dev)
        fp32 = "tf32" if tf32 else "fp32"
        peak, bf16_peak = measured[fp32 if precision == "fp32" else precision], measured["bf16"]
        click.echo(
            f"matmul peak measured: fp32{' (TF32 allowed)' if tf32 else ''} {measured[fp32] / 1e12:.2f} TFLOP/s, bf16 {measured['bf16'] / 1e12:.2f} TFLOP/s"
        )
    else:
        peak = bf16_peak = peak_tflops * 1e12
        click.echo(f"matmul peak given: {peak_tflops:g} TFLOP/s ({precision})")
    for group in groups:
        group.flops = run_flops(group.runs[0].cfg, dev)
        so_far = measured_efficiency(
            [r.cfg for r in group.runs], [r.record() for r in group.runs], group.flops, peak, together
        )
        if efficiency is not None:
            group.efficiency = efficiency
        elif so_far is not None and group.todo():
            group.efficiency = so_far
            click.echo(f"[{group.task}] {so_far:.1%} of the peak in its earlier chunks")
        elif probe_steps and group.todo():
            group.efficiency, warmup = probe_efficiency(
                [r.cfg for r in group.todo()], group.flops, peak, dev, together, logits_fn, probe_steps
            )
            click.echo(
                f"[{group.task}] probe: warm-up {warmup:.1f} s, then {group.efficiency:.1%} of the peak over {probe_steps} steps"
            )
    total = 0.0
    for group in groups:
        todo, cfg = group.todo(), group.runs[0].cfg
        left = group.remaining()
        total += left
        click.echo(
            f"[{group.task}] {len(group.runs)} runs ({cfg.model.architecture}, d_model {cfg.model.d_model}, {cfg.data.n_train:,} samples, "
            f"{cfg.train.epochs} epochs, batch {cfg.train.batch_size}), {len(todo)} to train, {sum(cfg.train.epochs - r.done() for r in todo)} run-epochs left; "
            f"{group.flops.train / 1e6:.2f} MFLOP per training sample, {group.flops.forward / 1e6:.2f} per evaluation sample; {left:.3g} FLOP left"
            + (
                ""
                if group.efficiency is None
                else f": {_minutes(left, peak * group.efficiency)} at {group.efficiency:.1%} of the peak"
            )
        )
    click.echo(
        f"total {total:.3g} FLOP left: "
        + ", ".join(f"{_minutes(total, peak * e)} at {e:.0%}" for e in REFERENCE_EFFICIENCIES)
        + " of the peak"
    )
    return peak, bf16_peak


def say_what_remains(
    groups: list[Group],
    returns: list,
    refused: list[tuple[list[str], float]],
    trained: bool,
    budget_seconds: float | None,
    start: float,
) -> None:
    """End the command truthfully: failed runs (exit 1), a budget that fit nothing (exit 1, with
    the budget that would), the runs left for the next chunk (exit 0), runs that did not complete."""
    failed = [r for r in returns if r.status == "failed"]
    if failed:  # recorded in their error.txt by the executor; the next command retries them
        raise click.ClickException(
            f"{len(failed)} run(s) failed, each with its error.txt ({failed[0].name}: {failed[0].error}); run the same command again to retry"
        )
    remaining = [r for g in groups for r in g.todo()]
    if remaining:
        if not trained:
            cheapest = min(s for _, s in refused)
            raise click.ClickException(
                f"--budget-seconds {budget_seconds:g} cannot fit one epoch of any unfinished task (the cheapest is predicted at "
                f"{cheapest:.1f} s); give at least {cheapest + (_clock() - start):.0f} seconds"
            )
        left = sum(g.remaining() for g in groups)
        click.echo(
            f"{len(remaining)} of {sum(len(g.runs) for g in groups)} runs remain ({left:.3g} FLOP); run the same command again to resume",
        )
        return
    failed = [r for g in groups for r in g.runs if r.recorded_status() != "completed"]
    if failed:
        raise click.ClickException(f"{len(failed)} run(s) did not complete: see the table's status column")


@click.command(cls=Script)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for the run folders and gpu_suite.md (needed unless --dry-run).",
)
@click.option(
    "--scale",
    type=click.Choice(["paper", "cpu", "tiny"]),
    default=None,
    help="Preset of every run [default: paper on CUDA, else tiny].",
)
@click.option(
    "--seeds", type=int, multiple=True, default=(0, 1, 2), show_default=True, help="Run seeds (repeat the option)."
)
@click.option(
    "--epochs", type=int, default=None, help="Shorten every run's schedule to this many epochs [default: the preset's]."
)
@click.option(
    "--task",
    "tasks",
    type=click.Choice(TASKS),
    multiple=True,
    help="Only this task (repeat for several) [default: both].",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default="strict",
    show_default=True,
    help="strict (final epoch, the preset's lr, each seed on its own) or paper (one run per --lrs; per seed the best over lrs and epochs, each target separately; then the mean over seeds).",
)
@click.option(
    "--lrs",
    default=None,
    metavar="LR1,LR2,...",
    help="The paper protocol's learning-rate grid, e.g. 1e-4,2e-4,3e-4 (with --protocol paper).",
)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option(
    "--ensemble/--one-by-one",
    default=None,
    help="Train a task's runs together as one vectorized ensemble [default: together on CUDA].",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16"]),
    default=None,
    help="Training forward precision: bf16 autocast or fp32 (part of each run's config) [default: bf16 on CUDA, else fp32].",
)
@click.option(
    "--tf32/--no-tf32",
    default=None,
    help="Let fp32 matrix products use TF32 (torch.set_float32_matmul_precision('high')) [default: on CUDA only].",
)
@click.option(
    "--compile/--no-compile",
    "compile_",
    default=None,
    help="torch.compile the ensemble's vectorized training step (with --ensemble) [default: on CUDA with --ensemble].",
)
@click.option(
    "--budget-seconds",
    type=Number(0, min_open=True),
    default=None,
    help="Stop training when this many seconds are spent (checkpoints kept); the same command resumes [default: no limit].",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (FLOPs, peak, predicted minutes) and exit without training."
)
@click.option(
    "--peak-tflops",
    type=Number(0, min_open=True),
    default=None,
    help="The device's dense matmul peak in the training precision, TFLOP/s, for the predictions [default: measured here].",
)
@click.option(
    "--efficiency",
    type=Number(0, 1, min_open=True),
    default=None,
    help="Fraction of the peak to predict with [default: measured: in the task's earlier chunks, else on --probe-steps throwaway steps; in a dry run only 20% and 40% unless --probe-steps].",
)
@click.option(
    "--probe-steps",
    type=Number(0, integer=True),
    default=None,
    help="Throwaway training steps timed per task that has not trained yet, to measure the efficiency (after a warm-up) [default: 3, in a dry run 0].",
)
@click.option("--threads", type=Number(1, integer=True), default=None, help="torch CPU threads [default: torch's].")
@click.option(
    "--backend",
    type=click.Choice(["local", "slurm"]),
    default="local",
    show_default=True,
    help="local: train here; slurm: in Slurm jobs through submitit (the --slurm-* options; docs/clusters.md).",
)
@slurm_options
def main(
    out: str | None,
    scale: str | None,
    seeds: tuple[int, ...],
    epochs: int | None,
    tasks: tuple[str, ...],
    protocol: str,
    lrs: str | None,
    device: str,
    ensemble: bool | None,
    precision: str | None,
    tf32: bool | None,
    compile_: bool | None,
    budget_seconds: float | None,
    dry_run: bool,
    peak_tflops: float | None,
    efficiency: float | None,
    probe_steps: int | None,
    threads: int | None,
    backend: str,
    **slurm_flags: object,
) -> None:
    """Train both tasks on the papers' models, small and large init, and write a markdown table."""
    start = _clock()
    if out is None and not dry_run:
        raise click.UsageError("--out is needed to train (only --dry-run runs without it)")
    if out is not None and not dry_run:
        try:  # its folder is a reproduction's (runs and summary.json): never nested in, or holding, other folders of runs
            refuse_nested(out, "the GPU suite", "reproduction")
        except ValueError as err:
            raise click.UsageError(str(err)) from err
    try:
        slurm = slurm_options_from(backend, device, slurm_flags)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    if slurm is not None and (budget_seconds or compile_ or tf32):
        raise click.UsageError(
            "--budget-seconds, --compile and --tf32 apply to training here; Slurm jobs chunk by --slurm-time"
        )
    if threads:
        try:
            check_cores(threads, "--threads", "torch threads")
        except ValueError as err:
            raise click.UsageError(str(err)) from err
        torch.set_num_threads(threads)
    dev = resolve_device(
        device if slurm is None else "cpu"
    )  # with slurm, the plan is made here and the jobs pick their device
    cuda = dev.type == "cuda" or (slurm is not None and slurm.gpus > 0)  # the GPU's defaults
    scale = scale or ("paper" if cuda else "tiny")
    together = cuda if ensemble is None else ensemble
    precision = precision or ("bf16" if cuda else "fp32")
    tf32 = (cuda and slurm is None) if tf32 is None else tf32
    if compile_ and not together:
        raise click.UsageError("--compile compiles the ensemble's vectorized step: use it with --ensemble")
    compile_ = cuda and together and slurm is None if compile_ is None else compile_
    probe_steps = (0 if dry_run or slurm is not None else 3) if probe_steps is None else probe_steps
    if tf32:
        torch.set_float32_matmul_precision("high")
    logits_fn = None
    if compile_:  # one compilation per ensemble (probes and tasks), two shapes each: past dynamo's default limit of 8
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        logits_fn = torch.compile(last_position_logits)
    root = Path(out) if out is not None else Path("/nonexistent-gpu-suite-dry-run")
    try:
        spec = suite_spec(scale, tuple(seeds), precision, protocol, lrs, tuple(dict.fromkeys(tasks)) or TASKS)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    groups = [Group(task, runs) for task, runs in suite_configs(spec, root, epochs).items()]
    jobs = [Job(r.name, r.cfg, r.folder) for g in groups for r in g.runs]
    table_path = root / TABLE_FILE
    own_table = table_path.is_file() and any(
        r.started() for g in groups for r in g.runs
    )  # a table an earlier chunk wrote
    if out is not None and not dry_run:
        try:  # a study folder is closed to strangers, and no output replaces a file the suite did not write
            refuse_strangers(jobs, root, "the GPU suite")
            if not own_table:
                check_output_file(table_path, TABLE_PURPOSE)
            check_summary_file(root)
            for group in groups:
                check_steps(group.runs[0].cfg)  # --epochs: a run that would not end is refused
                per_epoch = -(-group.runs[0].cfg.data.n_train // group.runs[0].cfg.train.batch_size)
                if probe_steps and probe_steps > per_epoch:
                    raise ValueError(
                        f"--probe-steps {probe_steps:,} is more than one epoch of the {group.task} runs ({per_epoch:,} steps): give --probe-steps at most {per_epoch:,}"
                    )
        except ValueError as err:
            raise click.UsageError(str(err)) from err
    device_name = (
        "Slurm jobs"
        if slurm is not None
        else torch.cuda.get_device_name(dev)
        if cuda
        else f"CPU ({torch.get_num_threads()} threads)"
    )
    header = (
        f"Device: {device_name}; torch {torch.__version__}; scale `{scale}`"
        + ("" if epochs is None else f", shortened to {epochs} epochs")
        + f"; precision {precision}; TF32 {'on' if tf32 else 'off'}; compile {'on' if compile_ else 'off'}; "
        + f"runs of a task {'trained together' if together else 'one by one'}; {PROTOCOL_TEXT[protocol]}"
        + ("" if lrs is None else f" (lrs {lrs})")
        + "."
    )
    click.echo(header)
    peak, bf16_peak = print_plan(
        groups, dev, precision, tf32, together, peak_tflops, efficiency, probe_steps, logits_fn
    )
    header += f" Matmul peak {'given' if peak_tflops else 'measured'}: {bf16_peak / 1e12:.2f} TFLOP/s (bf16)."
    if dry_run:
        return
    if slurm is not None:  # each task's runs as one ensemble per job when together
        from dataclasses import replace

        size = slurm.ensemble_size or (max(len(g.runs) for g in groups) if together else None)
        try:
            launcher: Launcher = make_launcher("slurm", slurm=replace(slurm, ensemble_size=size), study=root)
        except ValueError as err:  # submitit or Slurm's commands missing
            raise click.UsageError(str(err)) from err
    else:
        group_of = {r.name: g for g in groups for r in g.runs}
        launcher = EnsembleLauncher(
            device=str(dev),
            ensemble_size=None if together else 1,
            logits_fn=logits_fn,
            deadline=None if budget_seconds is None else start + budget_seconds,
            margin_epochs=2,
            epoch_seconds=lambda jobs: group_of[jobs[0].name].epoch_seconds(jobs, peak),
        )
        pending = {r.name for g in groups for r in g.todo()}
    try:  # the study folder held, a folder of another run refused before anything trains
        returns = run_study(
            jobs, root, launcher, held=lambda: record_study(root, "reproduction", jobs)
        )  # its record: the runs its readers read
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    refused = [] if slurm is not None else launcher.refused
    for names, epoch_s in refused:
        click.echo(
            f"[{group_of[names[0]].task}] not started: one epoch of its {len(names)} run(s) is predicted at {epoch_s:.1f} s, more than the budget has left"
        )
    trained = slurm is not None or bool(pending - {n for names, _ in refused for n in names})
    root.mkdir(parents=True, exist_ok=True)
    population = None
    if all(r.started() for g in groups for r in g.runs):
        population = read_population(spec, root)
        write_summaries(spec, root, population)
    text = markdown(groups, together, header, bf16_peak, peak, None if population is None else population.format())
    if own_table and table_path.is_file():  # written before the suite recorded its outputs: its own, replaced
        atomic_write(table_path, text)
        record_output(table_path, TABLE_PURPOSE)
    else:
        write_output(table_path, text, TABLE_PURPOSE)
    click.echo(text)
    say_what_remains(groups, returns, refused, trained, budget_seconds, start)


if __name__ == "__main__":
    main()
