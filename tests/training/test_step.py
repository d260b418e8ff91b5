"""training.trainer.step: the last-position forward equals the hooked forward, logits and gradients,
for every registered architecture (a fourth, examples/custom_architecture.py's ``parallel``,
is registered by this module's tests and covered by the same tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import load_script
from transformer_lens import HookedTransformer, HookedTransformerConfig
from transformer_lens.components import TransformerBlock

import training.trainer.loop as loop
from interp_init import InitConfig, ModelConfig, build_model, quiet_deprecation
from interp_init.architectures import architecture_names, get_architecture, install_blocks, registered
from training import make_run_config, train
from training.cli import main
from training.trainer.step import autocast_context, fast_forward_unsupported, last_position_logits

ACT_FNS = ("gelu", "gelu_new", "relu", "silu", "gelu_fast")
NORMS = ("LN", "LNPre", "RMS", "RMSPre")
#: A fourth architecture, registered by a test (the autouse fixture below), not by the package.
PARALLEL = load_script("examples/custom_architecture.py").PARALLEL
with registered(PARALLEL):
    REGISTERED = architecture_names()  # what the tests below iterate over: the registry


@pytest.fixture(autouse=True)
def _fourth_architecture_registered():
    with registered(PARALLEL):
        yield


def _model(
    n_layers: int,
    n_heads: int,
    norm: str = "LN",
    act_fn: str | None = "gelu",
    seed: int = 0,
    architecture: str = "standard",
    gamma: float = 0.3,
    noise: float = 0.2,
) -> HookedTransformer:
    cfg = ModelConfig(
        architecture=architecture,
        n_layers=n_layers,
        d_model=24,
        n_heads=n_heads,
        d_head=8,
        d_mlp=40,
        act_fn=act_fn,
        normalization_type=norm,
    )
    model = build_model(cfg, InitConfig(gamma=gamma), seed=seed)
    # Biases, LayerNorm weights and biases start at 0 / 1: perturb every parameter so each is exercised.
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn(p.shape, generator=gen))
    return model


def _logits_and_grads(model: HookedTransformer, fn, tokens: torch.Tensor, probe: torch.Tensor):
    model.zero_grad(set_to_none=True)
    logits = fn(model, tokens)
    (logits * probe).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return logits.detach(), grads


def _assert_same_as_hooked(model: HookedTransformer, n_pos: int = 9) -> None:
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, model.cfg.d_vocab, (6, n_pos), generator=gen)
    probe = torch.randn(6, model.cfg.d_vocab, generator=gen)
    ref_logits, ref_grads = _logits_and_grads(model, lambda m, t: m(t)[:, -1], tokens, probe)
    logits, grads = _logits_and_grads(model, last_position_logits, tokens, probe)
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-5 * max(1.0, ref_logits.abs().max().item()))
    assert set(grads) == set(ref_grads)
    # b_K's true gradient is 0 (softmax ignores a shift shared by all keys): compare every
    # gradient against the largest one's scale as well as its own.
    overall = max(g.abs().max().item() for g in ref_grads.values())
    for name in ref_grads:
        scale = ref_grads[name].abs().max().item()
        torch.testing.assert_close(
            grads[name], ref_grads[name], rtol=1e-4, atol=1e-5 * scale + 1e-6 * overall, msg=name
        )


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n_layers", [1, 2, 3, 4, 5, 6])
def test_logits_and_gradients_equal_hooked_forward(norm: str, n_layers: int) -> None:
    n_heads = 1 + n_layers % 3  # 1, 2 and 3 heads across the depths
    model = _model(n_layers, n_heads, norm, seed=n_layers)
    assert fast_forward_unsupported(model) is None
    _assert_same_as_hooked(model)


def test_the_registry_holds_the_fourth_architecture_registered_here() -> None:
    assert set(REGISTERED) == {"standard", "journal", "neurips", "parallel"}
    assert "parallel" not in _registry_outside_a_test()


def _registry_outside_a_test() -> tuple[str, ...]:
    from interp_init.architectures import unregister_architecture

    unregister_architecture("parallel")
    try:
        return architecture_names()
    finally:
        from interp_init.architectures import register_architecture

        register_architecture(PARALLEL)


@pytest.mark.parametrize("architecture", REGISTERED)
@pytest.mark.parametrize("n_layers", [1, 2, 3, 4, 5, 6])
def test_every_registered_architecture_equals_hooked_forward(architecture: str, n_layers: int) -> None:
    n_heads = 1 + n_layers % 3
    # a milder init than the standard tests': the journal's raw keys and values make a deep,
    # strongly perturbed model ill-conditioned in fp32 (the fp64 test below checks exactness)
    model = _model(n_layers, n_heads, act_fn=None, seed=n_layers, architecture=architecture, gamma=0.5, noise=0.1)
    assert fast_forward_unsupported(model) is None
    _assert_same_as_hooked(model)


@pytest.mark.parametrize("architecture", REGISTERED)
def test_every_registered_architecture_fp64_exactness(architecture: str) -> None:
    model = _model(6, 3, act_fn=None, architecture=architecture).double()
    model.cfg.dtype = torch.float64
    for n_pos in (9, 5):
        tokens = torch.randint(0, 201, (5, n_pos))
        diff = (last_position_logits(model, tokens) - model(tokens)[:, -1]).abs().max().item()
        assert diff < 1e-10


@pytest.mark.parametrize("act_fn", ACT_FNS)
def test_every_activation_function(act_fn: str) -> None:
    _assert_same_as_hooked(_model(2, 2, "LN", act_fn))


@pytest.mark.parametrize("norm", NORMS)
def test_fp64_exactness_six_layers_and_short_sequences(norm: str) -> None:
    # In float64 the rounding differences of fp32 vanish: the two computations are the same function.
    model = _model(6, 3, norm).double()
    model.cfg.dtype = torch.float64
    for n_pos in (9, 5):
        tokens = torch.randint(0, 201, (5, n_pos))
        diff = (last_position_logits(model, tokens) - model(tokens)[:, -1]).abs().max().item()
        assert diff < 1e-10


def test_each_architectures_fast_forward_is_its_own() -> None:
    """The fast path runs the model's architecture's last-position function, never another's."""
    for name in REGISTERED:
        model = _model(2, 2, act_fn=None, architecture=name)
        calls = []
        arch = get_architecture(name)  # a frozen dataclass: patched through object.__setattr__, then restored
        real = arch.last_position
        object.__setattr__(
            arch, "last_position", lambda block, resid, real=real: calls.append(name) or real(block, resid)
        )
        try:
            last_position_logits(model, torch.randint(0, 201, (2, 9)))
        finally:
            object.__setattr__(arch, "last_position", real)
        assert calls == [name]


def test_an_unregistered_block_is_an_error_not_a_fallback() -> None:
    class Unregistered(TransformerBlock):
        pass

    model = _model(2, 2)
    model.blocks = torch.nn.ModuleList([Unregistered(model.cfg, i) for i in range(2)])
    with pytest.raises(ValueError, match="Unregistered is no registered architecture"):
        last_position_logits(model, torch.randint(0, 201, (2, 9)))
    with pytest.raises(ValueError, match="architecture must be one of"):
        ModelConfig(architecture="gpt2")
    with pytest.raises(ValueError, match="architecture must be one of"):
        install_blocks(model, "gpt2")
    with pytest.raises(ValueError, match="architecture must be one of"):
        get_architecture("gpt2")


def test_fast_path_does_not_run_the_hooked_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model(2, 2)

    def refuse(*args, **kwargs):
        raise AssertionError("hooked forward called")

    monkeypatch.setattr(model, "forward", refuse)
    last_position_logits(model, torch.randint(0, 201, (2, 9)))  # does not raise


def _hooked(**overrides) -> HookedTransformer:
    kwargs = dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=50, n_ctx=9, act_fn="gelu")
    kwargs.update(overrides)
    with quiet_deprecation():
        model = HookedTransformer(HookedTransformerConfig(**kwargs))
    return model


@pytest.mark.parametrize(
    "overrides, reason",
    [
        (dict(attn_only=True), "attn_only"),
        (dict(positional_embedding_type="rotary", rotary_dim=8), "positional_embedding_type"),
        (dict(n_key_value_heads=1), "grouped-query"),
        (dict(attn_scores_soft_cap=5.0), "attn_scores_soft_cap"),
        (dict(output_logits_soft_cap=5.0), "output_logits_soft_cap"),
        (dict(normalization_type=None), "normalization_type"),
        (dict(parallel_attn_mlp=True), "parallel_attn_mlp"),
    ],
)
def test_unsupported_configs_fall_back_to_the_hooked_forward(overrides, reason) -> None:
    model = _hooked(**overrides)
    assert reason in fast_forward_unsupported(model)

    def refuse(*args, **kwargs):
        raise AssertionError("fast path taken")

    standard = get_architecture("standard")
    real = standard.all_positions, standard.last_position
    object.__setattr__(standard, "all_positions", refuse)  # a frozen dataclass: restored below
    object.__setattr__(standard, "last_position", refuse)
    try:
        tokens = torch.randint(0, 50, (3, 9))
        torch.testing.assert_close(last_position_logits(model, tokens), model(tokens)[:, -1], rtol=0, atol=0)
    finally:
        object.__setattr__(standard, "all_positions", real[0])
        object.__setattr__(standard, "last_position", real[1])


def test_supported_hooked_config_options_take_the_fast_path() -> None:
    # A non-default attention scale is read from the module, so it stays exact.
    model = _hooked(use_attn_scale=False, normalization_type="LN")
    assert fast_forward_unsupported(model) is None
    _assert_same_as_hooked(model)


def test_attached_hooks_are_honoured() -> None:
    model = _model(2, 1)
    tokens = torch.randint(0, 201, (4, 9))
    seen = []

    def zero_ablate(act, hook):
        seen.append(hook.name)
        return torch.zeros_like(act)

    with model.hooks(fwd_hooks=[("blocks.0.hook_attn_out", zero_ablate)]):
        assert fast_forward_unsupported(model) == "hooks are attached"
        ablated = last_position_logits(model, tokens)
        expected = model(tokens)[:, -1]
    assert seen == ["blocks.0.hook_attn_out"] * 2
    torch.testing.assert_close(ablated, expected)
    assert not torch.allclose(ablated, last_position_logits(model, tokens))
    assert fast_forward_unsupported(model) is None


def test_bad_tokens_are_refused() -> None:
    model = _model(1, 1)
    with pytest.raises(ValueError, match="n_ctx is 9"):
        last_position_logits(model, torch.zeros(2, 10, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[batch, pos\]"):
        last_position_logits(model, torch.zeros(10, dtype=torch.long))
    with pytest.raises(ValueError, match="integer token ids, got dtype torch.float32"):
        last_position_logits(model, torch.zeros(2, 9))


@pytest.mark.parametrize("with_hook", [False, True])
def test_compact_token_ids_are_widened(with_hook: bool) -> None:
    """uint8 ids (what make_dataset stores) give the int64 ids' logits, on the fast path and
    on the hooked fallback (a uint8 index would otherwise be read as a mask)."""
    model = _model(2, 2)
    tokens = torch.randint(0, 201, (4, 9))
    expected = model(tokens)[:, -1]
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda t, hook: t)] if with_hook else []):
        for dtype in (torch.uint8, torch.int16, torch.int32):
            torch.testing.assert_close(last_position_logits(model, tokens.to(dtype)), expected, rtol=1e-5, atol=1e-5)


def test_bf16_autocast_runs_matmuls_in_bfloat16() -> None:
    model = _model(2, 2)
    tokens = torch.randint(0, 201, (4, 9))
    with autocast_context("cpu", "bf16"):
        low = last_position_logits(model, tokens)
    with autocast_context("cpu", "fp32"):
        full = last_position_logits(model, tokens)
    assert low.dtype == torch.bfloat16 and full.dtype == torch.float32
    assert (low.float() - full).abs().max() < 0.1 * full.abs().max()
    with pytest.raises(ValueError, match="precision"):
        autocast_context("cpu", "fp16")


def test_config_fields_are_validated() -> None:
    with pytest.raises(ValueError, match="precision must be one of"):
        make_run_config("tiny", precision="fp16")
    with pytest.raises(ValueError, match="fast_forward must be true or false"):
        make_run_config("tiny", fast_forward="yes")


def _tiny(**options):
    return make_run_config("tiny", **{"n_train": 1024, "n_test": 200, "eval_samples": 200, "epochs": 2, **options})


def test_train_uses_the_fast_forward_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}

    def counting(model, tokens):
        calls["n"] += 1
        return last_position_logits(model, tokens)

    monkeypatch.setattr(loop, "last_position_logits", counting)
    fast_run = train(_tiny(), device="cpu", progress=False)
    assert calls["n"] > 0
    calls["n"] = 0
    hooked_run = train(_tiny(fast_forward=False), device="cpu", progress=False)
    assert calls["n"] == 0
    # The same function, so training follows the same path up to rounding; except b_K,
    # whose true gradient is 0: Adam turns its rounding noise into lr-sized steps.
    for (name, a), b in zip(fast_run.model.named_parameters(), hooked_run.model.parameters()):
        if not name.endswith("b_K"):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4, msg=name)
    assert fast_run.metrics["final"]["id_acc"] == pytest.approx(hooked_run.metrics["final"]["id_acc"], abs=0.02)


def test_bf16_training_keeps_fp32_weights_and_learns() -> None:
    result = train(_tiny(precision="bf16", epochs=3), device="cpu", progress=False)
    history = result.metrics["history"]
    assert result.metrics["status"] == "completed"
    assert all(p.dtype == torch.float32 for p in result.model.parameters())
    assert history[-1]["loss"] < history[0]["loss"]


def test_cli_generates_the_new_flags(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--device", "cpu", "--quiet", "--out", str(out)]
    argv += ["--n-train", "512", "--n-test", "100", "--eval-samples", "100", "--epochs", "1"]
    assert main([*argv, "--no-fast-forward", "--precision", "bf16"]) == 0
    saved = json.loads((out / "config.json").read_text())["train"]
    assert saved["fast_forward"] is False and saved["precision"] == "bf16"
    assert main([*argv[:-2], "--out", str(tmp_path / "bad"), "--precision", "fp8"]) == 2
