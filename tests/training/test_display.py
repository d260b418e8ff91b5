"""Results a user shows in Jupyter display as tables: a training result and a sweep's summary
(the probes' results: tests/probes/test_api.py; circuit views: tests/probes/test_flow.py)."""

from __future__ import annotations

import pandas as pd

from interp_init import InitConfig, ModelConfig, build_model
from training import make_run_config
from training.studies.sweep.runner import SweepSummary
from training.trainer.loop import TrainResult


def test_a_training_result_displays_its_run_and_final_numbers() -> None:
    cfg = make_run_config("tiny", task="symmetric", gamma=0.8, seed=3)
    model = build_model(
        ModelConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, d_mlp=16), InitConfig(gamma=0.8), seed=0
    )
    metrics = {
        "status": "completed",
        "final": {
            "id_acc": 0.25,
            "per_pair": {"1,2": 0.5},
            "heldout": {"4,3": {"inferential": 0.125, "symmetric": 0.75}},
        },
    }
    page = TrainResult(model, metrics, cfg)._repr_html_()
    assert page.startswith("<p><b>TrainResult</b></p>") and page.count("<tr") == 2  # a header row and one run
    for cell in ("symmetric", "neurips", "0.8", ">3<", "completed", "0.25", "heldout 4,3 inferential", "0.125", "0.75"):
        assert cell in page, cell
    assert "per_pair" not in page  # sixteen columns a reader does not want first


def test_a_sweep_summary_displays_its_counts_and_results() -> None:
    results = pd.DataFrame(
        {"run": ["a", "b", "c"], "status": ["completed", "completed", "failed"], "id_acc": [0.5, 0.75, None]}
    )
    summary = SweepSummary({"a": "completed", "b": "completed", "c": "failed"}, ("a",), results)
    page = summary._repr_html_()
    assert page.startswith(
        "<p><b>SweepSummary</b>: 3 runs (2 completed, 1 failed); 1 already done before this call</p>"
    )
    assert page.count("<tr") == 4 and "0.75" in page
