"""training.verdict: a run's solution in the papers' terms, from its final metrics."""

from __future__ import annotations

import pytest

from training.verdict import run_verdict


@pytest.mark.parametrize(
    ("inf", "sym", "id_acc", "solution"),
    [
        (0.85, 0.05, 0.99, "inferential"),
        (0.02, 0.94, 1.00, "symmetric"),
        (0.25, 0.11, 0.96, "neither"),
        (0.45, 0.45, 0.96, "neither"),
        (0.90, 0.00, 0.80, "did not fit"),
    ],
)
def test_symmetric_task(inf: float, sym: float, id_acc: float, solution: str) -> None:
    final = {"id_acc": id_acc, "heldout": {"4,3": {"inferential": inf, "symmetric": sym}}}
    v = run_verdict("symmetric", final, "completed", stable_rank=2.04)
    assert v.solution == solution
    assert v.evidence == f"ID accuracy {id_acc:.2f}, held-out (4,3) inferential {inf:.2f}, symmetric {sym:.2f}, layer-0 W_Q stable rank 2.0"
    assert "inferential" in v.expected and "symmetric" in v.expected


@pytest.mark.parametrize(
    ("id_acc", "ood", "phase"),
    [(0.5, 0.9, "Phase 1"), (0.99, 0.02, "Phase 2"), (0.99, 0.5, "Phase 2"), (0.99, 0.51, "Phase 3")],
)
def test_id_ood_phases(id_acc: float, ood: float, phase: str) -> None:
    v = run_verdict("id-ood", {"id_acc": id_acc, "ood_acc": ood, "commutativity": 0.7}, "completed")
    assert v.solution == phase
    assert f"OOD accuracy {ood:.2f}" in v.evidence and "stable rank" not in v.evidence


def test_unfinished_and_empty_runs_say_so() -> None:
    assert run_verdict("id-ood", {"id_acc": 0.99, "ood_acc": 0.8}, "diverged").solution == "diverged (Phase 3 so far)"
    v = run_verdict("symmetric", {}, "running")
    assert v.solution == "running (did not fit so far)" and "n/a" in v.evidence
    assert run_verdict("complexity", {"id_acc": 0.95}, "completed").solution == "fit"
