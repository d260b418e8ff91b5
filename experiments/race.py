"""The race of (3,4) against (4,3) in existing run folders, one row per run (read-only).

For every ``symmetric`` run folder under the given folders (a sweep folder's runs, or a
folder that is itself a run), finished or still training, prints one markdown row from its
history (read by :class:`training.studies.records.RunRecord`; :func:`training.studies.records.race_of`): the seed, the knobs (a sweep's
grid keys other than the seed; else the options that differ between the runs listed), the
epoch (3,4) is fitted (training accuracy >= 0.9), the (4,3) inferential / symmetric shares
at that epoch and at the last evaluated one, the epoch the shares stopped moving and the
lr then, whether that lr was above a tenth of the peak, and the failure mode (``infers``,
``early copy``, ``neither``, ``under-trained``)::

    python experiments/race.py runs/search/sym-small-g0.8-wd runs/search/sym-small-g0.8-wd1

``--cells`` adds one row per cell (runs with the same knobs; ``--knob KEY``, repeated, names
the knobs across several sweep folders, e.g. a grid split in two by lr) for the completed
runs: how many copy (mode ``early copy``) with the exact 95% interval, the other modes, and
each seed's place in the race's phase diagram, ``fit -> copy`` (the epoch (3,4) is fitted,
the epoch the symmetric share first reaches 0.8; ``-`` never).  ``--figure PATH`` (``.png``,
``.svg`` or ``.pdf``, through kaleido) draws that diagram, one panel per cell::

    python experiments/race.py runs/e-lr2.5e-4 runs/e-lr5e-4 --knob gamma --knob lr --knob batch_size --cells --figure race.png

It writes nothing but ``--figure`` and takes no lock, so it can read folders that are being trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from training.cli.errors import Script
from training.studies.records import RunRecord, race_of_record
from training.studies.study import run_dirs


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


def race_rows(roots: list[Path], knobs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One row per symmetric run folder under ``roots`` (columns as the table prints them;
    ``knobs``: the options that name a run's cell, default a sweep's grid keys but the seed);
    a row with the race also carries it under ``"race"`` and its epochs under ``"epochs run"``."""
    rows: list[dict[str, Any]] = []
    for root in roots:
        folders = run_dirs(root, depth=1)  # root itself if it is a run folder, else the runs its sweep names
        records = {f: RunRecord.read(f, strict=False) for f in folders}
        flats = {f: record.config.flat() for f, record in records.items()}
        keys = list(knobs) or _grid_keys(root)
        if keys is None:  # the options that differ between the runs (the seed aside)
            names = [k for k in (next(iter(flats.values()), {})) if k not in ("seed", "init_seed", "data_seed")]
            keys = [k for k in names if len({repr(flat[k]) for flat in flats.values()}) > 1]
        for folder, flat in flats.items():
            record = records[folder]
            if not record.task.has_race:
                continue
            race = race_of_record(record)
            status = record.recorded_status or "no metrics"
            unknown = [k for k in keys if k not in flat]
            if unknown:
                raise click.UsageError(
                    f"--knob {unknown[0]!r} is not an option of {folder}'s config; use one of its config.json's options (e.g. gamma, lr, batch_size)"
                )
            cell = ", ".join(f"{k}={flat[k]}" for k in keys) or "-"
            if race is None:
                rows.append(
                    {
                        "run": f"{root.name}/{folder.name}" if folder != root else folder.name,
                        "seed": _seed(flat),
                        "knobs": cell,
                        "status": status,
                    }
                )
                continue
            rows.append(
                {
                    "run": f"{root.name}/{folder.name}" if folder != root else folder.name,
                    "seed": _seed(flat),
                    "knobs": cell,
                    "gamma": f"{flat['gamma']:g}",
                    "epochs": f"{race.last_epoch}/{flat['epochs']}",
                    "status": status,
                    "(3,4) fit epoch": _num(race.fit_epoch, "{}"),
                    "copy epoch": _num(race.copy_epoch, "{}"),
                    "inf / sym at fit": f"{_num(race.inferential_at_fit)} / {_num(race.symmetric_at_fit)}",
                    "inf / sym at end": f"{_num(race.inferential_end)} / {_num(race.symmetric_end)}",
                    "ID at end": _num(race.final_id_acc),
                    "stopped moving": f"{race.settled_epoch}" + (" (still moving)" if race.still_moving else ""),
                    "lr then": _num(race.lr_at_settled, "{:.2g}"),
                    "lr > peak/10": "-" if race.lr_high is None else ("yes" if race.lr_high else "no"),
                    "mode": race.mode if status == "completed" else f"{race.mode} so far",
                    "race": race,
                    "epochs run": flat["epochs"],
                }
            )
    return rows


COLUMNS = (
    "run",
    "seed",
    "knobs",
    "gamma",
    "epochs",
    "status",
    "(3,4) fit epoch",
    "copy epoch",
    "inf / sym at fit",
    "inf / sym at end",
    "ID at end",
    "stopped moving",
    "lr then",
    "lr > peak/10",
    "mode",
)


def _epoch(epoch: int | None) -> str:
    return "-" if epoch is None else str(epoch)


def cell_rows(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per cell (the rows' ``knobs``, in first-seen order) over its completed runs:
    the copy rate with its exact interval, the modes, and each seed's ``fit -> copy``."""
    from training.studies.population import exact_interval
    from training.studies.records import MODES

    cells: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("status") == "completed" and "race" in row:
            cells.setdefault(row["knobs"], []).append(row)
    out = []
    for knobs, done in cells.items():
        modes = [row["mode"] for row in done]
        copies = modes.count("early copy")
        low, high = exact_interval(copies, len(done))
        out.append(
            {
                "cell": knobs,
                "runs": str(len(done)),
                "copy": f"{copies}/{len(done)} [{low:.2f}, {high:.2f}]",
                "modes": ", ".join(f"{m} {modes.count(m)}" for m in MODES if m in modes),
                "fit -> copy (seed)": ", ".join(
                    f"{_epoch(r['race'].fit_epoch)} -> {_epoch(r['race'].copy_epoch)} ({r['seed']})" for r in done
                ),
            }
        )
    return out


CELL_COLUMNS = ("cell", "runs", "copy", "modes", "fit -> copy (seed)")


def race_diagram(rows: list[dict[str, Any]]) -> Any:
    """The race's phase diagram: per cell one panel, per completed run one marker at (the
    epoch (3,4) is fitted, the epoch the symmetric share first reaches 0.8), "never" past the
    last epoch; the diagonal marks a copy in the epoch of the fit."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from training.studies.records import MODES

    done = [r for r in rows if r.get("status") == "completed" and "race" in r]
    cells = list(dict.fromkeys(r["knobs"] for r in done))
    if not cells:
        raise click.UsageError("no completed symmetric run to draw; --figure needs at least one")
    never = max(r["epochs run"] for r in done) + 1
    cols = min(4, len(cells))
    n_rows = -(-len(cells) // cols)
    titles = [cell.replace(", ", "<br>") for cell in cells]
    fig = make_subplots(
        rows=n_rows,
        cols=cols,
        subplot_titles=titles,
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=0.5 / n_rows / 2 + 0.06,
    )
    colours = dict(zip(MODES, ("#1b9e77", "#d95f02", "#7570b3", "#999999"), strict=True))
    for i, cell in enumerate(cells):
        row, col = divmod(i, cols)
        fig.add_trace(
            go.Scatter(
                x=[1, never],
                y=[1, never],
                mode="lines",
                line=dict(color="#cccccc", dash="dash"),
                showlegend=False,
                hoverinfo="skip",
            ),
            row=row + 1,
            col=col + 1,
        )
        seen: dict[tuple[int, int], int] = {}  # runs on one point are spread sideways
        points = []
        for r in (r for r in done if r["knobs"] == cell):
            at = (
                never if r["race"].fit_epoch is None else r["race"].fit_epoch,
                never if r["race"].copy_epoch is None else r["race"].copy_epoch,
            )
            seen[at] = seen.get(at, -1) + 1
            points.append((r, at[0] + 0.3 * seen[at], at[1]))
        for mode in MODES:
            mine = [(r, x, y) for r, x, y in points if r["mode"] == mode]
            if not mine:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[x for _, x, _ in mine],
                    y=[y for _, _, y in mine],
                    mode="markers+text",
                    text=[r["seed"] for r, _, _ in mine],
                    textposition="bottom center",
                    textfont=dict(size=9),
                    marker=dict(size=10, color=colours[mode], opacity=0.8),
                    name=mode,
                    legendgroup=mode,
                    showlegend=mode not in {t.name for t in fig.data},
                ),
                row=row + 1,
                col=col + 1,
            )
    step = max(1, never // 6)
    ticks = dict(
        tickvals=[*range(1, never, step), never],
        ticktext=[*map(str, range(1, never, step)), "never"],
        range=[0.3, never + 1.2],
    )
    fig.update_xaxes(**ticks)
    fig.update_yaxes(**ticks)
    for col in range(1, cols + 1):
        fig.update_xaxes(title_text="(3,4) fitted at epoch", row=n_rows, col=col)
    for row in range(1, n_rows + 1):
        fig.update_yaxes(title_text="copy at epoch", row=row, col=1)
    fig.update_annotations(font_size=11)
    fig.update_layout(
        title="The race: the epoch of the copy (symmetric >= 0.8) against the epoch (3,4) is fitted, one marker per seed",
        height=300 * n_rows + 120,
        margin=dict(t=110),
    )
    return fig


def _print_table(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    click.echo("| " + " | ".join(columns) + " |")
    click.echo("|" + "---|" * len(columns))
    for row in rows:
        click.echo("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")


@click.command(cls=Script)
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--knob",
    "knobs",
    multiple=True,
    metavar="KEY",
    help="A config option that names a run's cell (repeat for several; default: each sweep's grid keys but the seed).",
)
@click.option(
    "--cells",
    is_flag=True,
    help="Also print one row per cell: the copy rate with its exact interval, the modes, each seed's fit -> copy epochs.",
)
@click.option(
    "--figure",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the race's phase diagram to this .png, .svg or .pdf (kaleido).",
)
def main(folders: tuple[Path, ...], knobs: tuple[str, ...], cells: bool, figure: Path | None) -> None:
    """Print the race of every symmetric run under FOLDERS (sweep folders or run folders), one markdown row each."""
    if figure is not None:  # the one image guard, before any work
        from training.studies.report.page import check_image_file

        try:
            check_image_file(figure, "--figure", ("png", "svg", "pdf"))
        except ValueError as err:
            raise click.UsageError(str(err)) from err
    rows = race_rows(list(folders), knobs)
    _print_table(COLUMNS, rows)
    modes = [row["mode"] for row in rows if row.get("status") == "completed" and "mode" in row]
    if modes:
        click.echo(
            "\n"
            + ", ".join(f"{m}: {modes.count(m)}" for m in dict.fromkeys(sorted(modes)))
            + f" (of {len(modes)} completed runs)"
        )
    if cells:
        click.echo("")
        _print_table(CELL_COLUMNS, cell_rows(rows))
    if figure is not None:
        from training.studies.report import write_images

        figure.parent.mkdir(parents=True, exist_ok=True)
        written = write_images(
            {figure.stem: race_diagram(rows)}, figure.parent, figure.suffix.lstrip("."), width=1200, option="--figure"
        )
        click.echo(f"\nwrote {written[0]}")


if __name__ == "__main__":
    main()
