"""The released code's recipe as options (docs/science.md#where-the-papers-the-released-code-and-this-toolkit-differ):
its training and test sets, balanced per pair, against hand counts; ``drop_last``'s steps; the
early stop on a tiny run; and the config digests of folders written before the options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import read_metrics

from interp_init.runfolder import config_digest
from training import make_run_config, train
from training.cli import main
from training.config import LATER_OPTIONS
from training import train_ensemble
from training.trainer.loop import make_run_data

# The released scripts (sjtuzzw/complexity_control, script.py and data.py): data_size 900,000
# over 32 groups, 16 pairs x {keys with x mod 9 != p: weight 9, keys with x mod 9 == p: weight 1}.
GROUP_WEIGHTS = 16 * 9 + 16 * 1
PER_PAIR_TRAIN = 900_000 * 9 // GROUP_WEIGHTS  # 50,625
PER_PAIR_ID_TEST = 900_000 * 1 // GROUP_WEIGHTS  # 5,625


def _pair_counts(samples) -> dict[tuple[int, int], int]:
    pairs, counts = torch.unique(samples.anchor_pairs, dim=0, return_counts=True)
    return {tuple(p): int(c) for p, c in zip(pairs.tolist(), counts.tolist())}


def test_the_paper_preset_draws_the_released_symmetric_sets() -> None:
    cfg = make_run_config("paper", task="symmetric")
    assert (PER_PAIR_TRAIN, PER_PAIR_ID_TEST) == (50_625, 5_625)
    seen = [(a, b) for a in range(1, 5) for b in range(1, 5) if (a, b) != (4, 3)]
    assert (
        (cfg.data.n_train, cfg.data.n_test, cfg.data.heldout_size)
        == (15 * 50_625, 15 * 5_625, 50_625)
        == (759_375, 84_375, 50_625)
    )
    assert (
        cfg.train.steps_per_epoch(cfg.data.n_train) == 759_375 // 2048 == 370
    )  # drop_last: 1,615 samples left out each epoch
    data = make_run_data(cfg)
    assert _pair_counts(data.train) == dict.fromkeys(seen, 50_625)
    assert _pair_counts(data.id_test) == dict.fromkeys(seen, 5_625)
    assert _pair_counts(data.heldout) == {(4, 3): 50_625}
    # keys with and without the test condition, as the released groups split them (x mod 9 == p only in the ID test set)
    for split, test_keys in ((data.train, False), (data.id_test, True), (data.heldout, False)):
        assert bool(
            ((split.keys % 9) == split.key_positions).all()
            if test_keys
            else ((split.keys % 9) != split.key_positions).all()
        )
    # the key position is drawn at random per sample, as the released generator does: not balanced
    positions = torch.bincount(data.train.key_positions, minlength=7)
    assert len(set(positions.tolist())) > 1 and positions.min() > 759_375 / 7 * 0.98


def test_the_other_tasks_draw_their_released_sets() -> None:
    ood = make_run_config("paper", task="id-ood").data
    assert (ood.n_train, ood.n_test, ood.heldout_size, ood.balanced_pairs) == (
        14 * 50_625,
        14 * 5_625,
        2 * 50_625,
        True,
    )
    complexity = make_run_config("paper", task="complexity", k=2).data  # data_size 100,000: 5,625 and 625 per pair
    assert (
        (complexity.n_train, complexity.n_test, complexity.n_heldout)
        == (16 * 5_625, 16 * 625, None)
        == (90_000, 10_000, None)
    )
    assert make_run_config("paper", task="addition").data.balanced_pairs is False  # not an anchor task


def test_balanced_sizes_are_checked_where_the_config_is_made() -> None:
    with pytest.raises(
        ValueError,
        match=r"--n-train 1000 is not a multiple of the 15 pairs of the 'symmetric' task's train split.*--n-train 990",
    ):
        make_run_config("tiny", balanced_pairs=True, n_train=1000, n_test=495)
    with pytest.raises(
        ValueError, match=r"--n-heldout 11 is not a multiple of the 2 pairs of the 'id-ood' task's heldout split"
    ):
        make_run_config("tiny", task="id-ood", balanced_pairs=True, n_train=1400, n_test=490, n_heldout=11)
    with pytest.raises(
        ValueError,
        match=r"balanced_pairs applies to the .*'symmetric'.* task only, not 'addition': leave it unset",
    ):
        make_run_config("tiny", task="addition", balanced_pairs=True)
    with pytest.raises(ValueError, match="task 'complexity' has none: leave --n-heldout unset"):
        make_run_config("tiny", task="complexity", n_heldout=100)
    with pytest.raises(ValueError, match="no step would train"):
        make_run_config("tiny", drop_last=True, n_train=100, batch_size=256)
    assert make_run_config("tiny", balanced_pairs=True, n_train=1500, n_test=495, n_heldout=7).data.heldout_size == 7


def test_options_added_later_keep_an_older_folders_config_digest(tmp_path: Path) -> None:
    cfg = make_run_config("tiny")
    written = cfg.to_dict()
    for name in LATER_OPTIONS:  # a config that leaves them at their defaults writes none of them
        assert all(name not in section for section in written.values() if isinstance(section, dict))
    older = json.loads(json.dumps(written))  # as config.json was before the options existed
    assert config_digest(older) == config_digest(cfg.to_dict())
    paper = make_run_config("paper").to_dict()
    assert (
        paper["train"]["drop_last"] is True
        and paper["data"]["balanced_pairs"] is True
        and paper["data"]["n_heldout"] == 50_625
    )
    # a folder of the paper preset as it was (900,000 samples at random, 10,000 in each test set) is asked for by its sizes
    text = {"n_train": 900_000, "n_test": 10_000, "n_heldout": 10_000, "balanced_pairs": False, "drop_last": False}
    before = make_run_config("paper", **text)
    assert before.data.n_heldout is None and not any(
        name in before.to_dict()[s] for name in LATER_OPTIONS for s in ("data", "train")
    )
    done = train(cfg.with_options(epochs=1, cosine_epochs=0.0), tmp_path / "r", device="cpu", progress=False)
    again = train(
        cfg.with_options(epochs=1, cosine_epochs=0.0, n_heldout=cfg.data.n_test, drop_last=False),
        tmp_path / "r",
        device="cpu",
        progress=False,
    )
    assert again.metrics == done.metrics  # the same config: the finished run is read, not refused or retrained


def test_drop_last_takes_whole_batches_only(tmp_path: Path) -> None:
    cfg = make_run_config("tiny", drop_last=True)  # 2,000 samples, batch 256: 7 steps, not 8
    metrics = train(cfg, tmp_path / "r", device="cpu", progress=False).metrics
    assert [r["step"] for r in metrics["history"]] == [7, 14, 21]
    assert [r["step"] for r in train(make_run_config("tiny"), device="cpu", progress=False).metrics["history"]] == [
        8,
        16,
        24,
    ]


def _losses(cfg) -> list[float]:
    return [r["loss"] for r in train(cfg, device="cpu", progress=False).metrics["history"]]


def test_the_early_stop_ends_a_run_completed_at_the_epoch_its_loss_falls_below(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = _losses(make_run_config("tiny", seed=0))
    assert losses[1] < losses[0]
    threshold = (losses[0] + losses[1]) / 2  # the epoch-mean loss of epoch 2 is below it, epoch 1's is not
    out = tmp_path / "stopped"
    assert (
        main(
            [
                "train",
                "--preset",
                "tiny",
                "--seed",
                "0",
                "--stop-below-loss",
                str(threshold),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        f"completed (stopped after epoch 2: training loss {losses[1]:.3g} < --stop-below-loss {threshold:g})"
        in capsys.readouterr().out
    )
    metrics = read_metrics(out)
    assert metrics["status"] == "completed" and [r["epoch"] for r in metrics["history"]] == [1, 2]
    assert metrics["stopped_early"] == {"epoch": 2, "loss": losses[1], "stop_below_loss": threshold}
    assert metrics["final"] == metrics["history"][-1] and "id_acc" in metrics["final"]  # evaluated where it stopped
    assert {p.name for p in out.iterdir()} == {"config.json", "metrics.json", "model.safetensors"}
    # the same weights as a run of two epochs (the tiny schedule's lr does not depend on --epochs)
    two = train(make_run_config("tiny", seed=0, epochs=2), device="cpu", progress=False)
    stopped = train(
        make_run_config("tiny", seed=0, stop_below_loss=threshold), out, device="cpu", progress=False
    )  # read, not retrained
    assert all(torch.equal(a, b) for a, b in zip(two.model.parameters(), stopped.model.parameters()))
    # a threshold no epoch reaches changes nothing but the config
    assert (
        "stopped_early"
        not in train(make_run_config("tiny", seed=0, stop_below_loss=1e-7), device="cpu", progress=False).metrics
    )


def test_an_ensemble_member_that_stops_is_finished_at_once_and_the_others_train_on(tmp_path: Path) -> None:
    fast, slow = (
        make_run_config("tiny", seed=0, lr=3e-3),
        make_run_config("tiny", seed=0, lr=1e-5, warmup_start_lr=1e-6, min_lr=1e-6),
    )
    fast_losses, slow_losses = _losses(fast), _losses(slow)
    threshold = (fast_losses[0] + fast_losses[1]) / 2
    assert fast_losses[1] < threshold < min(fast_losses[0], *slow_losses)
    cfgs = [c.with_options(stop_below_loss=threshold) for c in (fast, slow)]
    results = train_ensemble(cfgs, [tmp_path / "fast", tmp_path / "slow"], device="cpu", progress=False)
    assert results[0].metrics["stopped_early"]["epoch"] == 2 and len(results[0].metrics["history"]) == 2
    assert "stopped_early" not in results[1].metrics and len(results[1].metrics["history"]) == 3
    assert read_metrics(tmp_path / "fast")["status"] == read_metrics(tmp_path / "slow")["status"] == "completed"
    alone = train(cfgs[0], device="cpu", progress=False)  # the stopped member kept its weights of epoch 2
    for a, b in zip(alone.model.parameters(), results[0].model.parameters()):
        assert torch.allclose(a, b, atol=1e-5)
