"""The campaign's records: where they go, what is finished, and what each cell's outcome means.

Layout under the results folder (``experiments/results/campaign/`` by default)::

    <cell>/cell.json                    the cell's spec (written once, with its first part)
    <cell>/part-K/part.json             the part: its runs, status, device, versions, speed, step path
    <cell>/part-K/<run>/config.json     each run's config
    <cell>/part-K/<run>/metrics.json    and its metrics with the whole history (no weights, no checkpoint)

Once a lease's archive is unpacked in the repository, each part is marked as a stored study by
the one writer of stored records (``experiments/store.py --mark runs``, docs/campaign.md):
``<cell>/part-K/stored-study.json``, ``STUDY.md`` and each run's ``stored.json``, read here as before.

A run is finished when a part holds its record with a finished status (``completed`` or
``diverged``); a cell when all its runs are (:class:`CampaignResults`).  A part stopped by
its deadline keeps its records (``running``, with their histories) but finishes nothing: its
runs are trained again, from the start, by a later part.

:func:`decide` applies a cell's decision rule (docs/campaign.md) to its records;
:func:`still_moving` is the rule that picks the runs the last cell retrains.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from campaign_cells import CELLS, SHORT_EPOCHS, TINY_EPOCHS, Cell, Run, cell_named, extended, grid_runs

from interp_init.fileio import json_kind, read_json
from interp_init.runfolder import FINISHED_STATUSES, RunStatus, write_json
from interp_init.tasks.anchor import FLIP_CRITERIA, symmetric_solution
from training.studies.population import mann_whitney
from training.studies.records import RunRecord, pick_paper
from training.studies.study import run_dirs

#: The default results folder (relative to the checkout).
RESULTS = Path("experiments/results/campaign")
#: The most a cell's records may weigh: what one lease can bring back.
MAX_CELL_BYTES = 64 * 2**20
#: A run is still moving when, over its last evaluated epochs within this many, a target's share spans more than :data:`MOVING_SPREAD`.
MOVING_WINDOW, MOVING_SPREAD = 5, 0.1
#: The targets whose spread :func:`still_moving` reads, per task.
MOVING_TARGETS = {"symmetric": ("heldout_inferential", "heldout_symmetric"), "id-ood": ("ood_acc", "commutativity")}
_PART = re.compile(r"^part-(\d+)$")


def stored(record: RunRecord) -> RunRecord:
    """A stored record (no weights) with the status its ``metrics.json`` records, which is
    what a record without weights has to say (the folder alone would read as pending)."""
    return replace(record, status=RunStatus(record.recorded_status)) if record.recorded_status else record


@dataclass
class CampaignResults:
    """The campaign's records under ``root`` (see the module docstring), read and written."""

    root: Path
    scale: str = "paper"

    def cell_dir(self, cell: Cell) -> Path:
        return self.root / cell.name

    def part_dirs(self, cell: Cell) -> list[Path]:
        folder = self.cell_dir(cell)
        parts = [p for p in folder.iterdir() if _PART.match(p.name) and p.is_dir()] if folder.is_dir() else []
        return sorted(parts, key=lambda p: int(_PART.match(p.name).group(1)))

    def parts(self, cell: Cell) -> list[dict[str, Any]]:
        """Every part's ``part.json``, in order."""
        parts = [
            read_json(
                p / "part.json",
                "a part's record is damaged: restore it from the archive the lease brought back, or remove the part's folder to train it again",
            )
            for p in self.part_dirs(cell)
            if (p / "part.json").is_file()
        ]
        for path, part in zip(
            (p / "part.json" for p in self.part_dirs(cell) if (p / "part.json").is_file()), parts, strict=True
        ):
            if not isinstance(part, dict):
                raise ValueError(
                    f"{path} holds {json_kind(part)}, not a part's record; restore it from the archive, or remove the part's folder to train it again"
                )  # noqa: TRY004 - bad input: one line, exit 2
        return parts

    def next_part(self, cell: Cell) -> int:
        dirs = self.part_dirs(cell)
        return 1 + (int(_PART.match(dirs[-1].name).group(1)) if dirs else 0)

    def records(self, cell: Cell, full: bool = False) -> dict[str, RunRecord]:
        """The cell's finished runs by name, read from its parts (:func:`stored`); ``full``:
        with the whole-schedule record of each run the extension retrained in its place."""
        out: dict[str, RunRecord] = {}
        for part in self.part_dirs(cell):
            for link in sorted(p for p in part.iterdir() if p.is_symlink() and (p / "config.json").is_file()):
                # records are plain files and folders (one rule, as experiments/store.py's)
                raise ValueError(
                    f"{link} is a symlink (to {link.readlink()}); the campaign's records are plain files and folders: replace the link by a copy of the run's records"
                )
            for run in run_dirs(part, depth=1):
                record = stored(RunRecord.read(run))
                if record.recorded_status in FINISHED_STATUSES and run.name not in out:
                    out[run.name] = record
        for extension in (c for c in CELLS if full and cell.name in c.extends):
            out |= {
                name.split("__", 1)[1]: r
                for name, r in self.records(extension).items()
                if name.startswith(f"{cell.name}__")
            }
        return out

    def runs(self, cell: Cell, assume_bf16: bool = False) -> list[Run] | None:
        """The cell's runs at this scale; None while they depend on cells not finished yet
        (the extension's, or a cell's precision that cell 02's decision sets: with
        ``assume_bf16``, the cell's own precision then, for a plan)."""
        if cell.extends:
            if not all(self.finished(cell_named(c)) for c in cell.extends):
                return None
            out = []
            for source in (cell_named(c) for c in cell.extends):
                records = self.records(source)
                out += [
                    extended(run, source.name, self.scale)
                    for run in self.runs(source) or []
                    if still_moving(records[run.name])
                ]
            return out
        fp32 = False
        if cell.precision_from is not None:
            control = cell_named(cell.precision_from)
            if not self.finished(control):
                return grid_runs(cell, self.scale) if assume_bf16 else None
            fp32 = decide(self, control).outcome == "precision matters"
        return grid_runs(cell, self.scale, fp32)

    def todo(self, cell: Cell, assume_bf16: bool = False) -> list[Run] | None:
        """The cell's runs not finished yet (None: not known yet, see :meth:`runs`)."""
        runs = self.runs(cell, assume_bf16)
        if runs is None:
            return None
        done = self.records(cell)
        return [r for r in runs if r.name not in done]

    def finished(self, cell: Cell) -> bool:
        todo = self.todo(cell)
        return todo is not None and not todo

    def check_spec(self, cell: Cell) -> None:
        """Refuse to add parts to a cell whose recorded spec differs from the code's: the rules
        were registered for that spec (docs/campaign.md), results only add rows."""
        path = self.cell_dir(cell) / "cell.json"
        if path.is_file() and read_json(
            path, "restore the cell's spec from the archive, or give another --results"
        ) != self.spec(cell):
            raise ValueError(
                f"{path} records another spec (or scale) than the campaign's code for cell {cell.name}: a registered cell is never changed; "
                "add a new cell instead, or give another --results"
            )

    def spec(self, cell: Cell) -> dict[str, Any]:
        """``cell.json``: the cell's spec and the scale its records were trained at."""
        return {**cell.spec(), "scale": self.scale}

    def write_cell(self, cell: Cell) -> None:
        self.check_spec(cell)
        path = self.cell_dir(cell) / "cell.json"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json(path, self.spec(cell))

    def size(self, cell: Cell) -> int:
        """Bytes of the cell's records."""
        folder = self.cell_dir(cell)
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _columns(record: RunRecord, epoch: int | None = None) -> dict[str, float]:
    """The task's numbers at ``epoch`` (an evaluated one; None: the last evaluated)."""
    evaluated = [e for e in record.history if e.metrics is not None and (epoch is None or e.epoch == epoch)]
    return evaluated[-1].metrics.columns() if evaluated else {}


def answer(record: RunRecord, epoch: int | None = None) -> str:
    """What a run answers at ``epoch`` (default: its last evaluated): on ``symmetric`` the
    word of :func:`interp_init.tasks.anchor.symmetric_solution`; on ``id-ood`` its phase
    (``did not fit``: ID < 0.9; ``composes``: OOD >= 0.5; ``Phase 2``: OOD <= 0.3; else ``between``)."""
    c = _columns(record, epoch)
    if record.task_name == "symmetric":
        return symmetric_solution(
            c.get("id_acc"), c.get("heldout_inferential"), c.get("heldout_symmetric"), c.get("exception_acc")
        )
    if (c.get("id_acc") or 0.0) < FLIP_CRITERIA["min_id_acc"]:
        return "did not fit"
    ood = c.get("ood_acc") or 0.0
    return (
        "composes"
        if ood >= FLIP_CRITERIA["min_small_ood"]
        else "Phase 2"
        if ood <= FLIP_CRITERIA["max_large_ood"]
        else "between"
    )


def still_moving(record: RunRecord) -> bool:
    """Whether a run was still moving at its last epoch: over its evaluated epochs within the
    last :data:`MOVING_WINDOW`, a target's share (:data:`MOVING_TARGETS`) spans more than
    :data:`MOVING_SPREAD`, or its last ID accuracy is below 0.9 (not fitted yet)."""
    last = record.epochs_run
    window = [e.metrics.columns() for e in record.history if e.metrics is not None and e.epoch > last - MOVING_WINDOW]
    if not window or (window[-1].get("id_acc") or 0.0) < FLIP_CRITERIA["min_id_acc"]:
        return True
    for target in MOVING_TARGETS[record.task_name]:
        values = [c[target] for c in window if c.get(target) is not None]
        if values and max(values) - min(values) > MOVING_SPREAD:
            return True
    return False


@dataclass(frozen=True)
class Decision:
    """A cell's outcome under its rule: the outcome's name, what it means, and the numbers read."""

    outcome: str
    meaning: str
    table: tuple[str, ...] = ()

    def format(self) -> str:
        return "\n".join([*self.table, "", f"outcome: {self.outcome}: {self.meaning}"])


def _by_seed(records: Sequence[RunRecord]) -> dict[int, list[RunRecord]]:
    out: dict[int, list[RunRecord]] = defaultdict(list)
    for r in records:
        out[r.config.seed].append(r)
    return dict(sorted(out.items()))


def _paper_statistic(records: Sequence[RunRecord], target: str) -> tuple[float, dict[int, float]]:
    """The papers' statistic: per seed the best ``target`` over the runs (lrs) and evaluated epochs; their mean."""
    best = {seed: pick_paper(runs, (target,))[target].value or 0.0 for seed, runs in _by_seed(records).items()}
    return (sum(best.values()) / len(best) if best else 0.0), best


def _seeds_ending(records: Sequence[RunRecord], word: str) -> int:
    """Seeds with at least one run whose last evaluated epoch answers ``word``."""
    return sum(any(answer(r) == word for r in runs) for runs in _by_seed(records).values())


def _decide_small(records: list[RunRecord]) -> Decision:
    stat, best = _paper_statistic(records, "heldout_inferential")
    sym, best_sym = _paper_statistic(records, "heldout_symmetric")
    strict, n = _seeds_ending(records, "inferential"), len(best)
    table = tuple(
        f"seed {s}: best (4,3) inferential {v:.2f}, best symmetric {best_sym[s]:.2f}" for s, v in best.items()
    ) + (f"means: inferential {stat:.2f}, symmetric {sym:.2f}; seeds ending inferential at some lr: {strict} of {n}",)
    if strict:  # "flip" until 2026-11-29: one init's runs cannot show a flip (docs/campaign.md, the amendments)
        return Decision(
            "infers",
            "small init infers at the end of the cell on some lr: small init's side of Fig. 2 at paper scale; the flip is the contrast's to call, with large init",
            table,
        )
    if stat >= 0.8:
        return Decision(
            "transient",
            "the papers' statistic reaches 0.8 but no run keeps the inferential answer: Fig. 2 reproduces only as an early transient",
            table,
        )
    if stat < 0.5:
        return Decision("fails", "Fig. 2 fails by its own statistic here", table)
    return Decision(
        "partial",
        "partial inference (0.5 <= statistic < 0.8, no run ending inferential): recorded, the campaign goes on unchanged",
        table,
    )


def _decide_precision(results: CampaignResults, records: list[RunRecord]) -> Decision:
    bf16 = {(r.config.seed, r.lr): r for r in results.records(cell_named("01-fig2-small-init")).values()}
    table, differ, spread = [], 0, 0.0
    for r in records:
        other = bf16.get((r.config.seed, r.lr))
        if other is None:
            return Decision("pending", f"cell 01 has no finished run for seed {r.config.seed}, lr {r.lr:g}")
        a, b = _columns(r), _columns(other)
        delta = max(abs((a.get(t) or 0.0) - (b.get(t) or 0.0)) for t in MOVING_TARGETS["symmetric"])
        differ += answer(r) != answer(other)
        spread = max(spread, delta)
        table.append(
            f"seed {r.config.seed}: fp32 {answer(r)}, bf16 {answer(other)}, largest share difference {delta:.2f}"
        )
    if differ or spread > 0.3:
        return Decision(
            "precision matters",
            "the answers differ or a share moves by more than 0.3: cells 03-05 train in fp32 without TF32",
            tuple(table),
        )
    if spread > 0.1:
        return Decision(
            "bf16 holds, shares move",
            "same answers, shares within 0.3: later cells stay in bf16, with this difference beside their decisions",
            tuple(table),
        )
    return Decision("bf16 holds", "same answers, shares within 0.1: later cells stay in bf16", tuple(table))


def _decide_large(records: list[RunRecord]) -> Decision:
    sym, best_sym = _paper_statistic(records, "heldout_symmetric")
    inf, best_inf = _paper_statistic(records, "heldout_inferential")
    table = tuple(
        f"seed {s}: best symmetric {best_sym[s]:.2f}, best inferential {best_inf[s]:.2f}" for s in best_sym
    ) + (f"means: symmetric {sym:.2f}, inferential {inf:.2f}",)
    if sym >= 0.8 and inf >= 0.8:
        return Decision(
            "both answers",
            "the papers' selection finds both answers at large init: their statistic cannot separate the regimes here",
            table,
        )
    if sym >= 0.8:
        return Decision(
            "copies", "large init copies under the papers' selection: Fig. 2's large-init side reproduces", table
        )
    if sym < 0.5:
        return Decision("fails", "large init does not copy by the papers' statistic", table)
    return Decision("partial", "0.5 <= symmetric statistic < 0.8: recorded, the campaign goes on unchanged", table)


def _decide_depth(records: list[RunRecord]) -> Decision:
    cells: dict[tuple[int, float], list[RunRecord]] = defaultdict(list)
    for r in records:
        cells[(r.config.model.n_layers, r.config.init.gamma)].append(r)
    table, found, transient, low = [], False, False, True
    for (depth, gamma), runs in sorted(cells.items()):
        stat, _ = _paper_statistic(runs, "heldout_inferential")
        fitted = sum(
            any((_columns(r).get("id_acc") or 0.0) >= FLIP_CRITERIA["min_id_acc"] for r in s)
            for s in _by_seed(runs).values()
        )
        shadow = fitted < 2
        strict = _seeds_ending(runs, "inferential")
        table.append(
            f"depth {depth}, gamma {gamma:g}: statistic {stat:.2f}, seeds ending inferential {strict}, seeds fitted {fitted}"
            + (" (shadow)" if shadow else "")
        )
        if not shadow:
            found |= stat >= 0.8 and strict > 0
            transient |= stat >= 0.8 and strict == 0
            low &= stat < 0.5
    if found:
        return Decision(
            "inference found",
            "small init infers in Fig. 2's inferential region at paper scale: the depth-2 null is local",
            tuple(table),
        )
    if transient:
        return Decision(
            "transient only",
            "the papers' statistic reaches 0.8 somewhere, but no run keeps the inferential answer",
            tuple(table),
        )
    if low:
        return Decision(
            "no inference", "Fig. 2's inferential region does not reproduce at depth 3-4 here", tuple(table)
        )
    return Decision("partial", "mixed sub-cells: recorded, the campaign goes on unchanged", tuple(table))


def _decide_journal(records: list[RunRecord]) -> Decision:
    small = [r for r in records if r.config.init.gamma == 0.8]
    large = [r for r in records if r.config.init.gamma != 0.8]
    composes = sum(answer(r) == "composes" for r in small)
    phase2 = sum(answer(r) == "Phase 2" for r in large)
    table = tuple(f"gamma {r.config.init.gamma:g}, seed {r.config.seed}: {answer(r)}" for r in small + large) + (
        f"small init composes on {composes} of {len(small)}; large init in Phase 2 on {phase2} of {len(large)}",
    )
    if composes >= 2 and phase2 >= 2:
        return Decision("flip", "the journal's flip reproduces on its 10-layer model", table)
    if composes >= 2:
        return Decision("no large-init side", "small init composes, large init does not stay in Phase 2", table)
    return Decision("no small-init side", "small init does not compose on 2 of 3 seeds", table)


def _decide_extension(records: list[RunRecord], short: int) -> Decision:
    changed = [(r.path.name, answer(r, short), answer(r)) for r in records if answer(r, short) != answer(r)]
    table = tuple(f"{name}: {a} at epoch {short}, {b} at the end" for name, a, b in changed) + (
        f"{len(changed)} of {len(records)} extended runs changed their answer",
    )
    if changed:
        return Decision(
            "later epochs matter",
            "the source cells' decisions are read again with these runs' full-schedule records in place",
            table,
        )
    return Decision(
        "25 epochs suffice", "no extended run changed its answer after epoch 25: the 25-epoch decisions stand", table
    )


#: Fig. 2's contrast reads small init's cells against large init's (docs/campaign.md, the amendments).
CONTRAST_CELLS: dict[str, tuple[str, ...]] = {
    "small": ("01-fig2-small-init", "07-fig2-small-more-seeds"),
    "large": ("03-large-init", "08-fig2-large-more-seeds"),
}
#: The level the contrast's rank tests call a difference at.
CONTRAST_ALPHA = 0.05


def _whole_seeds(results: CampaignResults, names: Sequence[str]) -> list[RunRecord]:
    """The finished runs of the cells ``names`` whose seed has every lr of its cell finished."""
    out = []
    for name in names:
        cell = cell_named(name)
        runs, records = results.runs(cell), results.records(cell)
        lrs = {r.config.train.lr for r in runs or []}
        for seed, seed_runs in _by_seed(list(records.values())).items():
            if {r.lr for r in seed_runs} >= lrs:
                out.extend(seed_runs)
    return out


def decide_contrast(results: CampaignResults) -> Decision:
    """Fig. 2's contrast at paper scale: small init's per-seed best shares (cells 01, 07)
    against large init's (03, 08), both panels, by the two-sided exact Mann-Whitney U test
    over whole seeds; the flip needs both panels separated in the papers' direction."""
    small, large = (_whole_seeds(results, CONTRAST_CELLS[k]) for k in ("small", "large"))
    if not small or not large:
        return Decision(
            "pending",
            "the contrast needs whole seeds (all 9 lrs) of both inits; a campaign that ends here concludes nothing about the contrast",
        )
    table, held, reversed_ = [], [], []
    for letter, target, expected in (("b", "heldout_inferential", "small"), ("a", "heldout_symmetric", "large")):
        (ms, bs), (ml, bl) = _paper_statistic(small, target), _paper_statistic(large, target)
        p = mann_whitney(list(bs.values()), list(bl.values()))
        higher = "small" if ms > ml else "large" if ml > ms else None
        table.append(
            f"panel ({letter}) {target}: small init {ms:.2f} ({len(bs)} seeds), large init {ml:.2f} ({len(bl)} seeds), Mann-Whitney p = {p:.3f}"
        )
        if p < CONTRAST_ALPHA:
            (held if higher == expected else reversed_).append(letter)
    table.append(
        f"seeds ending inferential at some lr: small init {_seeds_ending(small, 'inferential')} of {len(_by_seed(small))}, "
        f"large init {_seeds_ending(large, 'inferential')} of {len(_by_seed(large))}"
    )
    if reversed_:
        return Decision(
            "reversed", f"panel {' and '.join(reversed_)} separated against the papers' direction", tuple(table)
        )
    if len(held) == 2:
        return Decision(
            "flip",
            "both panels separated in the papers' direction: Fig. 2's contrast holds at paper scale",
            tuple(table),
        )
    if held:
        return Decision(
            "one panel",
            f"only panel ({held[0]}) separated in the papers' direction: the contrast holds on that panel only",
            tuple(table),
        )
    return Decision(
        "not separated",
        "neither panel separated at these seeds (with 3 seeds an init the smallest p is 0.1: cells 07 and 08 give 8)",
        tuple(table),
    )


def decide(results: CampaignResults, cell: Cell, full: bool = False) -> Decision:
    """``cell``'s outcome under its rule (docs/campaign.md), from its finished runs (``full``:
    with the extension's whole-schedule records in place of the runs it retrained)."""
    records = list(results.records(cell, full).values())
    if not records:
        return Decision("pending", "no finished run yet")
    rule = {
        "01": _decide_small,
        "03": _decide_large,
        "04": _decide_depth,
        "05": _decide_journal,
        "07": _decide_small,
        "08": _decide_large,
    }.get(cell.name[:2])
    if rule is not None:
        return rule(records)
    if cell.name.startswith("02"):
        return _decide_precision(results, records)
    return _decide_extension(records, SHORT_EPOCHS if results.scale == "paper" else TINY_EPOCHS[SHORT_EPOCHS])


__all__ = ["CELLS", "CampaignResults", "Decision", "answer", "decide", "decide_contrast", "still_moving", "stored"]
