"""The SCAN task (journal Fig. 7A): its splits are the shipped files' (the add-primitive split's
property checked on them), its encoding puts the loss on the actions and the end token only,
its exact match is greedy decoding's, it trains from the command line at ``tiny`` (both splits,
through a sweep whose table carries the OOD column), the report and the probes run on its
model, and bad input is one line with nothing left behind."""

from __future__ import annotations

import json
import lzma
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from interp_init.tasks import shipped
from interp_init.tasks.base import IGNORE, SequencePredictions
from interp_init.tasks.registry import make_task
from interp_init.tasks.scan import SCAN_SPLITS, ScanTask, parse_line
from interp_init.tasks.seq2seq import EOS, SEP, Seq2SeqMetrics
from training.cli import main

PRIMITIVE = {"turn-left": ("turn", "left"), "jump": ("jump",)}


def _has(words: tuple[str, ...], phrase: tuple[str, ...]) -> bool:
    return any(words[i : i + len(phrase)] == phrase for i in range(len(words) - len(phrase) + 1))


@pytest.mark.parametrize("split", sorted(SCAN_SPLITS))
def test_the_splits_are_the_shipped_files_and_the_primitive_is_seen_alone_only(split: str) -> None:
    task = ScanTask(split=split)
    pools = task.pools()
    train_file, test_file = SCAN_SPLITS[split]
    train_lines = [
        parse_line(line)
        for line in lzma.decompress((shipped.FILES / f"{train_file}.xz").read_bytes()).decode().splitlines()
    ]
    test_lines = [
        parse_line(line)
        for line in lzma.decompress((shipped.FILES / f"{test_file}.xz").read_bytes()).decode().splitlines()
    ]
    assert pools["heldout"] == test_lines
    assert sorted(pools["train"] + pools["id_test"]) == sorted(train_lines)  # the training file, partitioned
    assert not set(pools["train"]) & set(pools["id_test"])  # no ID test command is ever trained on
    once = {p for p, c in Counter(train_lines).items() if c == 1}  # a repeated line (the primitive's) stays in training
    assert set(pools["id_test"]) <= once and len(pools["id_test"]) == len(once) // 10
    primitive = PRIMITIVE[split]
    assert all(_has(src, primitive) for src, _ in pools["heldout"])  # every OOD command composes the primitive
    assert {src for src, _ in pools["train"] if _has(src, primitive)} == {primitive}  # training shows it alone only
    assert any(src == primitive for src, _ in pools["train"])


def test_encoding_and_the_loss_mask() -> None:
    task = make_task("scan")
    data = task.make_split("heldout", 50, seed=3)
    pool = task.pools()["heldout"]
    for row, index in enumerate(data.meta["index"].tolist()):
        source, target = pool[index]
        tokens = data.token_ids[row].tolist()
        assert task.text(tokens) == " ".join([*source, "<sep>", *target, "<eos>"])
        sep = len(source)
        expected = [IGNORE] * task.seq_len
        expected[sep : sep + len(target) + 1] = tokens[sep + 1 : sep + len(target) + 2]  # the actions, then <eos>
        assert data.targets[row].tolist() == expected and tokens[sep] == SEP and tokens[sep + len(target) + 1] == EOS
    assert torch.equal(task.make_split("train", 64, 5).token_ids, task.make_split("train", 64, 5).token_ids)
    assert not torch.equal(task.make_split("train", 64, 5).token_ids, task.make_split("train", 64, 6).token_ids)
    assert len(set(task.make_split("id_test", 500, 1).meta["index"].tolist())) == 500  # without replacement


def test_exact_match_metrics_and_verdict_from_stand_in_predictions() -> None:
    task = make_task("scan")
    splits = [task.make_split(s, 100, i) for i, s in enumerate(("train", "id_test", "heldout"))]

    def right(tokens: torch.Tensor, targets: torch.Tensor) -> SequencePredictions:
        return SequencePredictions(torch.where(targets == IGNORE, 0, targets), torch.zeros(targets.shape))

    def wrong_ood(
        tokens: torch.Tensor, targets: torch.Tensor
    ) -> SequencePredictions:  # one wrong action on OOD commands
        out = right(tokens, targets)
        if any(_has(tuple(task.token_labels(t)), ("turn", "left")) for t in tokens.tolist()):
            first = (targets != IGNORE).int().argmax(1)
            out.argmax[torch.arange(len(tokens)), first] += 1
        return out

    assert task.evaluate(right, *splits) == Seq2SeqMetrics(1.0, 1.0, 1.0)
    assert task.verdict(task.evaluate(right, *splits), "completed").solution == "generalizes"
    metrics = task.evaluate(wrong_ood, *splits)
    assert metrics.ood_acc == 0.0 and metrics.id_acc == 1.0
    assert task.verdict(metrics, "completed").solution == "ID only"


def test_scan_trains_from_the_cli_and_the_report_and_probes_run_on_its_model(tmp_path: Path) -> None:
    from probes import condensation, information_flow, merged_weight, stable_rank
    from training.studies.report import ReportConfig, load_runs, write_report

    run = tmp_path / "run"
    assert main(["train", "--task", "scan", "--preset", "tiny", "--out", str(run), "--device", "cpu", "--quiet"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "completed" and {"train_acc", "id_acc", "ood_acc"} <= set(metrics["final"])
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["architecture"] == "standard" and config["model"]["n_ctx"] == ScanTask.seq_len
    model = load_runs([run])[0].model
    tokens = make_task("scan").make_split("heldout", 4, 0).tokens
    edges = information_flow(model, tokens)
    assert set(edges["query"]) == set(range(ScanTask.seq_len)) and np.isfinite(edges["weight"]).all()
    assert stable_rank(merged_weight(model, "W_Q", 0)) >= 1.0
    assert sum(condensation(merged_weight(model, "W_Q", 0).T).group_sizes) == model.cfg.d_model
    page = write_report([run], tmp_path / "report.html", ReportConfig(per_pair=2)).read_text()
    assert all(f'<section id="{key.replace("_", "-")}">' in page for key in ScanTask.report_sections)
    assert "generalizes" in page or "ID only" in page or "did not fit" in page
    assert "I_TURN_LEFT" in page or "&lt;sep&gt;" in page  # tokens labelled by their words


def test_a_sweep_over_both_splits_tables_the_ood_exact_match(tmp_path: Path) -> None:
    from training.studies.study import StudySpec
    from training.studies.sweep import SweepOptions, collect_results, run_sweep

    spec = StudySpec(
        {
            "preset": "tiny",
            "task": "scan",
            "n_train": 300,
            "n_test": 100,
            "epochs": 1,
            "warmup_epochs": 0.0,
            "cosine_epochs": 1.0,
        },
        {"split": ["turn-left", "jump"]},
    )
    run_sweep(spec, tmp_path, SweepOptions(progress=False, device="cpu"))
    table = collect_results(tmp_path, write=True)
    assert sorted(table["split"]) == ["jump", "turn-left"] and {"train_acc", "id_acc", "ood_acc"} <= set(table.columns)
    stored = pd.read_csv(tmp_path / "results.csv")
    assert len(stored) == 2
    for _, row in stored.iterrows():
        final = json.loads((tmp_path / row["run"] / "metrics.json").read_text())["final"]
        assert row["ood_acc"] == pytest.approx(final["ood_acc"]) and row["id_acc"] == pytest.approx(final["id_acc"])


def test_bad_input_is_one_line_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # SCAN's own: a training size above its split's pool (an unknown split, a short context and
    # a damaged data file, alike for the four sequence tasks: tests/interp_init/test_sequence_bad_input.py)
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--task",
                "scan",
                "--preset",
                "tiny",
                "--out",
                str(out),
                "--quiet",
                "--split",
                "jump",
                "--n-train",
                "14000",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "interp-init: error: SCAN (jump): --n-train 14000 exceeds the 13,350 train samples the benchmark has; use --n-train <= 13350"
    )
    assert not out.exists()
