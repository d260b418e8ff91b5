"""The results tables of README.md and docs/: one function per table, from the stored records.

``python experiments/tables.py`` (which see) writes each into the pages between its markers
and ``--check`` compares.  A table is a function of the stored studies (``records.study(NAME)``:
a :class:`training.studies.population.StoredStudy` under ``experiments/results/``; a study not stored yet
stops the table, which is then left as it is) returning the block's markdown, read through the
project's one reader (:class:`training.studies.records.RunRecord`, the population, the selection
protocols, the race).  Adding a table is a function registered here and a marker::

    @generator("my-table", STUDY_NAMES["verification"], what="where it goes and what it says")
    def my_table(records: Records) -> str:
        population = records.study(STUDY_NAMES["verification"]).population()
        return _markdown(("criterion", "met"), ([r.name, exact_rate(r.met, r.of)] for r in population.rates))
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from interp_init.fileio import read_json
from training.studies.population import StoredStudy, exact_rate


class Records(Protocol):
    """The stored studies a table reads (``experiments/tables.py``'s ``Records``), and the
    scripts beside this one (``experiments/race.py``, ``paper_statistic.py``) as modules."""

    def study(self, name: str) -> StoredStudy: ...

    def stored(self, name: str) -> bool: ...

    def script(self, name: str) -> ModuleType: ...

    @property
    def root(self) -> Path: ...


@dataclass(frozen=True)
class Generator:
    """A table (or a sentence's number) made from stored studies."""

    name: str
    studies: tuple[str, ...]
    make: Callable[[Records], str]
    what: str


#: Every generator by name (``@generator``).
TABLES: dict[str, Generator] = {}


def generator(name: str, *studies: str, what: str) -> Callable[[Callable[[Records], str]], Callable[[Records], str]]:
    """Register ``make(records) -> markdown`` as the table ``name``, reading ``studies``."""

    def register(make: Callable[[Records], str]) -> Callable[[Records], str]:
        if name in TABLES:
            raise ValueError(f"table {name!r} is registered twice")
        TABLES[name] = Generator(name, studies, make, what)
        return make

    return register


#: Where the stored studies lie, from the repository's root (README's links to them).
RESULTS_DIR = "experiments/results"

#: The stored studies the tables read, by role: the folder names under experiments/results/.
STUDY_NAMES = {
    "verification": "verify-cpu-201-208",  # interp-init reproduce --preset cpu --seeds 201,...,208
    "paper-statistic": "paper-statistic-401-403",  # experiments/population-specs/sym-small-g0.8-paper-statistic.json
    "gpu": "gpu-suite-h200-2026-11-26",  # benchmarks/gpu_suite.py on an H200, 94 of 210 epochs
    "pc": "pc-depth3-const",  # the positive control's configuration P (docs/positive-control.md)
    "pc-depth3-cosine": "pc-depth3-cosine",
    "pc-depth2-const": "pc-depth2-const",
    "pc-depth4-const": "pc-depth4-const",
    "pc-depth2-const-large": "pc-depth2-const-large",  # rule 5 of docs/positive-control.md
    # docs/fig2-contrast.md (issue 52): Fig. 2's contrast, both inits under the papers' statistic, and the gamma slice
    "fig2-large-401-403": "fig2-large-401-403",
    "fig2-small-404-406": "fig2-small-404-406",
    "fig2-large-404-406": "fig2-large-404-406",
    "gamma-slice-d2": "gamma-slice-d2",
    "gamma-slice-d3": "gamma-slice-d3",
    # docs/concept-graphs.md (issue 55): the journal's Fig. 6 at CPU scale, and the gate pilots that chose its schedule (seed 0)
    "concept-graphs-fig6": "concept-graphs-fig6",
    "concept-graphs-gate-1": "concept-graphs-gate-1",
    "concept-graphs-gate-2": "concept-graphs-gate-2",
    "concept-graphs-gate-3": "concept-graphs-gate-3",
    "gamma-slice-g1.2": "gamma-slice-g1.2",
    # docs/beyond-anchor-functions.md (issue 54): the journal's Fig. 7 at CPU scale, one sweep per task and setting
    **{
        f"{fig}-{task}-{side}": f"{fig}-{task}-{side}"
        for fig, task in (("fig7a", "scan"), ("fig7e", "prontoqa"), ("fig7d", "code-lm"), ("fig7b", "cogs"))
        for side in ("small", "large")
    },
    "first-minute": "first-minute-tiny-0",  # interp-init reproduce --preset tiny --seed 0: README's first minute
}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _seeds(seeds: Iterable[int]) -> str:
    """``201-203`` for a run of consecutive seeds, else the list."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


def _modes(population: Any, seeds: Iterable[int], task: str, regime: str) -> str:
    """The failing seeds grouped by their race mode (the strict protocol's, :mod:`training.studies.records`)."""
    from training.studies.records import MODES

    by_mode: dict[str, list[int]] = {}
    for seed in seeds:
        race = next(r for r in population.rows if r.seed == seed).result(task, regime).race
        by_mode.setdefault("no race" if race is None else race.mode, []).append(seed)
    order = [m for m in (*MODES, "no race") if m in by_mode]
    return "; ".join(f"{mode}: {', '.join(map(str, by_mode[mode]))}" for mode in order)


def _failing(population: Any, name: str, seeds: list[int]) -> str:
    """What the seeds failing the criterion (or reading) ``name`` show."""
    if not seeds:
        return ""
    rows = {r.seed: r for r in population.rows}
    task = name.split(":", 1)[0]
    if "both ID" in name:
        return "; ".join(
            f"{s}: "
            + ", ".join(
                f"{g.split('-')[0]} init ID {_num(rows[s].result(task, g).value('id_acc'))}"
                for g in ("small-init", "large-init")
                if (rows[s].result(task, g).value("id_acc") or 0) < 0.9
            )
            for s in seeds
        )
    regime = "small-init" if "small-init" in name else "large-init"
    if task == "symmetric":
        return _modes(population, seeds, task, regime)
    return "; ".join(f"{s}: OOD {_num(rows[s].result(task, regime).value('ood_acc'))}" for s in seeds)


def rates_rows(population: Any, with_all: bool) -> list[list[str]]:
    """One row per criterion of the flip and per reading beside one (the count without the
    (3,4) condition beside the strict one): its name, k of n [95% exact interval], and what
    the failing seeds show."""
    rows = []
    for rate in population.rates_and_readings():
        if rate.name == "all" and not with_all:
            continue
        held = {
            row.seed: (row.checks[rate.name] if rate.beside is None else row.readings[rate.name][1])
            for row in population.rows
        }
        met = exact_rate(rate.met, rate.of)
        label = rate.name if rate.beside is None else f"{rate.name} (beside the criterion above; not a criterion)"
        rows.append(
            [
                label,
                f"**{met}**" if rate.name.startswith("symmetric: small-init") else met,
                "" if rate.name == "all" else _failing(population, rate.name, [s for s, ok in held.items() if not ok]),
            ]
        )
    return rows


#: The papers' statistic is read twice: on every evaluated epoch, then only on the epochs the
#: released scripts log (``-pae 3``), as the papers' own "best over epochs" saw them.
PAPER_READINGS = (None, 3)


def paper_statistic_row(records: Records) -> list[str]:
    """The papers' statistic of the stored seed x lr sweep: the mean of each seed's best
    inferential share, and how many seeds reach 0.8 there (without and with (3,4) fitted);
    where the sweep is not stored, a row that says so (the verification's rows stand alone)."""
    label = (
        "the papers' statistic: small init's best inferential share over 9 lrs and epochs, mean of 3 seeds (401-403)"
    )
    if not records.stored(
        STUDY_NAMES["paper-statistic"]
    ):  # its first folders are gone; its history is in docs/faithful-models.md
        return [
            label,
            "not stored yet: the sweep is being trained again (docs/faithful-models.md, the papers' own statistic)",
            "",
        ]
    paper_statistic = records.script("paper_statistic")
    study = records.study(STUDY_NAMES["paper-statistic"])
    picks, exception, _, pending = paper_statistic.seed_picks(study.path)
    if pending:
        raise ValueError(f"{study.path}: {pending} runs not completed; store the finished sweep")
    mean = paper_statistic.mean_picks(picks)["heldout_inferential"]
    reach, fitted = paper_statistic.reaching(picks, exception)
    n, lrs = len(picks), len(study.spec().grid.get("lr", ()))
    per_seed = ", ".join(_num(row["heldout_inferential"].value) for row in picks.values())
    every = PAPER_READINGS[-1]
    logged = paper_statistic.mean_picks(paper_statistic.seed_picks(study.path, every)[0])["heldout_inferential"]
    return [
        f"the papers' statistic: small init's best inferential share over {lrs} lrs and epochs, mean of {n} seeds ({_seeds(picks)})",
        f"{_num(mean)} (per seed {per_seed}; {_num(logged)} on the epochs the released scripts log, -pae {every}); "
        f">= 0.8 at the pick: {exact_rate(reach, n)}; with (3,4) fitted at the pick: **{exact_rate(fitted, n)}**",
        "",
    ]


def _rate_of(population: Any, start: str) -> Any:
    """The population's rate whose criterion name starts with ``start`` (the flip's criteria, :mod:`interp_init.tasks.anchor`)."""
    return next(r for r in population.rates if r.name.startswith(start) and r.beside is None)


@generator(
    "readme-answer",
    STUDY_NAMES["verification"],
    STUDY_NAMES["paper-statistic"],
    STUDY_NAMES["gpu"],
    what="README's and docs/index.md's answer: each flip with its rate, interval and scale, and the papers' statistic reconciled with the strict reading",
)
def readme_answer(records: Records) -> str:
    study = records.study(STUDY_NAMES["verification"])
    population, config = study.population(), RecordsConfig.of(study)
    model = study.records()[0].config.model
    seeds = _seeds({r.config.seed for r in study.records()})
    ood_small, ood_large = (
        _rate_of(population, "id-ood: small-init OOD"),
        _rate_of(population, "id-ood: large-init OOD"),
    )
    infers, copies = (
        _rate_of(population, "symmetric: small-init inferential"),
        _rate_of(population, "symmetric: large-init symmetric"),
    )
    gpu = [r for r in _gpu_races(records) if r["gamma"] == "0.8"]
    gpu_config = RecordsConfig.of(records.study(STUDY_NAMES["gpu"]))
    gpu_infers = sum(r["race"].mode == "infers" for r in gpu)
    lines = [
        f"- **The journal's flip (`id-ood`) holds**: small init composes the unseen pairs (OOD accuracy >= 0.5) on "
        f"{exact_rate(ood_small.met, ood_small.of)} seeds; large init does not (OOD <= 0.3) on {exact_rate(ood_large.met, ood_large.of)}.",
        f"- **The NeurIPS flip (`symmetric`) does not show at this scale**: small init infers the unseen pair (4,3) on "
        f"{exact_rate(infers.met, infers.of)} seeds, large init copies the seen answer on {exact_rate(copies.met, copies.of)}; at the "
        f"papers' scale on a GPU small init inferred on {exact_rate(gpu_infers, len(gpu))} after {gpu[0]['race'].last_epoch} of "
        f"{gpu_config.epochs} epochs.",
    ]
    if records.stored(STUDY_NAMES["paper-statistic"]):
        paper_statistic = records.script("paper_statistic")
        ps = records.study(STUDY_NAMES["paper-statistic"])
        picks, exception, _, _ = paper_statistic.seed_picks(ps.path)
        mean = paper_statistic.mean_picks(picks)["heldout_inferential"]
        _, fitted = paper_statistic.reaching(picks, exception)
        runs = [r for r in ps.records() if r.status == "completed" and r.config.init.gamma > 0.5]
        final = sum(_answers(r)[0] for r in runs)
        lrs = len(ps.spec().grid.get("lr", ()))
        lines.append(
            f"- **The papers' statistic agrees**: read their way (each seed's best inferential share over {lrs} lrs and every "
            f"epoch, mean of {len(picks)} seeds: {_num(mean)}; {fitted} of {len(picks)} seeds reach 0.8) it finds the moments a "
            f"run infers, yet only {final} of those {len(runs)} runs infers at its final epoch."
        )
    if records.stored(STUDY_NAMES["fig2-large-401-403"]):
        lines.append(f"- {fig2_sentence(records)}")
    if records.stored(STUDY_NAMES["gamma-slice-d2"]):
        lines.append(f"- {slice_sentence(records)}")
    lines.append(
        f"- Scale: the `{config.preset}` preset (the papers' models at d_model {config.d_model}, theirs {gpu_config.d_model}; "
        f"{model.n_layers} layers, {config.n_train:,} samples, {config.epochs} epochs), seeds {seeds}, each seed's final model, "
        f"95% exact intervals."
    )
    return "\n".join(lines)


@generator(
    "readme-verification",
    STUDY_NAMES["verification"],
    STUDY_NAMES["paper-statistic"],
    what="README's main table: the verification seeds' rates (strict, with the reading without the (3,4) condition), the failing seeds' modes, the papers' statistic",
)
def readme_verification(records: Records) -> str:
    population = records.study(STUDY_NAMES["verification"]).population()
    rows = rates_rows(population, with_all=False) + [paper_statistic_row(records)]
    return _markdown(("criterion", "seeds meeting it", "failing seeds: what they show"), rows)


@generator(
    "verification-rates",
    STUDY_NAMES["verification"],
    what="docs/faithful-models.md: the verification seeds' rates with the failing seeds' modes, and all six",
)
def verification_rates(records: Records) -> str:
    population = records.study(STUDY_NAMES["verification"]).population()
    return _markdown(("criterion", "met", "failing seeds: what they show"), rates_rows(population, with_all=True))


@generator(
    "verification-population",
    STUDY_NAMES["verification"],
    what="docs/faithful-models.md: the verification's population as Population.format() gives it",
)
def verification_population(records: Records) -> str:
    return f"```\n{records.study(STUDY_NAMES['verification']).population().format()}\n```"


@generator(
    "paper-statistic",
    STUDY_NAMES["paper-statistic"],
    what="docs/faithful-models.md: what experiments/paper_statistic.py prints for the stored sweep, on every epoch and on the logged epochs (--logged-every 3)",
)
def paper_statistic_table(records: Records) -> str:
    study = records.study(STUDY_NAMES["paper-statistic"])
    blocks = []
    for every in PAPER_READINGS:
        command = f"python experiments/paper_statistic.py experiments/results/{study.path.name}"
        command += "" if every is None else f" --logged-every {every}"
        blocks.append(
            f"`{command}`:\n\n```\n{records.script('paper_statistic').statistic_text(study.path, every)}\n```"
        )
    return "\n\n".join(blocks)


@generator(
    "paper-statistic-modes",
    STUDY_NAMES["paper-statistic"],
    what="docs/faithful-models.md: the sweep's runs by their mode at the last epoch (experiments/race.py), the runs that answer named",
)
def paper_statistic_modes(records: Records) -> str:
    from training.studies.records import MODES

    study = records.study(STUDY_NAMES["paper-statistic"])
    rows = [
        row for row in records.script("race").race_rows([study.path]) if "race" in row and row["status"] == "completed"
    ]
    words = {"infers": "infer", "early copy": "copy", "neither": "answer neither", "under-trained": "are under-trained"}
    parts = []
    for mode in MODES:
        runs = [row for row in rows if row["mode"] == mode]
        names = "; ".join(f"seed {row['seed']}, {row['knobs']}" for row in runs)
        named = f" ({names})" if runs and mode in ("infers", "early copy") else ""
        parts.append(f"{len(runs)} {words[mode]}{named}")
    return f"at the last epoch, over all {len(rows)} runs: " + ", ".join(parts)


def _gpu_races(records: Records) -> list[dict]:
    study = records.study(STUDY_NAMES["gpu"])
    rows = [
        row
        for row in records.script("race").race_rows(sorted({run.parent for run in study.run_dirs()}))
        if "race" in row
    ]
    return sorted(rows, key=lambda r: (r["gamma"] != "0.8", r["seed"]))


@generator(
    "gpu-race",
    STUDY_NAMES["gpu"],
    what="docs/faithful-models.md: the race of the GPU suite's runs, read from their stored histories",
)
def gpu_race(records: Records) -> str:
    rows = _gpu_races(records)
    epochs = {row["race"].last_epoch for row in rows}
    at = f"epoch {epochs.pop()}" if len(epochs) == 1 else "the last evaluated epoch"
    header = (
        "run",
        "(3,4) fit epoch",
        "copy epoch",
        "inf / sym at fit",
        f"inf / sym at {at}",
        f"ID at {at}",
        "shares stopped moving (epoch)",
        "mode so far",
    )
    return _markdown(
        header,
        (
            [
                f"{'small' if r['gamma'] == '0.8' else 'large'} init ({r['gamma']}), seed {r['seed']}",
                r["(3,4) fit epoch"],
                r["copy epoch"],
                r["inf / sym at fit"],
                r["inf / sym at end"],
                r["ID at end"],
                r["stopped moving"],
                r["race"].mode,
            ]
            for r in rows
        ),
    )


@generator(
    "readme-gpu",
    STUDY_NAMES["gpu"],
    what="README's sentence on the GPU run: its scale, epochs and small init's outcome",
)
def readme_gpu(records: Records) -> str:
    study = records.study(STUDY_NAMES["gpu"])
    small = [r for r in _gpu_races(records) if r["gamma"] == "0.8"]
    config = RecordsConfig.of(study)
    infers = sum(r["race"].mode == "infers" for r in small)
    copies = [r for r in small if r["race"].mode == "early copy"]
    return (
        f"the `{config.preset}` preset (d_model {config.d_model}, {config.n_train:,} samples, {config.precision}) trained small init on seeds "
        f"{_seeds(int(r['seed']) for r in small)} for {small[0]['race'].last_epoch} of its {config.epochs} epochs before the session's device time ran out; "
        f"it inferred on {exact_rate(infers, len(small))} and copied the symmetric answer on {len(copies)} of {len(small)}, whose shares stopped moving "
        f"at epochs {' and '.join(r['stopped moving'] for r in copies)} (`experiments/race.py`)"
    )


def _span(values: Iterable[float | int], fmt: str = "{}") -> str:
    """``a-b`` for a range of values, ``a`` when they are equal."""
    values = sorted(values)
    low, high = fmt.format(values[0]), fmt.format(values[-1])
    return low if low == high else f"{low}-{high}"


@generator(
    "gpu-rates",
    STUDY_NAMES["gpu"],
    what="docs/faithful-models.md: the GPU runs' rates by the last evaluated epoch, and small init's best inferential share",
)
def gpu_rates(records: Records) -> str:
    rows = _gpu_races(records)
    small, large = [r for r in rows if r["gamma"] == "0.8"], [r for r in rows if r["gamma"] != "0.8"]
    best = {}
    for record in (r for r in records.study(STUDY_NAMES["gpu"]).records() if r.config.init.gamma == 0.8):
        shares = [
            (e.metrics.columns().get("heldout_inferential") or 0.0, e.epoch)
            for e in record.history
            if e.metrics is not None
        ]
        best[record.config.seed] = max(shares)
    infers, copies = sum(r["race"].mode == "infers" for r in small), sum(r["race"].mode == "early copy" for r in small)
    return (
        f"**Small init infers on {exact_rate(infers, len(small))} by epoch {small[0]['race'].last_epoch} and copies on {exact_rate(copies, len(small))}; "
        f"large init copies on {exact_rate(sum(r['race'].mode == 'early copy' for r in large), len(large))}.** The highest inferential share each small-init "
        f"run reached at any epoch: "
        + ", ".join(f"seed {seed} {share:.2f} (epoch {epoch})" for seed, (share, epoch) in sorted(best.items()))
        + "."
    )


@generator(
    "gpu-epochs",
    STUDY_NAMES["gpu"],
    what="docs/faithful-models.md: how far the GPU runs trained (the last recorded epoch of how many)",
)
def gpu_epochs(records: Records) -> str:
    runs = records.study(STUDY_NAMES["gpu"]).records()
    return f"{_span(r.epochs_run for r in runs)} of {_span(r.config.train.epochs for r in runs)}"


#: From this epoch on, the GPU section gives each run's bands of shares.
GPU_BANDS_FROM = 21


@generator(
    "gpu-bands",
    STUDY_NAMES["gpu"],
    what="docs/faithful-models.md: the GPU runs' losses and the bands their shares moved in late in training",
)
def gpu_bands(records: Records) -> str:
    runs = sorted(records.study(STUDY_NAMES["gpu"]).records(), key=lambda r: (-r.config.init.gamma, r.config.seed))
    at_11 = max(e.loss for r in runs for e in r.history if e.epoch == 11)
    later = max(e.loss for r in runs for e in r.history if e.epoch > 11)
    last = max(r.epochs_run for r in runs)
    parts = []
    for run in runs:
        shares = [e.metrics.columns() for e in run.history if e.epoch >= GPU_BANDS_FROM and e.metrics is not None]
        inf, sym = (
            _span((c.get(k) or 0.0 for c in shares), "{:.2f}") for k in ("heldout_inferential", "heldout_symmetric")
        )
        parts.append(
            f"{'small' if run.config.init.gamma == 0.8 else 'large'} init seed {run.config.seed} {inf} / {sym}"
        )
    return (
        f"Every run's training loss was at most {at_11:.2f} at epoch 11 (later single epochs rose to {later:.2f} and came back). From epoch "
        f"{GPU_BANDS_FROM} to {last} the (4,3) inferential / symmetric shares moved within these bands: {'; '.join(parts)}."
    )


@generator(
    "gpu-fit-epochs",
    STUDY_NAMES["gpu"],
    what="docs/faithful-models.md: the epochs the GPU runs fitted (3,4), small init against large",
)
def gpu_fit_epochs(records: Records) -> str:
    rows = _gpu_races(records)
    small = [r["race"].fit_epoch for r in rows if r["gamma"] == "0.8" and r["race"].fit_epoch is not None]
    large = [r["race"].fit_epoch for r in rows if r["gamma"] != "0.8" and r["race"].fit_epoch is not None]
    return f"epochs {_span(small)} against {_span(large)}"


@generator(
    "first-minute-output",
    STUDY_NAMES["first-minute"],
    what="docs/getting-started.md: what the first minute prints (its table and verdict), from its stored runs; the call's own seconds are not recorded",
)
def first_minute_output(records: Records) -> str:
    from training.studies.population import failed_criteria

    study = records.study(STUDY_NAMES["first-minute"])
    population, spec = study.population(), study.spec()
    checks, seed = population.rows[0].checks, spec.seeds[0]
    lines = [
        f"preset {spec.preset}, seed {seed}, {spec.precision}, ... s in this call",
        population.format_regimes(),
        "flip reproduced (all criteria met)"
        if checks["all"]
        else f"flip NOT reproduced; failed: {failed_criteria(checks)}",
        f"this is one draw (seed {seed}): how often each criterion holds over seeds is what --seeds 31,32,33,... measures (docs/faithful-models.md)",
        "summary: runs/first-minute/summary.json",
        "report: runs/first-minute/report.html",
    ]
    return "```\n" + "\n".join(lines) + "\n```"


@generator(
    "first-minute-seconds",
    STUDY_NAMES["first-minute"],
    what="README and docs/getting-started.md: the seconds the first minute's four runs trained, with the machine and its load",
)
def first_minute_seconds(records: Records) -> str:
    study = records.study(STUDY_NAMES["first-minute"])
    seconds = [r.elapsed_s for r in study.records() if r.elapsed_s is not None]
    load = re.search(r"load average [0-9.]+(?:-[0-9.]+)?", study.get("beside") or "")
    machine = (study.get("machine") or "").split(" (")[0].split(",")[0]
    return (
        f"its four runs trained in {_span(seconds, '{:.1f}')} s each on a {machine}"
        f"{' at ' + load.group() if load else ''}, as `{RESULTS_DIR}/{study.name}/STUDY.md` records"
    )


@generator(
    "readme-minutes",
    STUDY_NAMES["verification"],
    what="README's time of the main job: the verification's models' training minutes",
)
def readme_minutes(records: Records) -> str:
    study = records.study(STUDY_NAMES["verification"])
    minutes = [r.elapsed_s / 60 for r in study.records() if r.elapsed_s is not None]
    median = statistics.median(minutes)
    return (
        f"a model trained in a median {median:.1f} minutes, {_span(minutes, '{:.1f}')} with other work on the cores "
        f"as its STUDY.md says, on a 2-core CPU with one torch thread, in the verification of seeds "
        f"{_seeds({r.config.seed for r in study.records()})}"
    )


@dataclass(frozen=True)
class RecordsConfig:
    """The options a stored study's runs share (the first run's), for sentences."""

    preset: str
    d_model: int
    n_train: int
    precision: str
    epochs: int

    @classmethod
    def of(cls, study: StoredStudy) -> RecordsConfig:
        config = study.records()[0].config
        return cls(
            config.preset, config.model.d_model, config.data.n_train, config.train.precision, config.train.epochs
        )


# -- the positive control (docs/positive-control.md): counts over the finished seeds, strict and without the (3,4) condition


def _small_large(records: Records, role: str) -> dict[float, list]:
    """The completed runs of a stored sweep, by gamma."""
    study = records.study(STUDY_NAMES[role])
    by_gamma: dict[float, list] = {}
    for record in study.records():
        if record.status == "completed":
            by_gamma.setdefault(record.config.init.gamma, []).append(record)
    return by_gamma


def _answers(record: Any) -> tuple[bool, bool, bool]:
    """Whether the run infers strictly, infers whatever (3,4) does, copies (the flip's own thresholds)."""
    from interp_init.tasks.anchor import FLIP_CRITERIA, SMALL_INFERENTIAL, SMALL_INFERENTIAL_ANY, heldout_answer

    final, task = record.final_columns(), record.task
    strict = task.flip_checks(final, final, FLIP_CRITERIA)[SMALL_INFERENTIAL]
    loose = task.flip_readings(final, final, FLIP_CRITERIA)[SMALL_INFERENTIAL_ANY][1]
    copies = (
        heldout_answer(final.get("heldout_inferential"), final.get("heldout_symmetric"), final.get("exception_acc"))
        == "symmetric"
    )
    return strict, loose, copies


def _per_seed(runs: list) -> str:
    return ", ".join(
        f"{r.config.seed}: {_num(r.final_columns()['heldout_inferential'])} / {_num(r.final_columns()['heldout_symmetric'])} "
        f"({_num(r.final_columns()['exception_acc'])})"
        for r in sorted(runs, key=lambda r: r.config.seed)
    )


def _init_table(by_gamma: dict[float, list], gammas: Sequence[float] = ()) -> str:
    """Per init (``gammas`` always listed, 'not trained yet' where no run is stored): the
    finished seeds, both readings, the copies and each seed's shares."""
    rows = []
    for gamma in sorted(set(by_gamma) | set(gammas), reverse=True):
        label, runs = f"{'small' if gamma > 0.5 else 'large'} init (gamma {gamma:g})", by_gamma.get(gamma, [])
        if not runs:
            rows.append([label, "0", "-", "-", "-", "not trained yet"])
            continue
        answers = [_answers(r) for r in runs]
        rows.append(
            [
                label,
                str(len(runs)),
                exact_rate(sum(a[0] for a in answers), len(runs)),
                exact_rate(sum(a[1] for a in answers), len(runs)),
                exact_rate(sum(a[2] for a in answers), len(runs)),
                _per_seed(runs),
            ]
        )
    header = (
        "init",
        "seeds finished",
        "infers: >= 0.8 with (3,4) fitted",
        "infers: >= 0.8 whatever (3,4) does",
        "copies: symmetric >= 0.8",
        "per seed: inferential / symmetric ((3,4))",
    )
    return _markdown(header, rows)


@generator(
    "pc-main",
    STUDY_NAMES["pc"],
    what="docs/positive-control.md: small and large init at P, strict and without the (3,4) condition",
)
def pc_main(records: Records) -> str:
    return _init_table(_small_large(records, "pc"))


@generator(
    "pc-depth2",
    STUDY_NAMES["pc-depth2-const"],
    STUDY_NAMES["pc-depth2-const-large"],
    what="docs/positive-control.md: small and large init at depth 2 with the lr held (rule 5; large init 'not trained yet' until stored)",
)
def pc_depth2(records: Records) -> str:
    by_gamma = _small_large(records, "pc-depth2-const")
    if records.stored(STUDY_NAMES["pc-depth2-const-large"]):
        for gamma, runs in _small_large(records, "pc-depth2-const-large").items():
            by_gamma.setdefault(gamma, []).extend(runs)
    return _init_table(by_gamma, (0.8, 0.5))


#: The cause variants against P, in the pre-registered order, and what each changes.
CAUSES = (
    ("pc", "P: depth 3, the lr held at its peak, 20 epochs"),
    ("pc-depth3-cosine", "depth 3 under the preset's cosine (12 epochs)"),
    ("pc-depth2-const", "depth 2, the lr held (20 epochs)"),
    ("pc-depth4-const", "depth 4, the lr held (20 epochs)"),
)


@generator(
    "pc-causes",
    *(STUDY_NAMES[r] for r, _ in CAUSES),
    what="docs/positive-control.md: small init at P and its three cause variants, with Fisher's exact test against P (a cause not stored yet reads 'not trained yet'; P itself is needed)",
)
def pc_causes(records: Records) -> str:
    from scipy.stats import fisher_exact

    counts = {}
    for role, _ in CAUSES:
        if role != "pc" and not records.stored(STUDY_NAMES[role]):
            continue  # a cause not trained yet: its row says so (the order is docs/positive-control.md's)
        runs = _small_large(records, role).get(0.8, [])
        answers = [_answers(r) for r in runs]
        counts[role] = (sum(a[0] for a in answers), sum(a[1] for a in answers), len(runs))
    p_met, _, p_n = counts["pc"]
    rows = []
    for role, label in CAUSES:
        if role not in counts:
            rows.append([label, "0", "-", "-", "not trained yet"])
            continue
        met, loose, n = counts[role]
        if role == "pc":
            against = "-"
        else:
            p = float(fisher_exact([[p_met, p_n - p_met], [met, n - met]])[1])
            against = f"p = {p:.3f}: " + ("separated" if p < 0.05 else f"not separated at {min(n, p_n)} seeds")
        rows.append([label, str(n), exact_rate(met, n) if n else "-", exact_rate(loose, n) if n else "-", against])
    return _markdown(
        (
            "small init (gamma 0.8)",
            "seeds finished",
            "infers: >= 0.8 with (3,4) fitted",
            "infers: >= 0.8 whatever (3,4) does",
            "against P (Fisher's exact test, two-sided, strict counts)",
        ),
        rows,
    )


# -- where the strict answer appears (README's and docs/faithful-models.md's last results table)

#: The stored CPU studies with small-init symmetric runs, in the order the breadth table lists them.
BREADTH = ("verification", "paper-statistic", "pc", "pc-depth3-cosine", "pc-depth2-const", "pc-depth4-const")


def _configuration(config: Any, lrs: Sequence[float] = ()) -> str:
    """A symmetric run's configuration in a few words: preset, depth, schedule, epochs, gamma
    (``lrs``: the peak lrs of a sweep over them, said as their span)."""
    train = config.train
    schedule = "the lr held at its peak" if train.min_lr >= train.lr else f"cosine to {train.min_lr:g}"
    peak = f"peak lr {min(lrs):g}-{max(lrs):g} ({len(lrs)} lrs)" if len(lrs) > 1 else f"peak lr {train.lr:g}"
    return f"`{config.preset}`, depth {config.model.n_layers}, {peak}, {schedule}, {train.epochs} epochs, gamma {config.init.gamma:g}"


@generator(
    "strict-breadth",
    *(STUDY_NAMES[r] for r in BREADTH),
    what="README and docs/faithful-models.md: where small init infers strictly, per stored CPU study: configuration, seeds, both readings, the closest share (a study not stored yet is left out)",
)
def strict_breadth(records: Records) -> str:
    rows = []
    for role in BREADTH:
        if role != "verification" and not records.stored(STUDY_NAMES[role]):
            continue
        study = records.study(STUDY_NAMES[role])
        small = [
            r
            for r in study.records()
            if r.status == "completed" and r.task_name == "symmetric" and r.config.init.gamma > 0.5
        ]
        if not small:
            continue
        answers = [_answers(r) for r in small]
        closest = max(small, key=lambda r: r.final_columns()["heldout_inferential"] or 0.0)
        columns, lrs = closest.final_columns(), sorted({r.config.train.lr for r in small})
        seeds = _seeds({r.config.seed for r in small}) + (
            f" x {len(lrs)} lrs ({len(small)} runs)" if len(lrs) > 1 else ""
        )
        where = f"seed {closest.config.seed}" + (f", lr {closest.config.train.lr:g}" if len(lrs) > 1 else "")
        rows.append(
            [
                f"{STUDY_NAMES[role]}: {_configuration(small[0].config, lrs)}",
                seeds,
                exact_rate(sum(a[0] for a in answers), len(small)),
                exact_rate(sum(a[1] for a in answers), len(small)),
                f"{_num(columns['heldout_inferential'])} ({where}, (3,4) {_num(columns['exception_acc'])})",
            ]
        )
    header = (
        "stored study: small init on `symmetric`",
        "seeds (runs) finished",
        "infers: >= 0.8 with (3,4) fitted",
        "infers: >= 0.8 whatever (3,4) does",
        "highest final inferential share",
    )
    return _markdown(header, rows)


# -- Fig. 2 as a contrast, and the gamma slice (docs/fig2-contrast.md, pre-registered; experiments/contrast.py)

#: Each init's seed x lr sweeps: the first is needed, the others are read where they are stored.
FIG2_SWEEPS = {
    "small": ("paper-statistic", "fig2-small-404-406"),
    "large": ("fig2-large-401-403", "fig2-large-404-406"),
}
#: The gamma slice's sweeps, read where they are stored.
SLICE = ("gamma-slice-d2", "gamma-slice-d3", "gamma-slice-g1.2")


def _fig2(records: Records) -> tuple[ModuleType, Any, Any]:
    """experiments/contrast.py and both inits' sweeps (their stored studies, read together)."""
    contrast = records.script("contrast")
    sweeps = []
    for roles in FIG2_SWEEPS.values():
        folders = [records.study(STUDY_NAMES[roles[0]]).path]
        folders += [records.study(STUDY_NAMES[r]).path for r in roles[1:] if records.stored(STUDY_NAMES[r])]
        sweeps.append(contrast.InitSweep.read(folders))
    return contrast, *sweeps


_FIG2_STUDIES = tuple(STUDY_NAMES[r] for roles in FIG2_SWEEPS.values() for r in roles)


@generator(
    "fig2-contrast",
    *_FIG2_STUDIES,
    what="README and docs/fig2-contrast.md: Fig. 2's two panels for both inits under the papers' statistic (every epoch and the logged epochs), with the Mann-Whitney test and rule C1's word",
)
def fig2_contrast(records: Records) -> str:
    contrast, small, large = _fig2(records)
    return contrast.panel_table(contrast.panel_rows(small, large) + contrast.panel_rows(small, large, 3))


@generator(
    "fig2-verdict",
    *_FIG2_STUDIES,
    what="README and docs/fig2-contrast.md: which seeds are read, rule C1's conclusion, the spikes",
)
def fig2_verdict(records: Records) -> str:
    contrast, small, large = _fig2(records)
    return (
        f"{contrast.seeds_line(small, large)}. Rule C1 on the every-epoch reading: {contrast.contrast_word(contrast.panel_rows(small, large))}; "
        f"{contrast.spikes_sentence(small, large)}"
    )


@generator(
    "fig2-picks",
    *_FIG2_STUDIES,
    what="docs/fig2-contrast.md: every seed's pick on both panels with its neighbouring epochs and whether it is a spike",
)
def fig2_picks(records: Records) -> str:
    contrast, small, large = _fig2(records)
    return contrast.picks_table(small, large)


@generator(
    "fig2-strict",
    *_FIG2_STUDIES,
    what="README and docs/fig2-contrast.md: rule C2, the strict last-epoch reading of both inits, per seed at lr 5e-4 (Fisher) and over all runs",
)
def fig2_strict(records: Records) -> str:
    contrast, small, large = _fig2(records)
    return contrast.strict_table(small, large)


@generator(
    "gamma-slice",
    *(STUDY_NAMES[r] for r in SLICE),
    what="README and docs/fig2-contrast.md: the gamma slice per depth x gamma (rule S1) and rules S2-S3 (a sweep not stored yet is left out)",
)
def gamma_slice(records: Records) -> str:
    contrast = records.script("contrast")
    folders = [records.study(STUDY_NAMES[SLICE[0]]).path]
    folders += [records.study(STUDY_NAMES[r]).path for r in SLICE[1:] if records.stored(STUDY_NAMES[r])]
    cells = contrast.slice_cells(folders)
    return contrast.slice_table(cells) + "\n\n" + contrast.slice_rules(cells)


# -- the journal's Fig. 7 at CPU scale (docs/beyond-anchor-functions.md, pre-registered; experiments/fig7.py)

#: Each figure's task and its two settings' stored sweeps, in the pre-registered order.
FIG7 = {"7A": "fig7a-scan", "7E": "fig7e-prontoqa", "7D": "fig7d-code-lm", "7B": "fig7b-cogs"}


def _fig7(records: Records, figure: str) -> tuple[ModuleType, Any, Any]:
    """experiments/fig7.py and one figure's two settings (MissingRecords where one is not stored)."""
    fig7 = records.script("fig7")
    small, large = (
        fig7.Side.read([records.study(STUDY_NAMES[f"{FIG7[figure]}-{side}"]).path]) for side in ("small", "large")
    )
    return fig7, small, large


def _fig7_table(figure: str) -> Callable[[Records], str]:
    def make(records: Records) -> str:
        fig7, small, large = _fig7(records, figure)
        return fig7.table(small, large)

    return make


for _figure, _stem in FIG7.items():
    generator(
        f"fig{_figure.lower()}",
        f"{_stem}-small",
        f"{_stem}-large",
        what=f"docs/beyond-anchor-functions.md: Fig. {_figure}, small against large init per data size (rules B1-B3)",
    )(_fig7_table(_figure))


@generator(
    "readme-beyond",
    *(f"{stem}-{side}" for stem in FIG7.values() for side in ("small", "large")),
    what="README: the journal's Fig. 7 at CPU scale, per figure the word of rule B2 and small-beats-large per data size, or that it has not run",
)
def readme_beyond(records: Records) -> str:
    lines = []
    for figure, stem in FIG7.items():
        task = stem.split("-", 1)[1]
        if not all(records.stored(STUDY_NAMES[f"{stem}-{side}"]) for side in ("small", "large")):
            lines.append(
                f"- **Fig. {figure}** (`{task}`): not run yet (pre-registered in `docs/beyond-anchor-functions.md`)."
            )
            continue
        fig7, small, large = _fig7(records, figure)
        rows = fig7.compare(small, large)
        sizes = "; ".join(
            f"{r.n_train:,} samples: {r.word}, small init better on {exact_rate(r.beats, len(r.seeds))} seeds (p = {_num(r.p)})"
            for r in rows
            if r.seeds
        )
        lines.append(
            f"- **Fig. {figure}** (`{task}`, {fig7.METRICS[task][0]}): {fig7.figure_word(rows, task)}; {sizes}."
        )
    return "\n".join(lines)


# -- the journal's Fig. 6 at CPU scale (docs/concept-graphs.md, pre-registered; interp-init concept-graphs)


def _fig6(records: Records) -> tuple[Any, Any, list[Any], Path]:
    """The stored concept-graph study: the study module, its spec, its rows (the pre-registered
    reading of its runs, :func:`training.studies.concept_graphs.read_rows`) and its folder."""
    from training.studies import concept_graphs

    path = records.study(STUDY_NAMES["concept-graphs-fig6"]).path
    spec = concept_graphs.ConceptStudySpec.from_file(path / concept_graphs.SPEC_FILE)
    return concept_graphs, spec, concept_graphs.read_rows(spec, path), path


@generator(
    "fig6-concept-graphs",
    STUDY_NAMES["concept-graphs-fig6"],
    what="docs/concept-graphs.md: Fig. 6 at CPU scale, per gamma the right-shape share of the unseen tuples over seeds, the rule's reading and verdict, the judge, minutes a run, and (post hoc) what every completed run drew",
)
def fig6_concept_graphs(records: Records) -> str:
    concept_graphs, spec, rows, path = _fig6(records)
    judge = read_json(path / concept_graphs.SUMMARY, "restore the stored study (git checkout)")["judge"]
    table = concept_graphs.table_markdown(rows, judge, concept_graphs.run_minutes(spec, path))
    return table + "\n" + concept_graphs.verdict(rows)["sentence"] + "\n\n" + concept_graphs.drawn_sentence(rows)


#: The gate pilots (docs/concept-graphs.md, "Minutes a model" and the amendment), in the order they ran.
FIG6_GATES = ("concept-graphs-gate-1", "concept-graphs-gate-2", "concept-graphs-gate-3")


@generator(
    "fig6-gate",
    *(STUDY_NAMES[g] for g in FIG6_GATES),
    what="docs/concept-graphs.md: the gate pilots on seed 0, each run's schedule, id_acc against the gate, no-object samples and minutes",
)
def fig6_gate(records: Records) -> str:
    from training.studies import concept_graphs

    lines = []
    for role in FIG6_GATES:
        study = records.study(STUDY_NAMES[role])
        spec = concept_graphs.ConceptStudySpec.from_file(study.path / concept_graphs.SPEC_FILE)
        runs = concept_graphs.run_metrics(spec, study.path)
        for name, cfg in spec.configs().items():
            metrics = runs[name]
            if metrics is None or metrics["status"] != "completed":
                lines.append(f"- `{role}`, {name}: {metrics['status'] if metrics else 'not run'}")
                continue
            final, train = metrics["final"], cfg.train
            seen = final["seen"].values()
            passed = "passes" if final["id_acc"] >= concept_graphs.VALID_ID_ACC else "fails"
            lines.append(
                f"- `{role}`: gamma {cfg.init.gamma:g}, seed {cfg.seed}, lr {train.lr:g}, {train.epochs} epochs "
                f"({train.epochs * train.steps_per_epoch:,} steps): id_acc {final['id_acc']:.2f}, {passed} the gate "
                f"(>= {concept_graphs.VALID_ID_ACC}); no-object samples of the training tuples "
                f"{sum(v['empty'] for v in seen) / len(seen):.2f}; {metrics['elapsed_s'] / 60:.0f} minutes"
            )
    return "\n".join(lines)


@generator(
    "readme-fig6",
    STUDY_NAMES["concept-graphs-fig6"],
    what="README: the journal's Fig. 6 at CPU scale, the pre-registered rule's verdict, or that it has not run",
)
def readme_fig6(records: Records) -> str:
    if not records.stored(STUDY_NAMES["concept-graphs-fig6"]):
        return "- **Fig. 6** (concept-graph diffusion): not run yet (pre-registered in `docs/concept-graphs.md`)."
    concept_graphs, spec, rows, _ = _fig6(records)
    shares = "; ".join(
        f"gamma {r.gamma:g}: {'-' if r.mean is None else f'{r.mean:.2f}'} ({len(r.counted)} of {r.runs} seeds counted"
        + ("" if r.id_acc is None else f", id_acc {r.id_acc:.2f}")
        + ")"
        for r in rows
    )
    return (
        f"- **Fig. 6** (concept-graph diffusion, right-shape share of the unseen tuples 010 and 011, "
        f"seeds {', '.join(map(str, spec.seeds))}): {concept_graphs.verdict(rows)['sentence']} Per gamma: {shares}."
    )


@generator(
    "pc-depth2-inits",
    STUDY_NAMES["pc-depth2-const"],
    STUDY_NAMES["pc-depth2-const-large"],
    what="docs/positive-control.md: small against large init at depth 2 with the lr held, copies and strict infers, by Fisher's exact test (post hoc)",
)
def pc_depth2_inits(records: Records) -> str:
    contrast = records.script("contrast")
    small, large = (
        _small_large(records, role).get(gamma, [])
        for role, gamma in (("pc-depth2-const", 0.8), ("pc-depth2-const-large", 0.5))
    )
    s, l = (contrast.Strict.of(runs) for runs in (small, large))
    p_copy, p_inf = contrast.fisher((l.copies, l.n), (s.copies, s.n)), contrast.fisher((s.infers, s.n), (l.infers, l.n))
    return (
        f"large init copies on {l.copies} of {l.n} against small init's {s.copies} of {s.n} (two-sided Fisher's exact test p = {p_copy:.3f}), "
        f"and small init infers strictly on {s.infers} of {s.n} against large init's {l.infers} of {l.n} (p = {p_inf:.3f})"
    )


# -- what the benchmark scripts print (docs/campaign.md, docs/clusters.md, benchmarks/README.md), so that a page cannot disagree with the code


def _benchmark(*args: str) -> str:
    """What ``python benchmarks/SCRIPT ARGS`` prints (benchmarks/ is a folder of scripts, run as one)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / args[0]
    command = [sys.executable, str(script), *args[1:]]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise ValueError(
            f"{' '.join(command[1:])} failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no message'}"
        )
    return done.stdout.strip()


@generator(
    "campaign-plan",
    what="docs/campaign.md: each cell's runs, FLOPs, device seconds and the leases, as `python benchmarks/gpu_campaign.py --dry-run --gpu h200` prints them over the stored campaign records",
)
def campaign_plan(records: Records) -> str:
    return _benchmark("gpu_campaign.py", "--dry-run", "--gpu", "h200", "--results", str(records.root / "campaign"))


@generator(
    "gpu-population-cost",
    what="docs/clusters.md: the paper-scale population's FLOPs and hours per GPU type, as `python benchmarks/gpu_cost.py` prints them",
)
def gpu_population_cost(records: Records) -> str:
    return _benchmark("gpu_cost.py")


#: The GPU suite's paper plan for an H200's stated bf16 peak (benchmarks/README.md).
SUITE_PLAN = (
    "gpu_suite.py",
    "--scale",
    "paper",
    "--dry-run",
    "--device",
    "cpu",
    "--peak-tflops",
    "989",
    "--precision",
    "bf16",
    "--ensemble",
)


@generator(
    "gpu-suite-plan",
    what=f"benchmarks/README.md: the GPU suite's paper plan, as `python benchmarks/{' '.join(SUITE_PLAN)}` prints it (less its first line, the machine's threads and torch)",
)
def gpu_suite_plan(records: Records) -> str:
    lines = _benchmark(*SUITE_PLAN).splitlines()
    return "```\n" + "\n".join(line for line in lines if not line.startswith("Device:")) + "\n```"


@generator(
    "campaign-data",
    what="docs/campaign.md: the paper preset's training samples per task (the released loaders' counts)",
)
def campaign_data(records: Records) -> str:
    from training.config import make_run_config

    symmetric, id_ood = (make_run_config("paper", task=t).data.n_train for t in ("symmetric", "id-ood"))
    return f"{symmetric:,} training samples on `symmetric`, {id_ood:,} on `id-ood`"


# -- the models shipped with the package (interp_init/pretrained/, experiments/package_pretrained.py)


@generator(
    "pretrained-models",
    what="docs/pretrained.md: the shipped models, what each learned (its final metrics), how long it trained and whether it equals the stored record of the same run",
)
def pretrained_models(records: Records) -> str:
    from interp_init.pretrained import list_pretrained, pretrained_info
    from interp_init.tasks.anchor import symmetric_solution
    from training.studies.records import RunRecord

    rows = []
    for name in list_pretrained():
        info = pretrained_info(name)
        record = RunRecord.read(info.path)
        final = record.final_columns()
        if final.get("heldout_inferential") is not None:
            learned = (
                f"{symmetric_solution(final['id_acc'], final['heldout_inferential'], final['heldout_symmetric'], final['exception_acc'])}: "
                f"(4,3) inferential {_num(final['heldout_inferential'])}, symmetric {_num(final['heldout_symmetric'])}, (3,4) {_num(final['exception_acc'])}"
            )
        else:
            learned = f"OOD {_num(final.get('ood_acc'))}, commutativity {_num(final.get('commutativity'))}"
        compared = info.compared
        same = (
            "-"
            if compared is None
            else (
                "weights and final metrics equal"
                if compared["weights_sha256_equal"] and compared["final_equal"]
                else f"final metrics differ by up to {compared['largest_final_difference']:.3g}"
            )
        )
        rows.append(
            [
                f"`{name}`",
                f"{info.task}, gamma {info.gamma:g}, seed {info.seed}",
                _num(final["id_acc"]),
                learned,
                f"{info.elapsed_s / 60:.1f}",
                f"{same} (`{compared['record']}`)" if compared else same,
            ]
        )
    return _markdown(
        (
            "name",
            "task, init, seed",
            "ID accuracy",
            "what it learned (final)",
            "training minutes",
            "against the stored record",
        ),
        rows,
    )


def fig2_sentence(records: Records) -> str:
    """README's line on Fig. 2's contrast (docs/fig2-contrast.md): both panels, both inits, the
    pre-registered test's word, the logged reading and the spikes."""
    contrast, small, large = _fig2(records)
    every, logged = contrast.panel_rows(small, large), contrast.panel_rows(small, large, 3)
    panels = []
    for row, again in zip(every, logged, strict=True):
        (ms, ml), (ls, ll) = row.means, again.means
        p = "-" if row.p is None else f"{row.p:.2f}"
        panels.append(
            f"panel ({row.panel}) {row.name} small init {_num(ms)} against large init {_num(ml)} (p = {p}; {_num(ls)} against {_num(ll)} on the logged epochs)"
        )
    spikes = sum(s.spike for s in small.picks("heldout_inferential"))
    lr = contrast.PRESET_LR
    s_at, l_at, p_inf, p_copy = contrast.strict_at(small, large, lr)
    strict = (
        f"read strictly (each seed's last epoch at lr {lr:g}), small init infers on {s_at.rate('infers')} against large init's "
        f"{l_at.rate('infers')} (Fisher p = {_num(p_inf)}) and copies on {s_at.rate('copies')} against {l_at.rate('copies')} (p = {_num(p_copy)})"
    )
    return (
        f"**Fig. 2 read as the contrast it is** (both inits under the papers' statistic, seeds "
        f"{_seeds(small.finished)} small and {_seeds(large.finished)} large, every lr finished): {'; '.join(panels)}: "
        f"{contrast.contrast_word(every)} (two-sided exact Mann-Whitney, pre-registered in "
        f"`docs/fig2-contrast.md`); {spikes} of small init's {len(small.finished)} inferential picks are one-epoch spikes; {strict}."
    )


def slice_sentence(records: Records) -> str:
    """README's line on the gamma slice: gamma 1.0 (the paper's init std at width 128) against 0.5, per depth stored."""
    contrast = records.script("contrast")
    folders = [records.study(STUDY_NAMES[r]).path for r in SLICE if records.stored(STUDY_NAMES[r])]
    cells = contrast.slice_cells(folders)
    parts = []
    for depth in sorted({d for d, _ in cells}):
        small, large = cells.get((depth, 1.0)), cells.get((depth, 0.5))
        if not small or not large:
            continue
        ids = [r.final_columns().get("id_acc") or 0.0 for r in small.runs]
        parts.append(
            f"at depth {depth} gamma 1.0 infers on {small.strict.rate('infers')} (final ID {_span(ids, '{:.2f}')}) and gamma 0.5 copies on {large.strict.rate('copies')}"
        )
    return (
        f"**Gamma where the paper's init scale lies** (gamma 1.0 gives width 128 the paper's init std; the `cpu` preset's schedule, seeds 701-704, "
        f"finished seeds only): {'; '.join(parts) or 'no cell with both gammas finished yet'} (`docs/fig2-contrast.md`)."
    )
