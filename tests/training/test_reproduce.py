"""The ``reproduce`` command: four runs, a summary.json of the right shape (a population of
one), resumable."""

from __future__ import annotations

import json

import pytest

from training.cli import main
from training.studies.population import check_flip
from training.studies.study import REGIMES, regime_config, regime_options
from training.studies.population import reproduce

SYMMETRIC_KEYS = {"gamma", "id_acc", "heldout_inferential", "heldout_symmetric", "exception_acc"}
OOD_KEYS = {"gamma", "id_acc", "ood_acc", "commutativity"}


@pytest.fixture(scope="module")
def tiny_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    # one worker: the runs train in this process (worker processes, each importing torch, took
    # two thirds of the fixture's time; the pool is tested by test_population's --seeds fixture)
    code = main(
        [
            "reproduce",
            "--preset",
            "tiny",
            "--seed",
            "3",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--quiet",
            "--workers",
            "1",
        ]
    )
    assert code == 0
    return out


def _runs(summary: dict) -> dict:
    """The one seed's rows of a single-seed summary.json (task -> regime -> numbers)."""
    assert summary["seeds"] == [summary["per_seed"][0]["seed"]] and summary["protocol"] == "strict"
    return summary["per_seed"][0]["runs"]


def test_summary_structure(tiny_out):
    summary = _runs(json.loads((tiny_out / "summary.json").read_text()))
    assert list(summary) == ["symmetric", "id-ood"]
    for task, keys in (("symmetric", SYMMETRIC_KEYS), ("id-ood", OOD_KEYS)):
        assert list(summary[task]) == ["small-init", "large-init"]
        for regime, row in summary[task].items():
            assert keys <= set(row), (task, regime, row)
            assert row["gamma"] == REGIMES["tiny"][regime]["gamma"]
            for key in keys - {"gamma"}:
                assert 0.0 <= row[key] <= 1.0
            # the summary repeats the run folder's own final metrics
            metrics = json.loads((tiny_out / task / regime / "metrics.json").read_text())
            assert metrics["status"] == "completed"
            assert row["id_acc"] == metrics["final"]["id_acc"]
            config = json.loads((tiny_out / task / regime / "config.json").read_text())
            assert config["data"]["task"] == task
            assert config["init"]["gamma"] == row["gamma"]
            assert config["seed"] == 3


def test_rerun_reads_finished_runs_without_training(tiny_out):
    weights = sorted(tiny_out.glob("*/*/model.safetensors"))
    assert len(weights) == 4
    before = {p: p.stat().st_mtime_ns for p in weights}
    first = json.loads((tiny_out / "summary.json").read_text())
    again = reproduce("tiny", 3, tiny_out, device="cpu", progress=False)
    assert {p: p.stat().st_mtime_ns for p in weights} == before
    assert json.loads(json.dumps(again.to_dict())) == first


def test_unknown_preset_is_a_clear_error(tmp_path, capsys):
    code = main(["reproduce", "--preset", "nope", "--out", str(tmp_path / "x")])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown preset 'nope'" in err and "cpu" in err
    assert not (tmp_path / "x").exists()


def test_regimes_differ_only_in_their_options():
    for preset in REGIMES:
        for task in ("symmetric", "id-ood"):
            small = regime_config(preset, "small-init", task, seed=0).flat()
            large = regime_config(preset, "large-init", task, seed=0).flat()
            differing = {k for k in small if small[k] != large[k]}
            assert differing <= set(regime_options(preset, "small-init", task)) | set(
                regime_options(preset, "large-init", task)
            )
            assert small["gamma"] > large["gamma"]  # small init = larger gamma


def test_a_task_changes_a_regime_of_a_preset():
    """The cpu preset's large init on id-ood is the task's gamma 0.4 (Task.regime_overrides);
    symmetric keeps the preset's 0.5, the paper preset the papers' 0.5."""
    assert regime_config("cpu", "large-init", "id-ood", seed=101).init.gamma == 0.4
    assert regime_config("cpu", "large-init", "symmetric", seed=101).init.gamma == 0.5
    assert regime_config("paper", "large-init", "id-ood", seed=101).init.gamma == 0.5
    assert regime_config("cpu", "small-init", "id-ood", seed=101).init.gamma == 0.8


def _summary(inf=0.9, sym=0.9, small_ood=0.6, large_ood=0.1, id_acc=0.95, exception=0.97):
    return {
        "symmetric": {
            "small-init": {
                "gamma": 1,
                "id_acc": id_acc,
                "heldout_inferential": inf,
                "heldout_symmetric": 0.0,
                "exception_acc": exception,
            },
            "large-init": {"gamma": 0, "id_acc": id_acc, "heldout_inferential": 0.0, "heldout_symmetric": sym},
        },
        "id-ood": {
            "small-init": {"gamma": 1, "id_acc": id_acc, "ood_acc": small_ood, "commutativity": 1.0},
            "large-init": {"gamma": 0, "id_acc": id_acc, "ood_acc": large_ood, "commutativity": 0.0},
        },
    }


@pytest.mark.parametrize(
    ("kwargs", "failed"),
    [
        ({}, None),
        ({"inf": 0.79}, "symmetric: small-init inferential >= 0.8 with (3,4) fitted"),
        (
            {"inf": 0.85, "exception": 0.5},
            "symmetric: small-init inferential >= 0.8 with (3,4) fitted",
        ),  # never learned the exception
        (
            {"exception": None},
            "symmetric: small-init inferential >= 0.8 with (3,4) fitted",
        ),  # a summary from before it was recorded
        ({"sym": 0.5}, "symmetric: large-init symmetric >= 0.8"),
        ({"small_ood": 0.49}, "id-ood: small-init OOD >= 0.5"),
        ({"large_ood": 0.3}, None),
        ({"large_ood": 0.31}, "id-ood: large-init OOD <= 0.3"),
        ({"id_acc": 0.89}, "id-ood: both ID >= 0.9"),
    ],
)
def test_check_flip(kwargs, failed):
    checks = check_flip(_summary(**kwargs))
    assert checks["all"] == (failed is None)
    if failed is not None:
        assert not checks[failed]


@pytest.fixture(scope="module")
def cpu_summary(tmp_path_factory):
    """The ``cpu`` preset on seed 101, the first of the eight verification seeds of
    docs/faithful-models.md (about 9 minutes on 2 cores)."""
    return reproduce("cpu", 101, tmp_path_factory.mktemp("cpu"), device="cpu", progress=False).to_dict()["per_seed"][0][
        "runs"
    ]


@pytest.mark.slow
@pytest.mark.cpu_reproduction
def test_cpu_preset_reproduces_the_documented_seed(cpu_summary):
    """Seed 101 of the verification population (docs/faithful-models.md, "The cpu preset on
    eight fresh seeds"): the verdict of each criterion and its numbers, as documented. One
    draw: the rates over the eight seeds are in the docs, not asserted here.  Training time
    is recorded in the summary and the docs, not asserted."""
    documented = {
        "symmetric": {
            "small-init": {"id_acc": 0.96, "heldout_inferential": 0.21, "heldout_symmetric": 0.05},
            "large-init": {"id_acc": 0.99, "heldout_inferential": 0.00, "heldout_symmetric": 0.00},
        },
        "id-ood": {"small-init": {"id_acc": 0.99, "ood_acc": 0.44}, "large-init": {"id_acc": 0.99, "ood_acc": 0.26}},
    }
    for task, regimes in documented.items():
        for regime, numbers in regimes.items():
            for name, value in numbers.items():
                assert cpu_summary[task][regime][name] == pytest.approx(value, abs=0.02), (task, regime, name)
    checks = check_flip(cpu_summary)
    failed = {name for name, ok in checks.items() if not ok and name != "all"}
    assert failed == {
        "symmetric: small-init inferential >= 0.8 with (3,4) fitted",
        "symmetric: large-init symmetric >= 0.8",
        "id-ood: small-init OOD >= 0.5",
    }


def test_reproduce_ends_with_an_offline_report(tiny_out, capsys):
    report = tiny_out / "report.html"
    assert report.is_file()
    html = report.read_text()
    for task in ("symmetric", "id-ood"):
        for regime in ("small-init", "large-init"):
            assert str(tiny_out / task / regime) in html or f"{task}/{regime}" in html
    assert "<script src=" not in html


def test_precision_is_recorded(tiny_out):
    """(A folder of another precision is another run's: refused as every other, tests/test_launch.py.)"""
    summary = _runs(json.loads((tiny_out / "summary.json").read_text()))
    assert {row["precision"] for regimes in summary.values() for row in regimes.values()} == {"fp32"}
    assert regime_config("cpu", "small-init", "symmetric", seed=0, precision="bf16").train.precision == "bf16"


def test_report_opens_with_the_verdict_the_terminal_printed(tiny_out):
    html = (tiny_out / "report.html").read_text()
    verdict = html.index('id="verdict"')
    assert verdict < html.index('id="curves"')  # the first section
    summary = _runs(json.loads((tiny_out / "summary.json").read_text()))
    checks = check_flip(summary)
    line = "flip reproduced (all criteria met)" if checks["all"] else "flip NOT reproduced; failed: "
    assert line in html[verdict:]
    for regime in ("small-init", "large-init"):
        assert regime in html[verdict : html.index('id="curves"')]
