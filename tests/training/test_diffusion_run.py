"""The concept-diffusion kind of run through the one executor: a tiny run trains into its run
folder, a finished one is read and not trained again, one stopped at a deadline or killed
(SIGKILL) after a checkpoint resumes to the weights of an uninterrupted run, bad input is
refused in one line, and the judge counts a sample without an object wrong on every concept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from training.launch import Job, execute
from training.launch.base import check_jobs, run_kind
from training.launch.folders import load_diffusion_run
from training.trainer.diffusion import DiffusionRunConfig, diffusion_config


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "model.safetensors"))


def test_a_tiny_run_trains_through_the_executor_and_is_read_after(tmp_path: Path) -> None:
    cfg = diffusion_config("tiny", gamma=0.5, seed=1)
    assert run_kind(cfg) == "concept-diffusion"
    run = tmp_path / "run"
    assert execute([Job("run", cfg, run)], device="cpu")[0].status == "completed"
    metrics = json.loads((run / "metrics.json").read_text())
    final = metrics["final"]
    assert set(final["unseen"]) == {"010", "011"} and set(final["seen"]) == {"000", "100", "001", "111"}
    assert final["unseen"]["010"]["n"] == cfg.data.eval_samples
    assert final["id_acc"] == pytest.approx(sum(v["all_acc"] for v in final["seen"].values()) / 4)
    assert len(metrics["history"]) == cfg.train.epochs and not (run / "checkpoint.pt").exists()
    stamp = (run / "model.safetensors").stat().st_mtime_ns
    assert execute([Job("run", cfg, run)], device="cpu")[0].status == "completed"
    assert (run / "model.safetensors").stat().st_mtime_ns == stamp  # read, not trained again
    loaded = load_diffusion_run(run)
    assert loaded.config == cfg and loaded.metrics["final"] == final


def test_a_transformer_command_refuses_a_diffusion_run_naming_its_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training.cli import main

    run = tmp_path / "run"
    assert execute([Job("run", diffusion_config("tiny", seed=1), run)], device="cpu")[0].status == "completed"
    assert main(["report", str(run), "--out", str(tmp_path / "page.html")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"interp-init: error: {run / 'config.json'} is a 'concept-diffusion' run's config; "
        "this reads transformer runs: give their folders"
    )
    assert not (tmp_path / "page.html").exists()


def test_a_run_stopped_at_its_deadline_resumes_to_the_uninterrupted_weights(tmp_path: Path) -> None:
    cfg = diffusion_config("tiny", gamma=1.0, seed=2, epochs=3)
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert execute([Job("w", cfg, whole)], device="cpu")[0].status == "completed"
    ret = execute([Job("s", cfg, stopped)], device="cpu", deadline=0.0)  # long past: stops after its first epoch
    assert ret[0].status == "interrupted" and (stopped / "checkpoint.pt").exists()
    assert json.loads((stopped / "metrics.json").read_text())["status"] == "interrupted"
    assert execute([Job("s", cfg, stopped)], device="cpu")[0].status == "completed"
    a, b = _weights(whole), _weights(stopped)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (
        json.loads((whole / "metrics.json").read_text())["final"]
        == json.loads((stopped / "metrics.json").read_text())["final"]
    )


def test_a_run_killed_after_a_checkpoint_resumes_to_the_uninterrupted_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SIGKILL (the run folder's fault-injection switch) right after the second checkpoint's
    # rename, before the metrics of that epoch are written: the process cannot clean up, and
    # the same call then resumes from the checkpoint to the weights and metrics of a run never
    # stopped, each epoch trained once
    import os
    import signal
    import subprocess
    import sys

    cfg = diffusion_config("tiny", gamma=1.0, seed=4, epochs=4)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    script = (
        "import sys; from pathlib import Path; from training.launch import Job, execute; "
        "from training.trainer.diffusion import diffusion_config; "
        "execute([Job('k', diffusion_config('tiny', gamma=1.0, seed=4, epochs=4), Path(sys.argv[1]))], device='cpu', threads=1)"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "INTERP_INIT_KILL_AT": "after:checkpoint.pt:2"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(killed)], capture_output=True, env=env, timeout=600, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    assert (killed / "checkpoint.pt").exists() and not (killed / "model.safetensors").exists()
    assert torch.load(killed / "checkpoint.pt", weights_only=True)["epoch"] == 2
    assert json.loads((killed / "metrics.json").read_text())["status"] == "running"  # as the kill left it (epoch 1's)
    from training.launch import folders

    starts = []  # the epoch each call of the loop starts from (a restart would be 0)
    fit = folders.fit_diffusion
    monkeypatch.setattr(
        folders, "fit_diffusion", lambda c, **kw: starts.append((kw["state"] or {}).get("epoch", 0)) or fit(c, **kw)
    )
    assert execute([Job("k", cfg, killed)], device="cpu")[0].status == "completed"
    assert execute([Job("w", cfg, whole)], device="cpu")[0].status == "completed"
    assert starts == [2, 0]
    a, b = _weights(whole), _weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    resumed, uninterrupted = (json.loads((d / "metrics.json").read_text()) for d in (killed, whole))
    assert [h["epoch"] for h in resumed["history"]] == [1, 2, 3, 4] and resumed["history"] == uninterrupted["history"]
    assert resumed["final"] == uninterrupted["final"] and not (killed / "checkpoint.pt").exists()


def test_bad_input_is_refused_in_one_line(tmp_path: Path) -> None:
    cfg = diffusion_config("tiny", seed=0)
    data = cfg.to_dict()
    assert DiffusionRunConfig.from_dict(data) == cfg
    for bad, match in (
        ({**data, "extra": 1}, "unknown key"),
        ({**data, "train": {**data["train"], "batch": 3}}, r"\[train\] has unknown field"),
        ({**data, "train": {**data["train"], "lr": -1}}, "lr must be"),
        ({**data, "kind": "transformer"}, "not a concept-diffusion"),
        ({**data, "seed": 5}, "seeds are not"),
    ):
        with pytest.raises(ValueError, match=match) as err:
            DiffusionRunConfig.from_dict(bad, "x/config.json")
        assert "\n" not in str(err.value) and str(err.value).startswith("x/config.json")
    with pytest.raises(ValueError, match="unknown diffusion size"):
        diffusion_config("huge")
    with pytest.raises(ValueError, match="unknown training option"):
        diffusion_config("tiny", epoch=3)
    run = tmp_path / "run"
    assert execute([Job("run", cfg, run)], device="cpu")[0].status == "completed"
    other = diffusion_config("tiny", seed=9)
    with pytest.raises(ValueError, match="holds a run with another config"):
        check_jobs([Job("run", other, run)])
    half = tmp_path / "half"  # an unfinished run: the executor refuses another config there, in one line
    assert execute([Job("half", cfg, half)], device="cpu", deadline=0.0)[0].status == "interrupted"
    ret = execute([Job("half", other, half)], device="cpu")[0]
    assert ret.status == "failed" and "different config" in ret.error and "\n" not in ret.error
    assert DiffusionRunConfig.from_dict(json.loads((half / "config.json").read_text())) == cfg


def test_an_unknown_kind_of_run_fails_in_one_line(tmp_path: Path) -> None:
    from dataclasses import dataclass

    from training.launch.base import register_run_kind

    @dataclass(frozen=True)
    class Other:
        kind = "no-such-kind"

        def to_dict(self) -> dict:
            return {"model": {}, "kind": self.kind}

    ret = execute([Job("x", Other(), tmp_path / "x")], device="cpu")[0]  # type: ignore[arg-type]
    assert ret.status == "failed" and ret.error.startswith("ValueError: unknown kind of run 'no-such-kind'")
    for kind, trainer in (("transformer", print), ("", print), ("k", "not callable")):
        with pytest.raises(ValueError, match="run kind"):
            register_run_kind(kind, trainer)  # type: ignore[arg-type]


def test_every_size_ends_its_forward_process_near_noise_as_the_released_schedule_does() -> None:
    from training.trainer.diffusion import DIFFUSION_SIZES

    released = float(diffusion_config("paper").schedule.alphabar()[-1])  # 500 steps, betas 1e-4 to 0.02
    assert released < 0.01
    for size in DIFFUSION_SIZES:
        last = float(diffusion_config(size).schedule.alphabar()[-1])
        assert last < 0.02, f"{size}: alphabar at the last step is {last:.3g}; x_T would not be noise"
    assert float(diffusion_config("cpu").schedule.alphabar()[-1]) == pytest.approx(released, rel=0.2)


def test_the_judge_counts_a_sample_without_an_object_wrong_on_every_concept() -> None:
    from interp_init.concept_graphs import concept_graph_images
    from training.trainer.diffusion import judge_samples

    config = diffusion_config("cpu").images
    side = config.image_size
    speck = torch.ones(3, side, side)
    speck[:, 10:12, 10:12] = torch.tensor([0.9, 0.1, 0.1])[:, None, None]
    # blank, a grey field, a black field, a speck: before the no-object outcome the fields read
    # as a large red circle (000) and the speck as a small red circle (010)
    blank = torch.stack(
        [torch.ones(3, side, side), torch.full((3, side, side), 0.5), torch.zeros(3, side, side), speck]
    )
    for code in ("000", "010", "011"):
        got = judge_samples(blank, code, config)
        assert got == {"shape_acc": 0.0, "size_acc": 0.0, "colour_acc": 0.0, "all_acc": 0.0, "empty": 1.0, "n": 4}
    renders = concept_graph_images(["010"], per_code=4, seed=3, config=config).images
    got = judge_samples(torch.cat([renders, blank]), "010", config)
    assert got == {"shape_acc": 0.5, "size_acc": 0.5, "colour_acc": 0.5, "all_acc": 0.5, "empty": 0.5, "n": 8}
