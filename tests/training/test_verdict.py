"""training.studies.records: a run's solution in the papers' terms, from its final metrics."""

from __future__ import annotations

import pytest

from training.studies.records import run_verdict


@pytest.mark.parametrize(
    ("inf", "sym", "id_acc", "exception", "solution"),
    [
        (0.85, 0.05, 0.99, 0.97, "inferential"),
        (0.85, 0.05, 0.99, 0.40, "(3,4) not fitted"),  # the exception never learned: not inferring
        (0.69, 0.00, 0.99, 0.99, "neither"),  # below the criterion's 0.8: not called inferential
        (0.02, 0.94, 1.00, 0.99, "symmetric"),
        (0.25, 0.11, 0.96, 0.99, "neither"),
        (0.45, 0.45, 0.96, 0.99, "neither"),
        (0.90, 0.00, 0.80, 0.99, "did not fit"),
    ],
)
def test_symmetric_task(inf: float, sym: float, id_acc: float, exception: float, solution: str) -> None:
    final = {
        "id_acc": id_acc,
        "heldout": {"4,3": {"inferential": inf, "symmetric": sym}},
        "per_pair": {"3,4": exception, "1,1": 1.0},
    }
    v = run_verdict("symmetric", final, "completed", stable_rank=2.04)
    assert v.solution == solution
    assert (
        v.evidence
        == f"ID accuracy {id_acc:.2f}, held-out (4,3) inferential {inf:.2f}, symmetric {sym:.2f}, seen (3,4) {exception:.2f}, stable rank of layer 0's W_Q 2.0"
    )
    assert "inferential" in v.expected and "symmetric" in v.expected


def test_verdict_word_race_mode_and_flip_criteria_agree() -> None:
    """One threshold, one word: a fitted model is called inferential (symmetric) by the
    report's verdict, ``infers`` (``early copy``) by the race, exactly when it meets the
    small-init (large-init) criterion of the flip, over a grid of final shares (0.69
    included) after an epoch at which (3,4) was fitted, so a run that fitted the exception
    once and lost it is not inferring anywhere."""
    from interp_init.tasks.base import read_run_metrics
    from interp_init.tasks.registry import make_task
    from training.studies.population import check_flip
    from training.studies.records import race_of

    def record(epoch: int, inf: float, sym: float, exception: float) -> dict:
        return {
            "epoch": epoch,
            "step": epoch,
            "loss": 0.1,
            "lr": 1e-3,
            "id_acc": 0.99,
            "train_acc": 0.99,
            "heldout": {"4,3": {"inferential": inf, "symmetric": sym}},
            "per_pair": {"3,4": exception},
        }

    grid = [(i / 20, s / 20, e / 10) for i in range(21) for s in range(21 - i) for e in (0, 8, 9, 10)]
    for inf, sym, exception in [*grid, (0.69, 0.0, 1.0), (0.69, 0.31, 1.0)]:
        final = record(2, inf, sym, exception)
        solution = run_verdict("symmetric", final, "completed").solution
        history = read_run_metrics(make_task("symmetric"), {"history": [record(1, 0.5, 0.1, 1.0), final]}).history
        mode = race_of(history).mode
        row = {"id_acc": 0.99, "heldout_inferential": inf, "heldout_symmetric": sym, "exception_acc": exception}
        checks = check_flip({"symmetric": {"small-init": row, "large-init": row}})
        small, large = (
            checks["symmetric: small-init inferential >= 0.8 with (3,4) fitted"],
            checks["symmetric: large-init symmetric >= 0.8"],
        )
        assert small == (solution == "inferential") == (mode == "infers"), (inf, sym, exception, solution, mode)
        assert large == (solution == "symmetric") == (mode == "early copy"), (inf, sym, exception, solution, mode)


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
