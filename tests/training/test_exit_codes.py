"""Exit codes that tell the truth: every command exits non-zero, with a
one-line summary on stderr, when any of its work failed or diverged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from training.cli import main
from training.studies.study import StudySpec
from training.studies.sweep import RESULTS_FILE, SPEC_FILE

# Tiny runs: a second or two each on one CPU thread.
TINY = {"preset": "tiny", "task": "symmetric", "epochs": 1, "n_train": 256, "n_test": 64, "eval_samples": 64}
TINY_ARGS = [
    "--preset",
    "tiny",
    "--epochs",
    "1",
    "--n-train",
    "256",
    "--n-test",
    "64",
    "--eval-samples",
    "64",
    "--quiet",
]
# No warmup, no clipping, a huge learning rate and 8 steps: the loss is non-finite by step 2.
DIVERGING = {"lr": 1e8, "warmup_start_lr": 1e8, "grad_clip": 0.0, "batch_size": 32}
DIVERGING_ARGS = ["--lr", "1e8", "--warmup-start-lr", "1e8", "--grad-clip", "0", "--batch-size", "32"]


def _last_err_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


# ----------------------------------------------------------------------------- train


def test_train_that_diverges_exits_1_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["train", *TINY_ARGS, *DIVERGING_ARGS, "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("diverged: ")
    line = captured.err.strip().splitlines()[-1]
    assert line.startswith("interp-init: the run diverged at step ") and f"{out}/metrics.json" in line
    assert "Traceback" not in captured.err
    assert json.loads((out / "metrics.json").read_text())["status"] == "diverged"
    # The finished, diverged folder is not trained again, and still exits 1.
    assert main(["train", *TINY_ARGS, *DIVERGING_ARGS, "--out", str(out)]) == 1
    assert "diverged" in _last_err_line(capsys)


# ----------------------------------------------------------------------------- sweep


def _sabotaged_spec(tmp_path: Path, grid: dict) -> tuple[Path, StudySpec]:
    spec = StudySpec(TINY, grid)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    return path, spec


def _sabotage(out: Path, spec: StudySpec, name: str) -> None:
    """Make the point ``name`` fail when it trains: its folder holds its own config and a
    checkpoint that is not one (``training.trainer.loop`` refuses it with a ValueError)."""
    (point,) = [p for p in spec.points() if p.name == name]
    folder = out / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(point.config.to_dict()))
    (folder / "checkpoint.pt").write_bytes(b"not a checkpoint")


@pytest.fixture(scope="module")
def failed_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """A serial sweep of 3 points, one of which fails at train time: (folder, exit code, stderr)."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("failed_sweep")
    path, spec = _sabotaged_spec(tmp, {"gamma": [0.5, 0.8, 1.0]})
    out = tmp / "sweep"
    _sabotage(out, spec, "gamma=0.5")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["sweep", str(path), "--out", str(out), "--threads", "1", "--quiet"])
    return out, code, err.getvalue()


def test_sweep_with_a_failed_run_exits_1_serial(failed_sweep: tuple[Path, int, str]) -> None:
    out, code, err = failed_sweep
    assert code == 1
    assert err.strip().splitlines()[-1] == f"interp-init: 1 of 3 runs failed: see {out / RESULTS_FILE}"
    assert (out / "gamma=0.5" / "error.txt").is_file()


@pytest.mark.parametrize(
    "backend_args",
    [
        pytest.param(["--workers", "2", "--threads", "1"], id="process-pool"),
        pytest.param(["--backend", "ensemble", "--device", "cpu", "--ensemble-size", "1"], id="ensemble"),
        # Ray starts a local cluster (18 s of the default run): its exit code is the shared
        # sweep policy the other two check, and the Ray backend's table test_sweep's ray test
        pytest.param(["--backend", "ray", "--workers", "1", "--threads", "1"], id="ray", marks=pytest.mark.slow),
    ],
)
def test_sweep_with_a_failed_run_exits_1_on_every_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend_args: list[str]
) -> None:
    if "ray" in backend_args:
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'interp-init[ray]')")
    path, spec = _sabotaged_spec(tmp_path, {"gamma": [0.5, 0.8]})
    out = tmp_path / "sweep"
    _sabotage(out, spec, "gamma=0.5")
    assert main(["sweep", str(path), "--out", str(out), "--quiet", *backend_args]) == 1
    assert _last_err_line(capsys) == f"interp-init: 1 of 2 runs failed: see {out / RESULTS_FILE}"


def test_sweep_exit_code_follows_the_retry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, spec = _sabotaged_spec(tmp_path, {"gamma": [0.5]})
    out = tmp_path / "sweep"
    _sabotage(out, spec, "gamma=0.5")
    assert main(["sweep", str(path), "--out", str(out), "--threads", "1", "--quiet"]) == 1
    (out / "gamma=0.5" / "checkpoint.pt").unlink()  # the user removes the bad file, as the error says
    assert main(["sweep", str(path), "--out", str(out), "--threads", "1", "--quiet"]) == 0
    assert "1 completed" in capsys.readouterr().out


def test_sweep_with_a_diverged_run_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = StudySpec({**TINY, "grad_clip": 0.0, "batch_size": 32, "warmup_epochs": 0.0}, {"lr": [1e-3, 1e8]})
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    out = tmp_path / "sweep"
    assert main(["sweep", str(path), "--out", str(out), "--threads", "1", "--quiet"]) == 1
    assert _last_err_line(capsys) == f"interp-init: 1 of 2 runs diverged: see {out / RESULTS_FILE}"
    # Rerun: nothing to train, and the answer is the same.
    assert main(["sweep", str(path), "--out", str(out), "--threads", "1", "--quiet"]) == 1
    assert "2 already done" in capsys.readouterr().out


# ------------------------------------------------------------- report, phase-diagram


def test_report_over_a_failed_run_exits_1(
    failed_sweep: tuple[Path, int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _, _ = failed_sweep
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page), "--per-pair", "2"]) == 1
    captured = capsys.readouterr()
    assert f"report: {page}" in captured.out and page.is_file()  # the page is still written
    line = captured.err.strip().splitlines()[-1]
    assert line.startswith(f"interp-init: 1 of 3 runs failed: see {page}") and "gamma=0.5: failed" in line


def test_phase_diagram_over_failed_and_absent_runs_exits_1(
    failed_sweep: tuple[Path, int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, _, _ = failed_sweep
    out = tmp_path / "sweep"
    shutil.copytree(source, out)
    assert main(["phase-diagram", str(out)]) == 1
    captured = capsys.readouterr()
    assert "1 figure(s)" in captured.out and (out / "phase_diagram.html").is_file()
    assert (
        captured.err.strip().splitlines()[-1]
        == f"interp-init: 1 of 3 runs failed: see {out / RESULTS_FILE}; the figures leave them out"
    )
    shutil.rmtree(out / "gamma=1.0")  # a point of sweep.json without its run folder
    assert main(["phase-diagram", str(out)]) == 1
    assert _last_err_line(capsys) == (
        f"interp-init: 2 of 3 runs did not complete (1 failed, 1 absent): see {out / RESULTS_FILE}; the figures leave them out"
    )
    assert json.loads((out / SPEC_FILE).read_text())["grid"] == {"gamma": [0.5, 0.8, 1.0]}


def test_phase_diagram_over_completed_runs_exits_0(failed_sweep: tuple[Path, int, str], tmp_path: Path) -> None:
    source, _, _ = failed_sweep
    out = tmp_path / "sweep"
    shutil.copytree(source, out)
    shutil.rmtree(out / "gamma=0.5")
    spec = json.loads((out / SPEC_FILE).read_text())
    spec["grid"]["gamma"] = [0.8, 1.0]  # as if the sweep had been these two points
    (out / SPEC_FILE).write_text(json.dumps(spec))
    assert main(["phase-diagram", str(out)]) == 0


# ---------------------------------------------------------------------------- reproduce


def test_reproduce_with_a_diverged_run_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from training.studies import study as module

    small = {"n_train": 256, "n_test": 64, "eval_samples": 64, "epochs": 1}
    monkeypatch.setitem(
        module.REGIMES,
        "tiny",
        {"small-init": {"gamma": 0.8, **small, **DIVERGING}, "large-init": {"gamma": 0.3, **small}},
    )
    code = main(
        ["reproduce", "--preset", "tiny", "--out", str(tmp_path), "--device", "cpu", "--workers", "1", "--quiet"]
    )
    assert code == 1
    assert "diverged" in _last_err_line(capsys)
