"""Sequence outputs (``Task.output == "sequence"``): the every-position fast forward equals the
hooked forward (logits and gradients, every registered architecture), the step's loss is the
mean cross-entropy over the target positions, the one-pass exact match equals greedy decoding,
perplexity and token accuracy by hand, a task's wrong-shaped targets are refused, and a
sequence task of one's own trains through ``fit`` with metrics that greedy decoding confirms."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F

from interp_init import InitConfig, ModelConfig, build_model
from interp_init.architectures import architecture_names
from interp_init.decode import greedy_decode
from interp_init.tasks.base import (
    IGNORE,
    Samples,
    SequencePredictions,
    Task,
    TaskMetrics,
    exact_match,
    perplexity,
    token_accuracy,
)
from interp_init.tasks.checks import BadTaskOutput, checked_split
from training import make_run_config
from training.trainer.loop import fit, predict_sequences
from training.trainer.step import all_position_logits, make_optimizer, target_logits, train_step

SEP, EOS = 1, 2


def _model(architecture: str, n_layers: int, seed: int = 0, d_vocab: int = 12, n_ctx: int = 10):
    cfg = ModelConfig(
        architecture=architecture,
        n_layers=n_layers,
        d_model=24,
        n_heads=2,
        d_head=8,
        d_mlp=40,
        d_vocab=d_vocab,
        n_ctx=n_ctx,
    )
    model = build_model(cfg, InitConfig(gamma=0.3), seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # biases and norm weights start at 0 / 1: perturb every parameter
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model


@pytest.mark.parametrize("architecture", architecture_names())
@pytest.mark.parametrize("n_layers", [1, 3])
def test_all_position_logits_and_gradients_equal_the_hooked_forward(architecture: str, n_layers: int) -> None:
    model = _model(architecture, n_layers)
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 12, (5, 10), generator=gen).to(torch.uint8)  # compact ids are widened
    probe = torch.randn(5, 10, 12, generator=gen)
    results = []
    for fn in (lambda m, t: m(t.long()), all_position_logits):
        model.zero_grad(set_to_none=True)
        logits = fn(model, tokens)
        (logits * probe).sum().backward()
        results.append((logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (ref, ref_grads), (ours, grads) = results
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5 * max(1.0, ref.abs().max().item()))
    overall = max(g.abs().max().item() for g in ref_grads.values())
    for name, g in ref_grads.items():
        torch.testing.assert_close(
            grads[name], g, rtol=1e-4, atol=1e-5 * g.abs().max().item() + 1e-6 * overall, msg=name
        )


def test_the_step_loss_is_the_mean_cross_entropy_over_the_target_positions() -> None:
    model = _model("standard", 2)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 12, (6, 10), generator=gen)
    targets = torch.randint(0, 12, (6, 10), generator=gen)
    targets[torch.rand(6, 10, generator=gen) < 0.6] = IGNORE
    with torch.no_grad():  # by hand: log-softmax of the hooked forward, at the masked positions only
        logp = torch.log_softmax(model(tokens), -1)
        picked = [-logp[i, p, targets[i, p]] for i in range(6) for p in range(10) if targets[i, p] != IGNORE]
        expected = torch.stack(picked).mean()
    loss = train_step(
        model, make_optimizer(model, make_run_config("tiny").train), tokens, targets, logits_fn=all_position_logits
    )
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("architecture", architecture_names())
def test_the_target_position_shortcut_equals_the_hooked_forward_in_loss_gradients_and_predictions(
    architecture: str,
) -> None:
    model = _model(architecture, 2)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 12, (6, 10), generator=gen)
    targets = torch.randint(0, 12, (6, 10), generator=gen)
    targets[torch.rand(6, 10, generator=gen) < 0.5] = IGNORE
    targets[:, 7:] = IGNORE  # trailing positions without a target are cut
    results = []
    for compute in (
        lambda: F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten(), ignore_index=IGNORE),
        lambda: F.cross_entropy(*target_logits(model, tokens, targets)),
    ):
        model.zero_grad(set_to_none=True)
        loss = compute()
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (ref, ref_grads), (ours, grads) = results
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    overall = max(g.abs().max().item() for g in ref_grads.values())
    for name, g in ref_grads.items():
        torch.testing.assert_close(
            grads[name], g, rtol=1e-4, atol=1e-5 * g.abs().max().item() + 1e-6 * overall, msg=name
        )
    fast = predict_sequences(model, tokens, targets, batch_size=4, logits_fn=all_position_logits)
    hooked = predict_sequences(model, tokens, targets, batch_size=4)
    assert torch.equal(fast.argmax, hooked.argmax) and bool((fast.argmax[targets == IGNORE] == IGNORE).all())
    torch.testing.assert_close(fast.nll, hooked.nll, rtol=1e-5, atol=1e-6)


class _Oracle(torch.nn.Module):
    """A stand-in model: its next token after a prefix is the reference's, except after the
    prefixes a seeded coin marks, where it is a wrong token (so some samples decode right,
    some wrong, at any position)."""

    def __init__(self, references: torch.Tensor, vocab: int) -> None:
        super().__init__()
        self.references, self.vocab = references, vocab

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n, t = tokens.shape
        logits = torch.zeros(n, t, self.vocab)
        for i in range(n):
            for p in range(t):
                prefix = tuple(tokens[i, : p + 1].tolist())
                match = [r for r in self.references.tolist() if tuple(r[: p + 1]) == prefix]
                nxt = match[0][p + 1] if match and p + 1 < len(match[0]) else EOS
                if hash(prefix) % 7 == 0:  # deterministic within a run (ints hash to themselves)
                    nxt = (nxt + 1) % self.vocab
                logits[i, p, nxt] = 1.0
        return logits


def test_the_one_pass_exact_match_equals_greedy_decoding() -> None:
    gen = torch.Generator().manual_seed(5)
    n, seq, vocab = 40, 12, 9
    references, targets, prompts = (
        torch.zeros(n, seq, dtype=torch.long),
        torch.full((n, seq), IGNORE),
        torch.zeros(n, dtype=torch.long),
    )
    for i in range(n):  # [source, SEP, target, EOS, pad]: lengths vary
        src = torch.randint(3, vocab, (int(torch.randint(1, 4, (1,), generator=gen)),), generator=gen)
        tgt = torch.randint(3, vocab, (int(torch.randint(1, 5, (1,), generator=gen)),), generator=gen)
        ids = torch.cat([src, torch.tensor([SEP]), tgt, torch.tensor([EOS])])
        references[i, : len(ids)] = ids
        targets[i, len(src) : len(ids) - 1] = ids[len(src) + 1 :]
        prompts[i] = len(src) + 1
    model = _Oracle(references, vocab)
    one_pass = exact_match(model(references).argmax(-1), targets)
    decoded = greedy_decode(model, references, prompts, eos=EOS)
    by_decoding = torch.tensor([torch.equal(decoded[i], references[i]) for i in range(n)])
    assert torch.equal(one_pass, by_decoding)
    assert 0 < int(one_pass.sum()) < n  # both outcomes occur


def test_perplexity_and_token_accuracy_by_hand() -> None:
    targets = torch.tensor([[3, IGNORE, 1], [IGNORE, IGNORE, 2]])
    model = _model("standard", 1, d_vocab=5, n_ctx=3)
    tokens = torch.tensor([[0, 1, 2], [3, 4, 0]])
    preds = predict_sequences(model, tokens, targets, batch_size=1)
    logp = torch.log_softmax(model(tokens).detach(), -1)
    nll = -(logp[0, 0, 3] + logp[0, 2, 1] + logp[1, 2, 2]) / 3
    assert perplexity(preds.nll, targets) == pytest.approx(math.exp(float(nll)), rel=1e-5)
    assert float(preds.nll[0, 1]) == 0.0  # no target there
    argmax = torch.tensor([[3, 0, 0], [0, 0, 2]])
    assert token_accuracy(argmax, targets) == pytest.approx(2 / 3)
    assert exact_match(argmax, targets).tolist() == [False, True]
    uniform = torch.full((2, 3), math.log(7.0))  # a model uniform over 7 tokens: perplexity 7
    assert perplexity(uniform, targets) == pytest.approx(7.0)


@dataclass(frozen=True)
class CopyMetrics(TaskMetrics):
    token_acc: float
    id_ppl: float


@dataclass(frozen=True)
class CopyTask(Task):
    """Copy three tokens: ``[a, b, c, SEP, a, b, c, EOS]``, the loss on ``a, b, c, EOS``."""

    output: ClassVar[str] = "sequence"
    metrics_class: ClassVar[type[TaskMetrics]] = CopyMetrics
    vocab_size: ClassVar[int] = 8
    seq_len: ClassVar[int] = 8
    default_architecture: ClassVar[str] = "standard"
    has_heldout: ClassVar[bool] = False
    wrong_shape: bool = False

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        gen = torch.Generator().manual_seed(seed + (0 if split == "train" else 10_000))
        src = torch.randint(3, 8, (n, 3), generator=gen)
        tokens = torch.cat([src, torch.full((n, 1), SEP), src, torch.full((n, 1), EOS)], 1)
        targets = torch.full((n, 8), IGNORE)
        targets[:, 3:7] = tokens[:, 4:8]
        return Samples(self.name, split, tokens, targets[:, -1] if self.wrong_shape else targets, {})

    def evaluate(self, predict, train, id_test, heldout) -> CopyMetrics:
        tr, te = predict(train.tokens, train.targets), predict(id_test.tokens, id_test.targets)
        assert isinstance(te, SequencePredictions)
        em = [float(exact_match(p.argmax, d.targets).float().mean()) for p, d in ((tr, train), (te, id_test))]
        return CopyMetrics(
            em[0], em[1], token_accuracy(te.argmax, id_test.targets), perplexity(te.nll, id_test.targets)
        )


def test_a_sequence_task_trains_through_fit_and_greedy_decoding_confirms_its_exact_match() -> None:
    cfg = make_run_config("tiny", task=f"{__name__}:CopyTask", n_train=1000, n_test=200, epochs=6, lr=3e-3)
    result = fit(cfg, device="cpu", progress=False)
    final = result.metrics["final"]
    assert result.metrics["status"] == "completed" and final["id_ppl"] >= 1.0
    losses = [r["loss"] for r in result.metrics["history"]]
    assert losses[-1] < losses[0]
    task = cfg.data.make_task()
    test = task.make_split("id_test", 200, cfg.seeds["data.id_test"])
    decoded = greedy_decode(result.model, test.tokens, torch.full((200,), 4), eos=EOS)
    assert final["id_acc"] == pytest.approx(float((decoded == test.tokens).all(1).float().mean()))
    # the perplexity by hand from the hooked forward
    with torch.no_grad():
        nll = F.cross_entropy(result.model(test.tokens).flatten(0, 1), test.targets.flatten(), ignore_index=IGNORE)
    assert final["id_ppl"] == pytest.approx(math.exp(float(nll)), rel=1e-4)


def test_a_sequence_task_with_last_position_targets_is_refused() -> None:
    with pytest.raises(BadTaskOutput, match=r"returned targets of shape \(4,\), not 2-D \(\[n, seq_len\]\)"):
        checked_split(CopyTask(wrong_shape=True), "train", 4, 0)


def test_an_ensemble_refuses_a_sequence_task() -> None:
    from training.trainer.ensemble import check_ensemble

    with pytest.raises(ValueError, match="predicts sequences, and an ensemble trains last-position tasks only"):
        check_ensemble([make_run_config("tiny", task=f"{__name__}:CopyTask", n_train=300, n_test=50)])
