"""Search for a CPU-sized preset that shows the memorize-versus-reason flip.

Each ``run`` spec is a comma-separated list of flat options over the base below, e.g.::

    python experiments/search_cpu.py run --root runs/search \
        "task=symmetric,d_model=128,gamma=0.7,lr=2.5e-4,epochs=20"

trains them (one after another, 1 torch thread each; ``--workers 2`` for two at a time):
the specs are the named points of one :class:`training.studies.study.StudySpec` (base: the ``paper``
preset), one run folder per spec, trained by the one launcher
(:func:`training.launch.run_study`: the root folder held, a killed search resumes).
``status`` prints one line per run folder under ``--root`` from its record
(:class:`training.studies.records.RunRecord`, finished or not), so a running search can be polled.  ``rates`` judges candidates by
rates over seeds: for each sweep folder over seeds (``interp-init sweep`` with a ``seed``
grid) and the regime it stands for, how many seeds meet the reproduction's criteria for
that cell, with 95% exact intervals::

    python experiments/search_cpu.py rates runs/search/sym-small-g0.87:small-init

A third field picks the run folders of one cell of a sweep over more than seeds (a glob of
their names): ``runs/search/idood-neurips:large-init:gamma=0.4__*``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from fnmatch import fnmatch
from pathlib import Path

import click

from interp_init.outputs import refuse_nested
from training.cli.errors import ScriptGroup
from training.config import check_cores
from training.launch import JobReturn, PoolLauncher, SerialLauncher, run_study
from training.studies.records import RunRecord
from training.studies.study import StudySpec, record_study, refuse_strangers, run_dirs

#: The search's base (2 layers, 1 head, d_head = d_model / 2, d_mlp = 3 d_model).
BASE = dict(
    n_layers=2,
    n_heads=1,
    n_train=40_000,
    n_test=2_000,
    batch_size=512,
    weight_decay=0.01,
    grad_clip=1.0,
    eval_every=1,
    eval_samples=2_000,
    balanced_pairs=False,
    drop_last=False,
    n_heldout=None,  # the sets as the search drew them (the paper preset now draws the released ones)
)


def parse_spec(spec: str) -> dict:
    """``"d_model=128,gamma=0.7"`` -> flat options (ints, floats, strings)."""
    out: dict = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, _, raw = item.partition("=")
        value: object = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                continue
        out[key] = value
    return out


def options_for(spec: str) -> dict:
    """The full flat options of a spec: base, then spec; derived sizes and schedule."""
    opts = {**BASE, **parse_spec(spec)}
    d = opts.setdefault("d_model", 128)
    opts.setdefault("d_head", d // 2)
    opts.setdefault("d_mlp", 3 * d)
    epochs = opts.setdefault("epochs", 20)
    lr = opts.setdefault("lr", 1e-3)
    warm = opts.setdefault("warmup_epochs", max(0.05 * epochs, 1.0))
    opts.setdefault("cosine_epochs", epochs - warm)
    opts.setdefault("warmup_start_lr", lr * 0.05)
    opts.setdefault("min_lr", lr * 0.05)
    opts.setdefault("seed", 0)
    return opts


def run_name(spec: str) -> str:
    return spec.replace(",", "_").replace("=", "")


def read(folder: Path) -> RunRecord | None:
    """The run folder's record (None for a folder without a run, or a file)."""
    return RunRecord.read(folder, strict=False) if (folder / "config.json").is_file() else None


def folders(root: str | Path) -> list[Path]:
    """The run folders of a search (those its record names), oldest first; every folder in
    a root made before searches recorded their runs."""
    return sorted(run_dirs(root, depth=1), key=lambda p: p.stat().st_mtime)


def line(name: str, record: RunRecord | None) -> str:
    if record is None or not record.history:
        return f"{name:70s} (no epoch yet)"
    h = record.history[-1]
    c = {} if h.metrics is None else h.metrics.columns()
    extra = ""
    if "heldout_inferential" in c:
        extra = f"inf {c['heldout_inferential']:.2f} sym {c['heldout_symmetric']:.2f}"
    elif "ood_acc" in c:
        extra = f"ood {c['ood_acc']:.2f} comm {c['commutativity']:.2f}"
    return (
        f"{name:70s} {(record.recorded_status or '')[:4]} ep {h.epoch:3d} loss {h.loss:.3f} "
        f"train {c.get('train_acc', 0):.2f} id {c.get('id_acc', 0):.2f} {extra} {record.elapsed_s or 0:.0f}s"
    )


@click.group(cls=ScriptGroup)
def cli() -> None:
    """CPU preset search."""


@cli.command("run")
@click.option("--root", default="runs/search", show_default=True)
@click.option("--threads", default=1, show_default=True, help="Torch threads per run.")
@click.option("--workers", default=1, show_default=True, help="Runs trained at once (worker processes).")
@click.argument("specs", nargs=-1, required=True)
def run_command(root: str, threads: int, workers: int, specs: tuple[str, ...]) -> None:
    """Train each SPEC into ROOT/<spec name>, one line per run as it ends."""
    study = StudySpec({"preset": "paper"}, named={run_name(spec): options_for(spec) for spec in specs})
    jobs = study.jobs(root)
    folders = {job.name: job.run_dir for job in jobs}
    try:  # ROOT is a search folder: never nested in another study, and its record names its runs
        check_cores(threads, "--threads", "torch threads")
        check_cores(workers, "--workers", "worker processes")
        refuse_nested(root, "a search", "search", "--root")
        refuse_strangers(jobs, root, "a search", "--root")
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    start = [time.perf_counter()]

    def ended(ret: JobReturn) -> None:  # the one launcher's failure policy: error.txt for a failed run, busy -> running
        note = f" ({ret.status}: {ret.error})" if ret.error else ""
        click.echo(line(ret.name, read(folders[ret.name])) + f" wall {time.perf_counter() - start[0]:.0f}s{note}")
        start[0] = time.perf_counter()

    launcher = (
        SerialLauncher(device="cpu", threads=threads)
        if workers == 1
        else PoolLauncher(device="cpu", workers=workers, threads=threads)
    )
    run_study(
        jobs, root, launcher.notify(ended), held=lambda: record_study(root, "search", jobs), kind="search"
    )  # its record: the candidates so far


@cli.command("status")
@click.option("--root", default="runs/search", show_default=True)
@click.option("--full", is_flag=True, help="Every epoch, not only the last.")
def status_command(root: str, full: bool) -> None:
    """One line per run folder (its last epoch), finished or not."""
    for folder in folders(root):
        record = read(folder)
        if full and record is not None and record.metrics is not None:
            for i in range(1, len(record.history) + 1):
                click.echo(
                    line(
                        folder.name,
                        dataclasses.replace(
                            record, metrics=dataclasses.replace(record.metrics, history=record.history[:i])
                        ),
                    )
                )
        else:
            click.echo(line(folder.name, record))


@cli.command("json")
@click.option("--root", default="runs/search", show_default=True)
def json_command(root: str) -> None:
    """One JSON line per finished run: its options and final numbers (for the doc)."""
    for folder in folders(root):
        record = read(folder)
        if record is not None and record.history:
            last = {k: v for k, v in record.history[-1].to_json().items() if k != "per_pair"}
            click.echo(
                json.dumps(
                    {
                        "name": folder.name,
                        "status": record.recorded_status,
                        "elapsed_s": record.elapsed_s,
                        "config": record.config.to_dict(),
                        "last": last,
                    }
                )
            )


def _other(model: dict, init: dict, train_cfg: dict) -> str:
    """What differs from the search base besides the table's columns."""
    out = [] if model["n_layers"] == 2 else [f"{model['n_layers']} layers"]
    if model["n_heads"] != 1:
        out.append(f"{model['n_heads']} heads of d_head {model['d_head']}")
    out += [
        f"{k}={init[k]}"
        for k in ("gamma_embed", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_unembed")
        if init.get(k) is not None
    ]
    if "fast_forward" not in train_cfg:
        out.append("full hooked forward")
    return ", ".join(out)


@cli.command("table")
@click.option("--root", default="runs/search", show_default=True)
def table_command(root: str) -> None:
    """A markdown table of every run under ``--root`` (the doc's search record)."""
    click.echo(
        "| task | architecture | d_model | gamma | wd | lr (peak; warmup from, epochs; min) | batch | n_train | epochs run "
        "| conv. | seed | data v. | train | ID | (4,3) inf / sym or OOD / comm. | status | train s | other |"
    )
    click.echo("|" + "---|" * 18)
    for folder in folders(root):
        record = read(folder)
        if record is None or not record.history:
            continue
        c = record.config.to_dict()
        m, i, d, t = c["model"], c["init"], c["data"], c["train"]
        last = record.history[-1]
        h = {"epoch": last.epoch, **({} if last.metrics is None else last.metrics.columns())}
        if "heldout_inferential" in h:
            held = f"{h['heldout_inferential']:.2f} / {h['heldout_symmetric']:.2f}"
        else:
            held = f"{h.get('ood_acc', float('nan')):.2f} / {h.get('commutativity', float('nan')):.2f}"
        sched = f"{t['lr']:g}; {t['warmup_start_lr']:g}, {t['warmup_epochs']:g}; {t['min_lr']:g}"
        click.echo(
            f"| {d['task']} | {m.get('architecture', 'standard')} | {m['d_model']} | {i['gamma']} | {t['weight_decay']} | {sched} | {t['batch_size']} "
            f"| {d['n_train']} | {h['epoch']}/{t['epochs']} | {i['convention'] or 'its own'} | {c['seed']} | {c.get('data_version', 1)} | {h['train_acc']:.2f} "
            f"| {h['id_acc']:.2f} | {held} | {'stopped' if record.recorded_status == 'running' else record.recorded_status} | {record.elapsed_s or 0:.0f} "
            f"| {_other(m, i, t)} |"
        )


def _seed_label(cfg: dict) -> str:
    """A run's seed as the rates table names it: ``3``, or ``init 2 data 0`` where the
    init and the data were seeded apart (``--init-seed`` / ``--data-seed``)."""
    init, data = cfg.get("init_seed"), cfg.get("data_seed")
    if init is None and data is None:
        return str(cfg["seed"])
    return f"init {cfg['seed'] if init is None else init} data {cfg['seed'] if data is None else data}"


@cli.command("rates")
@click.argument("folders", nargs=-1, required=True, metavar="SWEEP_DIR:REGIME[:GLOB]...")
def rates_command(folders: tuple[str, ...]) -> None:
    """Per candidate (a sweep folder over seeds, with the regime it stands for: small-init or
    large-init), how many finished seeds meet the reproduction's criteria for that cell: ID
    >= 0.9, the cell's own criterion, and both; each k of n with its 95% exact interval.
    Prints one markdown row per folder (and, for small init on ``symmetric``, a second: the
    criterion without its (3,4) condition, beside it).  The criteria are the tasks' own
    (:meth:`interp_init.tasks.base.Task.flip_checks`), each run standing for both regimes.
    ``SWEEP_DIR:REGIME:GLOB`` reads only the run folders whose names match GLOB (one cell of
    a sweep over more than seeds, e.g. ``gamma=0.4__*``)."""
    from interp_init.tasks.anchor import FLIP_CRITERIA
    from training.studies.population import exact_interval
    from training.studies.study import REGIME_NAMES

    def rate(k: int, n: int) -> str:
        low, high = exact_interval(k, n)
        return f"{k} of {n} [{low:.2f}, {high:.2f}]"

    click.echo("| candidate | task | regime | seeds | ID >= 0.9 | cell criterion | met | both | per seed |")
    click.echo("|" + "---|" * 9)
    for item in folders:
        path, _, regime = item.rpartition(":")
        pattern = "*"
        if regime not in REGIME_NAMES and path.rpartition(":")[2] in REGIME_NAMES:
            pattern, (path, _, regime) = regime or "*", path.rpartition(":")
        if regime not in REGIME_NAMES:
            raise click.BadParameter(
                f"{item!r}: give SWEEP_DIR:small-init or SWEEP_DIR:large-init (and optionally :GLOB, a pattern of run-folder names)"
            )
        label = Path(path).name if pattern == "*" else f"{Path(path).name} ({pattern})"
        rows = []
        for folder in (f for f in run_dirs(path, depth=1) if fnmatch(f.name, pattern)):  # the runs its sweep names
            record = read(folder)
            if record is not None and record.recorded_status == "completed":
                final = record.final_columns()
                checks = record.task.flip_checks(final, final, FLIP_CRITERIA)
                fit = next(ok for name, ok in checks.items() if "both ID" in name)
                full, met = next((n, ok) for n, ok in checks.items() if regime in n)
                # the readings beside the cell's criterion (the small-init one without its (3,4) condition): rows of their own
                beside = {
                    name: held
                    for name, (of, held) in record.task.flip_readings(final, final, FLIP_CRITERIA).items()
                    if of == full
                }
                rows.append((_seed_label(record.config.to_dict()), record.task_name, final, fit, {full: met, **beside}))
        if not rows:
            click.echo(f"| {label} | - | {regime} | 0 finished | | | | | |")
            continue
        task, n = rows[0][1], len(rows)
        fit = [r[3] for r in rows]
        for name in rows[0][4]:
            met = [r[4][name] for r in rows]
            both = [a and b for a, b in zip(fit, met)]
            seeds = ", ".join(f"{r[0]}: {'yes' if b else 'no'} (ID {r[2]['id_acc']:.2f})" for r, b in zip(rows, both))
            criterion = name.split(": ", 1)[1] + (
                "" if name == next(iter(rows[0][4])) else " (beside the row above; not a criterion)"
            )
            click.echo(
                f"| {label} | {task} | {regime} | {n} | {rate(sum(fit), n)} | {criterion} | {rate(sum(met), n)} | {rate(sum(both), n)} | {seeds} |"
            )


if __name__ == "__main__":
    cli()
