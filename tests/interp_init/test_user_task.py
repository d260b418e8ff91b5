"""A researcher's own task, defined here and named ``test_user_task:LastTokenTask``: it
trains from the command line, its metrics reach the sweep's results.csv and the report;
examples/custom_task.py does the same end to end."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import torch

from interp_init.tasks.base import Samples, Task, TaskMetrics
from training.cli import main

TASK = "test_user_task:LastTokenTask"


@dataclass(frozen=True)
class LastTokenMetrics(TaskMetrics):
    unseen_acc: float


@dataclass(frozen=True)
class LastTokenTask(Task):
    """Repeat the first of three tokens 0..15; inputs starting with 15 are held out."""

    metrics_class: ClassVar[type[TaskMetrics]] = LastTokenMetrics
    vocab_size: ClassVar[int] = 16
    seq_len: ClassVar[int] = 3

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        rng = np.random.default_rng([seed, ("train", "id_test", "heldout").index(split)])
        tokens = torch.from_numpy(rng.integers(0, 16, size=(n, 3)))
        tokens[:, 0] = 15 if split == "heldout" else tokens[:, 0] % 15
        return Samples(self.name, split, tokens, tokens[:, 0].clone(), {})

    def evaluate(self, predict, train: Samples, id_test: Samples, heldout: Samples | None) -> LastTokenMetrics:
        def acc(data: Samples) -> float:
            return float((predict(data.tokens) == data.targets).float().mean())

        return LastTokenMetrics(acc(train), acc(id_test), acc(heldout))


SMALL = ["--preset", "tiny", "--device", "cpu", "--quiet", "--n-train", "512", "--epochs", "2"]


def test_a_user_task_trains_from_the_cli_and_reaches_the_sweep_table_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--task", TASK, *SMALL, "--out", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["status"] == "completed" and set(metrics["final"]) >= {"train_acc", "id_acc", "unseen_acc"}
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["d_vocab"] == 16

    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {"base": {"preset": "tiny", "task": TASK, "n_train": 512, "epochs": 2}, "grid": {"gamma": [0.5, 0.8]}}
        )
    )
    assert main(["sweep", str(spec), "--out", str(tmp_path / "sweep"), "--device", "cpu", "--quiet"]) == 0
    table = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert list(table["task"]) == [TASK, TASK] and table["unseen_acc"].notna().all()
    for run, acc in zip(table["run"], table["unseen_acc"], strict=True):
        assert acc == pytest.approx(
            json.loads((tmp_path / "sweep" / run / "metrics.json").read_text())["final"]["unseen_acc"]
        )

    assert main(["report", str(tmp_path / "sweep"), "--out", str(tmp_path / "report.html"), "--per-pair", "2"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "unseen_acc" in page and '<section id="flow">' in page and '<section id="key_masking">' in page
    assert "not a section of the task(s)" in page  # the anchor tasks' probes: noted, not run


def test_a_task_path_that_is_not_a_task_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--task", "test_user_task:LastTokenMetrics", *SMALL, "--out", str(tmp_path / "a")]) == 2
    assert "not a subclass of interp_init.tasks.base.Task" in capsys.readouterr().err
    assert main(["reproduce", "--task", TASK, "--preset", "tiny", "--out", str(tmp_path / "b")]) == 2
    assert "has no small-init / large-init flip to reproduce" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_custom_task_example_writes_a_completed_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_examples import EXAMPLES, run_script

    monkeypatch.syspath_prepend(str(EXAMPLES))  # as a script run has its folder on the path (runpy's does not)
    stdout = run_script(EXAMPLES / "custom_task.py", ["--out", str(tmp_path), "--device", "cpu"], monkeypatch)
    metrics = json.loads((tmp_path / "mod-sum" / "metrics.json").read_text())
    assert metrics["status"] == "completed" and "heldout_acc" in metrics["final"]
    assert (
        tmp_path / "mod-sum" / "model.safetensors"
    ).is_file() and f"report: {tmp_path / 'custom_task.html'}" in stdout
