"""The run folder's promises: files bound to their run, every file validated with one error
type, full disks and kills leaving nothing half-made (docs/reliability.md)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp_init import ModelConfig, build_model, load_model
from interp_init import fileio as fileio_module
from interp_init.model import save_weights
from interp_init.runfolder import (
    BadRunFile,
    RunFolder,
    RunFolderBusy,
    RunStatus,
    atomic_write,
    config_digest,
    file_sha256,
)
from training import make_run_config, train
from training.cli import main

_CLI = [sys.executable, "-c", "import sys; from training.cli import main; sys.exit(main())"]
_ARGS = ["train", "--preset", "tiny", "--epochs", "6", "--n-train", "2000", "--cosine-epochs", "5", "--quiet"]
#: The command that trained ``two_runs``' large-init run.
_LARGE = ["train", "--preset", "tiny", "--gamma", "0.5", "--quiet"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **extra}


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("two")
    for gamma, name in ((0.8, "small"), (0.5, "large")):
        train(make_run_config("tiny", gamma=gamma, seed=0), root / name, device="cpu", progress=False)
    return root / "small", root / "large"


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


# ------------------------------------------------------------------ bound to their run


def test_finished_run_records_the_digests_that_bind_its_files(two_runs: tuple[Path, Path]) -> None:
    small, _ = two_runs
    metrics = json.loads((small / "metrics.json").read_text())
    config = json.loads((small / "config.json").read_text())
    assert metrics["config_digest"] == config_digest(config)
    assert metrics["weights_sha256"] == file_sha256(small / "model.safetensors")
    from safetensors import safe_open

    with safe_open(str(small / "model.safetensors"), framework="pt") as handle:
        assert handle.metadata()["run_digest"] == metrics["config_digest"]


def test_weights_copied_from_another_run_are_refused_everywhere(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    small, large = two_runs
    run = _copy(large, tmp_path / "large")
    shutil.copy(small / "model.safetensors", run / "model.safetensors")
    with pytest.raises(BadRunFile, match=r"model\.safetensors holds the weights of another run"):
        load_model(run)
    # the command line (train on the finished folder, report) names the file and exits 2
    assert main([*_LARGE, "--out", str(run)]) == 2
    assert "model.safetensors holds the weights of another run" in capsys.readouterr().err
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 2
    assert "model.safetensors holds the weights of another run" in capsys.readouterr().err


def test_metrics_copied_from_another_run_are_refused(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    small, large = two_runs
    run = _copy(large, tmp_path / "large")
    shutil.copy(small / "metrics.json", run / "metrics.json")
    with pytest.raises(BadRunFile, match=r"metrics\.json holds the metrics of another run"):
        load_model(run)


def test_weights_rewritten_after_the_run_are_refused(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, large = two_runs
    run = _copy(large, tmp_path / "large")
    cfg = make_run_config("tiny", gamma=0.5, seed=0)
    other = build_model(cfg.model, cfg.init, seed=1)
    save_weights(other, cfg.model, run / "model.safetensors", run_digest=RunFolder(run).digest())
    with pytest.raises(BadRunFile, match="is not the file this run finished with"):
        load_model(run)


def test_folders_without_digests_still_load(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, large = two_runs
    run = _copy(large, tmp_path / "old")
    metrics = json.loads((run / "metrics.json").read_text())
    for key in ("config_digest", "weights_sha256"):
        metrics.pop(key)
    (run / "metrics.json").write_text(json.dumps(metrics))
    cfg = make_run_config("tiny", gamma=0.5, seed=0)
    weights = load_file(str(run / "model.safetensors"))
    model = build_model(cfg.model, cfg.init, seed=0)
    model.load_state_dict(weights, strict=False)
    save_weights(model, cfg.model, run / "model.safetensors")  # no run digest, as before digests existed
    loaded = load_model(run)
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in weights.items())


# -------------------------------------------------------- every file read is validated

_CONFIG_DAMAGE = {
    "a list": (b"[1, 2]", "holds an array, not a JSON object"),
    "null": (b"null", "holds null, not a JSON object"),
    "an empty list": (b"[]", "holds an array, not a JSON object"),
    "no model section": (b'{"init": {}}', "has no 'model' section"),
    "not UTF-8": (b'{"model": "\xff\xfe"}', "is not UTF-8 text"),
    "not JSON": (b'{"model": ', "is not valid JSON"),
}
_METRICS_DAMAGE = {
    "a list": (b"[1, 2]", "holds an array, not a JSON object"),
    "null": (b"null", "holds null, not a JSON object"),
    "an unknown status": (b'{"status": "done", "final": {}, "history": []}', "has status 'done'"),
    "no final": (b'{"status": "completed", "history": []}', "has a 'final' that is not a JSON object"),
    "a history of numbers": (
        b'{"status": "completed", "final": {}, "history": [1]}',
        "has a 'history' entry that is not a JSON object",
    ),
    "not UTF-8": (b"\xff\xfe\x00", "is not UTF-8 text"),
}


@pytest.mark.parametrize("damage", list(_CONFIG_DAMAGE))
def test_damaged_config_names_the_file(
    two_runs: tuple[Path, Path], tmp_path: Path, damage: str, capsys: pytest.CaptureFixture
) -> None:
    content, problem = _CONFIG_DAMAGE[damage]
    run = _copy(two_runs[1], tmp_path / "run")
    (run / "config.json").write_bytes(content)
    with pytest.raises(BadRunFile, match=problem.replace("(", r"\(").replace(")", r"\)")) as info:
        load_model(run)
    assert info.value.path == run / "config.json"
    assert main([*_ARGS, "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run / 'config.json'} " in err and problem in err


@pytest.mark.parametrize("damage", list(_METRICS_DAMAGE))
def test_damaged_metrics_name_the_file(
    two_runs: tuple[Path, Path], tmp_path: Path, damage: str, capsys: pytest.CaptureFixture
) -> None:
    content, problem = _METRICS_DAMAGE[damage]
    run = _copy(two_runs[1], tmp_path / "run")
    (run / "metrics.json").write_bytes(content)
    with pytest.raises(BadRunFile, match=problem) as info:
        RunFolder(run).read_metrics()
    assert info.value.path == run / "metrics.json"
    assert RunFolder(run).status() == RunStatus.PENDING  # damaged: never read as finished
    assert main([*_LARGE, "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run / 'metrics.json'} " in err and problem in err


# ----------------------------------------------- full disks and kills leave nothing half-made


def _disk_full_on(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic write of the file ``name`` writes half of its bytes, then fails with ENOSPC."""
    real = fileio_module._write_temporary

    def failing(tmp: Path, data: object) -> None:
        real(tmp, data)
        if tmp.name.startswith(f".{name}.tmp"):
            tmp.write_bytes(tmp.read_bytes()[: tmp.stat().st_size // 2])
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp))

    monkeypatch.setattr(fileio_module, "_write_temporary", failing)


@pytest.mark.parametrize("name", ["config.json", "checkpoint.pt", "metrics.json", "model.safetensors"])
def test_full_disk_names_the_path_leaves_no_temporary_and_resumes(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    cfg = make_run_config("tiny", seed=0, epochs=4, cosine_epochs=3.0, n_train=1000)
    reference = train(cfg, tmp_path / "ref", device="cpu", progress=False)
    with monkeypatch.context() as patch:
        _disk_full_on(name, patch)
        with pytest.raises(OSError) as info:
            train(cfg, run, device="cpu", progress=False)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(run / name)
    assert "run the same command again to resume" in str(info.value)
    assert _temporaries(run) == []
    resumed = train(cfg, run, device="cpu", progress=False)
    strip = lambda m: {k: v for k, v in m.items() if k != "elapsed_s"}  # noqa: E731
    assert strip(resumed.metrics) == strip(reference.metrics)
    assert _temporaries(run) == []


def test_full_disk_through_the_command_line_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _disk_full_on("model.safetensors", monkeypatch)
    assert main([*_ARGS, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "run" / "model.safetensors") in err and "resume" in err


@pytest.mark.slow  # a command-line process; the fault-injected writer covers a full disk in the default run
def test_a_real_small_filesystem(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.strip() or 'mount failed'}); the fault-injected writer covers it"
        )
    try:
        run = mount / "run"
        proc = subprocess.run([*_CLI, *_ARGS, "--out", str(run)], capture_output=True, text=True, env=_env())
        assert proc.returncode == 2, proc.stderr
        assert "No space left" in proc.stderr or "no space left" in proc.stderr
        assert "resume" in proc.stderr and proc.stderr.count("\n") == 1
        assert _temporaries(run) == []
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


@pytest.fixture(scope="module")
def cli_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run of ``_ARGS`` through the command line, uninterrupted."""
    ref = tmp_path_factory.mktemp("reference") / "run"
    subprocess.run([*_CLI, *_ARGS, "--out", str(ref)], check=True, env=_env(), capture_output=True)
    return ref


@pytest.mark.slow  # command-line processes; tests/training/test_reliability.py kills after a write in the default run
@pytest.mark.parametrize("name", ["checkpoint.pt", "model.safetensors"])
def test_kill_at_a_write_then_the_same_command_finishes_the_run(name: str, tmp_path: Path, cli_reference: Path) -> None:
    """Killed between writing the temporary file and renaming it (the hardest moment)."""
    stage = "before"
    ref, run = cli_reference, tmp_path / "run"
    count = "2" if name == "checkpoint.pt" else "1"
    killed = subprocess.run(
        [*_CLI, *_ARGS, "--out", str(run)], env=_env(INTERP_INIT_KILL_AT=f"{stage}:{name}:{count}"), capture_output=True
    )
    assert killed.returncode == -9
    left = _temporaries(run)
    assert len(left) == 1 and left[0].startswith(f".{name}.tmp"), left
    subprocess.run([*_CLI, *_ARGS, "--out", str(run)], check=True, env=_env(), capture_output=True)
    assert _temporaries(run) == []
    a, b = json.loads((ref / "metrics.json").read_text()), json.loads((run / "metrics.json").read_text())
    assert {k: v for k, v in a.items() if k != "elapsed_s"} == {k: v for k, v in b.items() if k != "elapsed_s"}
    assert (ref / "model.safetensors").read_bytes() == (run / "model.safetensors").read_bytes()


def test_atomic_write_removes_its_temporary_on_any_failure(tmp_path: Path) -> None:
    def broken(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise RuntimeError("serializer failed")

    with pytest.raises(RuntimeError, match="serializer failed"):
        atomic_write(tmp_path / "x.bin", broken)
    assert list(tmp_path.iterdir()) == []


def test_temporaries_of_live_writers_are_kept_and_pids_are_not_trusted(tmp_path: Path) -> None:
    import fcntl

    held = tmp_path / ".metrics.json.tmp-0123abcd"
    # Dead writers whose names carry a PID that is alive now (ours, init's): PIDs are reused
    # and differ between namespaces, so only the writer's lock tells whether it lives.
    dead = [
        tmp_path / f".metrics.json.tmp{os.getpid()}",
        tmp_path / ".config.json.tmp1",
        tmp_path / ".checkpoint.pt.tmp-ffee",
    ]
    for path in [held, *dead]:
        path.write_text("{}")
    with open(held, "rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        assert sorted(RunFolder(tmp_path).sweep_temporary()) == sorted(dead)
        assert held.exists() and not any(path.exists() for path in dead)


def test_an_empty_path_is_refused(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ValueError, match="path is empty"):
        RunFolder("")
    assert main([*_ARGS, "--out", ""]) == 2
    assert "path is empty" in capsys.readouterr().err


def test_model_config_of_a_run(two_runs: tuple[Path, Path]) -> None:
    cfg = make_run_config("tiny", gamma=0.8, seed=0)
    assert RunFolder(two_runs[0]).model_config() == cfg.model
    assert isinstance(RunFolder(two_runs[0]).model_config(), ModelConfig)
    assert RunFolder(two_runs[0]).status() == RunStatus.COMPLETED == "completed"


def test_a_second_process_training_the_same_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from interp_init.runfolder import RunFolder\n"
            "with RunFolder(sys.argv[1]).lock():\n    print('held', flush=True); time.sleep(600)",
            str(run),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy, match=rf"being trained by another process \(pid {holder.pid}\)"):
            train(make_run_config("tiny", seed=0), run, device="cpu", progress=False)
        assert main([*_ARGS, "--out", str(run)]) == 2
        assert f"(pid {holder.pid})" in capsys.readouterr().err
        assert not (run / "config.json").exists()  # refused before anything was written
    finally:
        holder.kill()
        holder.wait()
    train(make_run_config("tiny", seed=0), run, device="cpu", progress=False)  # a killed holder no longer holds it
    assert RunFolder(run).status() == RunStatus.COMPLETED


def test_a_sweep_folder_with_copied_weights_names_the_file(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from training.studies.sweep import collect_results

    sweep = tmp_path / "sweep"
    small, large = (_copy(run, sweep / run.name) for run in two_runs)
    shutil.copy(small / "model.safetensors", large / "model.safetensors")
    table = collect_results(sweep, write=False).set_index("run")
    assert table.loc["small", "status"] == "completed"
    assert table.loc["large", "status"] == "unreadable"
    assert "model.safetensors holds the weights of another run" in table.loc["large", "error"]
    assert main(["phase-diagram", str(sweep)]) == 1
    assert "1 of 2 runs unreadable" in capsys.readouterr().err
