"""The training loop and its run folder: metrics, loading, determinism, resume, divergence."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import torch
from helpers import read_metrics
from safetensors.torch import load_file

from interp_init import load_model
from training import make_dataset, make_run_config, train
from training.config import TrainConfig
from training.trainer.loop import full_forward_last
from training.trainer.step import last_position_logits


def _tiny(**kw):
    return make_run_config("tiny", **{"gamma": 0.8, "seed": 0, **kw})


def test_run_folder_and_metrics_layout(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = train(_tiny(), out, device="cpu", progress=False)
    assert {p.name for p in out.iterdir()} == {"config.json", "metrics.json", "model.safetensors"}
    metrics = read_metrics(out)
    assert metrics == json.loads(json.dumps(result.metrics))
    assert metrics["status"] == "completed"
    final = metrics["final"]
    for key in ("train_acc", "id_acc", "per_pair", "heldout"):
        assert key in final
    assert set(final["heldout"]) == {"4,3"} and set(final["heldout"]["4,3"]) == {"inferential", "symmetric"}
    assert len(final["per_pair"]) == 16 and "4,3" in final["per_pair"]
    assert [r["epoch"] for r in metrics["history"]] == [1, 2, 3]
    for record in metrics["history"]:
        assert {"epoch", "step", "loss", "train_acc", "id_acc"} <= set(record)
    config = json.loads((out / "config.json").read_text())
    assert (
        config["init"]["gamma"] == 0.8
        and config["seed"] == 0
        and set(config["seeds"]) >= {"init", "data.train", "shuffle"}
    )


def test_id_ood_metrics(tmp_path: Path) -> None:
    metrics = train(_tiny(task="id-ood"), tmp_path / "r", device="cpu", progress=False).metrics
    final = metrics["final"]
    assert 0 <= final["ood_acc"] <= 1 and 0 <= final["commutativity"] <= 1
    assert "heldout" not in final and {"3,4", "4,3"} <= set(final["per_pair"])


def test_loaded_model_has_identical_logits(tmp_path: Path) -> None:
    result = train(_tiny(), tmp_path / "r", device="cpu", progress=False)
    loaded = load_model(tmp_path / "r")
    tokens = make_dataset("symmetric", "train", 64, seed=9).tokens
    assert torch.equal(loaded(tokens), result.model(tokens))


def test_same_seed_same_weights_and_metrics(tmp_path: Path) -> None:
    a = train(_tiny(), tmp_path / "a", device="cpu", progress=False)
    b = train(_tiny(), tmp_path / "b", device="cpu", progress=False)
    c = train(_tiny(seed=1), tmp_path / "c", device="cpu", progress=False)
    for (name, pa), pb in zip(a.model.named_parameters(), b.model.parameters()):
        assert torch.equal(pa, pb), name
    assert a.metrics["history"] == b.metrics["history"]
    saved_a, saved_b = (
        load_file(str(tmp_path / "a" / "model.safetensors")),
        load_file(str(tmp_path / "b" / "model.safetensors")),
    )
    assert saved_a.keys() == saved_b.keys() and all(torch.equal(saved_a[k], saved_b[k]) for k in saved_a)
    assert not torch.equal(a.model.W_E, c.model.W_E)


def test_learns_on_cpu(tmp_path: Path) -> None:
    """A few seconds of training on a small model fits much of the data (the loop really trains)."""
    cfg = make_run_config(
        "tiny",
        gamma=0.5,
        d_model=64,
        d_head=32,
        n_heads=2,
        d_mlp=128,
        n_train=8000,
        epochs=12,
        lr=3e-3,
        warmup_epochs=1.0,
        cosine_epochs=11.0,
        batch_size=256,
    )
    metrics = train(cfg, device="cpu", progress=False).metrics
    assert metrics["history"][-1]["loss"] < metrics["history"][0]["loss"] - 1.0
    assert metrics["final"]["train_acc"] > 0.2


class _Interrupt(Exception):
    pass


def _interrupting(after_calls: int):
    calls = {"n": 0}

    def logits_fn(model, tokens):
        calls["n"] += 1
        if calls["n"] > after_calls:
            raise _Interrupt
        return last_position_logits(model, tokens)  # the trainer's default forward

    return logits_fn


def test_interrupted_run_resumes_to_identical_result(tmp_path: Path) -> None:
    cfg = _tiny()
    reference = train(cfg, tmp_path / "ref", device="cpu", progress=False)
    steps_per_epoch = math.ceil(cfg.data.n_train / cfg.train.batch_size)
    evals_per_epoch = 3  # train subset, id test, heldout: one batch each at tiny size
    with pytest.raises(_Interrupt):
        train(
            cfg,
            tmp_path / "run",
            device="cpu",
            progress=False,
            logits_fn=_interrupting(steps_per_epoch + evals_per_epoch + 2),
        )
    assert (tmp_path / "run" / "checkpoint.pt").exists()
    assert read_metrics(tmp_path / "run")["status"] == "interrupted"  # the stop recorded (a SIGKILL leaves "running")
    resumed = train(cfg, tmp_path / "run", device="cpu", progress=False)
    assert resumed.metrics["history"] == reference.metrics["history"]
    for pa, pb in zip(reference.model.parameters(), resumed.model.parameters()):
        assert torch.equal(pa, pb)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_finished_run_is_not_trained_again(tmp_path: Path) -> None:
    cfg = _tiny()
    train(cfg, tmp_path / "r", device="cpu", progress=False)
    mtime = (tmp_path / "r" / "model.safetensors").stat().st_mtime_ns
    again = train(cfg, tmp_path / "r", device="cpu", progress=False, logits_fn=_interrupting(0))
    assert again.metrics["status"] == "completed"
    assert (tmp_path / "r" / "model.safetensors").stat().st_mtime_ns == mtime


def test_divergence_is_recorded_and_last_good_checkpoint_kept(tmp_path: Path) -> None:
    cfg = _tiny()
    steps_per_epoch = math.ceil(cfg.data.n_train / cfg.train.batch_size)
    calls = {"n": 0}

    def nan_in_second_epoch(model, tokens):
        logits = full_forward_last(model, tokens)
        if model.training:
            calls["n"] += 1
            if calls["n"] == steps_per_epoch + 3:
                return logits * float("nan")
        return logits

    result = train(cfg, tmp_path / "r", device="cpu", progress=False, logits_fn=nan_in_second_epoch)
    metrics = read_metrics(tmp_path / "r")
    assert metrics["status"] == "diverged" and result.metrics["status"] == "diverged"
    assert metrics["diverged_at_step"] == steps_per_epoch + 3
    assert (tmp_path / "r" / "checkpoint.pt").exists()
    checkpoint = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert checkpoint["epoch"] == 1
    loaded = load_model(tmp_path / "r")
    assert all(torch.isfinite(p).all() for p in loaded.parameters())
    assert torch.equal(loaded.W_E, checkpoint["model"]["embed.W_E"])


def test_paper_schedule_is_expressible() -> None:
    tc = make_run_config("paper").train
    assert tc.lr_at(0) == pytest.approx(1e-5)
    assert tc.lr_at(5) == pytest.approx((1e-5 + 2.5e-4) / 2)
    assert tc.lr_at(10) == pytest.approx(2.5e-4)
    assert tc.lr_at(110) == pytest.approx((2.5e-4 + 1e-5) / 2)
    assert tc.lr_at(210) == pytest.approx(1e-5)
    assert make_run_config("paper", task="id-ood").train.lr == pytest.approx(1.5e-4)
    assert (
        make_run_config("paper", task="complexity", k=2).data.n_train == 90_000
    )  # the papers' 100,000 less the released ID test sets


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("lr", 0.0, "lr must be a finite positive number"),
        ("batch_size", 0, "batch_size must be an integer >= 1"),
        ("beta1", 1.0, "beta1 must be a number in \\[0, 1\\)"),
        ("weight_decay", -0.1, "weight_decay must be a finite number >= 0"),
        ("eval_dense_epochs", -1, "eval_dense_epochs must be an integer >= 0"),
    ],
)
def test_bad_train_config(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{field: value})


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(preset="nope"), "unknown preset 'nope'"),
        (dict(task="nope"), "unknown task 'nope'"),
        (dict(gamma=float("nan")), "gamma must be a finite positive number"),
        (dict(n_train=0), "n_train must be an integer >= 1"),
        (dict(task="complexity", k=7), "must be an integer in 0..6"),
        (dict(colour="red"), "unknown option\\(s\\) \\['colour'\\]"),
        (
            dict(d_vocab=10),
            "d_vocab 10 is too small for the 'symmetric' task, whose tokens and targets reach 109: use d_vocab >= 110",
        ),
        (dict(task="complexity", k=6, offset=20, d_vocab=120), "targets reach 125: use d_vocab >= 126"),
        (dict(n_ctx=5), "n_ctx 5 is shorter than the task's 9-token sequences: use n_ctx >= 9"),
    ],
)
def test_bad_run_options(options: dict, message: str) -> None:
    preset = options.pop("preset", "tiny")
    with pytest.raises(ValueError, match=message):
        make_run_config(preset, **options)


def test_folder_from_another_data_stream_is_refused(tmp_path: Path) -> None:
    cfg = _tiny()
    train(cfg, tmp_path / "r", device="cpu", progress=False)
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["data_version"] >= 2
    saved["data_version"] = 1  # as if made by an older make_dataset
    (tmp_path / "r" / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"data_version: 1 \(folder\) vs \d+ \(asked\)"):
        train(cfg, tmp_path / "r", device="cpu", progress=False)


def test_a_deadline_stops_after_an_epoch_and_the_same_call_resumes_to_the_same_run(tmp_path: Path) -> None:
    # checkpoint_every=2: the epoch a deadline stops at gets its checkpoint all the same
    cfg = _tiny(checkpoint_every=2)
    reference = train(cfg, tmp_path / "ref", device="cpu", progress=False)
    assert reference.finished
    out, chunks = tmp_path / "run", []
    while not chunks or not chunks[-1].finished:
        chunks.append(
            train(cfg, out, device="cpu", progress=False, deadline=time.monotonic())
        )  # always passed: one epoch per call
        if not chunks[-1].finished:
            metrics = read_metrics(out)
            assert metrics["status"] == "interrupted" and chunks[-1].metrics == metrics
            assert len(metrics["history"]) == len(chunks) and (out / "checkpoint.pt").exists()
    assert len(chunks) == cfg.train.epochs
    assert chunks[-1].metrics["history"] == reference.metrics["history"]
    for pa, pb in zip(reference.model.parameters(), chunks[-1].model.parameters()):
        assert torch.equal(pa, pb)
    a, b = load_file(str(tmp_path / "ref" / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    # a deadline far ahead changes nothing; one without a folder to resume from is refused
    assert train(cfg, tmp_path / "far", device="cpu", progress=False, deadline=time.monotonic() + 1e6).finished
    with pytest.raises(ValueError, match="a deadline needs a run folder"):
        train(cfg, device="cpu", progress=False, deadline=time.monotonic())
    with pytest.raises(ValueError, match="deadline must be a time.monotonic"):
        train(cfg, tmp_path / "bad", device="cpu", progress=False, deadline="soon")


def test_the_evaluation_cadence_evaluates_every_early_epoch_then_sparsely(tmp_path: Path) -> None:
    """``eval_dense_epochs``: each of the first epochs, then every ``eval_every``-th and the
    last; the history carries metrics on those epochs only.  At its default (0) it is not
    written into config.json, so earlier runs keep their digests."""
    cfg = _tiny(epochs=7, eval_every=3, eval_dense_epochs=2)
    assert [e for e in range(1, 8) if cfg.train.evaluates(e)] == [1, 2, 3, 6, 7]
    train(cfg, tmp_path / "sparse", device="cpu", progress=False)
    metrics = read_metrics(tmp_path / "sparse")
    assert [r["epoch"] for r in metrics["history"]] == list(range(1, 8))
    assert [r["epoch"] for r in metrics["history"] if "id_acc" in r] == [1, 2, 3, 6, 7]
    assert json.loads((tmp_path / "sparse" / "config.json").read_text())["train"]["eval_dense_epochs"] == 2
    assert "eval_dense_epochs" not in _tiny().to_dict()["train"]
    assert [e for e in range(1, 4) if _tiny(eval_every=2).train.evaluates(e)] == [2, 3]


def test_a_deadline_stops_before_an_epoch_as_long_as_the_last_would_pass_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step sleeps 0.2 s, so an epoch (8 steps) takes at least 1.6 s: with 2.5 s left at
    the start, the run stops after its first epoch (a second would end past the deadline),
    where a check of the clock alone would have started the second."""
    import training.trainer.loop as loop

    def slow_step(*args, **kwargs):
        time.sleep(0.2)
        return real_step(*args, **kwargs)

    real_step = loop.train_step
    monkeypatch.setattr(loop, "train_step", slow_step)
    cfg = _tiny(n_train=2048, batch_size=256, epochs=3)
    result = train(cfg, tmp_path / "run", device="cpu", progress=False, deadline=time.monotonic() + 2.5)
    assert not result.finished and [r["epoch"] for r in result.metrics["history"]] == [1]
    assert (tmp_path / "run" / "checkpoint.pt").exists()


def test_the_trainer_hands_its_history_and_checkpoints_to_its_sinks_and_resumes_from_a_state() -> None:
    """The loop writes nothing: each epoch's record goes to the history sink, the training
    state to the checkpoint sink, and that state resumes the run to the uninterrupted one's end."""
    from training.trainer.loop import Sinks, fit

    cfg = make_run_config(
        "tiny", task="symmetric", epochs=3, n_train=256, n_test=64, eval_samples=64, checkpoint_every=1
    )
    whole = fit(cfg, device="cpu", progress=False)
    records: list[dict] = []
    states: list[tuple[dict, dict]] = []
    sinks = Sinks(checkpoint=lambda state, metrics: states.append((state, metrics)), history=records.append)
    first = fit(cfg, device="cpu", progress=False, deadline=time.monotonic(), sinks=sinks)
    assert not first.finished and [s["epoch"] for s, _ in states] == [1] and states[0][1]["status"] == "running"
    rest = fit(cfg, device="cpu", progress=False, state=states[0][0], sinks=sinks)
    assert rest.finished and [s["epoch"] for s, _ in states] == [1, 2]
    assert records == whole.metrics["history"] == rest.metrics["history"]
    for a, b in zip(whole.model.parameters(), rest.model.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="a deadline needs a run folder"):
        fit(cfg, device="cpu", progress=False, deadline=time.monotonic())  # nowhere to hand the checkpoint


def test_eval_samples_is_an_upper_bound_recorded_as_asked(tmp_path: Path) -> None:
    """Decided (issue 56, docs/reliability.md): ``eval_samples`` above the training set is kept
    in the config as asked (its digest does not depend on the data's size) and measures on
    every training sample, as ``eval_samples = n_train`` does."""
    big = make_run_config("tiny", epochs=1, n_train=256, eval_samples=10**9)
    same = make_run_config("tiny", epochs=1, n_train=256, eval_samples=256)
    train(big, tmp_path / "big", device="cpu", progress=False)
    train(same, tmp_path / "same", device="cpu", progress=False)
    assert json.loads((tmp_path / "big" / "config.json").read_text())["train"]["eval_samples"] == 10**9
    assert read_metrics(tmp_path / "big")["final"]["train_acc"] == read_metrics(tmp_path / "same")["final"]["train_acc"]
