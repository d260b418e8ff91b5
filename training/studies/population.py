"""A flip judged over seeds: per-criterion rates with exact intervals, under a named protocol.

A *population* is a reproduction on one or more seeds (a single seed is a population of
one); each criterion of the flip (:meth:`interp_init.tasks.base.Task.flip_checks`, thresholds
:data:`interp_init.tasks.anchor.FLIP_CRITERIA`: :func:`check_flip`) is then a rate, ``k`` of ``n``
seeds, with its 95% exact binomial (Clopper-Pearson) interval (:func:`exact_interval`).
What a run's number is depends on the protocol (:mod:`training.studies.selection`: ``strict`` or
``paper``), which every table names.

:class:`Population` holds the per-seed rows (:class:`SeedRow`, one
:class:`RegimeResult` per task and regime, read from run records) and their rates
(:class:`CriterionRate`); ``summary.json`` is :meth:`Population.to_dict` (one schema for
one seed or many; :mod:`training.studies.summaries` writes and reads the files).
:func:`read_population` reads a reproduction's
(:meth:`training.studies.study.StudySpec.reproduction`) from its run records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.tasks.anchor import FLIP_CRITERIA
from interp_init.tasks.registry import make_task, task_class
from training.studies.race import Race, race_of
from training.studies.records import RunRecord
from training.studies.regimes import REGIME_NAMES
from training.studies.selection import Pick, check_protocol, pick_paper, pick_strict, protocol_text, targets
from training.studies.study import VARY, StudySpec

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

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in 0..{n}, got {k!r}")
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


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
    ``symmetric`` run read under ``strict``, its race (:class:`training.studies.race.Race`)."""

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
    epochs ``logged_every`` names, :func:`training.studies.selection.logged_epochs`, or every evaluated one)."""
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
