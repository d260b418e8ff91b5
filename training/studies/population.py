"""A flip judged over seeds: per-criterion rates with exact intervals, under a named protocol.

A *population* is a reproduction on one or more seeds (a single seed is a population of
one); each criterion of the flip (:meth:`interp_init.tasks.base.Task.flip_checks`, thresholds
:data:`interp_init.tasks.anchor.FLIP_CRITERIA`: :func:`check_flip`) is then a rate, ``k`` of ``n``
seeds, with its 95% exact binomial (Clopper-Pearson) interval (:func:`exact_interval`); two
inits' per-seed shares are told apart by the exact rank test (:func:`mann_whitney`).
What a run's number is depends on the protocol (:mod:`training.studies.records`: ``strict`` or
``paper``), which every table names.

:class:`Population` holds the per-seed rows (:class:`SeedRow`, one
:class:`RegimeResult` per task and regime, read from run records) and their rates
(:class:`CriterionRate`); ``summary.json`` is :meth:`Population.to_dict` (one schema for
one seed or many; :mod:`training.studies.population` writes and reads the files).
:func:`read_population` reads a reproduction's
(:meth:`training.studies.study.StudySpec.reproduction`) from its run records.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.config import check_int
from interp_init.fileio import BadRunFile, read_json
from interp_init.outputs import SUMMARY_FILE, SWEEP_SPEC_FILE, check_output_file, refuse_nested, study_kind
from interp_init.runfolder import RunStatus, write_json
from interp_init.stored import STORED_STUDY_FILE, STUDY_FORMAT, STUDY_PAGE
from interp_init.tasks.anchor import FLIP_CRITERIA
from interp_init.tasks.registry import make_task, task_class
from training.config import make_run_config, parse_list
from training.launch import JobReturn, Launcher, run_study
from training.launch.backends import build_launcher, local_launcher
from training.studies.records import (
    Pick,
    Race,
    RunRecord,
    check_protocol,
    pick_paper,
    pick_strict,
    protocol_text,
    race_of,
    targets,
)
from training.studies.study import (
    MAX_POINTS,
    REGIME_NAMES,
    REPRODUCE_BUSY,
    REPRODUCE_TASKS,
    VARY,
    StudySpec,
    record_study,
    refuse_strangers,
    run_dirs,
)

__all__ = [
    "CriterionRate",
    "KINDS",
    "Population",
    "REPRODUCTION_FILE",
    "RegimeResult",
    "SeedRow",
    "StoredStudy",
    "check_flip",
    "check_readings",
    "check_summary_file",
    "exact_interval",
    "exact_rate",
    "failed_criteria",
    "init_sides_problem",
    "mann_whitney",
    "protocol_summary",
    "read_population",
    "read_summary",
    "regime_result",
    "regime_results",
    "reproduce",
    "reproduce_study",
    "reproduction_from_record",
    "reproduction_record",
    "reproduction_spec",
    "write_summaries",
]

if TYPE_CHECKING:
    import pandas as pd

#: The per-seed table's short names of the targets.
_SHORT = {
    "id_acc": "ID",
    "heldout_inferential": "inf",
    "heldout_symmetric": "sym",
    "exception_acc": "(3,4)",
    "ood_acc": "OOD",
    "commutativity": "comm",
}


def exact_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial (Clopper-Pearson) interval of a rate of ``k`` successes in ``n``."""
    from scipy.stats import binomtest

    check_int("n", n)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in 0..{n}, got {k!r}")
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def exact_rate(k: int, n: int) -> str:
    """``k of n [low, high]``: a count with its 95% exact interval (:func:`exact_interval`), as the
    docs' tables print it; ``-`` for none of none."""
    if n == 0:
        return "-"
    low, high = exact_interval(k, n)
    return f"{k} of {n} [{low:.2f}, {high:.2f}]"


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> float | None:
    """The two-sided exact Mann-Whitney U test's p of ``x`` against ``y`` (None where a side is
    empty): how two inits' per-seed shares are told apart (experiments/contrast.py, the GPU
    campaign's contrast)."""
    from scipy.stats import mannwhitneyu

    if not len(x) or not len(y):
        return None
    return float(mannwhitneyu(list(x), list(y), alternative="two-sided", method="exact").pvalue)


def init_sides_problem(small_gamma: float, large_gamma: float, *, same: bool) -> str | None:
    """What is wrong with a small-init against large-init comparison given as ``--small`` and
    ``--large`` (experiments/contrast.py, experiments/fig7.py), in one line, or None: one setting
    on both sides (``same``), or small init's gamma below large init's (the sides swapped)."""
    if same:
        return "--small and --large are the same setting: give the small-init sweep to --small and the large-init one to --large"
    if small_gamma < large_gamma:
        return (
            f"--small is gamma {small_gamma:g}, below --large's {large_gamma:g} (small init is the larger gamma): "
            "the sides look swapped; give the small-init sweep to --small"
        )
    return None


def check_flip(
    summary: Mapping[str, Mapping[str, Mapping[str, Any]]], criteria: Mapping[str, float] = FLIP_CRITERIA
) -> dict[str, bool]:
    """Each criterion of the flip (the tasks' own :meth:`~interp_init.tasks.base.Task.flip_checks`)
    on one seed's numbers (task -> regime -> target -> value), by name, and ``"all"``."""
    checks = {
        k: v
        for task, rows in summary.items()
        for k, v in make_task(task).flip_checks(rows["small-init"], rows["large-init"], criteria).items()
    }
    return {**checks, "all": all(checks.values())}


def check_readings(
    summary: Mapping[str, Mapping[str, Mapping[str, Any]]], criteria: Mapping[str, float] = FLIP_CRITERIA
) -> dict[str, tuple[str, bool]]:
    """The readings beside the criteria on one seed's numbers (:meth:`~interp_init.tasks.base.Task.flip_readings`:
    name -> (the criterion it stands beside, whether it holds)); never in :func:`check_flip`'s ``"all"``."""
    return {
        k: v
        for task, rows in summary.items()
        for k, v in make_task(task).flip_readings(rows["small-init"], rows["large-init"], criteria).items()
    }


def failed_criteria(checks: Mapping[str, bool]) -> str:
    """The criteria of :func:`check_flip` that failed, joined for one line."""
    return "; ".join(name for name, ok in checks.items() if not ok and name != "all")


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@dataclass(frozen=True)
class RegimeResult:
    """One regime on one task for one seed: its selected numbers (:class:`Pick` per target),
    status (``completed`` unless one of its runs is not), run folders and, for a
    ``symmetric`` run read under ``strict``, its race (:class:`training.studies.records.Race`)."""

    task: str
    regime: str
    gamma: float
    picks: Mapping[str, Pick]
    status: str
    run_dirs: tuple[str, ...]
    weight_decay: float | None = None
    precision: str | None = None
    seconds: float | None = None
    race: Race | None = None

    def value(self, target: str) -> float | None:
        pick = self.picks.get(target)
        return None if pick is None else pick.value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gamma": self.gamma,
            **{t: p.value for t, p in self.picks.items()},
            "picked": {t: {"lr": p.lr, "epoch": p.epoch} for t, p in self.picks.items()},
            "status": self.status,
            "run_dirs": list(self.run_dirs),
            "weight_decay": self.weight_decay,
            "precision": self.precision,
            "seconds": self.seconds,
        }
        if self.race is not None:
            out["race"] = self.race.to_dict()
        return out

    @classmethod
    def from_dict(cls, task: str, regime: str, data: Mapping[str, Any]) -> RegimeResult:
        """Read :meth:`to_dict` back, or a row of the single-seed summary written before one
        schema (``gamma``, the targets, ``status``, ``seconds``, ``run_dir``)."""
        picked = data.get("picked") or {}
        picks = {
            t: Pick(data.get(t), (picked.get(t) or {}).get("lr"), (picked.get(t) or {}).get("epoch"))
            for t in targets(task)
        }
        dirs = data["run_dirs"] if "run_dirs" in data else [data["run_dir"]]
        race = None if data.get("race") is None else Race.from_dict(data["race"])
        return cls(
            task,
            regime,
            data["gamma"],
            picks,
            data.get("status", "completed"),
            tuple(dirs),
            data.get("weight_decay"),
            data.get("precision"),
            data.get("seconds"),
            race,
        )


def regime_result(
    task: str, regime: str, gamma: float, run_dirs: Sequence[str | Path], protocol: str, logged_every: int | None = None
) -> RegimeResult:
    """Read a regime's run folders (one, or one per lr) under ``protocol`` (``paper``: on the
    epochs ``logged_every`` names, :func:`training.studies.records.logged_epochs`, or every evaluated one)."""
    runs = [RunRecord.read(d, strict=False) for d in run_dirs]
    if not runs:
        raise ValueError(f"{task}/{regime}: no run folders to read")
    if check_protocol(protocol, logged_every) == "strict":
        if len(runs) != 1:
            raise ValueError(
                f"{task}/{regime}: the strict protocol reads one run (one lr), got {len(runs)}: {[str(r.path) for r in runs]}"
            )
        picks = pick_strict(runs[0], targets(task))
    else:
        picks = pick_paper(runs, targets(task), logged_every)
    bad = [r.status for r in runs if r.status != "completed"]
    first = runs[0]
    seconds = (
        sum(r.elapsed_s for r in runs if r.elapsed_s is not None)
        if any(r.elapsed_s is not None for r in runs)
        else None
    )
    race = race_of(first.history, first.lr) if task_class(task).has_race and len(runs) == 1 else None
    return RegimeResult(
        task,
        regime,
        gamma,
        picks,
        str(bad[0]) if bad else "completed",
        tuple(str(r.path) for r in runs),
        first.config.train.weight_decay,
        first.config.train.precision,
        seconds,
        race,
    )


@dataclass(frozen=True)
class SeedRow:
    """One seed of a population: its results per task and regime, and the flip's criteria on them."""

    seed: int
    results: tuple[RegimeResult, ...]
    init_seed: int | None = None
    data_seed: int | None = None

    def result(self, task: str, regime: str) -> RegimeResult:
        for r in self.results:
            if r.task == task and r.regime == regime:
                return r
        raise KeyError(f"seed {self.seed} has no result for {task}/{regime}")

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.task for r in self.results))

    def summary(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The single-seed summary's shape (task -> regime -> numbers) that :func:`check_flip` reads."""
        return {
            t: {
                g: {"gamma": self.result(t, g).gamma, **{k: self.result(t, g).value(k) for k in targets(t)}}
                for g in REGIME_NAMES
            }
            for t in self.tasks
        }

    @property
    def checks(self) -> dict[str, bool]:
        return check_flip(self.summary())

    @property
    def readings(self) -> dict[str, tuple[str, bool]]:
        return check_readings(self.summary())

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "init_seed": self.init_seed,
            "data_seed": self.data_seed,
            "runs": {t: {r.regime: r.to_dict() for r in self.results if r.task == t} for t in self.tasks},
            "criteria": self.checks,
            "readings": {name: held for name, (_, held) in self.readings.items()},
        }


@dataclass(frozen=True)
class CriterionRate:
    """How many seeds met one criterion, of how many, with the 95% exact interval; for a
    reading beside a criterion (not a criterion: :func:`check_readings`), ``beside`` names it."""

    name: str
    met: int
    of: int
    beside: str | None = None

    @property
    def interval(self) -> tuple[float, float]:
        return exact_interval(self.met, self.of)

    def to_dict(self) -> dict[str, Any]:
        return {
            "met": self.met,
            "of": self.of,
            "interval": list(self.interval),
            **({} if self.beside is None else {"beside": self.beside}),
        }


@dataclass(frozen=True)
class Population:
    """A reproduction on several seeds under one protocol: per-seed rows and per-criterion rates.

    ``lrs``: the learning-rate grid (``paper``; None: each preset's lr); ``vary``: which
    random source differs between the rows (``both``, or ``init`` / ``data`` with the
    other seeded by ``fixed_seed``); ``logged_every``: the ``paper`` protocol read only on
    the epochs the released scripts log (None: every evaluated epoch)."""

    preset: str
    protocol: str
    rows: tuple[SeedRow, ...]
    lrs: tuple[float, ...] | None = None
    vary: str = "both"
    fixed_seed: int | None = None
    logged_every: int | None = None

    def __post_init__(self) -> None:
        check_protocol(self.protocol, self.logged_every)
        if not self.rows:
            raise ValueError("a population needs at least one seed")
        if self.vary not in VARY:
            raise ValueError(f"vary must be one of {list(VARY)}, got {self.vary!r}")
        if len({r.tasks for r in self.rows}) != 1:
            raise ValueError("every seed of a population must have the same tasks")

    @property
    def protocol_text(self) -> str:
        """The protocol in words, with the epochs it reads (titles, captions, ``summary.json``)."""
        return protocol_text(self.protocol, self.logged_every)

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.rows)

    @property
    def tasks(self) -> tuple[str, ...]:
        return self.rows[0].tasks

    @property
    def rates(self) -> tuple[CriterionRate, ...]:
        """Per criterion of the flip (and ``all``), how many seeds meet it."""
        checks = [r.checks for r in self.rows]
        return tuple(CriterionRate(name, sum(c[name] for c in checks), len(checks)) for name in checks[0])

    @property
    def readings(self) -> tuple[CriterionRate, ...]:
        """Per reading beside a criterion (:func:`check_readings`), how many seeds meet it."""
        readings = [r.readings for r in self.rows]
        return tuple(
            CriterionRate(name, sum(r[name][1] for r in readings), len(readings), beside)
            for name, (beside, _) in readings[0].items()
        )

    def rates_and_readings(self) -> tuple[CriterionRate, ...]:
        """The rates, each reading right after the criterion it stands beside (what tables print)."""
        out: list[CriterionRate] = []
        for rate in self.rates:
            out += [rate, *(r for r in self.readings if r.beside == rate.name)]
        return tuple(out)

    def means(self) -> dict[str, dict[str, dict[str, float | None]]]:
        """Per task, regime and target, the mean over seeds (the papers' number under ``paper``)."""
        return {
            t: {g: {k: _mean([r.result(t, g).value(k) for r in self.rows]) for k in targets(t)} for g in REGIME_NAMES}
            for t in self.tasks
        }

    def to_dict(self) -> dict[str, Any]:
        """What ``summary.json`` holds: the protocol, the seeds, ``population`` (criterion ->
        met, of, interval), ``per_seed`` rows and the ``mean_over_seeds``."""
        return {
            "preset": self.preset,
            "protocol": self.protocol,
            "protocol_text": self.protocol_text,
            **({} if self.logged_every is None else {"logged_every": self.logged_every}),
            "seeds": list(self.seeds),
            "lrs": None if self.lrs is None else list(self.lrs),
            "vary": self.vary,
            "fixed_seed": self.fixed_seed,
            "population": {rate.name: rate.to_dict() for rate in self.rates},
            "readings": {rate.name: rate.to_dict() for rate in self.readings},
            "per_seed": [r.to_dict() for r in self.rows],
            "mean_over_seeds": self.means(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Population:
        """Read :meth:`to_dict` back (``summary.json``)."""
        rows = [
            SeedRow(row["seed"], regime_results(row["runs"]), row.get("init_seed"), row.get("data_seed"))
            for row in data["per_seed"]
        ]
        lrs = data.get("lrs")
        return cls(
            data.get("preset", ""),
            data.get("protocol", "strict"),
            tuple(rows),
            None if lrs is None else tuple(lrs),
            data.get("vary", "both"),
            data.get("fixed_seed"),
            data.get("logged_every"),
        )

    def regimes_table(self) -> pd.DataFrame:
        """One row per seed, task and regime: gamma, weight decay, the numbers, seconds
        (what ``reproduce --seed`` prints for its population of one)."""
        import pandas as pd

        rows = []
        for row in self.rows:
            for r in row.results:
                value = r.value
                rows.append(
                    {
                        "task": r.task,
                        "regime": r.regime,
                        "gamma": r.gamma,
                        "wd": r.weight_decay,
                        "ID acc": value("id_acc"),
                        "(4,3) inferential": value("heldout_inferential"),
                        "(4,3) symmetric": value("heldout_symmetric"),
                        "OOD acc": value("ood_acc"),
                        "commutativity": value("commutativity"),
                        "seconds": r.seconds,
                    }
                )
        return pd.DataFrame(rows)

    def format_regimes(self) -> str:
        """:meth:`regimes_table` as plain text."""
        return self.regimes_table().to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.2f}")

    def rates_table(self) -> pd.DataFrame:
        """One row per criterion: seeds that meet it, of how many, the 95% exact interval;
        each reading beside a criterion (:meth:`readings`) in the row after it."""
        import pandas as pd

        rows = [
            {"criterion": r.name, "met": r.met, "of": r.of, "95% interval": "[{:.2f}, {:.2f}]".format(*r.interval)}
            for r in self.rates_and_readings()
        ]
        return pd.DataFrame(rows)

    def seeds_table(self) -> pd.DataFrame:
        """One row per seed: the numbers the criteria read and whether all criteria hold; then
        the mean over seeds (the papers' number under ``paper``) and the criteria on it."""
        import pandas as pd

        def line(
            seed: int | str, numbers: Mapping[str, Mapping[str, Mapping[str, Any]]], row: SeedRow | None = None
        ) -> dict[str, Any]:
            cells = {
                f"{t} {g.split('-')[0]} {_SHORT[k]}": numbers[t][g][k]
                for t in self.tasks
                for g in REGIME_NAMES
                for k in targets(t)
            }
            return {"seed": seed, **cells, **race_columns(row), "all": check_flip(numbers)["all"]}

        def race_columns(row: SeedRow | None) -> dict[str, Any]:
            # the race of each symmetric regime (strict protocol): the epoch (3,4) is fitted and the failure mode
            out: dict[str, Any] = {}
            for t, g in (
                (t, g) for t in self.tasks for g in REGIME_NAMES if self.rows[0].result(t, g).race is not None
            ):
                race = None if row is None else row.result(t, g).race
                out[f"{t} {g.split('-')[0]} (3,4) fit epoch"] = None if race is None else str(race.fit_epoch or "never")
                out[f"{t} {g.split('-')[0]} mode"] = None if race is None else race.mode
            return out

        return pd.DataFrame([*(line(row.seed, row.summary(), row) for row in self.rows), line("mean", self.means())])

    def __str__(self) -> str:
        return self.format()

    def _repr_html_(self) -> str:
        """In Jupyter: the protocol, the rates with their intervals, then the seeds."""
        head = f"<p><b>Population</b>: {len(self.rows)} seeds {list(self.seeds)}, preset {self.preset}; {self.protocol_text}</p>"
        return f"{head}\n{self.rates_table().to_html(index=False)}\n{self.seeds_table().to_html(index=False, float_format=lambda v: f'{v:.2f}', na_rep='-')}"

    def format(self) -> str:
        """The population as text (what the command prints): the protocol, the rates, the seeds."""
        lines = [f"population of {len(self.rows)} seeds {list(self.seeds)}, preset {self.preset}, {self.protocol_text}"]
        if self.vary != "both":
            other = "data" if self.vary == "init" else "init"
            lines.append(f"varying the {self.vary} seed only; the {other} seeded by {self.fixed_seed}")
        per_seed = self.seeds_table().set_index("seed").T  # one column per seed: readable for many seeds
        per_seed.columns = [f"seed {c}" if c != "mean" else "mean" for c in per_seed.columns]
        per_seed = per_seed.apply(lambda column: column.map(_cell))
        lines += [
            self.rates_table().to_string(index=False),
            "",
            f"per seed ({self.protocol} protocol):",
            per_seed.to_string(),
        ]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.2f}"


def regime_results(runs: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> tuple[RegimeResult, ...]:
    """One seed's :class:`RegimeResult` s from a summary's task -> regime -> row."""
    return tuple(RegimeResult.from_dict(t, g, r) for t, regimes in runs.items() for g, r in regimes.items())


def read_population(spec: StudySpec, out: str | Path, seeds: Sequence[int] | None = None) -> Population:
    """The population (of ``seeds``, default all) of the reproduction ``spec`` from the run
    folders under ``out``, under its protocol."""
    if tuple(spec.named) != REGIME_NAMES or not spec.seeds or not spec.tasks:
        raise ValueError(
            f"a population is read from a reproduction's spec (named points {list(REGIME_NAMES)} over seeds and tasks)"
        )
    runs, fixed = spec.runs(out), spec.seed_overrides()

    def result(seed: int, task: str, regime: str) -> RegimeResult:
        mine = [r for r in runs if (r.seed, r.task, r.point) == (seed, task, regime)]
        return regime_result(
            task,
            regime,
            mine[0].config.init.gamma,
            list(dict.fromkeys(r.run_dir for r in mine)),
            spec.protocol,
            spec.logged_every,
        )

    rows = tuple(
        SeedRow(
            seed,
            tuple(result(seed, t, g) for t in spec.tasks for g in REGIME_NAMES),
            fixed.get("init_seed"),
            fixed.get("data_seed"),
        )
        for seed in (spec.seeds if seeds is None else seeds)
    )
    return Population(spec.preset, spec.protocol, rows, spec.lrs, spec.vary, spec.fixed_seed, spec.logged_every)


# ------------------------------------------------------------------ summaries
# The summary files of a population: ``summary.json`` (one schema for one seed or many:
# :meth:`~training.studies.population.Population.to_dict`), the protocol's copy beside it, and
# each member's own; :func:`read_summary` reads any of them back (also the single-seed
# summaries written before one schema), for the report, and refuses a damaged one by name;
# :func:`check_summary_file` refuses, before any work, a ``summary.json`` of one's own.


def read_summary(path: str | Path) -> Population | None:
    """The population a ``summary.json`` holds (None where there is none): today's schema,
    or the single-seed summary written before one schema (task -> regime -> row), read as
    a population of one.  A damaged one is refused (:class:`~interp_init.fileio.BadRunFile`
    naming it): a reader that skipped it would show the runs without their population."""
    path = Path(path)
    if not path.exists():
        return None
    fix = "run the same reproduce command again (it rewrites the summary from the run folders), or remove the file"
    data = read_json(path, fix)
    try:
        if not isinstance(data, dict):
            raise TypeError(f"it holds {type(data).__name__}, not an object")
        if "per_seed" in data:
            return Population.from_dict(data)
        return Population("", "strict", (SeedRow(0, regime_results(data)),))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise BadRunFile(
            path, f"is not a reproduction's summary ({type(err).__name__}: {' '.join(str(err).split())[:120]})", fix
        ) from None


def check_summary_file(out: str | Path, option: str = "--out") -> None:
    """Refuse, before any work, a folder holding a ``summary.json`` that is not a
    reproduction's and that no study recorded (a file of one's own): it is never
    overwritten (a study's own, even damaged, is rewritten)."""
    path = Path(out) / SUMMARY_FILE
    if not path.is_file() or study_kind(out) is not None:
        return
    try:
        read_summary(path)
    except ValueError:
        raise ValueError(
            f"{path} exists and is not a reproduction's summary this toolkit wrote; it is never overwritten: move it away first, "
            f"or choose another {option}"
        ) from None


def protocol_summary(spec: StudySpec, out: str | Path) -> Path:
    """Where a population keeps its protocol's summary beside ``summary.json``:
    ``summary-<protocol>.json`` (``summary-paper-logged-every-K.json`` with ``logged_every``)."""
    return (
        Path(out)
        / f"summary-{spec.protocol}{'' if spec.logged_every is None else f'-logged-every-{spec.logged_every}'}.json"
    )


def write_summaries(spec: StudySpec, out: str | Path, population: Population) -> None:
    """``out/summary.json`` (and with several seeds ``summary-<protocol>.json`` and, under
    ``strict``, each member's own summary: a population of one)."""
    write_json(Path(out) / SUMMARY_FILE, population.to_dict())
    if spec.single:
        return
    write_json(protocol_summary(spec, out), population.to_dict())
    if spec.protocol == "strict":
        for row in population.rows:
            one = Population(spec.preset, spec.protocol, (row,), spec.lrs, spec.vary, spec.fixed_seed)
            write_json(spec.member_dir(out, row.seed) / SUMMARY_FILE, one.to_dict())


# ------------------------------------------------------------------ stored
# A stored study read back: its manifest, its spec, its runs and its population.
#
# ``experiments/store.py`` copies a finished study (a reproduction, a sweep, a folder of runs
# such as the preset search) into ``experiments/results/<study>/`` without weights or
# checkpoints, marked as stored (:mod:`interp_init.stored`).  :class:`StoredStudy` reads such
# a folder through the project's one reader: its runs are :class:`~training.studies.records.RunRecord`
# s (a stored run reads as finished, with its cached stable ranks), a reproduction's
# population is :func:`~training.studies.population.read_population` of its spec, and a sweep's spec
# is its ``sweep.json``.  A reproduction records its spec in ``reproduction.json``
# (:func:`reproduction_record`: the arguments of
# :meth:`~training.studies.study.StudySpec.reproduction`), as a sweep does in ``sweep.json``.
#
# Example::
#
#     >>> from training.studies.population import StoredStudy
#     >>> study = StoredStudy.read("experiments/results/gpu-suite-h200-2026-11-26")
#     >>> study.kind, len(study.run_dirs())
#     ('gpu-suite', 6)

if TYPE_CHECKING:
    from training.studies.study import StudySpec

#: A stored reproduction's spec (:func:`reproduction_record`).
REPRODUCTION_FILE = "reproduction.json"
#: The kinds of stored study: what ``stored-study.json``'s ``kind`` may say.
KINDS: tuple[str, ...] = ("reproduction", "sweep", "runs", "gpu-suite", "concept-graphs")
#: How deep below a study folder its run folders lie at most (a population's: seed-S/task/regime).
RUN_DEPTH = 3
_FIX = "restore the file from the repository (git checkout), or store the study again with experiments/store.py"


def reproduction_record(spec: StudySpec) -> dict[str, Any]:
    """What ``reproduction.json`` holds for the reproduction ``spec``: the arguments of
    :meth:`~training.studies.study.StudySpec.reproduction` that rebuild it."""
    return {
        "preset": spec.preset,
        "seeds": list(spec.seeds),
        "protocol": spec.protocol,
        "lrs": None if spec.lrs is None else list(spec.lrs),
        "vary": spec.vary,
        "fixed_seed": spec.fixed_seed,
        "precision": spec.precision,
        "tasks": list(spec.tasks),
        "single": spec.single,
        "carry": None if spec.carry is None else list(spec.carry),
    }


def reproduction_from_record(data: Mapping[str, Any], where: str = REPRODUCTION_FILE) -> StudySpec:
    """The reproduction's :class:`~training.studies.study.StudySpec` from :func:`reproduction_record`'s
    dict (``where``: the file the messages name)."""
    if not isinstance(data, Mapping) or not {"preset", "seeds", "tasks"} <= set(data):
        raise ValueError(
            f"{where} is not a reproduction's record (it needs preset, seeds and tasks); store the study again with experiments/store.py"
        )
    listed = {key: None if data.get(key) is None else tuple(data[key]) for key in ("lrs", "carry")}
    return StudySpec.reproduction(
        data["preset"],
        tuple(data["seeds"]),
        data.get("protocol", "strict"),
        listed["lrs"],
        data.get("vary", "both"),
        data.get("fixed_seed"),
        data.get("precision", "fp32"),
        tuple(data["tasks"]),
        bool(data.get("single", False)),
        listed["carry"],
    )


@dataclass(frozen=True)
class StoredStudy:
    """A stored study folder (``stored-study.json``, see the module docstring): its path and manifest."""

    path: Path
    manifest: Mapping[str, Any]

    @classmethod
    def read(cls, path: str | Path) -> StoredStudy:
        """Read ``path``'s ``stored-study.json`` (validated); a one-line ``ValueError`` naming the fix where it has none."""
        path = Path(path)
        if not (path / STORED_STUDY_FILE).is_file():
            raise ValueError(
                f"{path} is not a stored study (it has no {STORED_STUDY_FILE}); store a finished study with experiments/store.py"
            )
        data = read_json(path / STORED_STUDY_FILE, _FIX)
        if not isinstance(data, dict) or data.get("format") != STUDY_FORMAT:
            raise BadRunFile(
                path / STORED_STUDY_FILE, f"is not a stored study's manifest (format {STUDY_FORMAT!r})", _FIX
            )
        if data.get("kind") not in KINDS:
            raise BadRunFile(path / STORED_STUDY_FILE, f"has kind {data.get('kind')!r}, not one of {list(KINDS)}", _FIX)
        return cls(path, data)

    @property
    def kind(self) -> str:
        """What the study is (:data:`KINDS`): ``reproduction``, ``sweep``, ``runs``, ``gpu-suite``
        or ``concept-graphs`` (diffusion runs: read with
        :func:`training.studies.concept_graphs.read_rows`)."""
        return str(self.manifest["kind"])

    @property
    def name(self) -> str:
        """The study's name: its folder's."""
        return self.path.name

    @property
    def page(self) -> Path:
        """The study's ``STUDY.md``."""
        return self.path / STUDY_PAGE

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the manifest (``command``, ``commit``, ``machine``, ``beside``, ``dates``, ...)."""
        return self.manifest.get(key, default)

    def spec(self) -> StudySpec:
        """The study's spec: a sweep's ``sweep.json`` or a reproduction's ``reproduction.json``."""
        if self.kind == "sweep":
            return StudySpec.from_file(self.path / SWEEP_SPEC_FILE)
        if self.kind == "reproduction":
            return reproduction_from_record(
                read_json(self.path / REPRODUCTION_FILE, _FIX), str(self.path / REPRODUCTION_FILE)
            )
        raise ValueError(
            f"{self.path} is a stored {self.kind} study, which has no spec file (a sweep and a reproduction have one)"
        )

    def run_dirs(self) -> list[Path]:
        """Every run folder of the study."""
        return run_dirs(self.path, RUN_DEPTH)

    def records(self) -> list[RunRecord]:
        """Every run of the study, read by the one reader (a transformer's runs)."""
        if self.kind == "concept-graphs":
            raise ValueError(
                f"{self.path} is a stored concept-graphs study of diffusion runs, not transformer runs; "
                "read it with training.studies.concept_graphs.read_rows"
            )
        return [RunRecord.read(run) for run in self.run_dirs()]

    def population(self, seeds: tuple[int, ...] | None = None) -> Population:
        """A stored reproduction's population (of ``seeds``, default all), read from its runs
        under its own protocol (:func:`~training.studies.population.read_population`)."""
        if self.kind != "reproduction":
            raise ValueError(
                f"{self.path} is a stored {self.kind} study; a population is read from a stored reproduction"
            )
        return read_population(self.spec(), self.path, seeds)


# ------------------------------------------------------------------ reproduce
# ``interp-init reproduce``: the flip on one seed (a population of one) or on several.
#
# :func:`reproduce` trains the two regimes of a preset (:mod:`training.studies.study`) on the flip's
# tasks for one seed into ``out/<task>/<regime>``; ``--seeds`` the same for several seeds
# (``out/seed-S/<task>/<regime>``).  Both are a
# :class:`training.studies.study.StudySpec` (:meth:`~training.studies.study.StudySpec.reproduction`) trained
# by :func:`training.launch.run_study`: a
# killed reproduction resumes where it stopped, finished runs are read, not retrained, a run
# another process trains is ``running`` (not failed), and a folder holding another preset's
# runs is refused before anything trains.  Both write ``out/summary.json``
# (:meth:`training.studies.population.Population.to_dict`) and return the
# :class:`~training.studies.population.Population`.
#
# Runs train one per CPU core (worker processes of one torch thread), on a CUDA GPU as
# ensembles of same-shape runs (:func:`training.launch.backends.local_launcher`).  Example
# (CPU: four runs of minutes each, two at a time on 2 cores: ``interp_init.pretrained.training_time()``
# says how long the shipped models took; see docs/faithful-models.md for what it shows)::
#
#     interp-init reproduce --preset cpu --seed 31 --out runs/reproduce/cpu-31


def reproduce_study(spec: StudySpec, out: str | Path, launcher: Launcher) -> tuple[Population | None, list[JobReturn]]:
    """Train every run of the reproduction ``spec`` into ``out`` (resumable) with ``launcher``,
    read the population and write its summaries; return it with the launch's returns (the
    population None while a launcher that does not wait, :attr:`~training.launch.Launcher.waits`,
    left runs submitted and unfinished: there is nothing to read yet)."""
    jobs = spec.jobs(out)
    refuse_strangers(jobs, out, "a reproduction")
    returns = run_study(jobs, out, launcher, REPRODUCE_BUSY, lambda: record_study(out, "reproduction", jobs))
    if not launcher.waits and any(r.status == RunStatus.RUNNING for r in returns):
        return None, returns
    population = read_population(spec, out)
    write_summaries(spec, out, population)
    return population, returns


def train_study(
    spec: StudySpec,
    out: str | Path,
    device: str,
    workers: int | None,
    progress: bool,
    backend: str | None = None,
    **options: Any,
) -> tuple[Population | None, list[JobReturn]]:
    """Train ``spec`` with ``backend`` (None: :func:`~training.launch.backends.local_launcher`) and its ``options``."""
    refuse_nested(
        out, "a reproduction", "reproduction"
    )  # before anything is printed or made (asked again when the folder is held)
    refuse_strangers(spec.jobs(out), out, "a reproduction")  # nor inside a study that does not name its runs
    check_summary_file(out)  # the files it writes at the end: never one of one's own
    check_output_file(Path(out) / "report.html", "report")
    launcher = (
        local_launcher(device, workers, progress)
        if backend is None
        else build_launcher(backend, device=device, workers=workers, progress=progress, **options)
    )
    if progress:
        jobs = spec.jobs(out)
        for run in jobs:
            print(
                f"[{run.name}] {run.config.model.architecture}, gamma={run.config.init.gamma}",
                file=sys.stderr,
                flush=True,
            )
        print(f"training {len(jobs)} runs with the {launcher.name} launcher", file=sys.stderr, flush=True)
    return reproduce_study(spec, out, launcher)


def reproduce(
    preset: str = "cpu",
    seed: int = 0,
    out: str | Path = "runs/reproduce",
    device: str = "auto",
    progress: bool = True,
    precision: str = "fp32",
    workers: int | None = None,
    tasks: Sequence[str] | None = None,
    carry: Sequence[str] | None = None,
) -> Population:
    """Train both regimes of ``preset`` on ``tasks`` (default every task with a flip) for
    ``seed`` into ``out``; write ``out/summary.json`` and return the population of one.

    ``workers`` runs train at once, in worker processes of one torch thread each when it
    is above 1 (default: one per core on a CPU; on a GPU same-shape runs as one ensemble);
    with one worker the runs train here, one after another.  ``precision="bf16"`` trains
    under bfloat16 autocast (a folder trained at another precision is refused).  ``carry``:
    hold these quantities of the paper's recipe (:attr:`StudySpec.carry`)."""
    spec = reproduction_spec(preset, seed, None, precision=precision, tasks=tasks, carry=carry)
    population = train_study(spec, out, device, workers, progress)[0]
    assert population is not None  # the local launcher waits for its runs
    return population


def reproduction_spec(
    preset: str,
    seed: int | None,
    seeds: str | None,
    protocol: str = "strict",
    lrs: str | None = None,
    vary: str = "both",
    fixed_seed: int | None = None,
    precision: str = "fp32",
    tasks: Sequence[str] | None = None,
    carry: Sequence[str] | None = None,
    logged_every: int | None = None,
) -> StudySpec:
    """The spec of ``reproduce``: one draw (``seed``, default 0: its runs in the study folder
    itself) or a population (``seeds``, a comma list; ``--fixed-seed`` defaults to the first
    seed when one source is varied; ``logged_every``: the paper protocol reads only the
    epochs the released scripts log)."""
    if seeds is not None and seed is not None:
        raise ValueError("give --seed S (one draw) or --seeds S1,S2,... (a population), not both")
    tasks = REPRODUCE_TASKS if tasks is None else tuple(tasks)
    carry = None if carry is None else tuple(carry)
    if seeds is None:
        if (protocol, lrs, vary, fixed_seed, logged_every) != ("strict", None, "both", None, None):
            raise ValueError(
                "--protocol paper, --lrs, --logged-every, --vary and --fixed-seed describe a population: give --seeds S1,S2,..."
            )
        return StudySpec.reproduction(
            preset, (0 if seed is None else seed,), precision=precision, tasks=tasks, single=True, carry=carry
        )
    seed_list = parse_list(seeds, int, "--seeds")
    if vary != "both" and fixed_seed is None:
        fixed_seed = seed_list[0]
    lr_list = parse_list(lrs, float, "--lrs") if lrs is not None else None
    for task in tasks if lr_list else ():  # an lr under the preset's schedule floor: refused naming this command's flag
        train = make_run_config(preset, task=task).train
        floor = max(train.warmup_start_lr, train.min_lr)
        low = [lr for lr in lr_list or () if 0 < lr < floor]  # a non-positive lr is refused by the spec, naming it
        if low:
            raise ValueError(
                f"--lrs {low[0]:g} is below the {preset} preset's lr floor {floor:g} on {task} (its warmup starts and its cosine ends there): "
                f"the schedule would climb above its peak; give --lrs of at least {floor:g}"
            )
    runs = len(seed_list) * len(tasks) * 2 * (len(lr_list) if lr_list else 1)  # counted before a config is built
    if runs > MAX_POINTS:
        raise ValueError(
            f"--seeds and --lrs ask for {runs:,} runs ({len(seed_list):,} seeds x {len(tasks)} tasks x 2 regimes"
            f"{f' x {len(lr_list)} lrs' if lr_list else ''}), more than the {MAX_POINTS:,} a study may have; give fewer seeds (or lrs)"
        )
    return StudySpec.reproduction(
        preset, seed_list, protocol, lr_list, vary, fixed_seed, precision, tasks, carry=carry, logged_every=logged_every
    )
