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

INFO = [
    "--command",
    "interp-init reproduce --preset tiny --seeds 3 --task symmetric --out SRC",
    "--commit",
    "f84dd73",
    "--machine",
    "2-core CPU, one torch thread",
    "--beside",
    "the tests",
]
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


def test_a_stored_reproduction_reads_as_its_source(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "results" / "tiny-3"
    code, out, _ = _store([str(study), str(dest), *INFO], capsys)
    assert code == 0 and "stored 2 runs (2 completed) of the reproduction study" in out and " KB in all" in out
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert not [f for f in files if f.endswith((".safetensors", ".pt", ".html", ".lock"))]
    run = dest / "seed-3" / "symmetric" / "small-init"
    assert {p.name for p in run.iterdir()} == {"config.json", "metrics.json", RANKS_FILE, STORED_FILE}
    source_run = study / "seed-3" / "symmetric" / "small-init"
    assert (
        RunRecord.read(run).status == RunStatus.COMPLETED
        and RunRecord.read(run).metrics == RunRecord.read(source_run).metrics
    )
    assert run_stable_ranks(run) == run_stable_ranks(source_run)
    stored = StoredStudy.read(dest)
    assert stored.kind == "reproduction" and stored.spec() == SPEC  # reproduction.json rebuilds the spec
    assert json.loads((dest / REPRODUCTION_FILE).read_text())["seeds"] == [3]
    mine, theirs = stored.population().to_dict(), read_population(SPEC, study).to_dict()
    assert mine["population"] == theirs["population"] and mine["readings"] == theirs["readings"]
    manifest = json.loads((dest / STORED_STUDY_FILE).read_text())
    assert manifest["commit"] == "f84dd73" and manifest["runs"]["statuses"] == {"completed": 2}
    assert (
        manifest["total_bytes"]
        == sum(f["bytes"] for f in manifest["files"].values())
        == sum((dest / f).stat().st_size for f in manifest["files"])
    )
    assert manifest["left_behind"]["model.safetensors"]["files"] == 2 and manifest["dates"][
        "first_run_started"
    ].endswith("UTC")
    page = (dest / STUDY_PAGE).read_text()
    for said in (
        "interp-init reproduce --preset tiny",
        "f84dd73",
        "2-core CPU",
        "the tests",
        "first run started",
        "model.safetensors (2 files",
    ):
        assert said in page, said


def test_stored_records_are_never_overwritten_but_by_replace(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_unfinished_runs_big_files_and_bad_input_are_refused(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_records_kept_before_the_command_are_marked_in_place(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old"
    shutil.copytree(study / "seed-3", old)
    for weights in old.rglob("model.safetensors"):
        weights.unlink()
    assert (
        RunRecord.read(old / "symmetric" / "small-init").status == RunStatus.PENDING
    )  # before: weights lost, not stored
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    code, out, _ = _store(["--mark", "runs", str(old), *INFO, "--dates", "2026-11-26"], capsys)
    assert code == 0 and "stored 2 runs (2 completed)" in out
    assert all(p.read_bytes() == data for p, data in before.items())  # nothing changed, only added
    assert StoredStudy.read(old).kind == "runs" and [r.status for r in StoredStudy.read(old).records()] == [
        "completed",
        "completed",
    ]
    assert "2026-11-26" in (old / STUDY_PAGE).read_text()
    code, _, err = _store(["--mark", "runs", str(old), *INFO], capsys)
    assert code == 2 and "is marked already" in err


def test_the_gpu_suite_records_read_as_stored() -> None:
    """The GPU suite's runs, stored before experiments/store.py, are marked: they read as the
    interrupted runs they are, with their histories."""
    study = StoredStudy.read(
        Path(__file__).resolve().parents[2] / "experiments" / "results" / "gpu-suite-h200-2026-11-26"
    )
    records = study.records()
    assert study.kind == "gpu-suite" and len(records) == 6 and {r.status for r in records} == {RunStatus.INTERRUPTED}
    assert {r.epochs_run for r in records} == {94} and study.get("commit") == "dc2ea08"
    assert all((r.path / STORED_FILE).is_file() for r in records)


# ------------------------------------------------------------------ issue 56: the lock, kills, symlinks, damaged input


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_store_into_the_same_place_is_refused_by_name(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 56, class 2: every store holds the project's lock on DEST's parent; a second one
    meanwhile is one line, exit 2, and writes nothing."""
    from interp_init.fileio import hold_folder

    (tmp_path / "results").mkdir()
    with hold_folder(tmp_path / "results", "is held by the test ({owner})"):
        code, _, err = _store([str(study), str(tmp_path / "results" / "d"), *INFO], capsys)
    assert code == 2 and err.count("\n") == 1 and "is being stored into by another experiments/store.py (pid" in err, (
        err
    )
    assert [p.name for p in (tmp_path / "results").iterdir()] == []


@pytest.mark.parametrize(
    ("signum", "code", "line"), [(15, 143, "terminated (SIGTERM)"), (2, 130, "aborted")], ids=["SIGTERM", "SIGINT"]
)
def test_a_signal_mid_store_leaves_the_records_as_they_were(
    signum: int,
    code: int,
    line: str,
    study: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 56, class 3 (and a doubtful case, decided: SIGINT is 130, as ``interp-init``'s):
    SIGTERM or SIGINT while the copy is written: one line, exit 143 or 130, no temporary
    folder, and the records DEST held before (a ``--replace``) unchanged."""
    import os

    dest = tmp_path / "dest"
    assert _store([str(study), str(dest), *INFO], capsys)[0] == 0
    before = _tree(dest)
    import interp_init.fileio as fileio

    store = load_script("experiments/store.py")
    real, calls = fileio.atomic_write, []  # the one writer's, which store.py writes through

    def write_then_stop(path, data):
        calls.append(path)
        if len(calls) == 3:
            os.kill(os.getpid(), signum)
        return real(path, data)

    monkeypatch.setattr(fileio, "atomic_write", write_then_stop)
    with pytest.raises(SystemExit) as done:
        store.main([str(study), str(dest), *INFO, "--replace", "--note", "second"])
    err = capsys.readouterr().err
    assert done.value.code == code and err == f"store.py: {line}\n", err
    assert _tree(dest) == before and sorted(p.name for p in tmp_path.iterdir()) == ["dest"]


def test_a_store_killed_mid_copy_is_cleaned_up_by_the_next(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 56, class 3: SIGKILL while the copy is written leaves ``.DEST.storing-<pid>``
    beside the records, which stay as they were; the next store removes it, whoever left it."""
    import os
    import subprocess
    import sys

    from helpers import ROOT

    dest = tmp_path / "dest"
    assert _store([str(study), str(dest), *INFO], capsys)[0] == 0
    before = _tree(dest)
    env = {
        **os.environ,
        "INTERP_INIT_KILL_AT": "before:metrics.json:2",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
    }
    killed = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "store.py"), str(study), str(dest), *INFO, "--replace"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    left = [
        p.name for p in tmp_path.iterdir() if p.name not in ("dest", ".lock")
    ]  # the dead store's lock, no longer held
    assert len(left) == 1 and left[0].startswith(".dest.storing-") and _tree(dest) == before
    code, _, err = _store([str(study), str(dest), *INFO, "--replace", "--note", "after the kill"], capsys)
    assert code == 0, err
    assert (
        sorted(p.name for p in tmp_path.iterdir()) == ["dest"]
        and json.loads((dest / STORED_STUDY_FILE).read_text())["note"] == "after the kill"
    )


def test_symlinks_are_refused_by_one_rule(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 56, class 5: records are plain files and folders: a symlinked run in SOURCE, a
    symlinked file for --mark, a DEST that is a dangling link or a link to an empty folder are
    refused by name before anything is written (no run is dropped without a word)."""
    linked = tmp_path / "linked"
    shutil.copytree(study, linked)
    run = linked / "seed-3" / "symmetric" / "large-init"
    shutil.move(str(run), str(tmp_path / "elsewhere"))
    run.symlink_to(tmp_path / "elsewhere")
    code, _, err = _store([str(linked), str(tmp_path / "a"), *INFO], capsys)
    assert code == 2 and f"{run} is a symlink" in err and not (tmp_path / "a").exists()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    (tmp_path / "to-empty").symlink_to(tmp_path / "empty")
    for name in ("dangling", "to-empty"):
        code, _, err = _store([str(study), str(tmp_path / name), *INFO], capsys)
        assert code == 2 and err.count("\n") == 1 and f"DEST {tmp_path / name} is a symlink" in err, err
    assert not (tmp_path / "nowhere").exists() and list((tmp_path / "empty").iterdir()) == []
    old = tmp_path / "old"
    shutil.copytree(study / "seed-3", old)
    for weights in old.rglob("model.safetensors"):
        weights.unlink()
    (old / "symmetric" / "small-init" / "notes.txt").symlink_to(tmp_path / "outside.txt")
    (tmp_path / "outside.txt").write_text("not the run's")
    code, _, err = _store(["--mark", "runs", str(old), *INFO], capsys)
    assert code == 2 and "notes.txt is a symlink" in err and not (old / STORED_STUDY_FILE).exists()


@pytest.mark.parametrize(
    ("damage", "said"),
    [({"per_seed": []}, "has an empty or misshapen per_seed"), ({"preset": None}, "has no 'preset'")],
)
def test_a_damaged_summary_is_one_line(
    damage: dict, said: str, study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 56, class 4: a summary without seeds' rows or without its preset: one line, exit 2."""
    source = tmp_path / "source"
    shutil.copytree(study, source)
    summary = json.loads((source / "summary.json").read_text())
    summary.update({k: v for k, v in damage.items() if v is not None})
    for key in (k for k, v in damage.items() if v is None):
        del summary[key]
    (source / "summary.json").write_text(json.dumps(summary))
    code, _, err = _store([str(source), str(tmp_path / "d"), *INFO], capsys)
    assert code == 2 and err.count("\n") == 1 and said in err and "summary.json" in err, err
    assert not (tmp_path / "d").exists()
