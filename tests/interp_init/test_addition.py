"""The addition task with a held-out square (journal Fig. 7C): its data never put a square
pair into training, it trains from the command line, the probes run on its models, its
report sections come from the task, and the Fig. 7C figure draws a gamma x weight decay table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interp_init.tasks.addition import EQUALS, PLUS, AdditionMetrics, AdditionTask
from interp_init.tasks.registry import make_task
from training.cli import main


@st.composite
def _tasks(draw: st.DrawFn) -> AdditionTask:
    n = draw(st.integers(2, 99))
    size = draw(st.integers(1, n - 1))
    return AdditionTask(n_operands=n, square_low=draw(st.integers(0, n - size)), square_size=size)


@settings(max_examples=60, deadline=None)
@given(task=_tasks(), seed=st.integers(0, 2**32 - 1))
def test_no_pair_of_the_held_out_square_ever_enters_training(task: AdditionTask, seed: int) -> None:
    train = task.make_split("train", 500, seed)
    a, b = train.meta["a"].numpy(), train.meta["b"].numpy()
    assert not task.in_square(a, b).any()
    # the tokens say the same: [a, +, b, =] with target a + b, operands in range
    tokens = train.tokens.numpy()
    assert (
        (tokens[:, 0] == a).all()
        and (tokens[:, 2] == b).all()
        and (tokens[:, 1] == PLUS).all()
        and (tokens[:, 3] == EQUALS).all()
    )
    assert (train.targets.numpy() == a + b).all() and (a < task.n_operands).all() and (b < task.n_operands).all()
    # every square pair is held out, and the three splits partition the grid
    splits = [{tuple(p) for p in task.pairs(s).tolist()} for s in ("train", "id_test", "heldout")]
    assert splits[2] == {(x, y) for x in range(task.n_operands) for y in range(task.n_operands) if task.in_square(x, y)}
    assert sum(map(len, splits)) == task.n_operands**2 and not (splits[0] & splits[1])


def test_the_same_seed_draws_the_same_samples_and_bad_squares_are_refused() -> None:
    task = make_task("addition")
    assert torch.equal(task.make_split("train", 64, 5).token_ids, task.make_split("train", 64, 5).token_ids)
    assert not torch.equal(task.make_split("train", 64, 5).token_ids, task.make_split("train", 64, 6).token_ids)
    with pytest.raises(ValueError, match="does not fit in the operands"):
        AdditionTask(square_low=90, square_size=20)
    with pytest.raises(ValueError, match="sums above 198"):
        AdditionTask(n_operands=101)


def test_metrics_and_verdict_from_an_exact_adder() -> None:
    task = make_task("addition")
    splits = [task.make_split(s, 200, i) for i, s in enumerate(("train", "id_test", "heldout"))]

    def adder(tokens: torch.Tensor) -> torch.Tensor:
        return tokens[:, 0] + tokens[:, 2]

    def memorizer(tokens: torch.Tensor) -> torch.Tensor:  # right outside the square only
        return torch.where(torch.as_tensor(task.in_square(tokens[:, 0], tokens[:, 2])), 0, adder(tokens))

    assert task.evaluate(adder, *splits) == AdditionMetrics(1.0, 1.0, 1.0)
    assert task.verdict(task.evaluate(adder, *splits), "completed").solution == "rule-based"
    assert task.evaluate(memorizer, *splits) == AdditionMetrics(1.0, 1.0, 0.0)
    assert task.verdict(task.evaluate(memorizer, *splits), "completed").solution == "case-based"
    grid = task.accuracy_grid(memorizer)
    assert grid.shape == (100, 100) and grid[40:60, 40:60].sum() == 0 and grid.sum() == 100 * 100 - 400


def test_addition_trains_from_the_cli_and_the_probes_run_on_its_model(tmp_path: Path) -> None:
    from probes import condensation, information_flow, merged_weight, stable_rank
    from training.studies.report import ReportConfig, load_runs, write_report

    run = tmp_path / "run"
    assert (
        main(["train", "--task", "addition", "--preset", "tiny", "--out", str(run), "--device", "cpu", "--quiet"]) == 0
    )
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "completed" and {"train_acc", "id_acc", "square_acc"} <= set(metrics["final"])
    model = load_runs([run])[0].model
    tokens = make_task("addition").make_split("heldout", 8, 0).tokens
    edges = information_flow(model, tokens)
    assert set(edges["query"]) == {0, 1, 2, 3} and np.isfinite(edges["weight"]).all()
    assert stable_rank(merged_weight(model, "W_Q", 0)) >= 1.0
    assert sum(condensation(merged_weight(model, "W_Q", 0).T).group_sizes) == model.cfg.d_model
    page = write_report([run], tmp_path / "report.html", ReportConfig(per_pair=2)).read_text()
    # the task's sections, the anchor-only ones noted: the sections come from the task object
    assert all(f'<section id="{key.replace("_", "-")}">' in page for key in AdditionTask.report_sections)
    assert '<section id="key_masking">' in page and "not a section of the task(s) [&#x27;addition&#x27;]" in page
    assert "rule-based" in page or "case-based" in page or "did not fit" in page
    assert "x=" not in page.split('<section id="flow">')[1][:4000]  # no anchor labels on addition tokens


def test_the_fig7c_figure_draws_square_accuracy_over_weight_decay_and_gamma() -> None:
    from training.studies.phase import make_figures, supported_figures

    rows = []
    for gamma in (0.3, 0.8):
        for wd in (0.01, 1.0):
            for seed in (0, 1):
                square = 0.9 if gamma == 0.8 or wd == 1.0 else 0.1 + 0.05 * seed
                rows.append(
                    {
                        "run": f"g{gamma}wd{wd}s{seed}",
                        "gamma": gamma,
                        "weight_decay": wd,
                        "seed": seed,
                        "task": "addition",
                        "status": "completed",
                        "train_acc": 1.0,
                        "id_acc": 0.95,
                        "square_acc": square,
                    }
                )
    df = pd.DataFrame(rows)
    df.insert(df.columns.get_loc("status"), "lr", 1e-3)
    assert supported_figures(df) == ["journal_fig7c"]
    fig = make_figures(df)["journal_fig7c"]
    z = np.array(fig.data[0].z)
    assert z.shape == (2, 2) and z[0, 0] == pytest.approx(0.125) and z[1, 0] == z[0, 1] == z[1, 1] == pytest.approx(0.9)
