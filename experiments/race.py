"""The race of (3,4) against (4,3) in existing run folders, one row per run (read-only).

For every ``symmetric`` run folder under the given folders (a sweep folder's runs, or a
folder that is itself a run), finished or still training, prints one markdown row from its
history (read by :class:`training.records.RunRecord`; :func:`training.race.race_of`): the seed, the knobs (a sweep's
grid keys other than the seed; else the options that differ between the runs listed), the
epoch (3,4) is fitted (training accuracy >= 0.9), the (4,3) inferential / symmetric shares
at that epoch and at the last evaluated one, the epoch the shares stopped moving and the
lr then, whether that lr was above a tenth of the peak, and the failure mode (``infers``,
``early copy``, ``neither``, ``under-trained``)::

    python experiments/race.py runs/search/sym-small-g0.8-wd runs/search/sym-small-g0.8-wd1

It writes nothing and takes no lock, so it can read folders that are being trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from training.race import race_of_record
from training.records import RunRecord


def run_folders(root: Path) -> list[Path]:
    """``root`` itself if it is a run folder, else its run folders (sorted)."""
    if (root / "config.json").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "config.json").is_file())


def _grid_keys(root: Path) -> list[str] | None:
    try:
        grid = json.loads((root / "sweep.json").read_text(encoding="utf-8"))["grid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [k for k in grid if k != "seed"]


def _seed(flat: dict[str, Any]) -> str:
    init, data = flat.get("init_seed"), flat.get("data_seed")
    if init is None and data is None:
        return str(flat["seed"])
    return f"init {flat['seed'] if init is None else init} data {flat['seed'] if data is None else data}"


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def race_rows(roots: list[Path]) -> list[dict[str, str]]:
    """One row per symmetric run folder under ``roots`` (columns as the table prints them)."""
    rows = []
    for root in roots:
        folders = run_folders(root)
        records = {f: RunRecord.read(f, strict=False) for f in folders}
        flats = {f: record.config.flat() for f, record in records.items()}
        keys = _grid_keys(root)
        if keys is None:  # the options that differ between the runs (the seed aside)
            names = [k for k in (next(iter(flats.values()), {})) if k not in ("seed", "init_seed", "data_seed")]
            keys = [k for k in names if len({repr(flat[k]) for flat in flats.values()}) > 1]
        for folder, flat in flats.items():
            record = records[folder]
            if not record.task.has_race:
                continue
            race = race_of_record(record)
            status = record.recorded_status or "no metrics"
            knobs = ", ".join(f"{k}={flat[k]}" for k in keys) or "-"
            if race is None:
                rows.append({"run": f"{root.name}/{folder.name}" if folder != root else folder.name, "seed": _seed(flat), "knobs": knobs, "status": status})
                continue
            rows.append({
                "run": f"{root.name}/{folder.name}" if folder != root else folder.name, "seed": _seed(flat), "knobs": knobs,
                "gamma": f"{flat['gamma']:g}", "epochs": f"{race.last_epoch}/{flat['epochs']}", "status": status,
                "(3,4) fit epoch": _num(race.fit_epoch, "{}"),
                "inf / sym at fit": f"{_num(race.inferential_at_fit)} / {_num(race.symmetric_at_fit)}",
                "inf / sym at end": f"{_num(race.inferential_end)} / {_num(race.symmetric_end)}",
                "ID at end": _num(race.final_id_acc),
                "stopped moving": f"{race.settled_epoch}" + (" (still moving)" if race.still_moving else ""),
                "lr then": _num(race.lr_at_settled, "{:.2g}"),
                "lr > peak/10": "-" if race.lr_high is None else ("yes" if race.lr_high else "no"),
                "mode": race.mode if status == "completed" else f"{race.mode} so far",
            })  # fmt: skip
    return rows


COLUMNS = ("run", "seed", "knobs", "gamma", "epochs", "status", "(3,4) fit epoch", "inf / sym at fit", "inf / sym at end", "ID at end", "stopped moving", "lr then", "lr > peak/10", "mode")


@click.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def main(folders: tuple[Path, ...]) -> None:
    """Print the race of every symmetric run under FOLDERS (sweep folders or run folders), one markdown row each."""
    rows = race_rows(list(folders))
    click.echo("| " + " | ".join(COLUMNS) + " |")
    click.echo("|" + "---|" * len(COLUMNS))
    for row in rows:
        click.echo("| " + " | ".join(row.get(c, "") for c in COLUMNS) + " |")
    modes = [row["mode"] for row in rows if row.get("status") == "completed" and "mode" in row]
    if modes:
        click.echo("\n" + ", ".join(f"{m}: {modes.count(m)}" for m in dict.fromkeys(sorted(modes))) + f" (of {len(modes)} completed runs)")


if __name__ == "__main__":
    main()
