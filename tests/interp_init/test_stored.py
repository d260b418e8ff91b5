"""Stored records (interp_init/stored.py): a run kept without its weights reads as finished,
with its cached ranks, only where it is marked as stored; nothing trains or writes there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from interp_init import load_model
from interp_init.fileio import BadRunFile, file_sha256
from interp_init.runfolder import RunFolder, RunStatus
from interp_init.stored import STORED_FILE, STORED_FORMAT, STORED_STUDY_FILE, is_stored, refuse_stored, stored_marker
from training import make_run_config, train
from training.studies.sweep.results import run_stable_ranks
from training.studies.records import RunRecord


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    train(make_run_config("tiny", seed=3), run, device="cpu", progress=False)
    return run


def _without_weights(finished: Path, to: Path, marker: dict | None) -> Path:
    """A copy of ``finished`` without its weights, marked as stored with ``marker`` (None: unmarked)."""
    shutil.copytree(finished, to)
    (to / "model.safetensors").unlink()
    if marker is not None:
        (to / STORED_FILE).write_text(json.dumps({"format": STORED_FORMAT, **marker}))
    return to


def test_a_stored_run_reads_finished_with_its_ranks_and_lost_weights_do_not(finished: Path, tmp_path: Path) -> None:
    ranks = run_stable_ranks(finished)
    sha = file_sha256(finished / "model.safetensors")
    assert ranks and RunRecord.read(finished).status == RunStatus.COMPLETED
    stored = _without_weights(finished, tmp_path / "stored", {"weights_sha256": sha})
    lost = _without_weights(finished, tmp_path / "lost", None)
    other = _without_weights(
        finished, tmp_path / "other", {"weights_sha256": "0" * 64}
    )  # names weights this run did not finish with
    record = RunRecord.read(stored)
    assert record.status == RunStatus.COMPLETED and record.metrics == RunRecord.read(finished).metrics
    assert run_stable_ranks(stored) == ranks  # the cached ranks of the weights left behind
    for folder in (lost, other):
        assert RunRecord.read(folder).status == RunStatus.PENDING  # never silently finished
        assert run_stable_ranks(folder) == {}
    assert is_stored(stored, RunFolder(stored).read_metrics()) and not is_stored(other, RunFolder(other).read_metrics())
    assert stored_marker(lost) is None


def test_a_damaged_marker_names_the_file_and_reads_as_not_stored(finished: Path, tmp_path: Path) -> None:
    run = _without_weights(finished, tmp_path / "run", {"weights_sha256": "abc"})
    with pytest.raises(BadRunFile, match=r"stored\.json has a weights_sha256 that is not a SHA-256"):
        stored_marker(run)
    assert RunRecord.read(run).status == RunStatus.PENDING
    (run / STORED_FILE).write_text("{}")
    with pytest.raises(BadRunFile, match="is not a stored run's marker"):
        stored_marker(run)


def test_nothing_is_trained_loaded_or_written_in_stored_records(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training.cli import main

    study = tmp_path / "study"
    study.mkdir()
    (study / STORED_STUDY_FILE).write_text("{}")
    run = _without_weights(finished, study / "run", {"weights_sha256": file_sha256(finished / "model.safetensors")})
    with pytest.raises(BadRunFile, match=r"model\.safetensors is absent: this run is a stored record.*STUDY\.md"):
        load_model(run)
    with pytest.raises(ValueError, match="is in the stored records"):
        refuse_stored(study / "new-sweep", "a sweep")
    for out in (run, study / "fresh"):
        assert main(["train", "--preset", "tiny", "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "stored records" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in study.iterdir()) == ["run", STORED_STUDY_FILE]  # nothing made


def test_nothing_is_trained_or_written_in_the_campaigns_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided (issue 56): the GPU campaign's records (a cell folder, marked by its cell.json,
    and its parts) are records as stored studies are: ``train --out`` there is refused, so no
    weights or checkpoints land among them."""
    from training.cli import main

    cell = tmp_path / "campaign" / "01-fig2-small-init"
    (cell / "part-1" / "seed=1").mkdir(parents=True)
    (cell / "cell.json").write_text("{}")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    for out in (cell / "part-1" / "new", cell / "new", cell / "part-1" / "seed=1"):
        assert (
            main(["train", "--preset", "tiny", "--epochs", "1", "--device", "cpu", "--out", str(out), "--quiet"]) == 2
        )
        err = capsys.readouterr().err
        assert f"is in the GPU campaign's records {cell}" in err and err.count("\n") == 1, err
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
