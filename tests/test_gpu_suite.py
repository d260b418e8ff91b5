"""The GPU suite on a CPU: chunks under a time budget, the cost estimate, compiled training.

No timing is asserted: the chunk tests state the device's peak and efficiency
(``--peak-tflops``, ``--efficiency``), so the predicted epoch time is a known number, and
the suite's rule (stop training once less than two predicted epochs, and one as long as the
last, are left) then stops each task after exactly one epoch per chunk.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers import load_script
from safetensors.torch import load_file

from training import make_run_config, train_ensemble
from training.trainer.step import last_position_logits

TINY = ["--scale", "tiny", "--device", "cpu", "--seeds", "0", "--epochs", "2", "--threads", "1"]


def hand_count(cfg) -> tuple[int, int]:
    """FLOPs of one training sample and one evaluation forward, counted by hand: every block
    but the last at all positions (2 * weights per token, attention's two products at each
    position, fused kernel whose backward recomputes ``q k^T``), the last block at the last
    position only with its query folded into ``W_K`` (``x_j . (W_K q)``, plus ``q . b_K``)
    and its pattern applied before ``W_V``; the backward is twice the forward, less the
    gradient of ``b_K`` where the architecture has no biases (``neurips``)."""
    m = cfg.model
    d, layers, ctx, vocab, h, dh, dm = m.d_model, m.n_layers, m.n_ctx, m.d_vocab, m.n_heads, m.d_head, m.d_mlp
    per_token_layer = 2 * (3 * d * h * dh + h * dh * d + 2 * d * dm) + 2 * 2 * ctx * dh * h
    last = 2 * (d * h * dh + h * dh * d + h * dh + 2 * ctx * d * h + d * h * dh + h * dh * d + 2 * d * dm)
    forward = ctx * (layers - 1) * per_token_layer + last + 2 * d * vocab
    recompute = (layers - 1) * 2 * ctx * ctx * dh * h
    no_key_bias = 2 * h * dh if m.architecture == "neurips" else 0
    return 3 * forward + recompute - no_key_bias, forward


@pytest.mark.parametrize("architecture", ["neurips", "journal"])
def test_cost_estimate_equals_a_hand_count(architecture: str) -> None:
    cost = load_script("benchmarks/gpu_cost.py")
    cfg = make_run_config(
        "tiny", task="symmetric", architecture=architecture, n_heads=2, d_head=16, epochs=4, eval_every=3
    )
    train_flops, forward_flops = hand_count(cfg)
    flops = cost.run_flops(cfg, torch.device("cpu"))
    assert (flops.train, flops.forward) == (train_flops, forward_flops)
    evaluations = 2  # after epoch 3 (eval_every) and the last
    per_eval = cfg.train.eval_samples + 2 * cfg.data.n_test  # train_eval, id_test, heldout (4,3)
    expected = 4 * cfg.data.n_train * train_flops + evaluations * per_eval * forward_flops
    assert cost.remaining_flops(cfg, flops, 0) == expected
    assert cost.remaining_flops(cfg, flops, 3) == cfg.data.n_train * train_flops + per_eval * forward_flops


def test_dry_run_prints_the_paper_plan_without_training(tmp_path: Path) -> None:
    suite = load_script("benchmarks/gpu_suite.py")
    args = [
        "--scale",
        "paper",
        "--dry-run",
        "--device",
        "cpu",
        "--peak-tflops",
        "1000",
        "--out",
        str(tmp_path / "suite"),
    ]
    result = CliRunner().invoke(suite.main, args)
    assert result.exit_code == 0, result.output
    assert "matmul peak given: 1000 TFLOP/s" in result.output
    assert (
        "[symmetric] 6 runs (neurips, d_model 400, 759,375 samples, 210 epochs, batch 2048), 6 to train"
        in result.output
    )
    assert "[id-ood] 6 runs (journal, d_model 400" in result.output
    total = float(re.search(r"total (\S+) FLOP left", result.output).group(1))
    expected = 0.0
    for task, arch in (("symmetric", "neurips"), ("id-ood", "journal")):
        cfg = make_run_config("paper", task=task, architecture=arch)
        train_flops, forward_flops = hand_count(cfg)
        per_eval = (
            cfg.train.eval_samples + cfg.data.n_test + cfg.data.n_heldout
        )  # train_eval, id_test, heldout ((4,3), or (3,4) and (4,3))
        expected += 6 * cfg.train.epochs * (cfg.data.n_train * train_flops + per_eval * forward_flops)
    assert total == pytest.approx(expected, rel=5e-3)  # printed to 3 digits
    minutes = float(re.search(r"left: (\S+) min at 20%", result.output).group(1))
    assert minutes == pytest.approx(expected / (0.2 * 1e15) / 60, rel=2e-2)
    assert not (tmp_path / "suite").exists()


def _efficiency_for(seconds: float, together: bool, peak_tflops: float = 0.001) -> str:
    """The --efficiency at which one epoch of a tiny task (both runs if ``together``) is predicted at ``seconds``."""
    suite = load_script("benchmarks/gpu_suite.py")
    cost = load_script("benchmarks/gpu_cost.py")
    work = 0.0
    for run in suite.suite_configs(suite.suite_spec("tiny", (0,)), Path("unused"), 2)["symmetric"]:
        epoch = cost.run_flops(run.cfg, torch.device("cpu")).epoch(run.cfg, True)
        work = work + epoch if together else max(work, epoch)
    return f"{work / (seconds * peak_tflops * 1e12):.6f}"


def _results(root: Path) -> dict[str, tuple[dict, list]]:
    out = {}
    for folder in sorted(root.glob("seed-0/*/*-init")):
        metrics = json.loads((folder / "metrics.json").read_text())
        weights = load_file(folder / "model.safetensors")
        out[str(folder.relative_to(root))] = (metrics["status"], metrics["history"], metrics["final"], weights)
    return out


@pytest.mark.parametrize("mode", ["--ensemble", "--one-by-one"])
def test_two_chunks_end_identical_to_one_uninterrupted_run(tmp_path: Path, mode: str) -> None:
    suite = load_script("benchmarks/gpu_suite.py")
    together = mode == "--ensemble"
    stated = ["--peak-tflops", "0.001", "--efficiency", _efficiency_for(6.0, together), mode]
    whole = CliRunner().invoke(suite.main, [*TINY, *stated, "--out", str(tmp_path / "whole")])
    assert whole.exit_code == 0, whole.output

    chunked = [*TINY, *stated, "--out", str(tmp_path / "chunks"), "--budget-seconds", "10"]
    first = CliRunner().invoke(suite.main, chunked)
    assert first.exit_code == 0, first.output
    assert "4 of 4 runs remain" in first.output and "run the same command again to resume" in first.output
    table = (tmp_path / "chunks" / "gpu_suite.md").read_text()
    assert "interrupted (1/2 epochs)" in table  # the table so far: the budget stopped each run after its first epoch
    assert all((f / "checkpoint.pt").exists() for f in (tmp_path / "chunks" / "seed-0" / "symmetric").iterdir())
    for _ in range(4):  # the second chunk finishes unless the machine stalls for seconds
        again = CliRunner().invoke(suite.main, chunked)
        assert again.exit_code == 0, again.output
        if "remain" not in again.output:
            break
    assert "remain" not in again.output and "completed" in again.output

    expected, got = _results(tmp_path / "whole"), _results(tmp_path / "chunks")
    assert sorted(got) == sorted(expected) and len(got) == 4
    for name, (status, history, final, weights) in expected.items():
        assert got[name][:3] == (status, history, final), name
        assert all(torch.equal(got[name][3][k], v) for k, v in weights.items()), name


def test_a_chunk_that_cannot_fit_one_epoch_is_refused(tmp_path: Path) -> None:
    suite = load_script("benchmarks/gpu_suite.py")
    stated = ["--peak-tflops", "0.001", "--efficiency", _efficiency_for(100.0, True), "--ensemble"]
    result = CliRunner().invoke(suite.main, [*TINY, *stated, "--out", str(tmp_path), "--budget-seconds", "10"])
    assert result.exit_code == 1
    assert re.search(r"\[symmetric\] not started: one epoch of its \d run\(s\) is predicted at 100.0 s", result.output)
    assert "cannot fit one epoch of any unfinished task" in result.output and re.search(
        r"give at least 10\d seconds", result.output
    )
    assert not list(tmp_path.glob("*/*/checkpoint.pt")) and not list(tmp_path.glob("*/*/model.safetensors"))


@pytest.mark.slow
def test_compiled_logits_train_the_ensemble_as_eager() -> None:
    """``torch.compile(last_position_logits)`` as the ensemble's ``logits_fn`` (inductor, on
    this CPU): the ensemble compiles its whole vectorized forward, and trains as eager does."""
    cfgs = [make_run_config("tiny", epochs=2, n_train=600, gamma=g) for g in (0.5, 0.8)]  # a last batch of 88
    eager = train_ensemble(cfgs, device="cpu", progress=False)
    compiled = train_ensemble(cfgs, device="cpu", progress=False, logits_fn=torch.compile(last_position_logits))
    for e, c in zip(eager, compiled):
        for p, q in zip(e.model.parameters(), c.model.parameters()):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
        assert [h["loss"] for h in c.metrics["history"]] == pytest.approx(
            [h["loss"] for h in e.metrics["history"]], rel=1e-4
        )


def test_efficiency_of_earlier_chunks_comes_from_the_run_folders(tmp_path) -> None:
    """The earlier chunks' efficiency from the run folders' records (training.studies.records.RunRecord)."""
    from training.studies.records import RunRecord

    cost = load_script("benchmarks/gpu_cost.py")
    cfgs = [make_run_config("tiny", gamma=g) for g in (0.5, 0.8)]
    flops = cost.RunFlops(train=1e6, forward=3e5)

    def record(name: str, epochs: list[int], elapsed: float) -> RunRecord:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfgs[0].to_dict()))
        history = [{"epoch": e, "step": e, "loss": 1.0, "lr": 1e-3} for e in epochs]
        (tmp_path / name / "metrics.json").write_text(
            json.dumps({"status": "running", "final": {}, "history": history, "elapsed_s": elapsed})
        )
        return RunRecord.read(tmp_path / name)

    records = [record("a", [1, 2], 4.0), record("b", [2], 5.0)]
    work = 2 * 2 * cfgs[0].data.n_train * 1e6
    assert cost.measured_efficiency(cfgs, records, flops, 1e9, together=True) == pytest.approx(work / 5.0 / 1e9)
    assert cost.measured_efficiency(cfgs, records, flops, 1e9, together=False) == pytest.approx(work / 9.0 / 1e9)
    assert cost.measured_efficiency(cfgs, [None, record("c", [], 0.0)], flops, 1e9, together=True) is None


@pytest.mark.parametrize("together", [True, False])
def test_the_probe_runs_on_a_schedule_whose_warm_up_is_longer_than_its_steps(together: bool) -> None:
    """The paper preset warms up for 10 epochs; the probe's one-epoch throwaway runs must
    shrink the schedule with them (the first GPU run failed here: 'warmup_epochs (10.0) is
    longer than the run's 1 epochs')."""
    cost = load_script("benchmarks/gpu_cost.py")
    paper = make_run_config("paper", task="symmetric", architecture="neurips")
    assert paper.train.warmup_epochs > 1
    shrunk = cost.probe_configs([paper], 3)[0]
    assert (shrunk.train.epochs, shrunk.data.n_train, shrunk.train.warmup_epochs) == (
        1,
        3 * paper.train.batch_size,
        0.0,
    )
    assert (shrunk.model, shrunk.init, shrunk.train.lr, shrunk.train.batch_size) == (
        paper.model,
        paper.init,
        paper.train.lr,
        paper.train.batch_size,
    )
    cfgs = [make_run_config("tiny", gamma=g, epochs=6, warmup_epochs=3) for g in (0.5, 0.8)]
    flops = cost.run_flops(cfgs[0], torch.device("cpu"))
    efficiency, warmup = cost.probe_efficiency(cfgs, flops, 1e12, torch.device("cpu"), together, None, steps=1)
    assert efficiency > 0 and warmup > 0


def test_the_paper_protocol_trains_one_run_per_lr_and_reads_each_target_at_its_best(tmp_path: Path) -> None:
    """``--protocol paper --lrs``: the folders of ``interp-init reproduce --protocol paper``
    (one per regime, seed and lr), and ``summary-paper.json`` holding, per target, the best
    over both runs' evaluated epochs (checked against the runs' own histories)."""
    suite = load_script("benchmarks/gpu_suite.py")
    args = [*TINY, "--protocol", "paper", "--lrs", "1e-3,2e-3", "--probe-steps", "0", "--out", str(tmp_path)]
    result = CliRunner().invoke(suite.main, args)
    assert result.exit_code == 0, result.output
    names = sorted(p.parent.relative_to(tmp_path).as_posix() for p in tmp_path.glob("seed-0/*/*/model.safetensors"))
    assert names == [
        f"seed-0/{t}/{r}{lr}"
        for t in ("id-ood", "symmetric")
        for r in ("large-init", "small-init")
        for lr in ("", "__lr=0.002")
    ]
    table = (tmp_path / "gpu_suite.md").read_text()
    assert "paper protocol: per seed the best over learning rates" in table and "(lrs 1e-3,2e-3)" in table
    assert "| id-ood | journal | small-init | 0.8 | 0.002 | 0 |" in table
    summary = json.loads((tmp_path / "summary-paper.json").read_text())
    assert summary["protocol"] == "paper" and summary["lrs"] == [1e-3, 2e-3]
    row = summary["per_seed"][0]["runs"]["id-ood"]["small-init"]
    histories = [
        json.loads((tmp_path / "seed-0" / "id-ood" / name / "metrics.json").read_text())["history"]
        for name in ("small-init", "small-init__lr=0.002")
    ]
    assert row["ood_acc"] == pytest.approx(
        max(h["ood_acc"] for history in histories for h in history if "ood_acc" in h)
    )


@pytest.mark.parametrize(
    "flags", [["--protocol", "paper"], ["--lrs", "1e-3"]], ids=["paper-without-lrs", "lrs-without-paper"]
)
def test_a_protocol_without_its_lr_grid_is_refused(tmp_path: Path, flags: list[str]) -> None:
    suite = load_script("benchmarks/gpu_suite.py")
    result = CliRunner().invoke(suite.main, [*TINY, *flags, "--out", str(tmp_path / "suite")])
    assert result.exit_code == 2 and "--lrs" in result.output
    assert not (tmp_path / "suite").exists()


def test_one_task_trains_and_reads_only_that_task(tmp_path: Path) -> None:
    suite = load_script("benchmarks/gpu_suite.py")
    result = CliRunner().invoke(
        suite.main, [*TINY, "--task", "symmetric", "--probe-steps", "0", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "seed-0").iterdir() if p.is_dir()) == ["symmetric"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["per_seed"][0]["runs"]) == ["symmetric"] and "[id-ood]" not in result.output


def test_a_folder_of_runs_is_refused_as_out(tmp_path: Path) -> None:
    """``--out`` is a reproduction's folder: inside a run folder, or a sweep's, it is refused
    before anything is written (``interp_init.outputs.refuse_nested``, as ``reproduce``)."""
    suite = load_script("benchmarks/gpu_suite.py")
    first = CliRunner().invoke(
        suite.main, [*TINY, "--task", "symmetric", "--probe-steps", "0", "--out", str(tmp_path / "suite")]
    )
    assert first.exit_code == 0, first.output
    run = tmp_path / "suite" / "seed-0" / "symmetric" / "small-init"
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    for out in (run / "nested", sweep):
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        result = CliRunner().invoke(suite.main, [*TINY, "--task", "symmetric", "--probe-steps", "0", "--out", str(out)])
        assert result.exit_code == 2 and "cannot be written there" in result.output, result.output
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
