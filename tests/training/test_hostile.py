"""The failure classes hostile testing found (issue 26), each tested over a list of its
instances, not only the one first reported.

1. finished work of another run is never overwritten, whichever file is missing;
2. a second sweep on a folder is refused up front, and a run another process trains is
   never counted as failed;
3. no temporary file or lock is left after any signal, and one line is printed;
4. a run folder is a leaf: no run, sweep or diagram inside one, no run in a sweep's folder;
5. no traceback for a device the machine lacks or a run that cannot fit in memory;
6. messages name the real cause and the file;
7. numeric options are refused outside the range where they mean something;
8. a grid too large to run is refused before its configs are built;
9. the Python API refuses meta-device models and wrong argument types with ``ValueError``.

The signal, namespace and process-pool cases run command-line processes and are marked
slow; each class keeps fast cases in the default run.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import training
from interp_init import build_model, gamma_init_, load_model
from interp_init.fileio import MissingRunFile, hold_folder
from interp_init.runfolder import RunFolder, RunStatus
from probes import attention_patterns, embedding_pca, merged_weight, singular_value_spectra, stable_rank
from training.cli import main
from training.config import make_run_config
from training.studies.study import MAX_POINTS, StudySpec

_TRAIN = ["train", "--preset", "tiny", "--quiet"]
_TINY_SPEC = {"base": {"preset": "tiny", "epochs": 2, "n_train": 500}, "grid": {"seed": [0, 1]}}


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny run (gamma 0.5, seed 0), trained as ``interp-init train`` does."""
    run = tmp_path_factory.mktemp("finished") / "run"
    training.train(make_run_config("tiny", seed=0), run, device="cpu", progress=False)
    return run


@pytest.fixture()
def run_copy(finished: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "R"))


def _spec(tmp_path: Path, spec: dict = _TINY_SPEC) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("interp-init: "), err
    return err


# ------------------------------------------------ 1. finished work is never overwritten


def _edit_gamma(run: Path, gamma: float) -> None:
    config = json.loads((run / "config.json").read_text())
    config["init"]["gamma"] = gamma
    (run / "config.json").write_text(json.dumps(config))


#: (what is done to the finished gamma-0.5 run, the gamma then asked for, the file named)
_OVERWRITES = {
    "config removed": (lambda r: (r / "config.json").unlink(), 0.8, "model.safetensors"),
    "config and metrics removed": (
        lambda r: [(r / n).unlink() for n in ("config.json", "metrics.json")],
        0.8,
        "model.safetensors",
    ),
    "config and weights removed": (
        lambda r: [(r / n).unlink() for n in ("config.json", "model.safetensors")],
        0.8,
        "metrics.json",
    ),
    "config edited, metrics removed": (
        lambda r: (_edit_gamma(r, 0.8), (r / "metrics.json").unlink()),
        0.8,
        "model.safetensors",
    ),
    "config removed, other seed": (lambda r: (r / "config.json").unlink(), 0.5, "model.safetensors"),
}


@pytest.mark.parametrize("case", list(_OVERWRITES))
def test_finished_work_of_another_run_is_never_overwritten(
    case: str, run_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, gamma, named = _OVERWRITES[case]
    damage(run_copy)
    before = _files(run_copy)
    seed = "1" if "seed" in case else "0"
    assert main([*_TRAIN, "--gamma", str(gamma), "--seed", seed, "--out", str(run_copy)]) == 2
    err = _one_error_line(capsys)
    assert str(run_copy / named) in err and "another --out" in err, err
    assert _files(run_copy) == before  # nothing rewritten, nothing added


def test_a_checkpoint_of_another_config_without_config_json_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    cfg = make_run_config("tiny", seed=0, epochs=3)
    folder = RunFolder(run)
    folder.create()
    folder.write_config(cfg.to_dict())
    folder.save_checkpoint(
        {"config": cfg.to_dict(), "model": {}, "optimizer": {}, "epoch": 1, "step": 1, "history": [], "elapsed_s": 0.0}
    )
    folder.config_path.unlink()
    before = _files(run)
    assert main([*_TRAIN, "--epochs", "3", "--gamma", "0.8", "--out", str(run)]) == 2
    assert "checkpoint.pt is a checkpoint from another config" in _one_error_line(capsys)
    assert _files(run) == before


def test_the_same_run_with_config_json_removed_is_recognised_not_retrained(
    run_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = (run_copy / "model.safetensors").read_bytes()
    (run_copy / "config.json").unlink()
    assert main([*_TRAIN, "--out", str(run_copy)]) == 0
    assert (run_copy / "model.safetensors").read_bytes() == weights
    assert RunFolder(run_copy).status() == RunStatus.COMPLETED


def test_a_sweep_refuses_a_point_folder_holding_another_runs_weights(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "S"
    shutil.copytree(finished, out / "seed=0")
    (out / "seed=0" / "config.json").unlink()
    before = _files(out)
    assert main(["sweep", str(_spec(tmp_path)), "--out", str(out), "--quiet"]) == 2
    assert "seed=0/model.safetensors holds the finished weights of another run" in _one_error_line(capsys)
    assert _files(out) == before


# -------------------------------------------------- 2. one sweep per folder at a time


@pytest.mark.parametrize(
    "extra", [[], ["--backend", "ensemble"], ["--extend"]], ids=["sequential", "ensemble", "extend"]
)
def test_a_second_sweep_on_a_held_folder_is_refused_up_front(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "S"
    out.mkdir()
    with hold_folder(
        out, "is being swept by another process ({owner}); wait for it to finish, or choose another --out"
    ):
        code = main(["sweep", str(_spec(tmp_path)), "--out", str(out), "--quiet", *extra])
        err = capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # the holder's: nothing trained, nothing written
    assert code == 2 and "being swept by another process" in err and "failed" not in err


@pytest.mark.parametrize("seeds", [["--seed", "1"], ["--seeds", "1,2"]], ids=["one-seed", "population"])
def test_a_second_reproduce_into_a_held_folder_is_refused_up_front(
    seeds: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training.studies.study import REPRODUCE_BUSY

    out = tmp_path / "R"
    out.mkdir()
    with hold_folder(out, REPRODUCE_BUSY):
        code = main(
            ["reproduce", "--preset", "tiny", *seeds, "--out", str(out), "--device", "cpu", "--quiet", "--workers", "1"]
        )
        err = capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # the holder's: nothing trained, nothing written
    assert code == 2 and "being reproduced into by another process" in err
    assert (
        main(
            ["reproduce", "--preset", "tiny", *seeds, "--out", str(out), "--device", "cpu", "--quiet", "--workers", "1"]
        )
        == 0
    )
    assert ".lock" not in {p.name for p in out.iterdir()}  # released when the command ends


@pytest.mark.parametrize("backend", ["local", "ensemble"])
def test_a_run_another_process_trains_is_not_counted_as_failed(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "S"
    (out / "seed=1").mkdir(parents=True)
    with RunFolder(out / "seed=1").lock():
        code = main(["sweep", str(_spec(tmp_path)), "--out", str(out), "--quiet", "--backend", backend])
        err = capsys.readouterr().err
    assert code == 1  # not all of the sweep's work is done, and it says why
    assert "1 of 2 runs running" in err and "failed" not in err
    assert not (out / "seed=1" / "error.txt").exists()
    assert RunFolder(out / "seed=0").status() == RunStatus.COMPLETED


@pytest.mark.slow  # two command-line processes
def test_two_sweep_processes_on_one_folder(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"base": {"preset": "tiny", "epochs": 30, "n_train": 2000}, "grid": {"seed": [0, 1, 2]}})
    out = tmp_path / "S"
    argv = [sys.executable, "-m", "training.cli", "sweep", str(spec), "--out", str(out), "--quiet"]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for(lambda: (out / ".lock").exists() and list(out.glob("*/config.json")), first)
        second = subprocess.run(argv, capture_output=True, text=True, env=_env())
        assert second.returncode == 2 and "being swept by another process" in second.stderr, second.stderr
        assert first.wait(timeout=600) == 0, first.stderr.read()
    finally:
        first.kill()
    assert "3 completed" in first.stdout.read()


# ------------------------------------------ 3. no leftovers after any signal, one line


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **extra}


def _leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*") if p.is_file())


def _wait_for(condition, proc: subprocess.Popen, timeout_s: float = 240) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None and not condition():
        time.sleep(0.05)
    assert proc.poll() is None and condition(), "the process ended, or never reached the point to signal"


_SIGNALS = {
    signal.SIGTERM: (143, "interp-init: terminated (SIGTERM)\n"),
    signal.SIGINT: (130, "interp-init: aborted\n"),
    signal.SIGHUP: (129, "interp-init: terminated (SIGHUP)\n"),
}


def _unhandled(signum: int, frame: object) -> None:
    raise RuntimeError("the signal reached the process's own handler: nothing turned it into a clean exit")


@pytest.mark.parametrize("sig", list(_SIGNALS), ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize(
    ("command", "at"), [("train", "checkpoint.pt"), ("train", "model.safetensors"), ("sweep", "checkpoint.pt")]
)
def test_a_signal_during_a_write_leaves_no_lock_or_temporary(
    sig: int, command: str, at: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The signal arrives between a temporary file's write and its rename (in this process)."""
    from interp_init import fileio

    def deliver(path: Path, stage: str) -> None:
        if stage == "before" and path.name == at:
            os.kill(os.getpid(), sig)  # its handler runs before the next line

    monkeypatch.setattr(fileio, "_fault_point", deliver)
    previous = {s: signal.signal(s, _unhandled) for s in _SIGNALS}
    try:
        out = tmp_path / "out"
        argv = (
            [*_TRAIN, "--epochs", "3", "--out", str(out)]
            if command == "train"
            else ["sweep", str(_spec(tmp_path)), "--out", str(out), "--quiet"]
        )
        code = main(argv)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert (code, capsys.readouterr().err) == _SIGNALS[sig]
    assert _leftovers(out) == []


@pytest.mark.parametrize(
    "name",
    [".metrics.json.tmp{pid}", ".model.safetensors.tmp1", ".checkpoint.pt.tmp-0a1b2c3d", ".config.json.tmp{ppid}"],
)
def test_a_dead_writers_temporary_is_removed_whatever_pid_its_name_holds(name: str, run_copy: Path) -> None:
    stale = run_copy / name.format(pid=os.getpid(), ppid=os.getppid())
    stale.write_bytes(b"half a file")
    training.train(make_run_config("tiny", seed=0), run_copy, device="cpu", progress=False)
    assert not stale.exists()


def _cli(*args: str) -> list[str]:
    code = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); from training.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, *args]


@pytest.mark.slow  # a command-line process per case, signalled while it trains
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["train", "sweep", "sweep-pool", "reproduce"])
def test_a_signalled_command_exits_cleanly_with_one_line(sig: int, command: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = _spec(
        tmp_path, {"base": {"preset": "tiny", "epochs": 200, "n_train": 2000}, "grid": {"gamma": [0.3, 0.5, 0.8, 1.0]}}
    )
    argv = {
        "train": ["train", "--preset", "tiny", "--epochs", "200", "--n-train", "2000", "--quiet", "--out", str(out)],
        "sweep": ["sweep", str(spec), "--out", str(out), "--quiet"],
        "sweep-pool": ["sweep", str(spec), "--out", str(out), "--workers", "2", "--threads", "1", "--quiet"],
        "reproduce": [
            "reproduce",
            "--preset",
            "tiny",
            "--out",
            str(out),
            "--workers",
            "2",
            "--quiet",
            "--device",
            "cpu",
        ],
    }[command]
    proc = subprocess.Popen(_cli(*argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for(lambda: any(p.name == "checkpoint.pt" for p in out.rglob("checkpoint.pt")), proc)
        proc.send_signal(sig)
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert (code, err) == _SIGNALS[sig], err  # one line, no "leaked semaphore objects" warning
    assert _leftovers(out) == []


@pytest.mark.slow  # a command-line process in its own PID namespace
def test_a_temporary_left_in_another_pid_namespace_is_removed(tmp_path: Path) -> None:
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode
    ):
        pytest.skip("unshare --pid is not available here")
    run = tmp_path / "run"
    args = ["--preset", "tiny", "--quiet", "--epochs", "3", "--out", str(run)]
    # bash stays PID 1 of the namespace (PID 1 ignores its own SIGKILL): the run is PID 2.
    inner = (
        f"INTERP_INIT_KILL_AT=before:checkpoint.pt:1 {sys.executable} -m training.cli train {' '.join(args)}; exit $?"
    )
    killed = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "bash", "-c", inner], env=_env(), capture_output=True
    )
    assert killed.returncode == 128 + signal.SIGKILL
    assert [p.name for p in run.iterdir() if ".tmp" in p.name], "no temporary file was left to clean"
    subprocess.run([sys.executable, "-m", "training.cli", "train", *args], env=_env(), check=True, capture_output=True)
    assert [p.name for p in run.iterdir() if ".tmp" in p.name] == []


# ---------------------------------------------------------- 4. a run folder is a leaf


_NESTED = {
    "train inside a run": lambda r, s, t: [*_TRAIN, "--out", str(r / "nested")],
    "train deep inside a run": lambda r, s, t: [*_TRAIN, "--out", str(r / "a" / "b")],
    "sweep into a run": lambda r, s, t: ["sweep", str(s), "--out", str(r), "--quiet"],
    "sweep inside a run": lambda r, s, t: ["sweep", str(s), "--out", str(r / "sweep"), "--quiet"],
    "sweep dry-run into a run": lambda r, s, t: ["sweep", str(s), "--out", str(r), "--dry-run"],
    "phase diagram of a run": lambda r, s, t: ["phase-diagram", str(r)],
    "phase diagram written into a run": lambda r, s, t: ["phase-diagram", str(t), "--out", str(r / "pd.html")],
}


@pytest.mark.parametrize("case", list(_NESTED))
def test_nothing_is_written_inside_a_run_folder(
    case: str, run_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"  # a folder of runs: what a phase diagram may be drawn from
    shutil.copytree(run_copy, runs / "a")
    before = _files(run_copy)
    assert main(_NESTED[case](run_copy, _spec(tmp_path), runs)) == 2
    assert "run folder" in _one_error_line(capsys)
    assert _files(run_copy) == before and not (run_copy / "nested").exists()


@pytest.mark.parametrize("holds", ["sweep.json", "runs"])
def test_a_run_is_not_trained_into_a_folder_of_runs(
    holds: str, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "S"
    folder.mkdir()
    if holds == "sweep.json":
        (folder / "sweep.json").write_text(json.dumps(_TINY_SPEC))
    else:
        shutil.copytree(finished, folder / "a")
    before = _files(folder)
    assert main([*_TRAIN, "--out", str(folder)]) == 2
    assert ("is a sweep folder" if holds == "sweep.json" else "holds run folders") in _one_error_line(capsys)
    assert _files(folder) == before


# ------------------------------------------------------------ 5. no traceback for a user


_NO_TRACEBACK = {
    "train on meta": ([*_TRAIN, "--device", "meta"], "'meta'"),
    "train on mps": ([*_TRAIN, "--device", "mps"], "'mps'"),
    "train on a missing GPU": ([*_TRAIN, "--device", "cuda:7"], "'cuda:7'"),
    "train on an unknown device": ([*_TRAIN, "--device", "xla"], "'xla'"),
    "a model too wide": ([*_TRAIN, "--d-model", "200000", "--d-mlp", "200000"], "--d-model"),
    "too many layers": (
        [*_TRAIN, "--n-layers", "100000", "--d-model", "4096", "--n-heads", "1", "--d-head", "4096"],
        "--n-layers",
    ),
    "a vocabulary too large": ([*_TRAIN, "--d-vocab", "10000000000"], "--d-vocab"),
    "too many samples": ([*_TRAIN, "--n-train", "200000000000"], "--n-train"),  # more than any machine has
    "sweep on meta": (["sweep", "SPEC", "--device", "meta", "--quiet"], "'meta'"),
    "reproduce on meta": (["reproduce", "--preset", "tiny", "--device", "meta", "--quiet"], "'meta'"),
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the device cases assume a machine without CUDA")
@pytest.mark.parametrize("case", list(_NO_TRACEBACK))
def test_bad_devices_and_sizes_are_one_line_before_anything_is_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, named = _NO_TRACEBACK[case]
    args = [str(_spec(tmp_path)) if a == "SPEC" else a for a in args]
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    assert named in _one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_report_on_meta_is_one_line(finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(finished), "--device", "meta", "--out", str(tmp_path / "r.html")]) == 2
    assert "'meta'" in _one_error_line(capsys)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    "error", [RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"), MemoryError()]
)
def test_running_out_of_memory_is_one_line_naming_what_to_lower(
    error: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import training.trainer.loop

    def exhausted(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(training.trainer.loop, "make_run_data", exhausted)
    assert main([*_TRAIN, "--out", str(tmp_path / "out")]) == 2
    err = _one_error_line(capsys)
    assert "out of memory" in err and "--n-train" in err and "--d-model" in err


# --------------------------------------------------- 6. messages name the real cause


def test_a_hand_edited_config_is_named_as_such(run_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_gamma(run_copy, 0.8)
    assert main([*_TRAIN, "--gamma", "0.8", "--out", str(run_copy)]) == 2
    err = _one_error_line(capsys)
    assert (
        f"{run_copy / 'config.json'} was changed after the run finished" in err and "copied from another run" not in err
    )


@pytest.mark.parametrize("name", ["model.safetensors", "checkpoint.pt"])
def test_an_unreadable_file_says_permission_denied_not_truncated(
    name: str, run_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tests run as root, whom permissions do not stop: opening the file is made to fail as for another user."""
    import interp_init.model
    from safetensors import SafetensorError

    path = run_copy / name
    if name == "checkpoint.pt":
        shutil.copy(run_copy / "model.safetensors", path)
    real_open = Path.open

    def denied(self: Path, *args: object, **kwargs: object):  # noqa: ANN202
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    def safe_open_denied(*args: object, **kwargs: object) -> None:
        raise SafetensorError("Permission denied (os error 13)")

    monkeypatch.setattr(Path, "open", denied)
    monkeypatch.setattr(interp_init.model, "safe_open", safe_open_denied)
    with pytest.raises(ValueError, match=r"cannot be opened \(Permission denied\); give this user read access") as info:
        if name == "model.safetensors":
            load_model(run_copy)
        else:
            RunFolder(run_copy).load_checkpoint(json.loads((run_copy / "config.json").read_text()))
    assert str(path) in str(info.value) and "truncated" not in str(info.value)


def test_a_run_a_live_process_trains_is_running_not_interrupted(
    run_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = json.loads((run_copy / "metrics.json").read_text())
    (run_copy / "model.safetensors").unlink()
    (run_copy / "metrics.json").write_text(json.dumps({**metrics, "status": "running", "final": {}}))
    assert RunFolder(run_copy).status() == RunStatus.INTERRUPTED
    with RunFolder(run_copy).lock():
        assert RunFolder(run_copy).status() == RunStatus.RUNNING
        assert main(["report", str(run_copy), "--out", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "running" in err and "interrupted" not in err


_SPECS = {
    "base a string": ({"base": "tiny", "grid": {"gamma": [0.5]}}, "'base' must be a table"),
    "grid a list": ({"base": {}, "grid": [0.5]}, "'grid' must be a table"),
    "base a list": ({"base": ["tiny"], "grid": {"gamma": [0.5]}}, "'base' must be a table"),
    "description a number": ({"grid": {"gamma": [0.5]}, "description": 3}, "'description' must be a string"),
    "grid values a string": ({"grid": {"gamma": "0.5"}}, "must be a list of values"),
    "not UTF-8": (b'{"grid": {"gamma": [0.5]}, "description": "caf\xe9"}', "is not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(_SPECS))
def test_a_bad_spec_names_its_file_and_the_problem(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content, problem = _SPECS[case]
    path = tmp_path / "spec.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = _one_error_line(capsys)
    assert str(path) in err and problem in err


# ------------------------------------------------------- 7. nonsense numbers refused


_NONSENSE = {
    "gamma 1e308": (["--gamma", "1e308"], "gamma must be a number in (0, "),
    "gamma 50": (["--gamma", "50"], "gamma must be a number in (0, "),
    "gamma_qk 1e308": (["--gamma-qk", "1e308"], "gamma_qk must be a number in (0, "),
    "gamma_embed 40": (["--gamma-embed", "40"], "gamma_embed must be a number in (0, "),
    "eps 1e308": (["--eps", "1e308"], "eps must be a number in (0, 1]"),
    "eps 2": (["--eps", "2"], "eps must be a number in (0, 1]"),
}


@pytest.mark.parametrize("case", list(_NONSENSE))
def test_nonsense_numbers_are_refused_saying_the_range(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, message = _NONSENSE[case]
    assert main([*_TRAIN, *args, "--out", str(tmp_path / "out")]) == 2
    assert message in _one_error_line(capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--id-threshold", "nan"],
        ["--ood-threshold", "-5"],
        ["--id-threshold", "1.5"],
        ["--pair-threshold", "2"],
        ["--loss-threshold", "0"],
        ["--loss-threshold", "inf"],
        ["--ood-threshold", "nan"],
    ],
    ids=lambda a: " ".join(a),
)
def test_phase_diagram_thresholds_are_refused_outside_their_range(
    args: list[str], finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(finished, runs / "a")
    before = _files(runs)
    assert main(["phase-diagram", str(runs), *args]) == 2
    err = _one_error_line(capsys)
    assert args[0] in err and ("[0, 1]" in err or "> 0" in err)
    assert _files(runs) == before


def test_gamma_init_refuses_a_gamma_that_draws_zeros() -> None:
    cfg = make_run_config("tiny")
    model = build_model(cfg.model, cfg.init, 0)
    with pytest.raises(ValueError, match="would be zero"):
        gamma_init_(model, gamma=1e308, seed=0)


# ----------------------------------------------------------- 8. grids too large to run


@pytest.mark.parametrize(
    "shape", [(100,) * 5, (MAX_POINTS + 1,), (101, 100), (30, 30, 30)], ids=lambda s: "x".join(map(str, s))
)
def test_a_grid_too_large_is_refused_before_its_configs_are_built(
    shape: tuple[int, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = ["gamma", "lr", "weight_decay", "warmup_epochs", "cosine_epochs"]
    grid = {key: [round(0.1 + i * 1e-4, 6) for i in range(n)] for key, n in zip(keys, shape, strict=False)}
    with pytest.raises(ValueError, match=r"spec grid has [\d,]+ points .* more than the 10,000"):
        StudySpec.from_dict({"base": {"preset": "tiny"}, "grid": grid})
    assert main(["sweep", str(_spec(tmp_path, {"base": {"preset": "tiny"}, "grid": grid})), "--dry-run"]) == 2
    assert "split it" in _one_error_line(capsys)


def test_a_grid_at_the_limit_is_accepted() -> None:
    assert (
        StudySpec.from_dict(
            {
                "base": {"preset": "tiny"},
                "grid": {"seed": list(range(100)), "gamma": [0.1 + i / 1000 for i in range(100)]},
            }
        ).size
        == MAX_POINTS
    )


# ------------------------------------------ 9. the Python API: meta models, wrong types


def _meta_model():  # noqa: ANN202
    cfg = make_run_config("tiny")
    return copy.deepcopy(build_model(cfg.model, cfg.init, 0)).to_empty(device="meta")


_API = {
    "gamma_init_ on meta": lambda run: gamma_init_(_meta_model(), gamma=0.5, seed=0),
    "gamma_init_ on a non-model": lambda run: gamma_init_("model", gamma=0.5, seed=0),
    "build_model on meta": lambda run: build_model(
        make_run_config("tiny").model, make_run_config("tiny").init, 0, device="meta"
    ),
    "load_model on meta": lambda run: load_model(run, device="meta"),
    "stable rank on meta": lambda run: stable_rank(merged_weight(_meta_model(), "W_Q", 0)),
    "spectra on meta": lambda run: singular_value_spectra(_meta_model()),
    "embedding PCA on meta": lambda run: embedding_pca(_meta_model()),
    "attention on meta": lambda run: attention_patterns(_meta_model(), torch.zeros(1, 9, dtype=torch.long)),
    "train a dict": lambda run: training.train({"preset": "tiny"}, run.parent / "D"),
    "train into a number": lambda run: training.train(make_run_config("tiny"), 123),
    "train on meta": lambda run: training.train(make_run_config("tiny"), run.parent / "M", device="meta"),
}


@pytest.mark.parametrize("case", list(_API))
def test_the_api_raises_value_errors_naming_the_argument(case: str, run_copy: Path) -> None:
    with pytest.raises(ValueError) as info:
        _API[case](run_copy)
    message = str(info.value)
    assert any(word in message for word in ("meta", "HookedTransformer", "cfg must be", "out_dir must be")), message
    assert not (run_copy.parent / "D").exists() and not (run_copy.parent / "M").exists()


def test_load_model_without_weights_names_the_file_and_the_fix(run_copy: Path) -> None:
    (run_copy / "model.safetensors").unlink()
    with pytest.raises(MissingRunFile, match=r"model\.safetensors does not exist; the run has not finished") as info:
        load_model(run_copy)
    assert isinstance(info.value, ValueError) and isinstance(info.value, FileNotFoundError)
