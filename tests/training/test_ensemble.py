"""training.trainer.ensemble: many runs at once give what training them one by one gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import read_metrics

from interp_init import load_model
from training import make_run_config, train
from training import train_ensemble
from training.trainer.ensemble import BatchedStep, VmapStep, check_ensemble, fit_ensemble
from training.trainer.loop import new_member
from training.trainer.step import last_position_logits

SMALL = dict(n_train=768, n_test=200, eval_samples=200, epochs=3, batch_size=256)


def _cfgs():
    # gamma, weight decay, lr, grad_clip and seed all differ; seeds 0 and 1 share nothing, two runs share seed 0.
    return [
        make_run_config("tiny", gamma=0.5, weight_decay=0.0, lr=2e-3, seed=0, **SMALL),
        make_run_config("tiny", gamma=0.8, weight_decay=0.1, lr=4e-3, seed=1, grad_clip=0.5, **SMALL),
        make_run_config("tiny", gamma=0.6, gamma_qk=0.9, weight_decay=0.01, lr=1e-3, seed=0, grad_clip=0.0, **SMALL),
    ]


def _assert_same_run(a, b, atol: float = 2e-5) -> None:
    for (name, pa), pb in zip(a.model.named_parameters(), b.model.parameters()):
        if name.endswith("b_K"):
            continue  # its true gradient is 0; Adam amplifies rounding noise (tests/training/test_step.py)
        torch.testing.assert_close(pa, pb, rtol=1e-4, atol=atol, msg=name)
    ha, hb = a.metrics["history"], b.metrics["history"]
    assert [h["epoch"] for h in ha] == [h["epoch"] for h in hb]
    for ra, rb in zip(ha, hb):
        assert ra.keys() == rb.keys()
        assert ra["step"] == rb["step"] and ra["lr"] == pytest.approx(rb["lr"], rel=1e-12)
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5)
        for key in ("train_acc", "id_acc"):
            assert ra[key] == pytest.approx(rb[key], abs=0.011)
    assert a.metrics["status"] == b.metrics["status"]


def test_ensemble_equals_one_by_one_training(tmp_path: Path) -> None:
    cfgs = _cfgs()
    ens = train_ensemble(cfgs, [tmp_path / f"e{i}" for i in range(3)], device="cpu", progress=False)
    one = [train(c, tmp_path / f"o{i}", device="cpu", progress=False) for i, c in enumerate(cfgs)]
    assert ens[0].metrics["history"][-1]["loss"] < ens[0].metrics["history"][0]["loss"]
    for i, (e, o) in enumerate(zip(ens, one)):
        assert e.config == cfgs[i]
        _assert_same_run(e, o)
        # The same folder as train() writes.
        ef, of = tmp_path / f"e{i}", tmp_path / f"o{i}"
        assert sorted(p.name for p in ef.iterdir()) == sorted(p.name for p in of.iterdir())
        assert json.loads((ef / "config.json").read_text()) == json.loads((of / "config.json").read_text())
        assert read_metrics(ef)["final"].keys() == read_metrics(of)["final"].keys()
        loaded = load_model(ef)
        tokens = torch.randint(0, 201, (4, 9))
        torch.testing.assert_close(loaded(tokens), e.model(tokens))


def test_runs_of_one_seed_with_another_data_seed_train_on_their_own_data(tmp_path: Path) -> None:
    """Members share data only where their data seeds agree: a run of seed 0 with data seed 5
    beside a run of seed 0 trains as it does alone."""
    cfgs = [make_run_config("tiny", seed=0, **SMALL), make_run_config("tiny", seed=0, data_seed=5, **SMALL)]
    ens = train_ensemble(cfgs, [tmp_path / "e0", tmp_path / "e1"], device="cpu", progress=False)
    _assert_same_run(ens[1], train(cfgs[1], tmp_path / "o1", device="cpu", progress=False))


def test_interrupted_ensemble_resumes_and_train_can_resume_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfgs = _cfgs()[:2]
    reference = train_ensemble(cfgs, [tmp_path / f"ref{i}" for i in range(2)], device="cpu", progress=False)
    real_step, calls = VmapStep.__call__, {"n": 0}

    class Interrupt(Exception):
        pass

    def interrupting(self, members, idx):
        calls["n"] += 1
        if calls["n"] > 4:  # 3 steps per epoch: dies in the second epoch
            raise Interrupt
        return real_step(self, members, idx)

    monkeypatch.setattr(VmapStep, "__call__", interrupting)
    dirs = [tmp_path / f"run{i}" for i in range(2)]
    with pytest.raises(Interrupt):
        train_ensemble(cfgs, dirs, device="cpu", progress=False)
    monkeypatch.setattr(VmapStep, "__call__", real_step)
    assert all((d / "checkpoint.pt").exists() and read_metrics(d)["status"] == "interrupted" for d in dirs)
    # each run's checkpoint holds its own tensors only, not the stacked ones they are views of
    for d in dirs:
        for name, tensor in torch.load(d / "checkpoint.pt", weights_only=True)["model"].items():
            assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size(), name
    # train() resumes an ensemble's checkpoint (same format) ...
    by_train = train(cfgs[1], dirs[1], device="cpu", progress=False)
    _assert_same_run(by_train, reference[1])
    # ... and the ensemble resumes its own, skipping the run train() finished.
    resumed = train_ensemble(cfgs, dirs, device="cpu", progress=False)
    assert resumed[0].metrics["history"] == reference[0].metrics["history"]
    for pa, pb in zip(resumed[0].model.parameters(), reference[0].model.parameters()):
        assert torch.equal(pa, pb)
    assert resumed[1].metrics == by_train.metrics
    assert not any((d / "checkpoint.pt").exists() for d in dirs)


def test_one_diverging_run_leaves_the_others_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfgs = _cfgs()[:2]
    real_loss, calls = VmapStep.loss, {"n": 0}

    def nan_for_run_1(self, tokens, targets):
        loss = real_loss(self, tokens, targets)
        calls["n"] += 1
        if calls["n"] == 5:  # second epoch, second step
            loss = loss * torch.tensor([1.0, float("nan")])
        return loss

    monkeypatch.setattr(VmapStep, "loss", nan_for_run_1)
    ens = train_ensemble(cfgs, [tmp_path / "a", tmp_path / "b"], device="cpu", progress=False)
    assert ens[1].metrics["status"] == "diverged" and ens[1].metrics["diverged_at_step"] == 5
    assert len(ens[1].metrics["history"]) == 1
    assert read_metrics(tmp_path / "b")["status"] == "diverged"
    assert (tmp_path / "b" / "checkpoint.pt").exists()  # kept, as train() keeps it
    # The run saved is its last good checkpoint (end of epoch 1), finite.
    assert all(torch.isfinite(p).all() for p in load_model(tmp_path / "b").parameters())
    monkeypatch.setattr(VmapStep, "loss", real_loss)
    _assert_same_run(ens[0], train(cfgs[0], device="cpu", progress=False))


def test_bf16_ensemble_trains() -> None:
    cfgs = [c.with_options(precision="bf16") for c in _cfgs()[:2]]
    ens = train_ensemble(cfgs, device="cpu", progress=False)
    one = train(cfgs[0], device="cpu", progress=False)
    assert ens[0].metrics["history"][-1]["loss"] == pytest.approx(one.metrics["history"][-1]["loss"], rel=2e-2)
    assert all(p.dtype == torch.float32 for p in ens[0].model.parameters())


def test_configs_that_cannot_train_together_are_refused(tmp_path: Path) -> None:
    a = make_run_config("tiny", **SMALL)
    with pytest.raises(ValueError, match=r"differ in n_layers \(2 vs 3\)"):
        check_ensemble([a, a.with_options(n_layers=3)])
    with pytest.raises(ValueError, match=r"differ in epochs"):
        train_ensemble([a, a.with_options(epochs=4)], device="cpu", progress=False)
    with pytest.raises(ValueError, match=r"differ in task"):
        check_ensemble([a, make_run_config("tiny", task="id-ood", architecture=a.model.architecture, **SMALL)])
    check_ensemble(
        [a, a.with_options(gamma=0.9, weight_decay=1.0, lr=3e-3, seed=5, grad_clip=2.0, convention="fan_in")]
    )
    with pytest.raises(ValueError, match="one per config"):
        train_ensemble([a, a], [tmp_path / "x"], device="cpu", progress=False)
    with pytest.raises(ValueError, match="distinct"):
        train_ensemble([a, a.with_options(seed=1)], [tmp_path / "x", tmp_path / "x"], device="cpu", progress=False)
    with pytest.raises(ValueError, match="at least one"):
        train_ensemble([], device="cpu", progress=False)


def test_a_deadline_stops_an_ensemble_and_the_same_call_resumes_it(tmp_path: Path) -> None:
    import time

    cfgs = _cfgs()[:2]
    reference = train_ensemble(cfgs, [tmp_path / f"ref{i}" for i in range(2)], device="cpu", progress=False)
    dirs = [tmp_path / f"run{i}" for i in range(2)]
    first = train_ensemble(cfgs, dirs, device="cpu", progress=False, deadline=time.monotonic())
    assert [r.finished for r in first] == [False, False]
    assert all(read_metrics(d)["status"] == "interrupted" and len(read_metrics(d)["history"]) == 1 for d in dirs)
    second = train_ensemble(cfgs, dirs, device="cpu", progress=False, deadline=time.monotonic() + 1e6)
    assert [r.finished for r in second] == [True, True]
    for done, ref in zip(second, reference):
        assert done.metrics["history"] == ref.metrics["history"]
        for pa, pb in zip(done.model.parameters(), ref.model.parameters()):
            assert torch.equal(pa, pb)
    with pytest.raises(ValueError, match="a deadline needs a run folder"):
        train_ensemble(cfgs, device="cpu", progress=False, deadline=time.monotonic())


def test_a_custom_logits_fn_is_the_one_the_vectorized_step_runs(tmp_path: Path) -> None:
    from training.trainer.step import last_position_logits

    calls = {"n": 0}

    def counting(model, tokens):
        calls["n"] += 1
        return last_position_logits(model, tokens)

    cfgs = _cfgs()[:2]
    ens = train_ensemble(cfgs, device="cpu", progress=False, logits_fn=counting)
    assert calls["n"] > 0
    _assert_same_run(ens[0], train(cfgs[0], device="cpu", progress=False))


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))],
)
def test_the_batched_step_trains_as_the_vmap_step_and_resumes_from_its_checkpoints(tmp_path: Path, device: str) -> None:
    """Per-member lr, weight decay and clipping (one run clipped hard, one not at all), a last
    batch of 88: the batched step's one update of every member equals each member's
    ``clip_grad_norm_`` and ``torch.optim.AdamW`` (the vmap step) to fp32 rounding; a deadline
    stops it every epoch and each call resumes from the checkpoint it wrote, ending where one
    call ends."""
    import time

    options = [
        dict(lr=1e-3, weight_decay=0.0, grad_clip=1.0),
        dict(lr=3e-3, weight_decay=0.1, grad_clip=0.01),
        dict(lr=2e-3, weight_decay=0.01, grad_clip=0.0),
    ]
    cfgs = [
        make_run_config("tiny", epochs=3, n_train=600, n_test=100, eval_samples=100, seed=s, **o)
        for s, o in enumerate(options)
    ]
    plain = train_ensemble(cfgs, device=device, progress=False)
    batched = train_ensemble(cfgs, device=device, progress=False, step="batched")
    for a, b in zip(plain, batched, strict=True):
        for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
        assert [h["loss"] for h in b.metrics["history"]] == pytest.approx(
            [h["loss"] for h in a.metrics["history"]], rel=1e-4
        )
    folders = [tmp_path / f"run{i}" for i in range(3)]
    while True:
        chunk = train_ensemble(
            cfgs, folders, device=device, progress=False, step=BatchedStep, deadline=time.monotonic()
        )
        if all(r.finished for r in chunk):
            break
    same = (
        torch.equal if device == "cpu" else lambda p, q: torch.allclose(p, q, rtol=1e-4, atol=1e-6)
    )  # CUDA's backward is not bit-reproducible
    for a, b in zip(batched, chunk, strict=True):
        assert all(same(p, q) for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True))


def test_a_diverged_member_is_no_longer_updated_by_the_batched_step() -> None:
    cfgs = [make_run_config("tiny", n_train=512, seed=s) for s in (0, 1)]
    members = [new_member(c, torch.device("cpu")) for c in cfgs]
    fast = BatchedStep(members, last_position_logits, torch.device("cpu"))
    before = [[p.detach().clone() for p in m.model.parameters()] for m in members]
    members[1].status = "diverged"
    fast(members, torch.arange(256).expand(2, -1))
    assert all(torch.equal(p, q) for p, q in zip(before[1], members[1].model.parameters(), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(before[0], members[0].model.parameters(), strict=True))
    assert [float(m.optimizer.state_dict()["state"][0]["step"]) for m in members] == [1.0, 0.0]


def test_an_unknown_step_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ensemble step 'graphs'.*batched"):
        fit_ensemble([make_run_config("tiny", n_train=64)], "cpu", progress=False, step="graphs")
