"""Subnormal floats are flushed to zero while a model trains, and only then."""

from __future__ import annotations

import torch

from training import make_run_config, train
from training import train_ensemble
from training.trainer.step import flush_denormals, last_position_logits

SUBNORMAL = 1e-39  # below fp32's smallest normal number, 1.18e-38


def _flushed() -> bool:
    return float(torch.tensor([SUBNORMAL], dtype=torch.float32) * 1.0) == 0.0


def test_the_context_flushes_and_restores() -> None:
    assert not _flushed()
    with flush_denormals():
        assert _flushed()
    assert not _flushed()


def test_training_runs_with_subnormals_flushed_and_restores_them_after() -> None:
    seen: list[bool] = []

    def logits(model, tokens):
        seen.append(_flushed())
        return last_position_logits(model, tokens)

    cfg = make_run_config("tiny", gamma=0.8, seed=0, epochs=1, warmup_epochs=0.5, cosine_epochs=0.5)
    train(cfg, device="cpu", progress=False, logits_fn=logits)
    assert seen and all(seen)
    assert not _flushed()
    seen.clear()
    train_ensemble([cfg, cfg.with_options(seed=1)], device="cpu", progress=False, logits_fn=logits)
    assert seen and all(seen)
    assert not _flushed()
