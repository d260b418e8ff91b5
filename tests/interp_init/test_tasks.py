"""Tasks as classes (interp_init.tasks.base): the registry, the anchor tasks' data and metrics
unchanged from before they were classes, typed metrics.json round trips, old run folders,
and a clear refusal of an incomplete task class."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from helpers import ROOT
from interp_init.tasks.anchor import SymmetricMetrics
from interp_init.tasks.base import EpochRecord, Task, TaskMetrics, read_run_metrics
from interp_init.tasks.registry import make_task, register_task, registered_tasks, task_class
from training.trainer.loop import evaluate

FIXTURES = ROOT / "tests" / "fixtures"

#: SHA-256 (first 16 hex digits) of the samples the anchor tasks drew before they were
#: classes (interp_init.tasks.data.make_dataset at DATA_VERSION 4, n=1000, seed=123): token ids,
#: targets, key positions, anchor pairs and candidate targets, as int64 bytes.
DIGESTS_BEFORE = {
    ("symmetric", "train"): "88a45279bae35d0d",
    ("symmetric", "id_test"): "817df322708d4f01",
    ("symmetric", "heldout"): "44a937eb058028c1",
    ("id-ood", "train"): "962f50aaba45f942",
    ("id-ood", "id_test"): "37ebd4de87154b21",
    ("id-ood", "heldout"): "6ee6bd635604d8cd",
    ("complexity", "train"): "5a27606d16d7295a",
    ("complexity", "id_test"): "07343d5e3185197e",
}


def _digest(ds) -> str:
    h = hashlib.sha256()
    for t in (
        ds.token_ids,
        ds.targets,
        ds.key_positions,
        ds.anchor_pairs,
        *[ds.candidate_targets[k] for k in sorted(ds.candidate_targets)],
    ):
        h.update(t.to(torch.int64).numpy().tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("task", "split"), list(DIGESTS_BEFORE))
def test_anchor_tasks_draw_the_same_samples_as_before(task: str, split: str) -> None:
    options = {"k": 3, "offset": 4} if task == "complexity" else {}
    assert _digest(make_task(task, **options).make_split(split, 1000, 123)) == DIGESTS_BEFORE[(task, split)]


_SHIFTS = torch.tensor([0, 5, 1, -2, -8])


def _rule_logits(model, tokens):
    """A deterministic stand-in for a model: the composite f, wrong on a third of the inputs
    (+4) and off by one for a1 = 4 on half of them (so no metric is 0 or 1)."""
    anchor = (tokens >= 1) & (tokens <= 4)
    p = anchor.int().argmax(1) - 1
    rows = torch.arange(len(tokens))
    key, a1, a2 = tokens[rows, p], tokens[rows, p + 1], tokens[rows, p + 2]
    pred = key + _SHIFTS[a1] + _SHIFTS[a2] + 4 * (tokens[:, 0] % 3 == 0) + ((a1 == 4) & (tokens[:, 0] % 2 == 0)).long()
    return torch.nn.functional.one_hot(pred.clamp(0, 200), 201).float()


@pytest.mark.parametrize("name", ["symmetric", "id-ood", "complexity"])
def test_anchor_tasks_measure_the_same_metrics_as_before(name: str) -> None:
    # tests/fixtures/anchor_metrics_before.json: training.trainer.loop.evaluate's dict before
    # tasks were classes, for _rule_logits on these samples
    before = json.loads((FIXTURES / "anchor_metrics_before.json").read_text())[name]
    task = make_task(name, **({"k": 2} if name == "complexity" else {}))
    train, id_test = task.make_split("train", 600, 1), task.make_split("id_test", 300, 2)
    heldout = task.make_split("heldout", 300, 3) if task.has_heldout else None
    metrics = evaluate(torch.nn.Module(), task, train, id_test, heldout, logits_fn=_rule_logits)
    assert isinstance(metrics, task.metrics_class)
    assert metrics.to_json() == before


def _example_metrics(cls: type[TaskMetrics]) -> TaskMetrics:
    values = {}
    for i, f in enumerate(fields(cls)):
        values[f.name] = (
            {"1,2": 0.5, "4,3": 0.25}
            if f.name == "per_pair"
            else {"4,3": {"inferential": 0.75, "symmetric": 0.125}}
            if f.name == "heldout"
            else 0.5 + i / 64
        )
    return cls(**values)


@pytest.mark.parametrize("name", registered_tasks())
def test_every_registered_task_round_trips_its_metrics_through_metrics_json(name: str, tmp_path: Path) -> None:
    task = make_task(name)
    metrics = _example_metrics(task.metrics_class)
    path = tmp_path / "metrics.json"
    record = EpochRecord(3, 30, 0.5, 1e-3, metrics)
    path.write_text(
        json.dumps({"status": "completed", "final": {"epoch": 3, **record.to_json()}, "history": [record.to_json()]})
    )
    typed = read_run_metrics(task, json.loads(path.read_text()))
    assert typed.final == metrics and typed.history == (record,)
    assert type(typed.final) is task.metrics_class
    with pytest.raises(ValueError, match=f"the {task.metrics_class.__name__} metrics lack"):
        task.read_metrics({"train_acc": 0.5})


def test_run_folders_written_before_tasks_were_classes_load_and_report(tmp_path: Path) -> None:
    from training.studies.report import ReportConfig, write_report
    from training.studies.sweep import collect_results

    shutil.copytree(FIXTURES / "legacy_runs", tmp_path / "runs")
    table = collect_results(tmp_path / "runs").set_index("run")
    for name in ("symmetric", "id-ood"):
        final = json.loads((tmp_path / "runs" / name / "metrics.json").read_text())["final"]
        assert table.loc[name, "status"] == "completed" and table.loc[name, "id_acc"] == pytest.approx(final["id_acc"])
    assert table.loc["symmetric", "heldout_inferential"] == pytest.approx(
        json.loads((tmp_path / "runs" / "symmetric" / "metrics.json").read_text())["final"]["heldout"]["4,3"][
            "inferential"
        ]
    )
    assert table.loc["id-ood", "ood_acc"] == pytest.approx(
        json.loads((tmp_path / "runs" / "id-ood" / "metrics.json").read_text())["final"]["ood_acc"]
    )
    typed = read_run_metrics(
        make_task("symmetric"), json.loads((tmp_path / "runs" / "symmetric" / "metrics.json").read_text())
    )
    assert isinstance(typed.final, SymmetricMetrics) and all(r.metrics is not None for r in typed.history)
    page = write_report([tmp_path / "runs"], tmp_path / "report.html", ReportConfig(per_pair=2)).read_text()
    assert "Phase " in page and "held-out (4,3) inferential" in page


def test_an_incomplete_task_class_is_refused_naming_what_it_lacks() -> None:
    class Half(Task):
        vocab_size = 10

    with pytest.raises(ValueError, match=r"is missing: seq_len \(an int >= 1\); make_split\(\); evaluate\(\)"):
        register_task("half", Half)
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        task_class("no_such_module:Task")
    with pytest.raises(ValueError, match="has no class 'Nope'"):
        task_class("interp_init.tasks.base:Nope")
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        task_class("nope")


def test_an_option_a_task_does_not_take_is_refused() -> None:
    from training.config import DataConfig

    with pytest.raises(ValueError, match="k applies to the 'complexity' task only, not 'symmetric': leave it unset"):
        DataConfig(task="symmetric", k=2)
    with pytest.raises(ValueError, match="do\\(es\\) not apply to task 'addition'"):
        make_task("addition", k=1)
    assert DataConfig(task="complexity", k=2).make_task() == make_task("complexity", k=2)


def test_the_task_decides_architecture_vocabulary_context_and_presets() -> None:
    from training.config import make_run_config, preset_options

    cfg = make_run_config("tiny", task="addition")
    assert (cfg.model.architecture, cfg.model.d_vocab, cfg.model.n_ctx) == ("journal", 201, 4)
    assert make_run_config("tiny", task="id-ood").model.architecture == "journal"
    assert make_run_config("tiny", task="symmetric").model.architecture == "neurips"
    # the presets as they were written per task: id-ood's lr, complexity's paper data size
    assert preset_options("cpu", "id-ood")["lr"] == 1e-3 and preset_options("cpu", "id-ood")["min_lr"] == 1e-3 / 20
    # and at the paper scale the released code's sets, balanced per pair (tests/training/test_released.py counts them)
    released = {"drop_last": True, "balanced_pairs": True}
    assert preset_options("cpu", "symmetric")["lr"] == 5e-4
    assert preset_options("paper", "id-ood") == {
        **released,
        "n_train": 708_750,
        "n_test": 78_750,
        "n_heldout": 101_250,
        "lr": 1.5e-4,
    }
    assert preset_options("paper", "complexity") == {**released, "n_train": 90_000}
    assert preset_options("paper", "symmetric") == {
        **released,
        "n_train": 759_375,
        "n_test": 84_375,
        "n_heldout": 50_625,
    }
