"""The journal's Fig. 7 at CPU scale: small init with large weight decay against large init with
small weight decay on the sequence tasks, the readings and rules docs/beyond-anchor-functions.md
pre-registered, from sweep folders (or stored studies).

Each side is a sweep over ``n_train`` (or one size) x seeds of one task; ``compare`` reads both
sides' finished runs and prints, per data size, each seed's final-epoch metric (``ood_acc`` for
``scan`` and ``prontoqa``, ``id_acc`` for ``cogs``, ``test_ppl`` for ``code-lm``, lower better),
how many runs fit (ID accuracy >= 0.9; ``code-lm`` has no fit test), the seeds in which small
beats large as *k of n* with its exact interval and the mean difference, the exact two-sided
Mann-Whitney U test between the sides (rule B1) and the figure's word (rule B2)::

    python experiments/fig7.py compare --small experiments/results/fig7a-scan-small \\
        --large experiments/results/fig7a-scan-large

``figure`` draws the metric against the data size, each seed a dot and each side's mean a line.
A size is compared on the seeds finished in both sides (rule P); a run not yet completed is left
out and counted.  It writes nothing but ``--out`` and takes no lock, so it can read sweeps that
are being trained.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from training.cli.errors import ScriptGroup
from training.studies.population import exact_rate, init_sides_problem, mann_whitney
from training.studies.records import RunRecord
from training.studies.study import run_dirs

#: Per task: the final-epoch column read, whether higher is better, and the figure it stands for.
METRICS: dict[str, tuple[str, bool, str]] = {
    "scan": ("ood_acc", True, "7A"),
    "cogs": ("id_acc", True, "7B"),
    "code-lm": ("test_ppl", False, "7D"),
    "prontoqa": ("ood_acc", True, "7E"),
}
#: Per task: the final-epoch training column of the post-hoc line (the fit the test metric is
#: read beside): training accuracy, or a language model's training perplexity.
TRAIN_COLUMN: dict[str, tuple[str, str]] = {"code-lm": ("train_ppl", "Training perplexity")}
#: The other tasks' training column and its name.
TRAIN_ACCURACY = ("train_acc", "Training accuracy")
#: A run fits when its ID accuracy is at least this (rule B3); code-lm has no fit test.
FIT = 0.9
#: The level rule B1 calls a difference at.
ALPHA = 0.05


@dataclass(frozen=True)
class Side:
    """One setting's sweep: its task, gamma and weight decay, and its completed runs' final
    metric by data size and seed; ``unfinished`` counts the runs not (yet) completed."""

    task: str
    gamma: float
    weight_decay: float
    values: dict[int, dict[int, float]]  # n_train -> seed -> metric
    fits: dict[int, dict[int, bool | None]]  # n_train -> seed -> fits (None: no fit test)
    unfinished: int
    seconds: dict[int, dict[int, float]] = field(default_factory=dict)  # n_train -> seed -> elapsed_s
    # n_train -> seed -> the final training column (TRAIN_COLUMN's, else train_acc)
    train: dict[int, dict[int, float]] = field(default_factory=dict)

    @classmethod
    def read(cls, folders: Sequence[Path]) -> Side:
        values: dict[int, dict[int, float]] = defaultdict(dict)
        fits: dict[int, dict[int, bool | None]] = defaultdict(dict)
        seconds: dict[int, dict[int, float]] = defaultdict(dict)
        train: dict[int, dict[int, float]] = defaultdict(dict)
        settings, unfinished = set(), 0
        for folder in folders:
            for run in run_dirs(Path(folder)):
                record = RunRecord.read(run, strict=False)
                if record.task_name not in METRICS:
                    raise click.ClickException(
                        f"{run}: a {record.task_name!r} run; Fig. 7 reads {', '.join(METRICS)} runs (give their sweeps)"
                    )
                config = record.config
                settings.add((record.task_name, config.init.gamma, config.train.weight_decay))
                final = record.final_columns() if record.status == "completed" else {}
                column = METRICS[record.task_name][0]
                if final.get(column) is None:
                    unfinished += 1
                    continue
                values[config.data.n_train][config.seed] = float(final[column])
                trained = TRAIN_COLUMN.get(record.task_name, TRAIN_ACCURACY)[0]
                if final.get(trained) is not None:
                    train[config.data.n_train][config.seed] = float(final[trained])
                if record.elapsed_s is not None:
                    seconds[config.data.n_train][config.seed] = record.elapsed_s
                id_acc = final.get("id_acc")
                fits[config.data.n_train][config.seed] = (
                    None if record.task_name == "code-lm" or id_acc is None else id_acc >= FIT
                )
        if len(settings) != 1:
            what = "no run" if not settings else f"runs of {sorted(settings)} (task, gamma, weight decay)"
            raise click.ClickException(f"{', '.join(map(str, folders))}: {what}; give one setting's sweeps together")
        task, gamma, weight_decay = settings.pop()
        return cls(task, gamma, weight_decay, dict(values), dict(fits), unfinished, dict(seconds), dict(train))

    @property
    def label(self) -> str:
        return f"gamma {self.gamma:g}, weight decay {self.weight_decay:g}"


@dataclass(frozen=True)
class SizeRow:
    """One data size: both sides' per-seed metrics on the seeds finished in both, the seeds in
    which small beats large, the mean difference, rule B1's test and word."""

    n_train: int
    seeds: tuple[int, ...]
    small: tuple[float, ...]
    large: tuple[float, ...]
    small_fits: int | None
    large_fits: int | None
    beats: int
    p: float | None
    word: str

    @property
    def difference(self) -> float | None:
        return statistics.fmean(self.small) - statistics.fmean(self.large) if self.seeds else None

    @property
    def ratio(self) -> float | None:
        """Small init's mean over large init's (the pre-registered effect size for perplexity)."""
        return statistics.fmean(self.small) / statistics.fmean(self.large) if self.seeds else None


def _fit_count(fits: dict[int, bool | None], seeds: Sequence[int]) -> int | None:
    flags = [fits[s] for s in seeds]
    return None if any(f is None for f in flags) else sum(bool(f) for f in flags)


def check_sides(small: Side, large: Side) -> None:
    """Refuse, in one line, sides that cannot be the comparison: two tasks, one setting on both
    sides, or the sides swapped (small init is the larger gamma)."""
    if small.task != large.task:
        raise click.ClickException(
            f"the sides train different tasks ({small.task} and {large.task}); give one task's sweeps"
        )
    same = (small.gamma, small.weight_decay) == (large.gamma, large.weight_decay)
    problem = init_sides_problem(small.gamma, large.gamma, same=same)
    if problem:
        raise click.ClickException(f"{problem} (both are {small.label})" if same else problem)


def compare(small: Side, large: Side) -> list[SizeRow]:
    """Rule B1 per data size, on the seeds finished in both sides (rule P); rule B3's "neither
    fits" where no run of either side fits."""
    check_sides(small, large)
    _, higher_better, _ = METRICS[small.task]
    rows = []
    for n in sorted(set(small.values) | set(large.values)):
        seeds = tuple(sorted(set(small.values.get(n, {})) & set(large.values.get(n, {}))))
        s = tuple(small.values[n][k] for k in seeds)
        l = tuple(large.values[n][k] for k in seeds)
        sf = _fit_count(small.fits[n], seeds) if seeds else None
        lf = _fit_count(large.fits[n], seeds) if seeds else None
        beats = sum((a > b) if higher_better else (a < b) for a, b in zip(s, l, strict=True))
        p = mann_whitney(list(s), list(l)) if seeds else None
        if not seeds:
            word = "no seed finished in both settings"
        elif sf == 0 and lf == 0:
            word = "neither fits (rule B3): not read"
        elif p is not None and p < ALPHA:
            better = (
                statistics.fmean(s) > statistics.fmean(l)
                if higher_better
                else statistics.fmean(s) < statistics.fmean(l)
            )
            word = "the journal's direction holds" if better else "a reversal"
        else:
            word = f"not separated at {len(seeds)} vs {len(seeds)} seeds"
        rows.append(SizeRow(n, seeds, s, l, sf, lf, beats, p, word))
    return rows


def figure_word(rows: Sequence[SizeRow], task: str) -> str:
    """Rule B2: the figure's word over the data sizes read."""
    read = [r for r in rows if r.seeds and not r.word.startswith("neither")]
    held = [r for r in read if r.word == "the journal's direction holds"]
    reversed_ = [r for r in read if r.word == "a reversal"]
    if not read:
        word = "nothing to read yet" if not any(r.seeds for r in rows) else "neither setting fits: not read"
    elif len(held) == len(read):
        word = "holds at CPU scale"
    elif held:
        word = "holds at some sizes (" + ", ".join(f"{r.n_train:,}" for r in held) + ")"
    else:
        word = "not shown"
    unread = [r for r in rows if r.seeds and r.word.startswith("neither")]
    if read and unread:
        word += " (" + ", ".join(f"{r.n_train:,}" for r in unread) + " not read: neither fits)"
    if reversed_:
        word = "reversed at " + ", ".join(f"{r.n_train:,}" for r in reversed_) + "; " + word
    if task == "cogs":
        word += " (ID accuracy only: COGS's OOD set is not available here)"
    return word


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _side(values: Sequence[float]) -> str:
    return f"{_num(statistics.fmean(values))} ({', '.join(_num(v) for v in values)})"


def _fits(k: int | None, n: int) -> str:
    return "no fit test" if k is None else f"{k} of {n}"


def table(small: Side, large: Side) -> str:
    """Per data size: both sides' mean (per seed) and fits, small beats large, the difference, p, rule B1."""
    column, higher_better, letter = METRICS[small.task]
    header = (
        f"| {small.task}: training samples | seeds | small init ({small.label}): mean (per seed) | fits "
        f"| large init ({large.label}): mean (per seed) | fits | small beats large | small - large "
        "| Mann-Whitney U, two-sided exact | rule B1 |"
    )
    out = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    rows = compare(small, large)
    for r in rows:
        if not r.seeds:
            out.append(f"| {r.n_train:,} | - | - | - | - | - | - | - | - | {r.word} |")
            continue
        n, p = len(r.seeds), "-" if r.p is None else f"p = {r.p:.3f}"
        effect = f"{r.difference:+.2f}" if higher_better else f"{r.difference:+.2f} (ratio {r.ratio:.2f})"
        out.append(
            f"| {r.n_train:,} | {', '.join(map(str, r.seeds))} | {_side(r.small)} | {_fits(r.small_fits, n)} "
            f"| {_side(r.large)} | {_fits(r.large_fits, n)} | {exact_rate(r.beats, n)} | {effect} | {p} | {r.word} |"
        )
    better = "higher is better" if higher_better else "lower is better; the ratio is small's mean over large's"
    word = figure_word(rows, small.task)
    left = f"runs not completed (left out): small {small.unfinished}, large {large.unfinished}"
    out += ["", f"{column} at the final epoch ({better}); Fig. {letter}: {word}; {left}."]
    trained = TRAIN_COLUMN.get(small.task, TRAIN_ACCURACY)[1]
    for what, per_side, summary in (
        (
            f"{trained} at the final epoch (mean over the seeds, by training samples; post hoc, read by no rule)",
            (small.train, large.train),
            _mean,
        ),
        (
            "Minutes a run (wall clock, the records' elapsed_s: median, min-max, by training samples)",
            (small.seconds, large.seconds),
            _minutes,
        ),
    ):
        lines = zip(("small init", "large init"), (_per_size(by_size, summary) for by_size in per_side), strict=True)
        both = "; ".join(f"{name} {line}" for name, line in lines if line)
        if both:
            out += ["", f"{what}: {both}."]
    return "\n".join(out)


def _per_size(by_size: dict[int, dict[int, float]], summary: Callable[[list[float]], str]) -> str:
    """``n: summary`` for each data size of the completed runs' per-seed values, in size order."""
    return ", ".join(f"{n:,}: {summary(list(by_size[n].values()))}" for n in sorted(by_size))


def _mean(values: Sequence[float]) -> str:
    return _num(statistics.fmean(values))


def _minutes(seconds: Sequence[float]) -> str:
    """The median and range of wall-clock seconds, in minutes."""
    mins = sorted(v / 60 for v in seconds)
    return f"{statistics.median(mins):.1f} ({mins[0]:.1f}-{mins[-1]:.1f})"


def figure(small: Side, large: Side):
    """The metric against the data size, each seed a dot and each side's mean a line; the sizes
    evenly spaced and labelled (a figure of one size is two columns of dots, not a numeric axis
    around it), each side's dots a little to its own side of the size."""
    import plotly.graph_objects as go

    check_sides(small, large)
    column, _, letter = METRICS[small.task]
    every = sorted(set(small.values) | set(large.values))
    fig = go.Figure()
    for label, side, colour, offset in (
        ("small init", small, "#1f77b4", -0.08),
        ("large init", large, "#d62728", 0.08),
    ):
        sizes = sorted(side.values)
        x = [every.index(n) + offset for n in sizes]
        for at, n in zip(x, sizes, strict=True):
            vals = list(side.values[n].values())
            dots = {"color": colour, "opacity": 0.5, "size": 8}
            fig.add_trace(go.Scatter(x=[at] * len(vals), y=vals, mode="markers", marker=dots, showlegend=False))
        means = [statistics.fmean(side.values[n].values()) for n in sizes]
        fig.add_trace(
            go.Scatter(x=x, y=means, mode="lines+markers", line={"color": colour}, name=f"{label} ({side.label}): mean")
        )
    fig.update_layout(
        width=700,
        height=450,
        title=f"Fig. {letter} at CPU scale ({small.task}): {column} against training samples",
        xaxis_title="training samples",
        yaxis_title=column,
        legend={"orientation": "h", "yanchor": "top", "y": -0.2},
    )
    ticks = list(range(len(every)))
    fig.update_xaxes(tickvals=ticks, ticktext=[f"{n:,}" for n in every], range=[-0.5, len(every) - 0.5])
    if column.endswith("_acc"):  # accuracies on their whole scale, so chance does not look like a spread
        fig.update_yaxes(range=[0, 1.02])
    return fig


# ----------------------------------------------------------------------------- the command

_FOLDERS = click.Path(exists=True, file_okay=False, path_type=Path)


@click.group(cls=ScriptGroup)
def main() -> None:
    """The journal's Fig. 7 at CPU scale (docs/beyond-anchor-functions.md), read from sweep folders."""


@main.command("compare")
@click.option(
    "--small", multiple=True, required=True, type=_FOLDERS, help="A small-init sweep folder (repeat for more)."
)
@click.option(
    "--large", multiple=True, required=True, type=_FOLDERS, help="A large-init sweep folder (repeat for more)."
)
def compare_(small: tuple[Path, ...], large: tuple[Path, ...]) -> None:
    """Both settings per data size, rules B1-B3."""
    click.echo(table(Side.read(small), Side.read(large)))


@main.command("figure")
@click.option(
    "--small", multiple=True, required=True, type=_FOLDERS, help="A small-init sweep folder (repeat for more)."
)
@click.option(
    "--large", multiple=True, required=True, type=_FOLDERS, help="A large-init sweep folder (repeat for more)."
)
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The PNG to write.")
def figure_(small: tuple[Path, ...], large: tuple[Path, ...], out: Path) -> None:
    """The figure as a PNG (through kaleido and a headless Chromium): the metric against the data size per setting."""
    from training.studies.report.page import StaticExportUnavailable, check_image_file, write_images

    try:  # the output guard, before any work: not in a run or study folder, nor over a file it did not write
        check_image_file(out, "--out")
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    fig = figure(Side.read(small), Side.read(large))
    try:
        (written,) = write_images({out.stem: fig}, out.parent, "png", width=700, scale=1.5, option="--out")
    except StaticExportUnavailable as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"wrote {written}")


if __name__ == "__main__":
    main()
