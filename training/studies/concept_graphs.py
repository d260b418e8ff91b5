"""The journal's Fig. 6 at CPU scale (docs/concept-graphs.md): concept-graph diffusion runs at
a row of gammas over seeds, trained through the one executor into a study folder, their
unseen tuples' samples read by :func:`interp_init.concept_graphs.read_concepts`, and the
table, the verdict of the pre-registered rule and a figure like Fig. 6B written beside them.

A study is a :class:`ConceptStudySpec` (a JSON file: ``experiments/population-specs/concept-graphs-fig6.json``);
its runs are ``OUT/gamma-G-seed-S`` (:meth:`ConceptStudySpec.jobs`), each a
:class:`training.trainer.diffusion.DiffusionRunConfig`; ``OUT/study.json`` names them
(kind ``concept-graphs``), so a rerun resumes them and a stranger is refused.  After the runs,
:func:`summarize` reads each run's ``metrics.json`` (:func:`read_rows`, which reads a stored
copy of the study, ``experiments/results/``, alike) and writes ``OUT/fig6-summary.json``,
``OUT/fig6-table.md`` and ``OUT/fig6b.png``.

**The reading** (fixed before any result; docs/concept-graphs.md#pre-registration): a run
*counts* when it completed and draws the tuples it saw (``id_acc``, the share of its samples
of the four training tuples read right on all three concepts, at least :data:`VALID_ID_ACC`);
its *right-shape share* is the share of its samples of the unseen tuples 010 and 011 read as
circles (the mean of the two; a sample showing no object is wrong on every concept, here and
in ``id_acc``).  Per gamma: the mean over the
counted seeds with a 95% percentile bootstrap interval over seeds (:data:`BOOTSTRAP` resamples,
seeded), the pooled share over all their samples with its exact (Clopper-Pearson) interval,
and how many seeds draw mostly circles (share above one half), with its exact interval.
**The rule**: the failure mode *appears* at a gamma when the bootstrap interval of the mean
lies wholly below one half (mostly triangles), and *disappears* when it lies wholly above
(mostly circles); fewer than :data:`MIN_SEEDS` counted seeds is *inconclusive*.  The study's
verdict names the state at gamma 0.5 (PyTorch's default scale) and at the row's largest gamma.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from interp_init.concept_graphs import ALL_CODES, UNSEEN_CODES, concept_graph_images, read_concepts
from interp_init.fileio import atomic_write, read_json
from interp_init.runfolder import RunFolder, RunStatus, write_json
from training.launch import Job, JobReturn, Launcher, run_study
from training.trainer.diffusion import DiffusionRunConfig, DiffusionTrain, diffusion_config

__all__ = [
    "BOOTSTRAP",
    "MIN_SEEDS",
    "SPEC_FILE",
    "VALID_ID_ACC",
    "ConceptStudySpec",
    "GammaRow",
    "drawn_sentence",
    "judge_accuracy",
    "png_bytes",
    "read_rows",
    "run_concept_study",
    "run_metrics",
    "run_minutes",
    "summarize",
    "table_markdown",
    "verdict",
    "write_figure",
]

#: A run counts when its samples of the training tuples are read right on all three concepts at least this often.
VALID_ID_ACC = 0.75
#: Fewer counted seeds at a gamma than this: inconclusive there.
MIN_SEEDS = 3
#: Bootstrap resamples of the seeds (the percentile interval of the mean), and their seed.
BOOTSTRAP = 10_000
BOOTSTRAP_SEED = 0
#: The seed of the held renders on which the judge's own accuracy is measured (no run trains on them:
#: a run's renders are seeded by its own derived seed).
JUDGE_SEED = 55_055
#: The gamma of PyTorch's default scale (kaiming-uniform, 1/sqrt(fan_in)).
DEFAULT_GAMMA = 0.5
STUDY_KIND = "concept-graphs"
#: The study's spec as its folder keeps it (a rerun with another spec is refused).
SPEC_FILE = "concept-graphs.json"
SUMMARY = "fig6-summary.json"
TABLE = "fig6-table.md"
FIGURE = "fig6b.png"


@dataclass(frozen=True)
class ConceptStudySpec:
    """A row of gammas over seeds (docs/concept-graphs.md): ``size`` a
    :data:`~training.trainer.diffusion.DIFFUSION_SIZES` name, ``distribution`` ``uniform``
    (the released code's) or ``normal``, ``train`` overrides of its
    :class:`~training.trainer.diffusion.DiffusionTrain` fields; ``figure_samples`` samples
    of each unseen tuple per gamma in the figure (the first seed's); ``judge_per_code``
    held renders of each of the eight tuples on which the judge's accuracy is measured."""

    gammas: tuple[float, ...]
    seeds: tuple[int, ...]
    size: str = "cpu"
    distribution: str = "uniform"
    train: dict[str, Any] = field(default_factory=dict)
    figure_samples: int = 8
    judge_per_code: int = 200

    def __post_init__(self) -> None:
        object.__setattr__(self, "gammas", tuple(self.gammas))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        if not self.gammas or len(set(self.gammas)) != len(self.gammas):
            raise ValueError(f"gammas must be distinct and at least one, got {list(self.gammas)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        for name in ("figure_samples", "judge_per_code"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.train, dict):
            raise ValueError(
                f"train must be an object of {[f.name for f in fields(DiffusionTrain)]}, got {self.train!r}"
            )
        self.configs()  # every run's config is valid (gammas, seeds, size, distribution, train)

    def configs(self) -> dict[str, DiffusionRunConfig]:
        """Each run's config by its name, ``gamma-G-seed-S``, gamma by gamma."""
        return {
            f"gamma-{gamma:g}-seed-{seed}": diffusion_config(
                self.size, gamma=gamma, distribution=self.distribution, seed=seed, **self.train
            )
            for gamma in self.gammas
            for seed in self.seeds
        }

    def jobs(self, out: str | Path) -> list[Job]:
        """The study's jobs, each run in ``out/NAME``."""
        return [Job(name, cfg, Path(out) / name) for name, cfg in self.configs().items()]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    @classmethod
    def from_file(cls, path: str | Path) -> ConceptStudySpec:
        """A spec from its JSON file; a problem is one ``ValueError`` naming the file."""
        data = read_json(Path(path), "give a JSON object such as experiments/population-specs/concept-graphs-fig6.json")
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a concept-graph study spec is a JSON object")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"{path}: unknown key(s) {unknown}; allowed: {[f.name for f in fields(cls)]}")
        try:
            return cls(**data)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: {' '.join(str(err).split())}") from None


def run_concept_study(spec: ConceptStudySpec, out: str | Path, launcher: Launcher) -> list[JobReturn]:
    """Train the study's runs into ``out`` with ``launcher`` (held; ``study.json`` names them;
    finished runs are read, unfinished ones resumed); one return per run, in order."""
    from training.studies.study import record_study, refuse_strangers

    jobs = spec.jobs(out)
    refuse_strangers(jobs, out, "a concept-graph study")
    spec_path = Path(out) / SPEC_FILE

    def held() -> None:
        if spec_path.exists() and json.loads(spec_path.read_text()) != spec.to_dict():
            raise ValueError(f"{out} holds a concept-graph study with another spec ({spec_path}); choose another --out")
        write_json(spec_path, spec.to_dict())
        record_study(out, STUDY_KIND, jobs)

    return run_study(jobs, out, launcher, held=held, kind=STUDY_KIND)


# ------------------------------------------------------------------ the reading


def judge_accuracy(image_size: int, per_code: int) -> dict[str, float]:
    """The judge's own accuracy on held renders (:data:`JUDGE_SEED`) of all eight tuples at
    ``image_size``: the share read right on each concept and on all three."""
    from interp_init.concept_graphs import ConceptGraphConfig

    config = ConceptGraphConfig(image_size=image_size)
    data = concept_graph_images(ALL_CODES, per_code=per_code, seed=JUDGE_SEED, config=config)
    want = [tuple(int(v) for v in row) for row in data.concepts]
    read = [read_concepts(image, config) for image in data.images.numpy()]
    n = len(read)
    out = {
        f"{name}_acc": sum(r is not None and r[i] == w[i] for r, w in zip(read, want)) / n
        for i, name in enumerate(("shape", "size", "colour"))
    }
    return out | {"all_acc": sum(r is not None and tuple(r) == w for r, w in zip(read, want)) / n, "n": n}


def _exact(k: int, n: int) -> tuple[float, float]:
    from training.studies.population import exact_interval

    return exact_interval(k, n)


def _bootstrap(values: Sequence[float]) -> tuple[float, float]:
    import numpy as np

    rng = np.random.default_rng(BOOTSTRAP_SEED)
    x = np.asarray(values, dtype=float)
    means = x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


@dataclass(frozen=True)
class GammaRow:
    """One gamma's reading (the module docstring): the runs, the counted ones, per counted seed
    its right-shape share (``shares``: seed -> ``{010, 011, mean}``), and the summaries."""

    gamma: float
    runs: int
    completed: int
    counted: tuple[int, ...]
    shares: dict[int, dict[str, float]]
    mean: float | None
    bootstrap: tuple[float, float] | None
    pooled: tuple[int, int]
    pooled_interval: tuple[float, float] | None
    circle_seeds: int
    circle_seeds_interval: tuple[float, float] | None
    empty: float | None
    id_acc: float | None
    state: str
    #: Post hoc, read by no rule: over every completed run, counted or not, the samples of 010
    #: and 011, those showing an object, those read as circles, those read as small (both right).
    drawn: tuple[int, int, int, int] = (0, 0, 0, 0)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "shares": {str(k): v for k, v in self.shares.items()}
        }


def _state(n_counted: int, interval: tuple[float, float] | None) -> str:
    if n_counted < MIN_SEEDS or interval is None:
        return "inconclusive"
    if interval[1] < 0.5:
        return "failure mode (triangles)"
    if interval[0] > 0.5:
        return "no failure mode (circles)"
    return "undecided"


def gamma_row(gamma: float, finals: dict[int, dict[str, Any] | None]) -> GammaRow:
    """One gamma's :class:`GammaRow` from its runs' ``final`` metrics by seed (None: not completed)."""
    done = {s: f for s, f in finals.items() if f is not None}
    counted = {s: f for s, f in done.items() if f["id_acc"] >= VALID_ID_ACC}
    shares = {
        s: {code: f["unseen"][code]["shape_acc"] for code in UNSEEN_CODES}
        | {"mean": sum(f["unseen"][code]["shape_acc"] for code in UNSEEN_CODES) / len(UNSEEN_CODES)}
        for s, f in counted.items()
    }
    means = [v["mean"] for v in shares.values()]
    k = sum(round(f["unseen"][c]["shape_acc"] * f["unseen"][c]["n"]) for f in counted.values() for c in UNSEEN_CODES)
    n = sum(f["unseen"][c]["n"] for f in counted.values() for c in UNSEEN_CODES)
    boot = _bootstrap(means) if means else None
    circles = sum(m > 0.5 for m in means)
    empty = [f["unseen"][c]["empty"] for f in counted.values() for c in UNSEEN_CODES]
    return GammaRow(
        gamma=gamma,
        runs=len(finals),
        completed=len(done),
        counted=tuple(sorted(counted)),
        shares=shares,
        mean=sum(means) / len(means) if means else None,
        bootstrap=boot,
        pooled=(k, n),
        pooled_interval=_exact(k, n) if n else None,
        circle_seeds=circles,
        circle_seeds_interval=_exact(circles, len(means)) if means else None,
        empty=sum(empty) / len(empty) if empty else None,
        id_acc=sum(f["id_acc"] for f in done.values()) / len(done) if done else None,
        state=_state(len(counted), boot),
        drawn=_drawn([f["unseen"][c] for f in done.values() for c in UNSEEN_CODES]),
    )


def _drawn(cells: Sequence[dict[str, Any]]) -> tuple[int, int, int, int]:
    """Samples, samples showing an object, read as circles, read as small, summed over ``cells``
    (unseen tuples' readings: a sample with no object is wrong on every concept, so the right
    shape and size of 010 and 011, circle and small, are counted among the objects)."""
    n = sum(c["n"] for c in cells)
    objects = sum(round((1 - c["empty"]) * c["n"]) for c in cells)
    circles = sum(round(c["shape_acc"] * c["n"]) for c in cells)
    small = sum(round(c["size_acc"] * c["n"]) for c in cells)
    return n, objects, circles, small


def drawn_sentence(rows: Sequence[GammaRow]) -> str:
    """What every completed run drew for 010 and 011, counted or not (post hoc, read by no
    rule): per gamma the share of samples showing an object, and of those the shares read as
    circles and as small."""
    parts = []
    for r in rows:
        n, objects, circles, small = r.drawn
        if not n:
            parts.append(f"gamma {r.gamma:g}: no completed run")
            continue
        shares = f", of those {circles / objects:.0%} circles and {small / objects:.0%} small" if objects else ", none"
        parts.append(
            f"gamma {r.gamma:g} ({r.completed} run{'s' * (r.completed != 1)}): {objects / n:.0%} of {n:,} samples show an object{shares}"
        )
    return (
        "Post hoc, read by no rule (every completed run, counted or not; 010 and 011 are small circles): "
        + "; ".join(parts)
        + "."
    )


def _cell(value: float | None, interval: tuple[float, float] | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def table_markdown(rows: list[GammaRow], judge: dict[str, float], minutes: list[float] | None = None) -> str:
    """The study's table (a row per gamma), the judge's own accuracy and, given ``minutes``
    (:func:`run_minutes`), minutes a run: what ``fig6-table.md`` and docs/concept-graphs.md show."""
    lines = [
        (
            "| gamma | runs counted / completed / all | right shape, 010 and 011 (mean over seeds [95% bootstrap]) "
            "| pooled over samples [exact 95%] | seeds drawing mostly circles [exact 95%] | no-object samples | id_acc | reading |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        k, n = r.pooled
        pooled = _cell(k / n, r.pooled_interval) if n else "-"
        seeds = (
            "-"
            if not r.counted
            else f"{r.circle_seeds}/{len(r.counted)}"
            + (
                f" [{r.circle_seeds_interval[0]:.2f}, {r.circle_seeds_interval[1]:.2f}]"
                if r.circle_seeds_interval
                else ""
            )
        )
        lines.append(
            f"| {r.gamma:g} | {len(r.counted)} / {r.completed} / {r.runs} | {_cell(r.mean, r.bootstrap)} | {pooled} "
            f"| {seeds} | {_cell(r.empty)} | {_cell(r.id_acc)} | {r.state} |"
        )
    lines.append("")
    lines.append(
        f"The judge (read_concepts) on {judge['n']:,} held renders of all eight tuples: shape {judge['shape_acc']:.3f}, "
        f"size {judge['size_acc']:.3f}, colour {judge['colour_acc']:.3f}, all three {judge['all_acc']:.3f}."
    )
    if minutes:
        lines.append(
            f"Minutes a run (its `elapsed_s`: training and the judged samples): median {statistics.median(minutes):.0f}, "
            f"range {min(minutes):.0f}-{max(minutes):.0f}, over {len(minutes)} completed runs."
        )
    return "\n".join(lines) + "\n"


def verdict(rows: list[GammaRow]) -> dict[str, str]:
    """The pre-registered rule on ``rows``: the state at gamma 0.5 (``default``) and at the
    row's largest gamma (``largest``), and the ``sentence`` that says what they mean."""
    by = {r.gamma: r for r in rows}
    top = max(by)
    out = {"default": by[DEFAULT_GAMMA].state if DEFAULT_GAMMA in by else "not in the row", "largest": by[top].state}
    appears = out["default"] == "failure mode (triangles)"
    disappears = out["largest"] == "no failure mode (circles)"
    undecided = {out["default"], out["largest"]} & {"inconclusive", "undecided", "not in the row"}
    said = f"At gamma {DEFAULT_GAMMA:g}: {out['default']}; at gamma {top:g}: {out['largest']}. "
    if appears and disappears:
        said += (
            "The failure mode appears at the default init and disappears at small init, as in the journal's Fig. 6B."
        )
    elif undecided:
        said += "The rule does not decide (fewer than the counted seeds it needs, or an interval across one half)."
    else:
        reasons = [
            ("the failure mode does not appear at the default init", not appears),
            ("it does not disappear at the largest gamma", not disappears),
        ]
        said += "The journal's Fig. 6B pattern is not seen: " + "; ".join(r for r, bad in reasons if bad) + "."
    out["sentence"] = said
    return out


def run_metrics(spec: ConceptStudySpec, folder: str | Path) -> dict[str, dict[str, Any] | None]:
    """Each run's ``metrics.json`` in ``folder`` (a study's or its stored records), by its name
    ``gamma-G-seed-S`` in the spec's order (None where it has none yet)."""
    folder = Path(folder)
    out = {}
    for name in spec.configs():
        run = RunFolder(folder / name)
        out[name] = run.read_metrics() if run.metrics_path.exists() else None
    return out


def read_rows(spec: ConceptStudySpec, folder: str | Path) -> list[GammaRow]:
    """The reading of each gamma (:func:`gamma_row`) from the runs in ``folder``: a study's
    folder or its stored records (``experiments/results/``); writes nothing."""
    metrics = run_metrics(spec, folder)
    rows = []
    for gamma in spec.gammas:
        finals: dict[int, dict[str, Any] | None] = {}
        for seed in spec.seeds:
            m = metrics[f"gamma-{gamma:g}-seed-{seed}"]
            finals[seed] = m["final"] if m is not None and m["status"] == RunStatus.COMPLETED else None
        rows.append(gamma_row(gamma, finals))
    return rows


def run_minutes(spec: ConceptStudySpec, folder: str | Path) -> list[float]:
    """Minutes of each completed run in ``folder`` (its ``elapsed_s``), in the spec's order."""
    return [
        m["elapsed_s"] / 60
        for m in run_metrics(spec, folder).values()
        if m is not None and m["status"] == RunStatus.COMPLETED and isinstance(m.get("elapsed_s"), (int, float))
    ]


def summarize(spec: ConceptStudySpec, out: str | Path, figure: bool = True) -> dict[str, Any]:
    """Read the study's runs (:func:`read_rows`), write ``fig6-summary.json``,
    ``fig6-table.md`` and (with ``figure``) ``fig6b.png`` into ``out``; return the summary."""
    out = Path(out)
    rows = read_rows(spec, out)
    image_size = next(iter(spec.configs().values())).model.image_size
    judge = judge_accuracy(image_size, spec.judge_per_code)
    summary = {
        "spec": spec.to_dict(),
        "rule": {"valid_id_acc": VALID_ID_ACC, "min_seeds": MIN_SEEDS, "bootstrap": BOOTSTRAP, "threshold": 0.5},
        "judge": judge,
        "rows": [r.to_dict() for r in rows],
        "verdict": verdict(rows),
    }
    write_json(out / SUMMARY, summary)
    table = table_markdown(rows, judge, run_minutes(spec, out))
    atomic_write(out / TABLE, table + "\n" + summary["verdict"]["sentence"] + "\n\n" + drawn_sentence(rows) + "\n")
    if figure:
        write_figure(spec, out)
    return summary


def png_bytes(image: Any) -> bytes:
    """An RGB image ``[H, W, 3]`` in [0, 1] as 8-bit PNG bytes (through Pillow)."""
    import io

    import numpy as np
    from PIL import Image

    pixels = (np.clip(np.asarray(image, dtype=float), 0, 1) * 255 + 0.5).astype(np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"an RGB image is [H, W, 3], got shape {pixels.shape}")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_figure(spec: ConceptStudySpec, out: str | Path) -> Path:
    """``OUT/fig6b.png``, like the journal's Fig. 6B: a row per gamma (in the spec's order, top
    to bottom), the first seed's first ``figure_samples`` samples of 010 (small red circle),
    then, after a gap, those of 011 (small blue circle): the very images its run judged
    (seeded alike; at most the size's ``eval_samples``, all a run draws), 2 pixels apart on
    grey; a gamma whose first seed has not completed is a grey row."""
    import numpy as np

    from training.launch.folders import load_diffusion_run
    from training.trainer.diffusion import sample_code

    first = next(iter(spec.configs().values()))
    out, k, size = Path(out), min(spec.figure_samples, first.data.eval_samples), first.model.image_size
    pad, gap = 2, size // 2
    width = len(UNSEEN_CODES) * k * (size + pad) + (len(UNSEEN_CODES) - 1) * gap + pad
    grid = np.full((len(spec.gammas) * (size + pad) + pad, width, 3), 0.6)
    for row, gamma in enumerate(spec.gammas):
        try:
            loaded = load_diffusion_run(out / f"gamma-{gamma:g}-seed-{spec.seeds[0]}")
        except ValueError:
            continue
        top = pad + row * (size + pad)
        for j, code in enumerate(UNSEEN_CODES):
            images = sample_code(loaded.model, loaded.config, code, k).permute(0, 2, 3, 1).numpy()
            for i in range(k):
                left = pad + j * (k * (size + pad) + gap) + i * (size + pad)
                grid[top : top + size, left : left + size] = images[i]
    path = out / FIGURE
    atomic_write(path, png_bytes(grid))
    return path


def check_trained(spec: ConceptStudySpec, out: str | Path) -> list[str]:
    """The runs of the study that have not completed, by name (what a rerun trains or resumes)."""
    return [name for name in spec.configs() if RunFolder(Path(out) / name).status() != RunStatus.COMPLETED]
