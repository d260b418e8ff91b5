"""A finished study stored without weights (experiments/store.py) and read back (training/stored.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import load_script

from interp_init.runfolder import RunStatus
from interp_init.stored import STORED_FILE, STORED_STUDY_FILE, STUDY_PAGE
from training.launch import SerialLauncher
from training.studies.population import read_population
from training.studies.sweep.results import RANKS_FILE, run_stable_ranks
from training.studies.records import RunRecord
from training.studies.population import reproduce_study
from training.studies.population import REPRODUCTION_FILE, StoredStudy
from training.studies.study import StudySpec

INFO = ["--command", "interp-init reproduce --preset tiny --seeds 3 --task symmetric --out SRC", "--commit", "f84dd73",
        "--machine", "2-core CPU, one torch thread", "--beside", "the tests"]  # fmt: skip
SPEC = StudySpec.reproduction("tiny", (3,), tasks=("symmetric",))


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished reproduction of one seed (a population of one, two tiny runs)."""
    out = tmp_path_factory.mktemp("study") / "src"
    reproduce_study(SPEC, out, SerialLauncher(device="cpu"))
    return out


def _store(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    store = load_script("experiments/store.py")
    with pytest.raises(SystemExit) as done:
        store.main(argv)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_a_stored_reproduction_reads_as_its_source(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "results" / "tiny-3"
    code, out, _ = _store([str(study), str(dest), *INFO], capsys)
    assert code == 0 and "stored 2 runs (2 completed) of the reproduction study" in out and " KB in all" in out
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert not [f for f in files if f.endswith((".safetensors", ".pt", ".html", ".lock"))]
    run = dest / "seed-3" / "symmetric" / "small-init"
    assert {p.name for p in run.iterdir()} == {"config.json", "metrics.json", RANKS_FILE, STORED_FILE}
    source_run = study / "seed-3" / "symmetric" / "small-init"
    assert RunRecord.read(run).status == RunStatus.COMPLETED and RunRecord.read(run).metrics == RunRecord.read(source_run).metrics
    assert run_stable_ranks(run) == run_stable_ranks(source_run)
    stored = StoredStudy.read(dest)
    assert stored.kind == "reproduction" and stored.spec() == SPEC  # reproduction.json rebuilds the spec
    assert json.loads((dest / REPRODUCTION_FILE).read_text())["seeds"] == [3]
    mine, theirs = stored.population().to_dict(), read_population(SPEC, study).to_dict()
    assert mine["population"] == theirs["population"] and mine["readings"] == theirs["readings"]
    manifest = json.loads((dest / STORED_STUDY_FILE).read_text())
    assert manifest["commit"] == "f84dd73" and manifest["runs"]["statuses"] == {"completed": 2}
    assert manifest["total_bytes"] == sum(f["bytes"] for f in manifest["files"].values()) == sum((dest / f).stat().st_size for f in manifest["files"])
    assert manifest["left_behind"]["model.safetensors"]["files"] == 2 and manifest["dates"]["first_run_started"].endswith("UTC")
    page = (dest / STUDY_PAGE).read_text()
    for said in ("interp-init reproduce --preset tiny", "f84dd73", "2-core CPU", "the tests", "first run started", "model.safetensors (2 files"):
        assert said in page, said


def test_stored_records_are_never_overwritten_but_by_replace(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    code, _, err = _store([str(study), str(mine), *INFO], capsys)
    assert code == 2 and "was not made by experiments/store.py" in err and err.count("\n") == 1
    dest = tmp_path / "dest"
    assert _store([str(study), str(dest), *INFO], capsys)[0] == 0
    code, _, err = _store([str(study), str(dest), *INFO], capsys)
    assert code == 2 and "give --replace" in err
    (dest / "seed-3" / "extra.txt").write_text("not the store's")
    code, _, err = _store([str(study), str(dest), *INFO, "--replace"], capsys)
    assert code == 2 and "seed-3/extra.txt, which experiments/store.py did not make" in err
    (dest / "seed-3" / "extra.txt").unlink()
    assert _store([str(study), str(dest), *INFO, "--replace", "--note", "again"], capsys)[0] == 0
    assert json.loads((dest / STORED_STUDY_FILE).read_text())["note"] == "again"
    assert not list(tmp_path.glob(".dest*"))  # no working copy left beside it


def test_unfinished_runs_big_files_and_bad_input_are_refused(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unfinished = tmp_path / "unfinished"
    shutil.copytree(study, unfinished)
    run = unfinished / "seed-3" / "symmetric" / "large-init"
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, "status": "running", "final": {}}))  # killed: interrupted
    code, _, err = _store([str(unfinished), str(tmp_path / "a"), *INFO], capsys)
    assert code == 2 and "is interrupted, not finished" in err and not (tmp_path / "a").exists()
    code, out, _ = _store([str(unfinished), str(tmp_path / "b"), *INFO, "--partial"], capsys)
    assert code == 0 and "(1 completed, 1 interrupted)" in out
    assert RunRecord.read(tmp_path / "b" / "seed-3" / "symmetric" / "large-init").status == RunStatus.INTERRUPTED
    code, _, err = _store([str(study), str(tmp_path / "c"), *INFO, "--max-file-mb", "0.001"], capsys)
    assert code == 2 and "over --max-file-mb 0.001" in err and not (tmp_path / "c").exists()
    code, _, err = _store([str(study), str(tmp_path / "d"), *INFO[:2], "--commit", "HEAD", *INFO[4:]], capsys)
    assert code == 2 and "is not a git commit hash" in err
    code, _, err = _store([str(tmp_path / "b"), str(tmp_path / "e"), *INFO], capsys)
    assert code == 2 and "is already stored records" in err
    other = tmp_path / "other"
    shutil.copytree(study, other)
    config = json.loads((other / "seed-3" / "symmetric" / "small-init" / "config.json").read_text())
    config["init"]["gamma"] = 0.7
    (other / "seed-3" / "symmetric" / "small-init" / "config.json").write_text(json.dumps(config))
    code, _, err = _store([str(other), str(tmp_path / "f"), *INFO], capsys)
    assert code == 2 and "is not the run summary.json names (gamma 0.7, the spec's 0.8)" in err


def test_records_kept_before_the_command_are_marked_in_place(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    shutil.copytree(study / "seed-3", old)
    for weights in old.rglob("model.safetensors"):
        weights.unlink()
    assert RunRecord.read(old / "symmetric" / "small-init").status == RunStatus.PENDING  # before: weights lost, not stored
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    code, out, _ = _store(["--mark", "runs", str(old), *INFO, "--dates", "2026-11-26"], capsys)
    assert code == 0 and "stored 2 runs (2 completed)" in out
    assert all(p.read_bytes() == data for p, data in before.items())  # nothing changed, only added
    assert StoredStudy.read(old).kind == "runs" and [r.status for r in StoredStudy.read(old).records()] == ["completed", "completed"]
    assert "2026-11-26" in (old / STUDY_PAGE).read_text()
    code, _, err = _store(["--mark", "runs", str(old), *INFO], capsys)
    assert code == 2 and "is marked already" in err


def test_the_gpu_suite_records_read_as_stored() -> None:
    """The GPU suite's runs, stored before experiments/store.py, are marked: they read as the
    interrupted runs they are, with their histories."""
    study = StoredStudy.read(Path(__file__).resolve().parents[2] / "experiments" / "results" / "gpu-suite-h200-2026-11-26")
    records = study.records()
    assert study.kind == "gpu-suite" and len(records) == 6 and {r.status for r in records} == {RunStatus.INTERRUPTED}
    assert {r.epochs_run for r in records} == {94} and study.get("commit") == "dc2ea08"
    assert all((r.path / STORED_FILE).is_file() for r in records)
