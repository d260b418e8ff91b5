"""Reliability: kill and resume, safe loading, determinism, validated configs."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import read_metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from interp_init import InitConfig, ModelConfig, build_model, load_model
from interp_init.model import save_weights
from training import make_run_config, train

_CLI = [sys.executable, "-c", "import sys; from training.cli import main; sys.exit(main())"]
_KILL_ARGS = ["train", "--preset", "tiny", "--epochs", "12", "--n-train", "3000", "--cosine-epochs", "11", "--quiet"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _strip_times(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != "elapsed_s"}


def test_sigkill_then_same_command_resumes_to_identical_result(tmp_path: Path) -> None:
    ref, run = tmp_path / "ref", tmp_path / "run"
    subprocess.run([*_CLI, *_KILL_ARGS, "--out", str(ref)], check=True, env=_env(), capture_output=True)
    # SIGKILL right after the second checkpoint and its metrics landed (the run folder's fault-injection switch)
    killed = subprocess.run(
        [*_CLI, *_KILL_ARGS, "--out", str(run)],
        env={**_env(), "INTERP_INIT_KILL_AT": "after:metrics.json:2"},
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL
    metrics = read_metrics(run)
    assert metrics["status"] == "running" and len(metrics["history"]) == 2
    subprocess.run([*_CLI, *_KILL_ARGS, "--out", str(run)], check=True, env=_env(), capture_output=True)
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name]
    assert _strip_times(read_metrics(run)) == _strip_times(read_metrics(ref))
    a, b = load_file(str(ref / "model.safetensors")), load_file(str(run / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_config_records_every_derived_seed(tmp_path: Path) -> None:
    cfg = make_run_config("tiny", seed=3)
    train(cfg, tmp_path / "r", device="cpu", progress=False)
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["seeds"] == cfg.seeds and len(set(cfg.seeds.values())) == len(cfg.seeds)
    assert make_run_config("tiny", seed=4).seeds["init"] != cfg.seeds["init"]


# ------------------------------------------------------------------ safe loading


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    train(make_run_config("tiny", seed=0), out, device="cpu", progress=False)
    return out


def _copy(run: Path, dest: Path) -> Path:
    dest.mkdir()
    for path in run.iterdir():
        (dest / path.name).write_bytes(path.read_bytes())
    return dest


def test_truncated_weights_name_the_file(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path / "r")
    data = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"model\.safetensors is not a readable safetensors weights file"):
        load_model(run)


def test_foreign_weights_file_is_refused(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path / "r")
    (run / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ValueError, match="model.safetensors"):
        load_model(run)


def test_weights_from_another_config_are_refused(finished_run: Path, tmp_path: Path) -> None:
    run = _copy(finished_run, tmp_path / "r")
    other = ModelConfig(n_layers=1, d_model=16, n_heads=1, d_head=16, d_mlp=32)
    save_weights(build_model(other, InitConfig(gamma=0.5), seed=0), other, run / "model.safetensors")
    with pytest.raises(ValueError, match="the checkpoint is from another config"):
        load_model(run)


def test_missing_run_folder_is_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a run folder"):
        load_model(tmp_path / "nothing")


def _interrupted_run(tmp_path: Path) -> tuple[Path, object]:
    cfg = make_run_config("tiny", seed=0)
    steps = math.ceil(cfg.data.n_train / cfg.train.batch_size)
    calls = {"n": 0}

    def stop_in_epoch_two(model, tokens):
        calls["n"] += 1
        if calls["n"] > steps + 5:
            raise KeyboardInterrupt
        return model(tokens)[:, -1]

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "r", device="cpu", progress=False, logits_fn=stop_in_epoch_two)
    assert (tmp_path / "r" / "checkpoint.pt").exists()
    return tmp_path / "r", cfg


def test_truncated_checkpoint_names_the_file(tmp_path: Path) -> None:
    run, cfg = _interrupted_run(tmp_path)
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[:100])
    with pytest.raises(ValueError, match=r"checkpoint\.pt is not a readable checkpoint"):
        train(cfg, run, device="cpu", progress=False)


def test_checkpoint_with_code_is_not_executed(tmp_path: Path) -> None:
    run, cfg = _interrupted_run(tmp_path)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"format": "interp-init-checkpoint/1", "evil": Evil()}, run / "checkpoint.pt")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        train(cfg, run, device="cpu", progress=False)
    assert not marker.exists()


def test_checkpoint_from_another_config_is_refused(tmp_path: Path) -> None:
    run, cfg = _interrupted_run(tmp_path)
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    state["config"]["init"]["gamma"] = 0.123
    torch.save(state, run / "checkpoint.pt")
    with pytest.raises(ValueError, match="checkpoint from another config"):
        train(cfg, run, device="cpu", progress=False)


# ------------------------------------------------------------ property-based configs

_VALID = {
    "n_layers": st.integers(1, 3),
    "d_model": st.sampled_from([8, 16]),
    "n_heads": st.integers(1, 3),
    "d_head": st.sampled_from([4, 8]),
    "d_mlp": st.sampled_from([8, 32]),
    "gamma": st.floats(0.05, 2.0),
    "convention": st.sampled_from(["reference", "fan_in"]),
    "task": st.sampled_from(["symmetric", "id-ood", "complexity"]),
    "weight_decay": st.floats(0.0, 1.0),
    "lr": st.floats(1e-5, 1e-2),
    "batch_size": st.integers(1, 64),
    "grad_clip": st.floats(0.0, 5.0),
}
_INVALID = {
    "n_layers": st.sampled_from([0, -1, 1.5, "2", True]),
    "d_model": st.sampled_from([0, -8, 2.0]),
    "gamma": st.sampled_from([0.0, -0.5, float("nan"), float("inf"), float("-inf")]),
    "convention": st.text(max_size=8).filter(lambda s: s not in ("reference", "fan_in")),
    "task": st.text(max_size=8).filter(lambda s: s not in ("symmetric", "id-ood", "complexity")),
    "lr": st.sampled_from([0.0, -1e-3, float("nan"), float("inf")]),
    "weight_decay": st.sampled_from([-0.01, float("nan")]),
    "batch_size": st.sampled_from([0, -5, 3.5]),
    "n_train": st.sampled_from([0, -1]),
    "epochs": st.sampled_from([0, -2]),
    "beta2": st.sampled_from([1.0, -0.1, 2.0]),
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional=_VALID))
def test_every_accepted_config_trains_one_step(options: dict) -> None:
    options = {"n_train": 32, "n_test": 16, "epochs": 1, "eval_samples": 16, **options}
    if "lr" in options:  # the schedule's floor under its peak (a schedule is checked as a whole)
        options |= {"warmup_start_lr": options["lr"] / 10, "min_lr": options["lr"] / 10}
    cfg = make_run_config("tiny", **options)
    metrics = train(cfg, device="cpu", progress=False).metrics
    assert metrics["status"] in ("completed", "diverged")
    assert metrics["history"] and metrics["history"][0]["step"] == math.ceil(32 / cfg.train.batch_size)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(_INVALID)).flatmap(lambda k: st.tuples(st.just(k), _INVALID[k])))
def test_every_rejected_config_says_why(item: tuple) -> None:
    field, value = item
    with pytest.raises(ValueError) as info:
        make_run_config("tiny", **{field: value})
    message = str(info.value)
    assert field in message or (field == "task" and "unknown task" in message), message
