"""The NeurIPS Fig. 2 as the contrast it is, and the gamma slice: the readings and tests that
docs/fig2-contrast.md pre-registered, from sweep folders (or stored studies).

Fig. 2 puts, per gamma, the best symmetric share (panel a) and the best inferential share
(panel b) on the held-out (4,3) side by side, each the best over 9 peak lrs and over epochs,
averaged over seeds: small init should be high on (b) and low on (a), large init the other
way round.  ``fig2`` reads both inits' seed x lr sweeps and prints, per panel, each init's
mean with its per-seed picks, the two-sided exact Mann-Whitney U test between the inits
(rule C1), each pick with its share one epoch before and after and whether it is a *spike*
(both neighbours more than 0.2 below it), and the strict last-epoch reading (rule C2: at
the preset's lr per seed with Fisher's exact test, and over every run, with how many counted
runs have an ID accuracy below 0.9)::

    python experiments/contrast.py fig2 --small experiments/results/paper-statistic-401-403 \\
        --large experiments/results/fig2-large-401-403

``slice`` reads sweeps over gamma (and depth) at one lr: per depth x gamma cell the strict
counts and the best shares over epochs (rule S1), whether the flip's bar S2 is met, and gamma
1.0 against 0.8 and 0.5 (rule S3)::

    python experiments/contrast.py slice experiments/results/gamma-slice-d2

A seed of a sweep over lrs counts only once all its lrs have completed (rule P); a seed with
some of them is listed as partial.  It writes nothing and takes no lock, so it can read
sweeps that are being trained.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from interp_init.tasks.anchor import ID_THRESHOLD, heldout_answer
from training.cli.errors import ScriptGroup
from training.studies.population import exact_rate, init_sides_problem, mann_whitney
from training.studies.records import Pick, RunRecord, pick_paper
from training.studies.study import StudySpec, run_dirs
from training.studies.sweep.spec import SPEC_FILE

#: Fig. 2's panels: its letter, the (4,3) share it reads, its name, and which init the papers
#: put higher on it.
PANELS: tuple[tuple[str, str, str, str], ...] = (
    ("b", "heldout_inferential", "best inferential share", "small"),
    ("a", "heldout_symmetric", "best symmetric share", "large"),
)
#: A pick is a spike when the larger of its neighbouring epochs' shares is more than this below it.
SPIKE_DROP = 0.2
#: The level the pre-registered tests call a difference at.
ALPHA = 0.05
#: The `cpu` preset's peak lr, where rule C2 reads one run per seed.
PRESET_LR = 5e-4
#: The gamma of small init and of large init in C, and the slice's gamma at the paper's init std.
SMALL_GAMMA, LARGE_GAMMA, PAPER_STD_GAMMA = 0.8, 0.5, 1.0


# ----------------------------------------------------------------------------- reading


def _completed(folders: Iterable[Path]) -> tuple[list[RunRecord], set[float]]:
    """The completed symmetric runs of ``folders`` and the lrs their sweeps name."""
    runs, lrs = [], set()
    for folder in folders:
        folder = Path(folder)
        if (folder / SPEC_FILE).is_file():
            lrs |= {float(lr) for lr in StudySpec.from_file(folder / SPEC_FILE).grid.get("lr", ())}
        for run in run_dirs(folder):
            record = RunRecord.read(run, strict=False)
            if record.task_name != "symmetric":
                raise click.ClickException(
                    f"{run}: a {record.task_name!r} run; the contrast reads symmetric runs (give sweeps of symmetric runs)"
                )
            if record.status == "completed":
                runs.append(record)
    return runs, lrs


@dataclass(frozen=True)
class SeedPick:
    """One seed's pick on one panel: the papers' best, where it was read, the share one epoch
    before and after it in the same run (None at an edge), and whether it is a spike."""

    seed: int
    pick: Pick
    before: float | None
    after: float | None
    exception: float | None  # the (3,4) training accuracy at the pick's epoch

    @property
    def spike(self) -> bool:
        neighbours = [v for v in (self.before, self.after) if v is not None]
        return bool(neighbours) and self.pick.value is not None and max(neighbours) < self.pick.value - SPIKE_DROP


def _shares(record: RunRecord, column: str) -> dict[int, float | None]:
    return {e.epoch: e.metrics.columns().get(column) for e in record.history if e.metrics is not None}


def _seed_pick(seed: int, runs: Sequence[RunRecord], column: str, logged_every: int | None) -> SeedPick:
    pick = pick_paper(runs, (column,), logged_every)[column]
    run = next((r for r in runs if r.lr == pick.lr), None)
    if run is None or pick.epoch is None:
        return SeedPick(seed, pick, None, None, None)
    shares, fits = _shares(run, column), _shares(run, "exception_acc")
    return SeedPick(seed, pick, shares.get(pick.epoch - 1), shares.get(pick.epoch + 1), fits.get(pick.epoch))


@dataclass(frozen=True)
class InitSweep:
    """One init's seed x lr sweeps, read together: the completed runs of its finished seeds
    (every lr the sweeps name completed), and the seeds with only some of them."""

    gamma: float
    finished: dict[int, list[RunRecord]]
    partial: dict[int, int]  # seed -> how many of its lrs completed
    lrs: tuple[float, ...]

    @classmethod
    def read(cls, folders: Sequence[Path]) -> InitSweep:
        runs, lrs = _completed(folders)
        gammas = {r.config.init.gamma for r in runs}
        if len(gammas) > 1:
            raise click.ClickException(
                f"{', '.join(map(str, folders))}: runs of gammas {sorted(gammas)}; give one init's sweeps together"
            )
        by_seed: dict[int, list[RunRecord]] = defaultdict(list)
        for run in runs:
            by_seed[run.config.seed].append(run)
        lrs = lrs or {r.lr for r in runs}
        finished = {s: sorted(rs, key=lambda r: r.lr) for s, rs in sorted(by_seed.items()) if {r.lr for r in rs} >= lrs}
        partial = {s: len(rs) for s, rs in sorted(by_seed.items()) if s not in finished}
        return cls(gammas.pop() if gammas else float("nan"), finished, partial, tuple(sorted(lrs)))

    def picks(self, column: str, logged_every: int | None = None) -> list[SeedPick]:
        """Each finished seed's pick on ``column`` (the papers' statistic, per seed)."""
        return [_seed_pick(seed, runs, column, logged_every) for seed, runs in self.finished.items()]

    def at_lr(self, lr: float) -> list[RunRecord]:
        """The finished seeds' runs at the peak lr ``lr`` (rule C2's strict reading)."""
        return [r for runs in self.finished.values() for r in runs if abs(r.lr - lr) < 1e-12]

    def runs(self) -> list[RunRecord]:
        return [r for runs in self.finished.values() for r in runs]


# ----------------------------------------------------------------------------- the strict reading


@dataclass(frozen=True)
class Strict:
    """The strict last-epoch counts of a set of runs (:func:`heldout_answer`, the flip's thresholds): how many
    infer (inferential >= 0.8 with (3,4) fitted), how many copy (symmetric >= 0.8), and of
    each how many have an ID accuracy below 0.9 (the criterion has no ID condition of its own)."""

    n: int
    infers: int
    infers_low_id: int
    copies: int
    copies_low_id: int

    @classmethod
    def of(cls, runs: Iterable[RunRecord]) -> Strict:
        n = infers = infers_low = copies = copies_low = 0
        for run in runs:
            final = run.final_columns()
            answer = heldout_answer(
                final.get("heldout_inferential"), final.get("heldout_symmetric"), final.get("exception_acc")
            )
            low = final.get("id_acc") is None or final["id_acc"] < ID_THRESHOLD
            n += 1
            if answer == "inferential":
                infers, infers_low = infers + 1, infers_low + low
            elif answer == "symmetric":
                copies, copies_low = copies + 1, copies_low + low
        return cls(n, infers, infers_low, copies, copies_low)

    def rate(self, what: str) -> str:
        met, low = (self.infers, self.infers_low_id) if what == "infers" else (self.copies, self.copies_low_id)
        return exact_rate(met, self.n) + (f" ({low} with ID < {ID_THRESHOLD:g})" if low else "")


# ----------------------------------------------------------------------------- the tests


def fisher(a: tuple[int, int], b: tuple[int, int]) -> float | None:
    """Two-sided Fisher's exact test's p of the counts ``a`` = (met, n) against ``b``."""
    from scipy.stats import fisher_exact

    if not a[1] or not b[1]:
        return None
    return float(fisher_exact([[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]])[1])


def verdict(p: float | None, higher: str | None, expected: str, n: tuple[int, int]) -> str:
    """Rule C1's word for one panel: separated in the papers' direction, a reversal, or not separated."""
    if p is None:
        return "not tested (an init has no finished seed)"
    if p < ALPHA and higher == expected:
        return "separated, the papers' direction"
    if p < ALPHA:
        return "separated against the papers' direction (a reversal)"
    return f"not separated at {n[0]} vs {n[1]} seeds"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mean(values: Sequence[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


# ----------------------------------------------------------------------------- fig2


@dataclass(frozen=True)
class PanelRow:
    """One panel under one reading: both inits' per-seed picks, their means, the test, the word."""

    panel: str
    name: str
    logged_every: int | None
    small: list[SeedPick]
    large: list[SeedPick]
    p: float | None
    word: str

    @property
    def means(self) -> tuple[float | None, float | None]:
        return _mean([s.pick.value for s in self.small]), _mean([s.pick.value for s in self.large])


def panel_rows(small: InitSweep, large: InitSweep, logged_every: int | None = None) -> list[PanelRow]:
    """Rule C1 on both panels under one reading (every epoch, or the logged ones)."""
    rows = []
    for letter, column, name, expected in PANELS:
        s, l = small.picks(column, logged_every), large.picks(column, logged_every)
        sv, lv = (
            [x.pick.value for x in s if x.pick.value is not None],
            [x.pick.value for x in l if x.pick.value is not None],
        )
        p = mann_whitney(sv, lv)
        ms, ml = _mean(sv), _mean(lv)
        higher = None if ms is None or ml is None or ms == ml else ("small" if ms > ml else "large")
        rows.append(PanelRow(letter, name, logged_every, s, l, p, verdict(p, higher, expected, (len(sv), len(lv)))))
    return rows


def contrast_word(rows: Sequence[PanelRow]) -> str:
    """Rule C1's conclusion from the every-epoch reading's two panels."""
    held = [r.panel for r in rows if r.word.startswith("separated, the")]
    reversed_ = [r.panel for r in rows if "reversal" in r.word]
    if len(held) == 2:
        word = "Fig. 2's contrast holds at CPU scale (both panels separated in the papers' direction)"
    elif held:
        word = f"the contrast holds on panel ({held[0]}) only"
    else:
        word = "not separated on either panel"
    if reversed_:
        word += "; reversed on panel " + " and ".join(f"({p})" for p in reversed_)
    return word


def _seed_values(picks: Sequence[SeedPick]) -> str:
    return ", ".join(_num(s.pick.value) for s in picks)


def panel_table(rows: Sequence[PanelRow]) -> str:
    """The contrast as Fig. 2 reads it: per panel and reading, both inits' means (per seed), the difference, p, the word."""
    out = [
        "| panel | reading | small init (gamma 0.8): mean (per seed) | large init (gamma 0.5): mean (per seed) | small - large | Mann-Whitney U, two-sided exact | rule C1 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ms, ml = r.means
        diff = "-" if ms is None or ml is None else f"{ms - ml:+.2f}"
        reading = "every epoch" if r.logged_every is None else f"logged epochs (-pae {r.logged_every})"
        p = "-" if r.p is None else f"p = {r.p:.3f}"
        out.append(
            f"| ({r.panel}) {r.name} | {reading} | {_num(ms)} ({_seed_values(r.small)}) | {_num(ml)} ({_seed_values(r.large)}) | {diff} | {p} | {r.word} |"
        )
    return "\n".join(out)


def picks_table(small: InitSweep, large: InitSweep, logged_every: int | None = None) -> str:
    """Every seed's pick on both panels: the share, its lr and epoch, the shares one epoch before
    and after, spike or not, and the (3,4) accuracy at the inferential pick."""
    out = [
        "| init | seed | panel | best share (lr, epoch) | one epoch before / after | spike | (3,4) at the pick |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, sweep in (("small init (gamma 0.8)", small), ("large init (gamma 0.5)", large)):
        for letter, column, _, _ in PANELS:
            for s in sweep.picks(column, logged_every):
                where = "-" if s.pick.value is None else f"{s.pick.value:.2f} (lr {s.pick.lr:g}, epoch {s.pick.epoch})"
                out.append(
                    f"| {label} | {s.seed} | ({letter}) | {where} | {_num(s.before)} / {_num(s.after)} | {'spike' if s.spike else 'no'} | {_num(s.exception)} |"
                )
    return "\n".join(out)


def spikes_sentence(small: InitSweep, large: InitSweep) -> str:
    parts = []
    for label, sweep in (("small", small), ("large", large)):
        for letter, column, _, _ in PANELS:
            picks = sweep.picks(column)
            parts.append(f"{label} init ({letter}) {sum(s.spike for s in picks)} of {len(picks)}")
    return "spikes among the every-epoch picks: " + ", ".join(parts)


def strict_at(
    small: InitSweep, large: InitSweep, lr: float = PRESET_LR
) -> tuple[Strict, Strict, float | None, float | None]:
    """Rule C2's test: both inits' strict counts per seed at ``lr``, and Fisher's two-sided p of
    small init's count that infers against large init's, and of the count that copies."""
    s_at, l_at = Strict.of(small.at_lr(lr)), Strict.of(large.at_lr(lr))
    p_inf = fisher((s_at.infers, s_at.n), (l_at.infers, l_at.n))
    p_copy = fisher((s_at.copies, s_at.n), (l_at.copies, l_at.n))
    return s_at, l_at, p_inf, p_copy


def strict_table(small: InitSweep, large: InitSweep, lr: float = PRESET_LR) -> str:
    """Rule C2: per seed at the preset's lr (tested by Fisher's exact test) and over every run of the finished seeds (not tested)."""
    s_at, l_at, p_inf, p_copy = strict_at(small, large, lr)
    s_all, l_all = Strict.of(small.runs()), Strict.of(large.runs())

    def word(p: float | None) -> str:
        return (
            "-"
            if p is None
            else f"p = {p:.3f}: " + ("separated" if p < ALPHA else f"not separated at {s_at.n} vs {l_at.n} seeds")
        )

    return "\n".join(
        [
            f"| reading | small init (gamma 0.8) | large init (gamma 0.5) | Fisher's exact test, two-sided (per seed at lr {lr:g}) |",
            "|---|---|---|---|",
            f"| infers, per seed at lr {lr:g} | {s_at.rate('infers')} | {l_at.rate('infers')} | {word(p_inf)} |",
            f"| copies, per seed at lr {lr:g} | {s_at.rate('copies')} | {l_at.rate('copies')} | {word(p_copy)} |",
            f"| infers, runs over {len(small.lrs)} lrs (not independent; not tested) | {s_all.rate('infers')} | {l_all.rate('infers')} | - |",
            f"| copies, runs over {len(large.lrs)} lrs (not independent; not tested) | {s_all.rate('copies')} | {l_all.rate('copies')} | - |",
        ]
    )


def seeds_line(small: InitSweep, large: InitSweep) -> str:
    """Which seeds each init has finished (all lrs) and which are partial (rule P)."""
    parts = []
    for label, sweep in (("small init", small), ("large init", large)):
        part = f"{label}: seeds {', '.join(map(str, sweep.finished)) or 'none'} finished ({len(sweep.lrs)} lrs each)"
        if sweep.partial:
            part += "; partial (left out): " + ", ".join(
                f"{s} ({k} of {len(sweep.lrs)} lrs)" for s, k in sweep.partial.items()
            )
        parts.append(part)
    return "; ".join(parts)


def read_sides(small: Sequence[Path], large: Sequence[Path]) -> tuple[InitSweep, InitSweep]:
    """Both inits' sweeps, refused in one line when they cannot be the contrast (one gamma on both
    sides, or the sides swapped)."""
    s, l = InitSweep.read(small), InitSweep.read(large)
    problem = init_sides_problem(s.gamma, l.gamma, same=s.gamma == l.gamma)
    if problem:
        raise click.ClickException(problem)
    return s, l


def fig2_text(small: InitSweep, large: InitSweep) -> str:
    rows = panel_rows(small, large) + panel_rows(small, large, 3)
    return "\n\n".join(
        [
            seeds_line(small, large),
            panel_table(rows),
            f"rule C1 (every epoch): {contrast_word(rows[:2])}; {spikes_sentence(small, large)}",
            picks_table(small, large),
            strict_table(small, large),
        ]
    )


# ----------------------------------------------------------------------------- the gamma slice


@dataclass(frozen=True)
class Cell:
    """One depth x gamma cell of the slice: its completed runs (one lr, one per seed)."""

    depth: int
    gamma: float
    runs: tuple[RunRecord, ...]

    def best(self, column: str) -> list[float]:
        """Each seed's best share over epochs (the papers' statistic at one lr)."""
        return [pick_paper([r], (column,))[column].value or 0.0 for r in self.runs]

    @property
    def strict(self) -> Strict:
        return Strict.of(self.runs)


def slice_cells(folders: Sequence[Path]) -> dict[tuple[int, float], Cell]:
    """The slice's cells by (depth, gamma), each with its completed runs sorted by seed."""
    runs, _ = _completed(folders)
    lrs = {r.lr for r in runs}
    if len(lrs) > 1:
        raise click.ClickException(
            f"{', '.join(map(str, folders))}: runs at peak lrs {sorted(lrs)}; the slice reads one lr (give the gamma-slice sweeps)"
        )
    cells: dict[tuple[int, float], list[RunRecord]] = defaultdict(list)
    for run in runs:
        cells[(run.config.model.n_layers, run.config.init.gamma)].append(run)
    return {key: Cell(*key, tuple(sorted(rs, key=lambda r: r.config.seed))) for key, rs in sorted(cells.items())}


def slice_table(cells: dict[tuple[int, float], Cell]) -> str:
    """Rule S1: per cell the strict counts and both best shares (mean and per seed)."""
    out = [
        "| depth | gamma (init std, d_model^-gamma) | seeds finished | infers: >= 0.8 with (3,4) fitted | copies: symmetric >= 0.8 | best inferential: mean (per seed) | best symmetric: mean (per seed) | final ID accuracy: mean (per seed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (depth, gamma), cell in cells.items():
        inf, sym = cell.best("heldout_inferential"), cell.best("heldout_symmetric")
        ids = [r.final_columns().get("id_acc") for r in cell.runs]
        seeds = ", ".join(str(r.config.seed) for r in cell.runs)
        std = cell.runs[0].config.model.d_model ** -gamma
        out.append(
            f"| {depth} | {gamma:g} ({std:.4f}) | {seeds} | {cell.strict.rate('infers')} | {cell.strict.rate('copies')} | "
            f"{_num(_mean(inf))} ({', '.join(map(_num, inf))}) | {_num(_mean(sym))} ({', '.join(map(_num, sym))}) | "
            f"{_num(_mean(ids))} ({', '.join(map(_num, ids))}) |"
        )
    return "\n".join(out)


def slice_rules(cells: dict[tuple[int, float], Cell]) -> str:
    """Rules S2 (the flip's bar, per depth) and S3 (gamma 1.0 against 0.8 and 0.5, per depth)."""
    lines = []
    for depth in sorted({d for d, _ in cells}):
        small, large = cells.get((depth, PAPER_STD_GAMMA)), cells.get((depth, LARGE_GAMMA))
        if small and large:
            s, l = small.strict, large.strict
            met = s.infers >= 3 and l.copies >= 3 and s.n >= 4 and l.n >= 4
            word = "met: a candidate preset, to be verified on seeds 801-808" if met else "not met"
            lines.append(
                f"- depth {depth}, rule S2 (gamma 1.0 infers on >= 3 of 4 and gamma 0.5 copies on >= 3 of 4): "
                f"gamma 1.0 infers on {s.infers} of {s.n}, gamma 0.5 copies on {l.copies} of {l.n}: {word}"
            )
        for other in (SMALL_GAMMA, LARGE_GAMMA):
            a, b = cells.get((depth, PAPER_STD_GAMMA)), cells.get((depth, other))
            if not a or not b:
                continue
            p_count = fisher((a.strict.infers, a.strict.n), (b.strict.infers, b.strict.n))
            p_rank = mann_whitney(a.best("heldout_inferential"), b.best("heldout_inferential"))
            lines.append(
                f"- depth {depth}, rule S3, gamma 1.0 against {other:g}: strict infers {a.strict.infers} of {a.strict.n} vs "
                f"{b.strict.infers} of {b.strict.n}, Fisher p = {p_count:.3f}; best inferential {_num(_mean(a.best('heldout_inferential')))} vs "
                f"{_num(_mean(b.best('heldout_inferential')))}, Mann-Whitney p = {'-' if p_rank is None else f'{p_rank:.3f}'}: "
                + ("separated" if (p_count < ALPHA or (p_rank is not None and p_rank < ALPHA)) else "not separated")
            )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the figure


def figure(small: InitSweep, large: InitSweep, cells: dict[tuple[int, float], Cell] | None = None):
    """Fig. 2 at CPU scale: per panel, each init's per-seed picks (the papers' statistic, every
    epoch) and their mean; with the slice's ``cells``, a second row of heatmaps, depth x gamma,
    of the mean best share over epochs at the preset's lr."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = 2 if cells else 1
    titles = [f"({letter}) {name}, best over {len(small.lrs)} lrs and epochs" for letter, _, name, _ in PANELS[::-1]]
    if cells:
        titles += [
            f"({letter}) the gamma slice: {name.split(' ', 1)[1]}, lr {PRESET_LR:g}"
            for letter, _, name, _ in PANELS[::-1]
        ]
    fig = make_subplots(rows=rows, cols=2, subplot_titles=titles, vertical_spacing=0.18)
    colours = {"small": "#1f77b4", "large": "#d62728"}
    for col, (letter, column, name, _) in enumerate(PANELS[::-1], start=1):
        for label, sweep in (("large", large), ("small", small)):
            values = [p.pick.value for p in sweep.picks(column) if p.pick.value is not None]
            x = f"{label} init (gamma {sweep.gamma:g})"
            fig.add_trace(
                go.Scatter(
                    x=[x] * len(values),
                    y=values,
                    mode="markers",
                    marker={"color": colours[label], "size": 9, "opacity": 0.6},
                    name=f"{label} init: a seed",
                    showlegend=col == 1,
                    legendgroup=label,
                ),
                row=1,
                col=col,
            )
            if values:
                fig.add_trace(
                    go.Scatter(
                        x=[x],
                        y=[statistics.fmean(values)],
                        mode="markers",
                        marker={"color": colours[label], "size": 18, "symbol": "line-ew-open", "line": {"width": 3}},
                        name=f"{label} init: mean",
                        showlegend=col == 1,
                        legendgroup=label,
                    ),
                    row=1,
                    col=col,
                )
        fig.update_yaxes(range=[-0.05, 1.05], title_text="share of the held-out (4,3)", row=1, col=col)
        if cells:
            depths, gammas = sorted({d for d, _ in cells}), sorted({g for _, g in cells})
            z = [[_mean(cells[(d, g)].best(column)) if (d, g) in cells else None for g in gammas] for d in depths]
            text = [
                [
                    "-" if v is None else f"{v:.2f} (n={len(cells[(d, g)].runs)})"
                    for v, g in zip(row, gammas, strict=True)
                ]
                for row, d in zip(z, depths, strict=True)
            ]
            fig.add_trace(
                go.Heatmap(
                    z=z,
                    x=[f"gamma {g:g}" for g in gammas],
                    y=[f"depth {d}" for d in depths],
                    zmin=0,
                    zmax=1,
                    colorscale="Viridis",
                    text=text,
                    texttemplate="%{text}",
                    showscale=col == 2,
                    colorbar={"len": 0.42, "y": 0.21},
                ),
                row=2,
                col=col,
            )
    fig.update_layout(
        width=1000,
        height=420 * rows,
        title="NeurIPS Fig. 2 at CPU scale (the cpu preset, symmetric): small against large init",
        margin={"t": 90},
    )
    return fig


# ----------------------------------------------------------------------------- the command


@click.group(cls=ScriptGroup)
def main() -> None:
    """The Fig. 2 contrast and the gamma slice (docs/fig2-contrast.md), read from sweep folders."""


@main.command()
@click.option(
    "--small",
    "small",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A small-init seed x lr sweep folder (repeat for more seeds).",
)
@click.option(
    "--large",
    "large",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A large-init seed x lr sweep folder (repeat for more seeds).",
)
def fig2(small: tuple[Path, ...], large: tuple[Path, ...]) -> None:
    """Both inits under the papers' statistic, their picks, the strict reading and rules C1-C2."""
    click.echo(fig2_text(*read_sides(small, large)))


@main.command(name="slice")
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def slice_(folders: tuple[Path, ...]) -> None:
    """The gamma slice's cells (rule S1) and rules S2-S3."""
    cells = slice_cells(folders)
    click.echo(slice_table(cells) + "\n\n" + slice_rules(cells))


@main.command(name="figure")
@click.option(
    "--small",
    "small",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A small-init seed x lr sweep folder.",
)
@click.option(
    "--large",
    "large",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A large-init seed x lr sweep folder.",
)
@click.option(
    "--slice",
    "slices",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A gamma-slice sweep folder (adds the heatmaps).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The .png to write: a new file, or one this figure command wrote before and nobody changed.",
)
def figure_(small: tuple[Path, ...], large: tuple[Path, ...], slices: tuple[Path, ...], out: Path) -> None:
    """Fig. 2 at CPU scale as a PNG (through kaleido and a headless Chromium)."""
    from training.studies.report.page import StaticExportUnavailable, check_image_file, write_images

    try:  # the one output guard, before any work: not in a run or study folder, nor over a file it did not write
        check_image_file(out, "--out")
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    fig = figure(*read_sides(small, large), slice_cells(slices) if slices else None)
    try:
        (written,) = write_images({out.stem: fig}, out.parent, "png", width=1000, scale=1.5, option="--out")
    except StaticExportUnavailable as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"wrote {written}")


if __name__ == "__main__":
    main()
