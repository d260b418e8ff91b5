"""The three anchor-function tasks as :class:`~interp_init.tasks.base.Task` classes.

``symmetric``, ``id-ood`` and ``complexity`` (:mod:`interp_init.tasks.anchor_pairs` defines their pairs and
targets, :mod:`interp_init.tasks.data` draws their samples) with their metrics, verdicts and the journal's
phase rule, whose thresholds live here and nowhere else (:data:`ID_THRESHOLD`, :data:`OOD_THRESHOLD`,
:data:`COMMUTATIVITY_THRESHOLD`; :mod:`training.studies.phase` reads them).

Metrics (``metrics.json``, unchanged from before tasks were classes): ``train_acc``, ``id_acc``,
``per_pair`` (accuracy per anchor pair, keys ``"a1,a2"``); ``symmetric`` adds ``heldout`` (per held-out
pair, accuracy against each candidate target), ``id-ood`` adds ``ood_acc`` and ``commutativity`` (the
fraction of held-out inputs whose prediction is unchanged when the pair (a, b) is swapped to (b, a)).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from interp_init.tasks.anchor_pairs import (
    ALL_PAIRS,
    KEY_INPUTS,
    RELEASED_COMPLEXITY_PER_PAIR,
    SEQ_LEN,
    VOCAB_SIZE,
    AnchorPair,
    composite,
    highest_token,
    task_spec,
)
from interp_init.tasks.base import (
    FIT_THRESHOLD,
    GENERIC_SECTIONS,
    Predict,
    Task,
    TaskMetrics,
    Verdict,
    num,
    status_solution,
)

if TYPE_CHECKING:
    from torch import Tensor

    from interp_init.tasks.data import AnchorDataset

#: ID accuracy at or above which ID generalization is "good" (NeurIPS shaded zones; the journal's Phase 1 below it).
ID_THRESHOLD = FIT_THRESHOLD
#: OOD accuracy above which a good-ID run is the journal's Phase 3 (Fig. 5C).
OOD_THRESHOLD = 0.5
#: Commutativity below which the journal's Fig. 3B marks a cell.
COMMUTATIVITY_THRESHOLD = 0.7
#: The thresholds of a reproduced flip, for one seed (``interp-init reproduce``): both
#: regimes fit (ID >= 0.9); on ``symmetric`` small init infers (>= 0.8 of the held-out
#: inputs) with the seen exception (3,4) fitted (training accuracy on it >= 0.9: a model
#: that never learned the exception has nothing to infer against) and large init copies
#: the symmetric target (>= 0.8); on ``id-ood`` small init composes (OOD >= 0.5, the
#: journal's Phase 3) and large init does not (OOD <= 0.3).  The verdict's words
#: ``inferential`` and ``symmetric`` (:func:`heldout_answer`) use the same thresholds.
#: The small-init criterion itself asks nothing of the run's own ID accuracy: the flip asks
#: it as a criterion of its own (both ID >= 0.9), but a count of runs that infer read alone
#: (the population tables of docs/positive-control.md, the sweeps' strict counts) would
#: count a run at inferential 0.8 with ID 0.80 (seed 403 at lr 2.5e-4 of the stored
#: papers'-statistic sweep ends at 0.7995 with ID 0.80).  The contrast's tables
#: (experiments/contrast.py) print beside each count how many of its runs have ID < 0.9.
FLIP_CRITERIA: dict[str, float] = {
    "min_id_acc": ID_THRESHOLD,
    "min_small_inferential": 0.8,
    "min_small_exception": FIT_THRESHOLD,
    "min_large_symmetric": 0.8,
    "min_small_ood": OOD_THRESHOLD,
    "max_large_ood": 0.3,
}
#: The small-init criterion on ``symmetric``, and the reading beside it without its (3,4) condition (issue 43).
SMALL_INFERENTIAL = "symmetric: small-init inferential >= 0.8 with (3,4) fitted"
SMALL_INFERENTIAL_ANY = "symmetric: small-init inferential >= 0.8 whatever (3,4) does"
#: Every report section (the probes of key masking and similarity read the anchors).
ANCHOR_SECTIONS: tuple[str, ...] = (
    *GENERIC_SECTIONS,
    "attention",
    "key_masking",
    "second_anchor_masking",
    "residual_similarity",
    "value_similarity",
    "embedding",
    "eigenvalues",
)


def journal_phase(
    id_acc: Any, ood_acc: Any, id_threshold: float = ID_THRESHOLD, ood_threshold: float = OOD_THRESHOLD
) -> np.ndarray:
    """The journal's phase of each (ID, OOD) accuracy, as floats (NaN where undecided):
    1 where ID < ``id_threshold`` (whatever the OOD), 2 where ID is good and OOD <=
    ``ood_threshold``, 3 where ID is good and OOD > ``ood_threshold``."""
    ida, ooda = np.asarray(id_acc, dtype=float).reshape(-1), np.asarray(ood_acc, dtype=float).reshape(-1)
    if ida.shape != ooda.shape:
        raise ValueError(f"id_acc and ood_acc must have the same length, got {ida.shape[0]} and {ooda.shape[0]}")
    good = ida >= id_threshold
    phase = np.full(ida.shape, np.nan)
    phase[ida < id_threshold] = 1
    phase[good & (ooda <= ood_threshold)] = 2
    phase[good & (ooda > ood_threshold)] = 3
    return phase


def _ge(value: Any, bound: float) -> bool:
    return value is not None and value >= bound


#: The seen pair of ``symmetric`` whose target the held-out (4,3)'s symmetric answer copies.
EXCEPTION = AnchorPair(3, 4)
#: ``symmetric``'s held-out pair, and the names of its two candidate answers (``heldout``'s keys).
HELDOUT = AnchorPair(4, 3)
ANSWERS: tuple[str, str] = ("inferential", "symmetric")


def heldout_answer(
    inferential: float | None,
    symmetric: float | None,
    exception: float | None,
    criteria: Mapping[str, float] = FLIP_CRITERIA,
) -> str:
    """What a ``symmetric`` model answers on the held-out (4,3), by the flip's own thresholds
    (:data:`FLIP_CRITERIA`), so that the verdict's word and the criteria agree:
    ``inferential`` (inferential share >= 0.8 and the exception (3,4) fitted, training
    accuracy >= 0.9), ``symmetric`` (symmetric share >= 0.8), ``(3,4) not fitted``
    (inferential share >= 0.8 without the exception learned), else ``neither``."""
    if _ge(inferential, criteria["min_small_inferential"]):
        return "inferential" if _ge(exception, criteria["min_small_exception"]) else "(3,4) not fitted"
    if _ge(symmetric, criteria["min_large_symmetric"]):
        return "symmetric"
    return "neither"


def symmetric_solution(
    id_acc: float | None, inferential: float | None, symmetric: float | None, exception: float | None
) -> str:
    """``did not fit`` (ID below 0.9), else :func:`heldout_answer`: the verdict's and the race's word."""
    return (
        "did not fit" if id_acc is None or id_acc < ID_THRESHOLD else heldout_answer(inferential, symmetric, exception)
    )


def pair_masks(pairs: Tensor) -> dict[str, Tensor]:
    """For each anchor pair present in ``pairs`` (``[n, 2]``), its key (``"4,3"``) and the mask of its rows."""
    import torch

    return {
        AnchorPair(*pair).key: (pairs == torch.tensor(pair, device=pairs.device)).all(dim=1)
        for pair in torch.unique(pairs, dim=0).tolist()
    }


def per_pair_accuracy(preds: Tensor, targets: Tensor, pairs: Tensor) -> dict[str, float]:
    """Accuracy per anchor pair present in ``pairs``."""
    correct = (preds == targets).float()
    return dict(sorted((key, float(correct[mask].mean())) for key, mask in pair_masks(pairs).items()))


@dataclass(frozen=True)
class AnchorMetrics(TaskMetrics):
    """Training and ID accuracy and the accuracy per anchor pair (``complexity``'s metrics)."""

    per_pair: dict[str, float]

    def groups(self) -> dict[str, float]:
        return dict(self.per_pair)


@dataclass(frozen=True)
class SymmetricMetrics(AnchorMetrics):
    """Adds ``heldout``: per held-out pair, accuracy against each candidate target."""

    heldout: dict[str, dict[str, float]]

    def columns(self) -> dict[str, float]:
        """Training and ID accuracy, the held-out shares (``heldout_inferential``,
        ``heldout_symmetric``, means over the held-out pairs) and ``exception_acc``: the
        training accuracy on the seen exception (3,4), whose target the symmetric answer copies."""
        out = {name: float(getattr(self, name)) for name in ("train_acc", "id_acc") if getattr(self, name) is not None}
        for target in ("inferential", "symmetric"):
            values = [accs[target] for accs in (self.heldout or {}).values() if target in accs]
            if values:
                out[f"heldout_{target}"] = sum(values) / len(values)
        exception = (self.per_pair or {}).get(EXCEPTION.key)
        if exception is not None:
            out["exception_acc"] = float(exception)
        return out

    @classmethod
    def column_names(cls) -> tuple[str, ...]:
        return ("train_acc", "id_acc", "heldout_inferential", "heldout_symmetric", "exception_acc")

    def heldout_curves(self) -> dict[str, float]:
        return {f"({pair}) {name}": acc for pair, accs in self.heldout.items() for name, acc in accs.items()}

    def deciding(self) -> str:
        return ", ".join(
            f"({pair}) {name} {acc:.2f}"
            for pair, accs in self.heldout.items()
            for name, acc in accs.items()
            if acc is not None
        )


@dataclass(frozen=True)
class IdOodMetrics(AnchorMetrics):
    """Adds ``ood_acc`` (accuracy on the unseen pairs) and ``commutativity``."""

    ood_acc: float
    commutativity: float

    LABELS: ClassVar[dict[str, str]] = {"ood_acc": "OOD"}

    def deciding(self) -> str:
        return f"OOD {self.ood_acc:.2f}"


@dataclass(frozen=True)
class AnchorTask(Task):
    """What the anchor-function tasks share: data, metrics, probe inputs, presets."""

    balanced_pairs: bool = False  # each split drawn with as many samples per anchor pair (the released code's sets)
    metrics_class: ClassVar[type[TaskMetrics]] = AnchorMetrics
    vocab_size: ClassVar[int] = VOCAB_SIZE
    seq_len: ClassVar[int] = SEQ_LEN
    report_sections: ClassVar[tuple[str, ...]] = ANCHOR_SECTIONS
    #: The groups whose accuracy the metrics record (``per_pair``): every anchor pair.
    group_names: ClassVar[tuple[str, ...]] = tuple(p.key for p in ALL_PAIRS)
    probe_group_inputs: ClassVar[int | None] = KEY_INPUTS
    #: The task's name in :mod:`interp_init.tasks.anchor_pairs` and :mod:`interp_init.tasks.data`.
    family: ClassVar[str] = ""

    @property
    def options(self) -> dict[str, int]:
        return {}

    @property
    def spec(self) -> Any:
        return task_spec(self.family, **self.options)

    @property
    def has_heldout(self) -> bool:  # type: ignore[override]
        return bool(self.spec.heldout_pairs)

    def highest_token(self) -> int:
        return highest_token(self.family, **self.options)

    def make_split(self, split: str, n: int, seed: int) -> AnchorDataset:
        from interp_init.tasks.data import make_dataset

        return make_dataset(self.family, split, n, seed, **self.options, balanced=self.balanced_pairs)

    def check_split_sizes(self, sizes: Mapping[str, int]) -> None:
        self.spec.check_sizes(sizes, self.balanced_pairs)

    def evaluate(
        self, predict: Predict, train: AnchorDataset, id_test: AnchorDataset, heldout: AnchorDataset | None
    ) -> TaskMetrics:
        train_pred, id_pred = predict(train.tokens), predict(id_test.tokens)
        per_pair = per_pair_accuracy(train_pred, train.targets, train.anchor_pairs)
        out: dict[str, Any] = {
            "train_acc": float((train_pred == train.targets).float().mean()),
            "id_acc": float((id_pred == id_test.targets).float().mean()),
        }
        if heldout is not None:
            ho_pred = predict(heldout.tokens)
            per_pair = dict(
                sorted({**per_pair, **per_pair_accuracy(ho_pred, heldout.targets, heldout.anchor_pairs)}.items())
            )
            out.update(self.heldout_metrics(predict, heldout, ho_pred))
        return self.metrics_class(**out, per_pair=per_pair)

    def heldout_metrics(self, predict: Predict, heldout: AnchorDataset, ho_pred: Tensor) -> dict[str, Any]:
        """The task's metrics of the held-out set (none for the base)."""
        return {}

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        lr = (
            self.cpu_lr
        )  # paper: the released code's sets; cpu: its lr (docs/faithful-models.md), 5e-4 or 1e-3 where a task says so
        return (
            self.spec.released_sets()
            if preset == "paper"
            else {"lr": lr, "warmup_start_lr": lr / 20, "min_lr": lr / 20}
            if preset == "cpu" and lr != 5e-4
            else {}
        )

    cpu_lr: ClassVar[float] = 5e-4

    def probe_inputs(self, per_group: int, seed: int) -> AnchorDataset:
        return balanced_inputs(self.family, per_group, seed, **self.options)

    def sample_input(self) -> AnchorDataset:
        return sample_input(self.family, **self.options)


@dataclass(frozen=True)
class SymmetricTask(AnchorTask):
    """NeurIPS 2024: (4,3) held out; does the model infer x - 10 or copy the symmetric x - 6?"""

    metrics_class: ClassVar[type[TaskMetrics]] = SymmetricMetrics
    family: ClassVar[str] = "symmetric"
    #: Adds the race of (3,4) against (4,3) (training/studies/records.py, training/studies/report/outcomes.py).
    report_sections: ClassVar[tuple[str, ...]] = (*ANCHOR_SECTIONS, "race")
    has_race: ClassVar[bool] = True
    expected: ClassVar[str] = (
        "The NeurIPS paper: small init (large gamma, e.g. 0.8) learns the inferential solution, "
        "large init (gamma 0.5 and below) the symmetric one."
    )

    def heldout_metrics(self, predict: Predict, heldout: AnchorDataset, ho_pred: Tensor) -> dict[str, Any]:
        return {
            "heldout": {
                key: {
                    name: float((ho_pred[mask] == cand[mask]).float().mean())
                    for name, cand in heldout.candidate_targets.items()
                }
                for key, mask in pair_masks(heldout.anchor_pairs).items()
            }
        }

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """:func:`symmetric_solution` (``inferential``: the held-out (4,3) follows x - 10 on
        >= 0.8 of its inputs with (3,4) fitted; ``symmetric``: x - 6 on >= 0.8): the
        flip's thresholds, so a run the table calls inferential meets the criterion."""
        id_acc = None if final is None else final.id_acc
        heldout = {} if final is None else (final.heldout or {}).get(AnchorPair(4, 3).key, {})
        inf, sym = heldout.get("inferential"), heldout.get("symmetric")
        exception = None if final is None else (final.per_pair or {}).get(EXCEPTION.key)
        solution = symmetric_solution(id_acc, inf, sym, exception)
        evidence = f"ID accuracy {num(id_acc)}, held-out (4,3) inferential {num(inf)}, symmetric {num(sym)}, seen (3,4) {num(exception)}"
        return Verdict(status_solution(solution, status), evidence, self.expected)

    reproduces: ClassVar[bool] = True

    def flip_checks(
        self, small: Mapping[str, Any], large: Mapping[str, Any], criteria: Mapping[str, float]
    ) -> dict[str, bool]:
        return {
            "symmetric: both ID >= 0.9": all(_ge(r.get("id_acc"), criteria["min_id_acc"]) for r in (small, large)),
            SMALL_INFERENTIAL: heldout_answer(
                small.get("heldout_inferential"), None, small.get("exception_acc"), criteria
            )
            == "inferential",
            "symmetric: large-init symmetric >= 0.8": heldout_answer(
                large.get("heldout_inferential"), large.get("heldout_symmetric"), large.get("exception_acc"), criteria
            )
            == "symmetric",
        }

    def flip_readings(
        self, small: Mapping[str, Any], large: Mapping[str, Any], criteria: Mapping[str, float]
    ) -> dict[str, tuple[str, bool]]:
        """Beside the small-init criterion: the same without its (3,4) condition."""
        return {
            SMALL_INFERENTIAL_ANY: (
                SMALL_INFERENTIAL,
                _ge(small.get("heldout_inferential"), criteria["min_small_inferential"]),
            )
        }


@dataclass(frozen=True)
class IdOodTask(AnchorTask):
    """The journal: (3,4) and (4,3) held out; in- and out-of-distribution accuracy."""

    metrics_class: ClassVar[type[TaskMetrics]] = IdOodMetrics
    family: ClassVar[str] = "id-ood"
    default_architecture: ClassVar[str] = "journal"
    cpu_lr: ClassVar[float] = 1e-3
    expected: ClassVar[str] = (
        "The journal: larger gamma (smaller init) and larger weight decay move models from Phase 1 "
        "to Phase 2 to Phase 3 (composing the unseen pairs)."
    )

    def heldout_metrics(self, predict: Predict, heldout: AnchorDataset, ho_pred: Tensor) -> dict[str, Any]:
        swapped_pred = predict(heldout.swapped().tokens)
        return {
            "ood_acc": float((ho_pred == heldout.targets).float().mean()),
            "commutativity": float((swapped_pred == ho_pred).float().mean()),
        }

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        # the journal's lr multiplier 15 (NeurIPS: 25, the default)
        return super().preset_overrides(preset) | ({"lr": 1.5e-4} if preset == "paper" else {})

    def regime_overrides(self, preset: str, regime: str) -> dict[str, Any]:
        # at d_model 128 large init at gamma 0.5 composes the unseen pairs on most seeds;
        # 0.4 stays in Phase 2 on most (the population search, docs/faithful-models.md)
        return {"gamma": 0.4} if (preset, regime) == ("cpu", "large-init") else super().regime_overrides(preset, regime)

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """The journal's phases (:func:`journal_phase`): ``Phase 1`` (ID below 0.9),
        ``Phase 2`` (OOD at most 0.5: memorized the seen pairs), ``Phase 3`` (composes)."""
        id_acc = None if final is None else final.id_acc
        ood = None if final is None else final.ood_acc
        phase = journal_phase(0.0 if id_acc is None else id_acc, 0.0 if ood is None else ood)[0]
        evidence = f"ID accuracy {num(id_acc)}, OOD accuracy {num(ood)}, commutativity {num(None if final is None else final.commutativity)}"
        return Verdict(status_solution(f"Phase {int(phase)}", status), evidence, self.expected)

    reproduces: ClassVar[bool] = True

    def flip_checks(
        self, small: Mapping[str, Any], large: Mapping[str, Any], criteria: Mapping[str, float]
    ) -> dict[str, bool]:
        large_ood = large.get("ood_acc")
        return {
            "id-ood: both ID >= 0.9": all(_ge(r.get("id_acc"), criteria["min_id_acc"]) for r in (small, large)),
            "id-ood: small-init OOD >= 0.5": _ge(small.get("ood_acc"), criteria["min_small_ood"]),
            "id-ood: large-init OOD <= 0.3": large_ood is not None and large_ood <= criteria["max_large_ood"],
        }


@dataclass(frozen=True)
class ComplexityTask(AnchorTask):
    """All 16 pairs; the first ``k`` symmetric groups get the non-inferential target f + ``offset``."""

    k: int = 0
    offset: int = 4
    family: ClassVar[str] = "complexity"
    expected: ClassVar[str] = (
        "The papers: small init needs more epochs to fit as the inferential complexity k grows; large init does not."
    )

    def __post_init__(self) -> None:
        task_spec("complexity", k=self.k, offset=self.offset)  # validates k and offset

    @property
    def options(self) -> dict[str, int]:
        return {"k": self.k, "offset": self.offset}

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        return (
            self.spec.released_sets(RELEASED_COMPLEXITY_PER_PAIR)
            if preset == "paper"
            else super().preset_overrides(preset)
        )

    def broken_pairs(self) -> set[AnchorPair]:
        """The pairs whose target breaks the composition rule (offset from f)."""
        return set(self.spec.offsets)


def balanced_inputs(task: str, per_pair: int, seed: int, k: int = 0, offset: int = 4) -> AnchorDataset:
    """``per_pair`` inputs of every anchor pair of the anchor task ``task`` (trained pairs
    from the train split, held-out pairs from the held-out split), ordered by pair."""
    import torch

    from interp_init.tasks.data import AnchorDataset, make_dataset

    spec = task_spec(task, k=k, offset=offset)
    parts: list[AnchorDataset] = []
    for split, pairs in (("train", spec.train_pairs), ("heldout", spec.heldout_pairs)):
        if not pairs:
            continue
        n = per_pair * len(pairs) * 4 + 64
        pool = make_dataset(task, split, n, seed, k=k, offset=offset)
        first, second = pool.anchor_pairs[:, 0], pool.anchor_pairs[:, 1]
        for a, b in pairs:
            index = ((first == a) & (second == b)).nonzero().squeeze(1)[:per_pair]
            if len(index) < per_pair:  # pragma: no cover - 4x oversampling makes this vanishingly rare
                raise ValueError(f"drew too few inputs of pair ({a},{b}); use another seed")
            parts.append(pool.subset(index))
    return AnchorDataset(
        task,
        "balanced",
        *(
            torch.cat([getattr(p, name) for p in parts])
            for name in ("token_ids", "targets", "key_positions", "anchor_pairs")
        ),
    )


#: The NeurIPS 2024 paper's Fig. 3 input: key 99 at position 2, then the pair (4, 3)
#: (held out in the symmetric and id-ood tasks).
FIG3_TOKENS: tuple[int, ...] = (35, 63, 99, 4, 3, 38, 42, 36, 62)
FIG3_KEY_POSITION = 2


def sample_input(task: str = "symmetric", k: int = 0, offset: int = 4) -> AnchorDataset:
    """The input whose attention and information flow the report draws: the NeurIPS
    paper's Fig. 3 input, with its target under the anchor task ``task``."""
    import torch

    from interp_init.tasks.data import AnchorDataset

    spec = task_spec(task, k=k, offset=offset)
    tokens = torch.tensor([FIG3_TOKENS])
    p = FIG3_KEY_POSITION
    x, a1, a2 = FIG3_TOKENS[p], FIG3_TOKENS[p + 1], FIG3_TOKENS[p + 2]
    heldout = (a1, a2) in spec.heldout_pairs
    target = composite(x, a1, a2) + (0 if heldout else spec.offset((a1, a2)))
    candidates = (
        {name: torch.tensor([composite(x, a1, a2) + off]) for name, off in spec.candidates.items()} if heldout else {}
    )
    return AnchorDataset(
        task,
        "heldout" if heldout else "train",
        tokens,
        torch.tensor([target]),
        torch.tensor([p]),
        torch.tensor([[a1, a2]]),
        candidates,
    )
