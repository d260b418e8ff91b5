"""One sweep per folder: a sweep folder records its spec; another spec
into it is refused unless asked to extend it with the same keys; read-only commands never
write into a folder they then refuse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from training.cli import main
from training.studies.study import StudySpec
from training.studies.sweep import RESULTS_FILE, SPEC_FILE, SweepOptions, check_sweep_folder, load_results, run_sweep

TINY = {"preset": "tiny", "task": "symmetric", "epochs": 1, "n_train": 256, "n_test": 64, "eval_samples": 64}


def _write_spec(path: Path, grid: dict, **base: object) -> Path:
    path.write_text(json.dumps({"base": {**TINY, **base}, "grid": grid}))
    return path


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (what a refused command must not change)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def one_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished sweep of one tiny run over gamma."""
    out = tmp_path_factory.mktemp("one_sweep") / "sweep"
    run_sweep(StudySpec(TINY, {"gamma": [0.8]}), out, SweepOptions(progress=False, threads=1))
    return out


@pytest.fixture()
def sweep_copy(one_sweep: Path, tmp_path: Path) -> Path:
    out = tmp_path / "sweep"
    shutil.copytree(one_sweep, out)
    return out


def test_the_folder_records_its_spec(one_sweep: Path) -> None:
    assert json.loads((one_sweep / SPEC_FILE).read_text()) == {"base": TINY, "grid": {"gamma": [0.8]}}


@pytest.mark.parametrize(
    ("grid", "base", "difference"),
    [
        ({"seed": [0, 1]}, {}, "grid keys ['gamma'] there, ['seed'] here"),
        ({"gamma": [0.8], "seed": [0]}, {}, "grid keys ['gamma'] there, ['gamma', 'seed'] here"),
        ({"gamma": [0.8]}, {"epochs": 2}, "base epochs: 1 there, 2 here"),
        ({"gamma": [0.5]}, {}, "grid gamma: [0.8] there, [0.5] here"),
    ],
)
def test_another_spec_is_refused_naming_the_folder_and_the_fix(
    sweep_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], grid: dict, base: dict, difference: str
) -> None:
    before = _snapshot(sweep_copy)
    spec = _write_spec(tmp_path / "other.json", grid, **base)
    assert main(["sweep", str(spec), "--out", str(sweep_copy), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(
        f"interp-init: error: {sweep_copy} holds another sweep ({difference}; see {sweep_copy / SPEC_FILE})"
    )
    assert "use another --out, or pass --extend" in err
    assert _snapshot(sweep_copy) == before  # nothing trained, nothing rewritten


def test_dry_run_checks_the_folder_and_writes_nothing(
    sweep_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(sweep_copy)
    assert (
        main(["sweep", str(_write_spec(tmp_path / "other.json", {"seed": [0]})), "--out", str(sweep_copy), "--dry-run"])
        == 2
    )
    assert "holds another sweep" in capsys.readouterr().err
    same = _write_spec(tmp_path / "same.json", {"gamma": [0.8]})
    assert main(["sweep", str(same), "--out", str(sweep_copy), "--dry-run"]) == 0
    assert f"{sweep_copy} takes it" in capsys.readouterr().out
    assert _snapshot(sweep_copy) == before


def test_the_same_spec_or_a_part_of_it_resumes(
    sweep_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = StudySpec(TINY, {"gamma": [0.8]})
    assert check_sweep_folder(spec, sweep_copy) == spec
    # A part of a larger recorded sweep (a retry of some points) keeps the recorded spec.
    larger = StudySpec(TINY, {"gamma": [0.8, 0.5]})
    (sweep_copy / SPEC_FILE).write_text(json.dumps(larger.to_dict()))
    assert check_sweep_folder(spec, sweep_copy) == larger
    assert (
        main(["sweep", str(_write_spec(tmp_path / "part.json", {"gamma": [0.8]})), "--out", str(sweep_copy), "--quiet"])
        == 0
    )
    assert "1 already done" in capsys.readouterr().out
    assert json.loads((sweep_copy / SPEC_FILE).read_text())["grid"] == {"gamma": [0.8, 0.5]}


def test_extend_adds_values_with_the_same_keys(
    sweep_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _write_spec(tmp_path / "more.json", {"gamma": [0.5, 0.8]})
    assert main(["sweep", str(spec), "--out", str(sweep_copy), "--extend", "--threads", "1", "--quiet"]) == 0
    assert "2 runs (1 already done): 2 completed" in capsys.readouterr().out
    assert json.loads((sweep_copy / SPEC_FILE).read_text())["grid"] == {"gamma": [0.8, 0.5]}
    assert sorted(load_results(sweep_copy)["run"]) == ["gamma=0.5", "gamma=0.8"]


@pytest.mark.parametrize(("grid", "base"), [({"seed": [0]}, {}), ({"gamma": [0.5]}, {"epochs": 2})])
def test_extend_with_other_keys_or_base_is_refused(
    sweep_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], grid: dict, base: dict
) -> None:
    before = _snapshot(sweep_copy)
    spec = _write_spec(tmp_path / "other.json", grid, **base)
    assert main(["sweep", str(spec), "--out", str(sweep_copy), "--extend", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{sweep_copy} holds another sweep" in err
        and "--extend adds grid values to a sweep with the same base and grid keys only" in err
    )
    assert _snapshot(sweep_copy) == before


def test_a_damaged_sweep_json_is_refused_naming_it(sweep_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (sweep_copy / SPEC_FILE).write_text("{not json")
    before = _snapshot(sweep_copy)
    with pytest.raises(ValueError, match=f"{sweep_copy / SPEC_FILE} does not hold a readable sweep spec"):
        run_sweep(StudySpec(TINY, {"gamma": [0.8]}), sweep_copy, SweepOptions(progress=False))
    assert _snapshot(sweep_copy) == before


# ------------------------------------------------------------------ read-only commands


def test_phase_diagram_writes_nothing_into_a_folder_it_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["phase-diagram", str(empty)]) == 2
    assert "no completed runs" in capsys.readouterr().err
    assert list(empty.iterdir()) == []  # no results.csv, no figure


def test_phase_diagram_refusing_a_sweep_leaves_its_files_as_they_were(
    sweep_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A sweep whose only run has failed: no figure can use it.
    run = sweep_copy / "gamma=0.8"
    for name in ("metrics.json", "model.safetensors"):
        (run / name).unlink()
    (run / "error.txt").write_text("RuntimeError: simulated\n")
    before = _snapshot(sweep_copy)
    assert main(["phase-diagram", str(sweep_copy)]) == 2
    assert "no completed runs" in capsys.readouterr().err
    assert _snapshot(sweep_copy) == before
    assert (sweep_copy / RESULTS_FILE).is_file() and not (sweep_copy / "phase_diagram.html").exists()


def test_report_refusing_a_folder_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty), "--out", str(empty / "report.html")]) == 2
    assert "holds no run folder" in capsys.readouterr().err
    assert list(empty.iterdir()) == []
