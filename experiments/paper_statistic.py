"""The papers' own statistic for one regime on ``symmetric``: per seed the best over an lr grid and epochs, then the mean over seeds.

NeurIPS 2024 reports, per gamma, the best test accuracy over 9 learning rates (and over the
epochs it logged), averaged over 3 seeds: the ``paper`` protocol of
:func:`training.studies.records.pick_paper`, each target picked separately.  This reads a sweep
folder whose grid is the seed and the peak lr (every other option equal) and prints, per
seed, each target's best with the lr and epoch it was read at, the (3,4) training accuracy
at the epoch of the best inferential share (the papers never check it; this project's
criterion asks it >= 0.9), and the mean over seeds; then how many seeds reach an
inferential share >= 0.8 at any lr and epoch, with its 95% exact interval::

    python experiments/paper_statistic.py runs/paper-stat

``--logged-every 3`` reads only the epochs the released scripts log (their ``-pae 3``: epochs
3, 6, ... and the next-to-last, never the last epoch's end;
:func:`training.studies.records.logged_epochs`), so the best over epochs is taken where the
papers could take it: over a third of the epochs this project evaluates.

It writes nothing and takes no lock, so it can read a sweep that is being trained (runs not
yet completed are left out and counted).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import click

from interp_init.tasks.anchor import FLIP_CRITERIA
from training.cli.errors import Script
from training.cli.flags import Number
from training.studies.population import exact_interval
from training.studies.records import LOGGED_HELP, Pick, RunRecord, check_protocol, pick_paper, targets
from training.studies.study import run_dirs

#: The targets of the row, in the order printed.
TARGETS = targets("symmetric")
#: The inferential share and the (3,4) accuracy the small-init criterion asks for.
INFERS, FITS = FLIP_CRITERIA["min_small_inferential"], FLIP_CRITERIA["min_small_exception"]


def _exception_at(records: list[RunRecord], pick: Pick) -> float | None:
    """The (3,4) training accuracy at the run and epoch ``pick`` was read at."""
    for record in records:
        if record.lr == pick.lr:
            for entry in record.history:
                if entry.epoch == pick.epoch and entry.metrics is not None:
                    return entry.metrics.columns().get("exception_acc")  # the column pick_paper reads
    return None


def seed_picks(
    folder: Path, logged_every: int | None = None
) -> tuple[dict[int, dict[str, Pick]], dict[int, float | None], dict[int, int], int]:
    """Per seed: each target's :class:`Pick` over the seed's completed runs (on the epochs
    ``logged_every`` names, or every evaluated one), the (3,4) accuracy at the inferential
    pick, how many runs were read; and how many were not completed."""
    by_seed: dict[int, list[RunRecord]] = defaultdict(list)
    varying: set[str] = set()
    first: dict[str, object] | None = None
    for run in run_dirs(folder, depth=1):  # the runs the sweep names
        record = RunRecord.read(run, strict=False)
        if record.task_name != "symmetric":
            raise click.ClickException(
                f"{run}: a {record.task_name!r} run; this statistic reads symmetric runs (give a sweep of symmetric runs)"
            )
        flat = {k: v for k, v in record.config.flat().items() if k not in ("seed", "lr")}
        first = flat if first is None else first
        varying |= {k for k in flat if flat[k] != first.get(k)}
        by_seed[record.config.seed].append(record)
    if varying:
        raise click.ClickException(
            f"{folder}: the runs differ in {sorted(varying)}, not only in seed and lr; give one regime's sweep"
        )
    if not by_seed:
        raise click.ClickException(f"{folder}: no run folders (folders with a config.json); give a sweep folder")
    picks, exception, counts, pending = {}, {}, {}, 0
    for seed, records in sorted(by_seed.items()):
        done = [r for r in records if r.status == "completed"]
        pending += len(records) - len(done)
        picks[seed] = pick_paper(done, TARGETS, logged_every)
        exception[seed] = _exception_at(done, picks[seed]["heldout_inferential"])
        counts[seed] = len(done)
    return picks, exception, counts, pending


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cell(pick: Pick) -> str:
    return "-" if pick.value is None else f"{pick.value:.2f} (lr {pick.lr:g}, epoch {pick.epoch})"


def statistic_text(folder: Path, logged_every: int | None = None) -> str:
    """What the command prints for the sweep ``folder``: per seed each target's best with the lr
    and epoch it was read at (only on the epochs the released scripts log with
    ``logged_every``), the mean over seeds, and how many seeds reach the inferential bar."""
    check_protocol("paper", logged_every)
    picks, exception, counts, pending = seed_picks(folder, logged_every)
    lines = [
        "| seed | runs | " + " | ".join(f"best {t}" for t in TARGETS) + " | (3,4) at the inferential pick |",
        "|" + "---|" * (len(TARGETS) + 3),
    ]
    for seed, row in picks.items():
        lines.append(
            f"| {seed} | {counts[seed]} | "
            + " | ".join(_cell(row[t]) for t in TARGETS)
            + f" | {_num(exception[seed])} |"
        )
    means = mean_picks(picks)
    lines.append("| mean over seeds | | " + " | ".join(_num(means[t]) for t in TARGETS) + " | |")
    (reach, fitted), n = reaching(picks, exception), len(picks)
    low, high = exact_interval(reach, n)
    low2, high2 = exact_interval(fitted, n)
    lines += [
        "",
        (
            f"inferential >= {INFERS} at some lr and epoch: {reach} of {n} seeds [{low:.2f}, {high:.2f}]; "
            f"with (3,4) fitted at that epoch: {fitted} of {n} [{low2:.2f}, {high2:.2f}]"
        ),
    ]
    if pending:
        lines.append(f"{pending} runs not completed yet (left out)")
    if logged_every is not None:
        lines.append(
            f"epochs read: those the released scripts log with -pae {logged_every} (epochs {logged_every}, {2 * logged_every}, {3 * logged_every}, ... and the next-to-last)"
        )
    return "\n".join(lines)


def mean_picks(picks: dict[int, dict[str, Pick]]) -> dict[str, float | None]:
    """Per target, the mean over seeds of each seed's best (the papers' number)."""
    means = {}
    for t in TARGETS:
        values = [row[t].value for row in picks.values() if row[t].value is not None]
        means[t] = sum(values) / len(values) if values else None
    return means


def reaching(picks: dict[int, dict[str, Pick]], exception: dict[int, float | None]) -> tuple[int, int]:
    """How many seeds reach an inferential share >= 0.8 at some lr and epoch, and how many of
    them with (3,4) fitted at that epoch."""
    reach = sum(1 for row in picks.values() if (row["heldout_inferential"].value or 0.0) >= INFERS)
    fitted = sum(
        1
        for seed, row in picks.items()
        if (row["heldout_inferential"].value or 0.0) >= INFERS and (exception[seed] or 0.0) >= FITS
    )
    return reach, fitted


@click.command(cls=Script)
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--logged-every",
    type=Number(1, integer=True),
    default=None,
    metavar="K",
    help=LOGGED_HELP.replace("With --protocol paper: r", "R"),
)
def main(folder: Path, logged_every: int | None) -> None:
    """Print the papers' statistic (best over lrs and epochs per seed, mean over seeds) of the symmetric sweep FOLDER."""
    click.echo(statistic_text(folder, logged_every))


if __name__ == "__main__":
    main()
