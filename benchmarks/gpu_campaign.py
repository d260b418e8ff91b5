"""What every GPU lease runs: the next parts of the pre-registered campaign (docs/campaign.md).

``next`` takes the first unfinished cell (:data:`campaign_cells.CELLS`, read against what the
results folder already holds), plans the part that fits the time left (``campaign_plan``:
whole seeds first, else fewer lrs; never a run that cannot finish), trains it as one ensemble
(:func:`train_part`), writes its records without weights or checkpoints into
``<results>/<cell>/part-K/`` (``campaign_records``), and goes on to the next part while one
fits.  The training loop stops a part before an epoch that, as long as its last, would pass
the deadline; such a part is recorded as stopped and its runs are trained again, from the
start, by a later part.  Every part records the device, the versions, the step path that
trained it and any fallback, where its time went, and its realized speed: samples/s and the
fraction of the measured bf16 peak, beside the in-run probe's rate (``--profile`` adds a
``torch.profiler`` summary of the call's first part).  ``status`` prints each cell's progress and its outcome under
its rule.  Usage::

    python benchmarks/gpu_campaign.py --dry-run --gpu h200                 # the plan, on any machine
    python benchmarks/gpu_campaign.py next --budget-seconds 540 --out /tmp/campaign-runs --archive $OUT/campaign.tar.gz
    python benchmarks/gpu_campaign.py status
    python benchmarks/gpu_campaign.py next --scale tiny --device cpu --results /tmp/c --out /tmp/r --budget-seconds 120   # toy size
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import platform
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import torch

from campaign_cells import CELLS, SCALES
from campaign_plan import (
    AIM_EFFICIENCY,
    GPUS,
    LEASE_BUDGET_S,
    MARGIN_S,
    MEASURED_EFFICIENCY,
    SETUP_PRIOR_S,
    Costs,
    Part,
    Rate,
    cell_seconds,
    next_part,
    precision_of,
    simulate,
)
from campaign_records import MAX_CELL_BYTES, RESULTS, CampaignResults, decide, decide_contrast
from gpu_cost import peaks as measure_peaks
from gpu_cost import remaining_flops
from campaign_profile import profiler_for, timed

from interp_init import resolve_device
from interp_init.fileio import STORING, BadRunFile, hold_folder, place_folder
from interp_init.outputs import check_output_file, check_output_folder, enclosing_study, write_output
from training.cli.errors import Script
from training.cli.flags import Number
from training.launch import EnsembleLauncher, Job, run_study
from training.config import check_cores
from training.trainer.loop import RunData, make_run_data
from training.trainer.step import last_position_logits

#: The step paths, fastest first, and what each falls back to (the plain step last): ``batched``
#: the trainer's one AdamW update of every member (:class:`training.trainer.ensemble.BatchedStep`),
#: ``compiled`` the same with the vectorized forward compiled, ``plain`` the trainer's
#: :class:`~training.trainer.ensemble.VmapStep`, eager.
LADDERS: dict[str, tuple[str, ...]] = {
    "compiled": ("compiled", "batched", "plain"),
    "batched": ("batched", "plain"),
    "plain": ("plain",),
}
PATHS: tuple[str, ...] = tuple(LADDERS)
#: The purpose ``--archive`` is recorded with (a later call's archive may replace it).
ARCHIVE_PURPOSE = "campaign archive"

ROOT = Path(__file__).resolve().parent.parent


class DataCache:
    """Each data set made once per call and kept on the device, shared by every part whose runs draw it."""

    def __init__(self) -> None:
        self.store: dict[tuple, RunData] = {}

    def __call__(self, cfg, dev: torch.device) -> RunData:
        seeds = tuple(v for k, v in cfg.seeds.items() if k.startswith("data."))
        key = (cfg.data, seeds, cfg.train.eval_samples, cfg.model.d_vocab, str(dev))
        if key not in self.store:
            self.store[key] = make_run_data(cfg, dev)
        return self.store[key]


@dataclass
class PartRun:
    """What :func:`train_part` returns: the path that trained, the runs' folders and results, the timings."""

    path: str
    folders: list[Path]
    finished: bool
    events: list[dict]
    timing: dict
    samples: int
    profile: dict | None


def train_part(
    part: Part, folder: Path, dev: torch.device, path: str, deadline: float, data_fn: DataCache, profile: bool
) -> PartRun:
    """The campaign's one call into training: ``part``'s runs as one study (:func:`training.launch.run_study`)
    under the ensemble launcher with ``deadline`` (one ensemble, through the one executor),
    on the trainer's step of ``path``, and down its ladder (:data:`LADDERS`) to the plain step
    on any failure of a faster one (its runs then start again in a fresh folder on the next
    path, in the time left)."""
    tf32 = part.runs[0].tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    cfg = part.runs[0].config
    events: list[dict] = []
    for kind in LADDERS[path]:
        t0 = time.perf_counter()
        steps: list = []
        attempt = (
            folder / f"attempt-{1 + len(list(folder.glob('attempt-*')))}"
        )  # a fresh folder, whatever an earlier, killed call left
        folders = [attempt / r.name for r in part.runs]
        summary: dict = {}
        try:
            logits_fn = torch.compile(last_position_logits) if kind == "compiled" else None
            steps_per_epoch = -(-cfg.data.n_train // cfg.train.batch_size)
            with profiler_for(profile, dev, steps_per_epoch, cfg.train.epochs, summary) as prof:
                step = timed("vmap" if kind == "plain" else "batched", steps, prof)
                launcher = EnsembleLauncher(
                    device=str(dev), deadline=deadline, step=step, logits_fn=logits_fn, data_fn=data_fn
                )
                returns = run_study(
                    [Job(r.name, r.config, f) for r, f in zip(part.runs, folders, strict=True)],
                    attempt,
                    launcher,
                    kind="sweep",
                )
            failed = [r for r in returns if r.status == "failed"]
            if failed:  # the executor recorded it in the run's error.txt: the next step down the ladder
                raise RuntimeError(f"run {failed[0].name} failed: {failed[0].error}")
            end = time.perf_counter()
            timing = {
                "setup_s": round(steps[-1].epoch_start[0] - t0, 3),
                "train_s": round(end - steps[-1].epoch_start[0], 3),
                **steps[-1].timing(end),
            }
            return PartRun(
                kind,
                folders,
                all(r.status == "completed" for r in returns),
                events,
                timing,
                steps[-1].samples,
                summary or None,
            )
        except Exception as err:  # any failure of a fast path: the next one down
            if kind == LADDERS[path][-1]:
                raise
            events.append(
                {
                    "path": kind,
                    "error": f"{type(err).__name__}: {err}"[:1000],
                    "after_s": round(time.perf_counter() - t0, 3),
                }
            )
            click.echo(
                f"  the {kind} step failed after {time.perf_counter() - t0:.1f} s ({type(err).__name__}: {str(err)[:200]}); falling back",
                err=True,
            )
            del err
            gc.collect()
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    raise AssertionError("unreachable")  # pragma: no cover


def versions() -> dict[str, Any]:
    """The software that trained a part."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        commit = done.stdout.strip() or None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "transformer_lens": installed("transformer-lens"),
        "numpy": installed("numpy"),
        "git_commit": commit,
    }


def device_info(dev: torch.device) -> dict[str, Any]:
    if dev.type != "cuda":
        return {
            "type": dev.type,
            "name": f"CPU ({torch.get_num_threads()} threads)",
            "processor": platform.processor() or platform.machine(),
        }
    props = torch.cuda.get_device_properties(dev)
    return {
        "type": "cuda",
        "name": props.name,
        "capability": [props.major, props.minor],
        "memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
    }


def part_record(
    part: Part,
    number: int,
    run: PartRun,
    rate: Rate,
    costs: Costs,
    dev: torch.device,
    peaks: dict[str, float],
    budget: float,
) -> dict:
    """``part.json``: which part, its runs and status, the device and versions, the step path, the timings and speed."""
    from training.studies.records import RunRecord

    records = [RunRecord.read(f) for f in run.folders]
    work = sum(
        remaining_flops(r.config, costs.flops(r), 0) - remaining_flops(r.config, costs.flops(r), rec.epochs_run)
        for r, rec in zip(part.runs, records)
    )
    train_flops = costs.flops(part.runs[0]).train
    rate_s = run.samples / run.timing["train_s"] if run.timing["train_s"] > 0 else None
    precision_peak = peaks[precision_of(part.runs[0])]
    probe = (run.timing.get("probe") or {}).get("samples_per_s")
    speed = {
        "samples_per_s": rate_s,
        "train_mflop_per_sample": train_flops / 1e6,
        "realized_tflops": work / run.timing["train_s"] / 1e12,
        "fraction_of_bf16_peak": None if rate_s is None else rate_s * train_flops / peaks["bf16"],
        "fraction_of_precision_peak": work / run.timing["train_s"] / precision_peak,
        "probe_samples_per_s": probe,
        "probe_over_realized": None if not (probe and rate_s) else probe / rate_s,
        "planned_seconds": round(part.seconds, 1),
        "planned_efficiency": rate.efficiency.get(precision_of(part.runs[0]), MEASURED_EFFICIENCY),
    }
    return {
        "cell": part.cell.name,
        "part": number,
        "status": "complete" if run.finished else "stopped",
        "runs": {
            r.name: {"epochs": rec.epochs_run, "status": rec.recorded_status} for r, rec in zip(part.runs, records)
        },
        "evaluated_epochs": [e.epoch for e in records[0].history if e.metrics is not None],
        "precision": part.runs[0].config.train.precision,
        "tf32": part.runs[0].tf32,
        "budget_s": budget,
        "step": {"path": run.path, "fallbacks": run.events},
        "timing": run.timing,
        "speed": speed,
        "peaks_tflops": {k: v / 1e12 for k, v in peaks.items()},
        "device": device_info(dev),
        "versions": versions(),
        "profile": run.profile,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def remove_stale_copies(results: CampaignResults) -> list[Path]:
    """Remove the part folders a killed copy left (``<cell>/.part-K.storing-<pid>``, the one
    writer's :func:`~interp_init.fileio.place_folder`), whoever left them: called under the lock
    on ``--results``, which every copy holds while one exists."""
    removed = []
    for cell in CELLS:
        folder = results.cell_dir(cell)
        for stale in sorted(folder.glob(STORING.format(name="part-*") + "*")) if folder.is_dir() else []:
            shutil.rmtree(stale)
            removed.append(stale)
    return removed


def write_records(results: CampaignResults, part: Part, number: int, run: PartRun, record: dict) -> Path:
    """Copy each run's config and metrics (never weights or checkpoints) and write ``part.json``."""
    results.write_cell(part.cell)
    out = results.cell_dir(part.cell) / f"part-{number}"
    files = {
        f"{r.name}/{name}": (folder / name).read_bytes()
        for r, folder in zip(part.runs, run.folders, strict=True)
        for name in ("config.json", "metrics.json")
    }
    place_folder(out, {**files, "part.json": (json.dumps(record, indent=1) + "\n").encode()})
    if results.size(part.cell) > MAX_CELL_BYTES:
        click.echo(
            f"warning: {results.cell_dir(part.cell)} holds {results.size(part.cell) / 2**20:.1f} MiB, more than a lease brings back",
            err=True,
        )
    return out


def realized(results: CampaignResults, device: str) -> tuple[dict[str, float], float | None]:
    """The efficiency per precision and the set-up seconds of the latest complete part trained on ``device``."""
    efficiency, setup = {}, None
    for cell in CELLS:
        for part in results.parts(cell):
            if part.get("status") == "complete" and part.get("device", {}).get("name") == device:
                efficiency["bf16" if part["precision"] == "bf16" else "tf32" if part["tf32"] else "fp32"] = part[
                    "speed"
                ]["fraction_of_precision_peak"]
                setup = part["timing"]["setup_s"]
    return efficiency, setup


def _rate_for(
    args_peaks: dict[str, float], efficiency: float | None, results: CampaignResults, device: str, setup: float | None
) -> Rate:
    """The rate the plan uses: the given efficiency, else what this campaign's parts realized on
    ``device``, else the first GPU run's; the given set-up, else the latest part's, else the prior."""
    seen, seen_setup = realized(results, device)
    given = {p: efficiency for p in ("bf16", "tf32", "fp32")} if efficiency is not None else seen
    return Rate(
        args_peaks, given, setup if setup is not None else seen_setup if seen_setup is not None else SETUP_PRIOR_S
    )


def plan_text(
    results: CampaignResults, costs: Costs, peaks: dict[str, float], label: str, rate: Rate, budget: float
) -> str:
    """The dry run's plan: each cell's runs, FLOPs and device seconds at the measured and the
    aimed efficiency, the leases each rate needs, and what the next lease trains."""
    measured = Rate(peaks, {}, rate.setup_s)
    aim = Rate(peaks, dict.fromkeys(("bf16", "tf32", "fp32"), AIM_EFFICIENCY), rate.setup_s)
    lines = [
        f"Campaign plan at scale {results.scale} on {label}.",
        f"A lease runs `next --budget-seconds {budget:g}`; a part's set-up is taken as {rate.setup_s:.0f} s.",
        "",
        f"| cell | runs | run-epochs | PFLOP | device s at {MEASURED_EFFICIENCY:.1%} (measured) | device s at {AIM_EFFICIENCY:.0%} (aim) | finished |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in CELLS:
        runs = results.runs(cell, assume_bf16=True)
        note = ""
        if runs is None:  # the extension: at most every run of the cells it extends
            from campaign_cells import cell_named, extended

            runs = [
                extended(r, c, results.scale)
                for c in cell.extends
                for r in results.runs(cell_named(c), assume_bf16=True) or []
            ]
            note = "at most "
        done = len(results.records(cell))
        work = sum(costs.work(r) for r in runs)
        lines.append(
            f"| {cell.name} | {note}{len(runs)} | {note}{sum(r.config.train.epochs for r in runs):,} | {note}{work / 1e15:,.1f} "
            f"| {note}{cell_seconds(runs, costs, measured):,.0f} | {note}{cell_seconds(runs, costs, aim):,.0f} | {done} of {len(runs) if not note else '?'} |"
        )
    for name, r in (("measured", measured), ("aim", aim)):
        leases = simulate(results, costs, r, budget)
        lines.append(
            f"\nAt the {name} efficiency, the cells whose runs are known (03-05 taken in bf16) need {len(leases)} leases; the first: "
            + "; ".join(p.describe() for p in leases[0])
            if leases
            else f"\nAt the {name} efficiency nothing is left that a lease fits."
        )
    nxt = simulate(results, costs, rate, budget, leases=1)
    lines.append(
        f"\nThe next lease, at {rate.efficiency.get('bf16', MEASURED_EFFICIENCY):.1%} of the bf16 peak: "
        + ("; ".join(p.describe() for p in nxt[0]) if nxt else "nothing (every known cell finished)")
    )
    return "\n".join(lines)


def status_text(results: CampaignResults) -> str:
    """Each cell's progress, its parts, and its outcome under its rule so far."""
    lines = []
    for cell in CELLS:
        runs, done = results.runs(cell), results.records(cell)
        lines.append(
            f"## {cell.name}: "
            + ("runs decided by earlier cells" if runs is None else f"{len(done)} of {len(runs)} runs finished")
        )
        for p in results.parts(cell):
            speed = p.get("speed") or {}
            frac, ratio = speed.get("fraction_of_bf16_peak"), speed.get("probe_over_realized")
            lines.append(
                f"- part {p['part']}: {p['status']}, {len(p.get('runs', []))} runs, {p.get('device', {}).get('name')}, step {p.get('step', {}).get('path')}"
                + ("" if frac is None else f", {frac:.1%} of the bf16 peak")
                + ("" if ratio is None else f", probe/realized {ratio:.2f}")
            )
        if done:
            finished = runs is not None and len(done) == len(runs)
            lines += ["", ("" if finished else "(so far) ") + decide(results, cell).format(), ""]
            if {r.path for r in results.records(cell, full=True).values()} != {
                r.path for r in done.values()
            }:  # the extension retrained some
                lines += [
                    "With the whole schedule where the extension retrained a run:",
                    decide(results, cell, full=True).format(),
                    "",
                ]
    lines += ["## Fig. 2's contrast (cells 01 and 07 against 03 and 08)", decide_contrast(results).format()]
    return "\n".join(lines)


#: The most seconds a budget, a set-up or a margin may state (a year: a number no lease means).
MAX_SECONDS = 3.2e7


@click.command(cls=Script)
@click.argument("action", type=click.Choice(["next", "status"]), default="next")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the run folders being trained (weights, checkpoints); it stays where it is, only records go to --results.",
)
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"The campaign's records [default: {RESULTS} in the checkout; with --scale tiny, give another].",
)
@click.option(
    "--budget-seconds",
    type=Number(0, MAX_SECONDS, min_open=True),
    default=None,
    help="Train parts until this many seconds are spent (needed by next).",
)
@click.option(
    "--scale",
    type=click.Choice(SCALES),
    default="paper",
    show_default=True,
    help="paper: the cells as registered; tiny: the same cells at toy size, for tests.",
)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan (each cell's estimated device seconds, the next lease's parts) and train nothing.",
)
@click.option(
    "--gpu",
    type=click.Choice(sorted(GPUS)),
    default=None,
    help="The GPU a dry run plans for, with its recorded peaks [default: the device's measured peaks on CUDA, else h200].",
)
@click.option(
    "--step",
    "path",
    type=click.Choice(PATHS),
    default="batched",
    show_default=True,
    help="The fastest step path to try; each falls back to the next down to plain (compiled, batched, plain).",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Record a torch.profiler summary of 20 steps of the call's first part (around the end of its second epoch) into its part.json.",
)
@click.option(
    "--peak-tflops",
    type=Number(0, 1e6, min_open=True),
    default=None,
    help="State the device's dense matmul peak, TFLOP/s, for every precision [default: measured].",
)
@click.option(
    "--efficiency",
    type=Number(0, 1, min_open=True),
    default=None,
    help="Fraction of the peak to plan with [default: what this campaign's parts realized on this device, else the first GPU run's 11.4%].",
)
@click.option(
    "--setup-seconds",
    type=Number(0, MAX_SECONDS),
    default=None,
    help=f"A part's set-up to plan with [default: the latest part's, else {SETUP_PRIOR_S:g}].",
)
@click.option(
    "--margin-seconds",
    type=Number(0, MAX_SECONDS),
    default=MARGIN_S,
    show_default=True,
    help="Seconds kept free at the end for the records.",
)
@click.option(
    "--max-parts",
    type=Number(1, 1e6, integer=True),
    default=None,
    help="Train at most this many parts [default: while one fits].",
)
@click.option(
    "--archive",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the records of the cells this call trained into this .tar.gz (one file to bring back).",
)
@click.option(
    "--threads", type=Number(1, 1e6, integer=True), default=None, help="torch CPU threads [default: torch's]."
)
def main(
    action: str,
    out: Path | None,
    results: Path | None,
    budget_seconds: float | None,
    scale: str,
    device: str,
    dry_run: bool,
    gpu: str | None,
    path: str | None,
    profile: bool,
    peak_tflops: float | None,
    efficiency: float | None,
    setup_seconds: float | None,
    margin_seconds: float,
    max_parts: int | None,
    archive: Path | None,
    threads: int | None,
) -> None:
    """Train the campaign's next parts (next), or print its plan (--dry-run) or its progress and outcomes (status)."""
    start = time.monotonic()
    root = results or ROOT / RESULTS
    if scale == "tiny" and (root.resolve() == (ROOT / RESULTS).resolve()):
        raise click.UsageError(f"--scale tiny writes toy records: give --results (not the campaign's own {RESULTS})")
    store = CampaignResults(root, scale)
    if action == "status":
        click.echo(status_text(store))
        return
    try:  # the output guard and the bounds on counts (issue 46), before any work
        check_cores(threads, "--threads", "torch threads")
        if not dry_run:
            for folder, option in ((out, "--out"), (root, "--results")):
                if folder is not None:
                    check_output_folder(
                        folder, "the campaign's", [], option
                    )  # not a run, sweep, reproduction or search folder, nor in a run
                    if (study := enclosing_study(folder)) is not None:
                        raise ValueError(
                            f"{option} {folder} is inside the {study[1]} folder {study[0]}, which reads only the runs it names: choose another {option}"
                        )
            if archive is not None:
                check_output_file(archive, ARCHIVE_PURPOSE, "--archive")
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    if threads:
        torch.set_num_threads(threads)
    dev = resolve_device(device)
    costs = Costs()
    if dry_run:
        if peak_tflops is not None:
            peaks, label = (
                dict.fromkeys(("bf16", "fp32", "tf32"), peak_tflops * 1e12),
                f"a device stated at {peak_tflops:g} TFLOP/s",
            )
        elif gpu is None and dev.type == "cuda":
            peaks, label = measure_peaks(dev), f"{torch.cuda.get_device_name(dev)} (peaks measured here)"
        else:
            figures = GPUS[gpu or "h200"]
            peaks, label = (
                {"bf16": figures.bf16, "fp32": figures.fp32, "tf32": figures.tf32},
                f"{figures.name} ({figures.source})",
            )
        rate = _rate_for(peaks, efficiency, store, label.split(" (")[0], setup_seconds)
        click.echo(plan_text(store, costs, peaks, label, rate, budget_seconds or LEASE_BUDGET_S))
        return
    if out is None or budget_seconds is None:
        raise click.UsageError("next needs --out (where the runs train) and --budget-seconds (or give --dry-run)")
    if out.resolve().is_relative_to(root.resolve()):
        raise click.UsageError(
            f"--out {out} is inside --results {root}: weights and checkpoints never go into the records; choose another --out"
        )
    if root.resolve().is_relative_to(out.resolve()):
        raise click.UsageError(
            f"--results {root} is inside --out {out}: the records never lie among the runs being trained; choose another --results"
        )
    # Both folders under the project's lock (a second `next` on either is refused by name before
    # it trains), and what a killed copy left is removed first, whoever left it.
    for cell in CELLS:  # a registered cell is never changed: refused before anything is written
        try:
            store.check_spec(cell)
        except BadRunFile:  # a damaged cell.json: bad input, exit 2
            raise
        except ValueError as err:  # another spec recorded: the campaign's rule, exit 1
            raise click.ClickException(str(err)) from err
    made = [p for folder in (out, root) for p in (folder, *folder.parents) if not p.exists()]
    for folder in (root, out):
        folder.mkdir(parents=True, exist_ok=True)
    busy = "is in use by another gpu_campaign.py next ({owner}); wait for it to finish, or give another {option}"
    try:
        with (
            hold_folder(root, busy.format(owner="{owner}", option="--results")),
            hold_folder(out, busy.format(owner="{owner}", option="--out")),
        ):
            for stale in remove_stale_copies(store):
                click.echo(f"removed {stale}, the copy of a part a killed call left", err=True)
            run_next(
                store,
                costs,
                dev,
                out,
                start + budget_seconds,
                budget_seconds,
                path,
                profile,
                peak_tflops,
                efficiency,
                setup_seconds,
                margin_seconds,
                max_parts,
                archive,
            )
    finally:
        for folder in sorted(made, key=lambda p: len(p.parts), reverse=True):  # what this call made and left empty
            with contextlib.suppress(OSError):
                folder.rmdir()


def run_next(
    store: CampaignResults,
    costs: Costs,
    dev: torch.device,
    out: Path,
    end: float,
    budget: float,
    path: str,
    profile: bool,
    peak_tflops: float | None,
    efficiency: float | None,
    setup: float | None,
    margin: float,
    max_parts: int | None,
    archive: Path | None,
) -> None:
    """``next``: parts of the first unfinished cells while one fits before ``end`` (a ``time.monotonic()`` value);
    the registered cells' specs are checked by the caller, before anything is written."""
    peaks = dict.fromkeys(("bf16", "fp32", "tf32"), peak_tflops * 1e12) if peak_tflops else measure_peaks(dev)
    name = device_info(dev)["name"]
    rate = _rate_for(peaks, efficiency, store, name, setup)
    click.echo(
        f"{name}; torch {torch.__version__}; peaks (TFLOP/s): "
        + ", ".join(f"{k} {v / 1e12:.1f}" for k, v in peaks.items())
        + f"; planning at {', '.join(f'{k} {v:.1%}' for k, v in rate.efficiency.items()) or f'{MEASURED_EFFICIENCY:.1%} (the first GPU run)'}, set-up {rate.setup_s:.0f} s"
    )
    data, trained, touched, needed = DataCache(), 0, [], None
    while max_parts is None or trained < max_parts:
        left = end - time.monotonic() - margin
        part = next_part(
            store,
            costs,
            rate,
            left,
            skipped=lambda c, s: click.echo(f"[{c.name}] passed over: its next run needs {s:.0f} s, more than a lease"),
        )
        if part is None:
            first = next((c for c in CELLS if store.todo(c)), None)
            if first is not None and not trained:
                needed = rate.setup_s + costs.seconds(store.todo(first)[0], rate)
            break
        number = store.next_part(part.cell)
        click.echo(f"[{part.cell.name}] part {number}: {part.describe()}, {left:.0f} s left")
        store.write_cell(part.cell)
        try:
            done = train_part(
                part, out / part.cell.name / f"part-{number}", dev, path, end - margin, data, profile and not trained
            )
        except Exception as err:
            failed = {
                "cell": part.cell.name,
                "part": number,
                "status": "failed",
                "runs": [r.name for r in part.runs],
                "error": f"{type(err).__name__}: {err}"[:2000],
                "device": device_info(dev),
                "versions": versions(),
            }
            place_folder(
                store.cell_dir(part.cell) / f"part-{number}",
                {"part.json": (json.dumps(failed, indent=1) + "\n").encode()},
            )
            raise click.ClickException(
                f"part {number} of {part.cell.name} failed on every step path: {type(err).__name__}: {err}"
            ) from err
        record = part_record(part, number, done, rate, costs, dev, peaks, budget)
        folder = write_records(store, part, number, done, record)
        touched.append(part.cell)
        trained += 1
        speed = record["speed"]
        click.echo(
            f"  {record['status']} on the {done.path} step in {done.timing['setup_s'] + done.timing['train_s']:.0f} s (set-up {done.timing['setup_s']:.0f} s): "
            f"{speed['samples_per_s']:,.0f} samples/s, {speed['fraction_of_bf16_peak']:.1%} of the bf16 peak; records in {folder}"
        )
        if record["status"] != "complete":
            break
        rate.efficiency[precision_of(part.runs[0])] = efficiency or speed["fraction_of_precision_peak"]
        rate.setup_s = setup if setup is not None else done.timing["setup_s"]
    if archive is not None and touched:
        names = list(dict.fromkeys(c.name for c in touched))
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as tar:
            for name in names:
                tar.add(store.root / name, arcname=f"{store.root.name}/{name}")
        write_output(archive, packed.getvalue(), ARCHIVE_PURPOSE, "--archive")  # never over a file it did not write
        click.echo(
            f"records of {len(names)} cell(s) in {archive} ({archive.stat().st_size / 2**20:.2f} MiB); unpack with tar -xzf {archive.name} -C {store.root.parent}"
        )
    if needed is not None:
        raise click.ClickException(
            f"--budget-seconds {budget:g} cannot fit the next run (estimated {needed:.0f} s with its set-up); give at least {needed + margin:.0f} seconds"
        )
    if not trained:
        click.echo("nothing to train: every cell whose runs are known is finished (status prints the outcomes)")


if __name__ == "__main__":
    main()
