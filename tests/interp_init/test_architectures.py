"""The three architectures: HookedTransformers whose forward is the papers' (docs/science.md).

Each model's logits are compared with a plain PyTorch forward written here, from the
definitions alone, reading the model's parameters by name; hooks, init and run folders
are checked per architecture.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformer_lens import HookedTransformer

from interp_init import InitConfig, ModelConfig, build_model, gamma_init_, init_stds, load_model
from interp_init.architectures import architecture_of
from interp_init.init import bias_bounds
from training import make_run_config, train
from training.cli import main

#: The built-in architectures, whose definitions this module restates.
ARCHITECTURES = ("standard", "journal", "neurips")
SMALL = dict(n_layers=2, d_model=24, n_heads=3, d_head=8, d_mlp=40)


def _perturbed(architecture: str, seed: int = 0, **sizes: int) -> HookedTransformer:
    """A model whose every parameter (LayerNorm weights and biases included) is non-trivial."""
    model = build_model(ModelConfig(architecture=architecture, **{**SMALL, **sizes}), InitConfig(gamma=0.5), seed=seed)
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model


def _plain_forward(model: HookedTransformer, tokens: torch.Tensor, architecture: str) -> torch.Tensor:
    """The papers' forward, from the definitions (not from TransformerLens' or our code).

    standard: x += Attn(LN1 x, LN1 x); x += MLP(LN2 x); final LN; GELU.
    journal:  x += Attn(q from LN1 x, k and v from x); x += MLP(LN2 x); final LN; GELU.
    neurips:  x = LN1(x + Attn(x)); x = LN2(x + MLP(x)); no final LN; ReLU; no attention or
              MLP biases.
    """
    p = {name: t.detach() for name, t in model.named_parameters()}
    n_pos = tokens.shape[1]
    has_bias = architecture != "neurips"
    act = F.relu if architecture == "neurips" else (lambda h: F.gelu(h))  # exact (erf) GELU

    def bias(name: str) -> torch.Tensor | float:
        return p[name] if has_bias else 0.0

    def head_bias(name: str) -> torch.Tensor | float:  # [head, d_head] -> broadcast over batch and position
        return p[name][None, :, None, :] if has_bias else 0.0

    def ln(x: torch.Tensor, prefix: str) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * p[f"{prefix}.w"] + p[f"{prefix}.b"]

    def attn(q_in: torch.Tensor, kv_in: torch.Tensor, layer: int) -> torch.Tensor:
        a = f"blocks.{layer}.attn"
        q = torch.einsum("bpd,hde->bhpe", q_in, p[f"{a}.W_Q"]) + head_bias(f"{a}.b_Q")
        k = torch.einsum("bpd,hde->bhpe", kv_in, p[f"{a}.W_K"]) + head_bias(f"{a}.b_K")
        v = torch.einsum("bpd,hde->bhpe", kv_in, p[f"{a}.W_V"]) + head_bias(f"{a}.b_V")
        scores = torch.einsum("bhqe,bhke->bhqk", q, k) / math.sqrt(q.shape[-1])
        causal = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
        pattern = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        z = torch.einsum("bhqk,bhke->bqhe", pattern, v)
        return torch.einsum("bqhe,hed->bqd", z, p[f"{a}.W_O"]) + bias(f"{a}.b_O")

    def mlp(x: torch.Tensor, layer: int) -> torch.Tensor:
        m = f"blocks.{layer}.mlp"
        return act(x @ p[f"{m}.W_in"] + bias(f"{m}.b_in")) @ p[f"{m}.W_out"] + bias(f"{m}.b_out")

    x = p["embed.W_E"][tokens] + p["pos_embed.W_pos"][:n_pos]
    for layer in range(model.cfg.n_layers):
        ln1, ln2 = f"blocks.{layer}.ln1", f"blocks.{layer}.ln2"
        if architecture == "neurips":
            x = ln(x + attn(x, x, layer), ln1)
            x = ln(x + mlp(x, layer), ln2)
        else:
            h = ln(x, ln1)
            x = x + attn(h, h if architecture == "standard" else x, layer)
            x = x + mlp(ln(x, ln2), layer)
    if architecture != "neurips":
        x = ln(x, "ln_final")
    return x @ p["unembed.W_U"] + p["unembed.b_U"]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_is_a_hooked_transformer_of_its_architecture(architecture: str) -> None:
    model = build_model(ModelConfig(architecture=architecture, **SMALL), InitConfig(gamma=0.5), seed=0)
    assert isinstance(model, HookedTransformer)
    assert architecture_of(model) == architecture
    assert model.cfg.act_fn == {"neurips": "relu"}.get(architecture, "gelu")
    assert hasattr(model, "ln_final") == (architecture != "neurips")


@pytest.mark.parametrize("n_layers", [1, 3])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_forward_equals_plain_pytorch_from_the_definitions(architecture: str, n_layers: int) -> None:
    model = _perturbed(architecture, seed=n_layers, n_layers=n_layers)
    tokens = torch.randint(0, 201, (5, 9), generator=torch.Generator().manual_seed(1))
    expected = _plain_forward(model, tokens, architecture)
    torch.testing.assert_close(model(tokens), expected, rtol=1e-5, atol=1e-5)
    # in float64 the rounding of fp32 vanishes: the two are the same function
    model = model.double()
    model.cfg.dtype = torch.float64
    torch.testing.assert_close(model(tokens), _plain_forward(model, tokens, architecture), rtol=0, atol=1e-10)


def test_the_three_forwards_differ() -> None:
    # Same weights where the architectures share them: the blocks themselves must differ.
    tokens = torch.randint(20, 100, (4, 9))
    outs = {a: _plain_forward(_perturbed(a), tokens, a) for a in ARCHITECTURES}
    assert not torch.allclose(outs["standard"], outs["journal"], atol=1e-3)
    assert not torch.allclose(outs["standard"], outs["neurips"], atol=1e-3)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_standard_hook_points_fire_with_their_shapes(architecture: str) -> None:
    model = _perturbed(architecture)
    batch, n_pos, d, h, e = 2, 9, SMALL["d_model"], SMALL["n_heads"], SMALL["d_head"]
    _, cache = model.run_with_cache(torch.randint(0, 201, (batch, n_pos)))
    shapes = {
        "hook_embed": (batch, n_pos, d),
        "hook_pos_embed": (batch, n_pos, d),
        "blocks.1.hook_resid_pre": (batch, n_pos, d),
        "blocks.1.attn.hook_q": (batch, n_pos, h, e),
        "blocks.1.attn.hook_k": (batch, n_pos, h, e),
        "blocks.1.attn.hook_v": (batch, n_pos, h, e),
        "blocks.1.attn.hook_pattern": (batch, h, n_pos, n_pos),
        "blocks.1.attn.hook_z": (batch, n_pos, h, e),
        "blocks.1.hook_attn_out": (batch, n_pos, d),
        "blocks.1.hook_resid_mid": (batch, n_pos, d),
        "blocks.1.hook_mlp_out": (batch, n_pos, d),
        "blocks.1.hook_resid_post": (batch, n_pos, d),
        "blocks.1.ln1.hook_normalized": (batch, n_pos, d),
        "blocks.1.ln2.hook_normalized": (batch, n_pos, d),
    }
    for name, shape in shapes.items():
        assert tuple(cache[name].shape) == shape, name
    # the residual stream hooks mean what they mean in TransformerLens
    torch.testing.assert_close(cache["blocks.0.hook_resid_post"], cache["blocks.1.hook_resid_pre"])
    mid, post = cache["blocks.1.hook_resid_mid"], cache["blocks.1.hook_resid_post"]
    if architecture == "neurips":  # post-LN: the stream after each sum is normalized
        torch.testing.assert_close(post, model.blocks[1].ln2(mid + cache["blocks.1.hook_mlp_out"]))
    else:
        torch.testing.assert_close(post, mid + cache["blocks.1.hook_mlp_out"])
    # the journal's keys read the raw residual, the standard block's the normalized one
    resid_pre = cache["blocks.1.hook_resid_pre"]
    k_in = model.blocks[1].ln1(resid_pre) if architecture == "standard" else resid_pre
    attn = model.blocks[1].attn
    k = torch.einsum("bpd,hde->bphe", k_in, attn.W_K) + attn.b_K
    torch.testing.assert_close(cache["blocks.1.attn.hook_k"], k)


def test_hooks_intervene_inside_the_new_blocks() -> None:
    model = _perturbed("neurips")
    tokens = torch.randint(0, 201, (2, 9))
    zero = lambda act, hook: torch.zeros_like(act)  # noqa: E731
    with model.hooks(fwd_hooks=[("blocks.1.hook_mlp_out", zero)]):
        _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["blocks.1.hook_resid_post"], model.blocks[1].ln2(cache["blocks.1.hook_resid_mid"]))
    assert not any(hp._forward_hooks for hp in model.hook_dict.values())


def _expected_std(name: str, architecture: str, gamma: float, cfg: ModelConfig) -> float:
    """The init rules, restated: neurips uses the true fan-in, journal and standard d_model
    with W_O and W_out divided by sqrt(2 n_layers)."""
    leaf = name.rsplit(".", 1)[-1]
    if architecture == "neurips":
        return {"W_O": cfg.n_heads * cfg.d_head, "W_out": cfg.d_mlp}.get(leaf, cfg.d_model) ** -gamma
    std = cfg.d_model**-gamma
    return std / math.sqrt(2 * cfg.n_layers) if leaf in ("W_O", "W_out") else std


@pytest.mark.parametrize("gamma", [0.4, 0.9])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_gamma_init_follows_the_architectures_convention(architecture: str, gamma: float) -> None:
    cfg = ModelConfig(architecture=architecture, n_layers=3, d_model=64, n_heads=4, d_head=16, d_mlp=256, n_ctx=64)
    model = build_model(cfg, InitConfig(gamma=gamma), seed=1)
    params = dict(model.named_parameters())
    weights = [n for n in params if n.rsplit(".", 1)[-1].startswith("W_")]
    assert len(weights) == 3 + 3 * 6
    for name in weights:
        want = _expected_std(name, architecture, gamma, cfg)
        got = float(params[name].detach().double().std())
        assert abs(got / want - 1) < 0.05, (name, got, want)
        assert init_stds(model, gamma=gamma)[name] == pytest.approx(want)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_biases_follow_the_architecture(architecture: str) -> None:
    cfg = ModelConfig(architecture=architecture, n_layers=3, d_model=64, n_heads=4, d_head=16, d_mlp=256)
    model = build_model(cfg, InitConfig(gamma=0.8), seed=2)
    biases = {n: p for n, p in model.named_parameters() if n.rsplit(".", 1)[-1].startswith("b_")}
    if architecture == "standard":
        assert all(torch.all(b == 0) for b in biases.values())
        return
    if architecture == "neurips":  # no attention or MLP biases: only the unembedding's
        assert list(biases) == ["unembed.b_U"]
        for block in model.blocks:
            assert torch.all(block.attn.b_Q == 0) and torch.all(block.mlp.b_out == 0)
            assert "b_Q" not in dict(block.attn.named_parameters())
    # PyTorch's default rule for a linear layer: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    fan_in = {"b_O": cfg.n_heads * cfg.d_head, "b_out": cfg.d_mlp}
    scaled = []
    for name, b in biases.items():
        bound = 1 / math.sqrt(fan_in.get(name.rsplit(".", 1)[-1], cfg.d_model))
        assert bias_bounds(model)[name] == pytest.approx(bound)
        assert b.abs().max() <= bound and b.abs().max() > 0.5 * bound, name
        scaled.append(b.detach().flatten() / bound)
    spread = torch.cat(scaled).double()
    assert abs(float(spread.std()) / (1 / math.sqrt(3)) - 1) < 0.1  # the std of U(-1, 1)
    assert abs(float(spread.mean())) < 0.1


def test_gamma_init_without_a_seed_uses_the_global_generator() -> None:
    cfg = ModelConfig(architecture="journal", **SMALL)
    torch.manual_seed(5)
    a = gamma_init_(build_model(cfg, InitConfig(gamma=0.5), seed=0), gamma=0.7)
    torch.manual_seed(5)
    b = gamma_init_(build_model(cfg, InitConfig(gamma=0.5), seed=0), gamma=0.7)
    c = gamma_init_(build_model(cfg, InitConfig(gamma=0.5), seed=0), gamma=0.7)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if name.endswith("W_Q"):
            assert not torch.equal(pa, pc), name
    with pytest.raises(ValueError, match="at most one source of randomness"):
        gamma_init_(a, gamma=0.5, seed=0, generator=torch.Generator())


def test_standard_weights_are_unchanged_by_the_bias_rules() -> None:
    # The standard block draws no biases: its weights are the same draws as before biases had rules.
    model = build_model(ModelConfig(architecture="standard", **SMALL), InitConfig(gamma=0.5), seed=3)
    gen = torch.Generator().manual_seed(3)
    for name, std in init_stds(model, gamma=0.5).items():
        param = dict(model.named_parameters())[name]
        torch.testing.assert_close(param.detach(), torch.randn(param.shape, generator=gen) * std, rtol=0, atol=0)


def test_unknown_architecture_and_mismatched_norm_are_refused() -> None:
    with pytest.raises(ValueError, match="architecture must be one of"):
        ModelConfig(architecture="gpt2")
    with pytest.raises(ValueError, match="for architecture 'standard' only"):
        ModelConfig(architecture="neurips", normalization_type="RMS")


def test_a_config_without_architecture_is_the_standard_block() -> None:
    legacy = {k: v for k, v in vars(ModelConfig(architecture="standard", act_fn="gelu")).items() if k != "architecture"}
    assert ModelConfig.from_dict(legacy).architecture == "standard"


def test_task_decides_the_default_architecture() -> None:
    assert make_run_config("tiny", task="symmetric").model.architecture == "neurips"
    assert make_run_config("tiny", task="complexity").model.architecture == "neurips"
    assert make_run_config("tiny", task="id-ood").model.architecture == "journal"
    assert make_run_config("tiny", task="id-ood", architecture="standard").model.architecture == "standard"


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_load_model_round_trips(architecture: str, tmp_path) -> None:
    cfg = make_run_config(
        "tiny", task="id-ood", architecture=architecture, epochs=1, n_train=300, n_test=100, eval_samples=100
    )
    result = train(cfg, tmp_path / "run", device="cpu", progress=False)
    loaded = load_model(tmp_path / "run")
    assert architecture_of(loaded) == architecture
    tokens = torch.randint(20, 100, (4, 9))
    torch.testing.assert_close(loaded(tokens), result.model.eval()(tokens), rtol=0, atol=0)


def test_a_run_folder_of_another_architecture_is_refused(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "run")
    args = [
        "train",
        "--preset",
        "tiny",
        "--task",
        "symmetric",
        "--epochs",
        "1",
        "--n-train",
        "300",
        "--quiet",
        "--out",
        out,
    ]
    assert main([*args, "--architecture", "neurips"]) == 0
    assert main([*args, "--architecture", "journal"]) != 0
    err = capsys.readouterr().err
    assert "architecture" in err and "neurips" in err and "journal" in err


def test_equal_weights_give_byte_identical_files(tmp_path) -> None:
    import hashlib

    from interp_init.model import save_weights

    cfg = ModelConfig(architecture="journal", **SMALL)
    model = build_model(cfg, InitConfig(gamma=0.5), seed=0)
    digests = set()
    for i in range(6):  # safetensors orders its header's metadata differently on each call
        path = save_weights(model, cfg, tmp_path / f"w{i}.safetensors")
        digests.add(hashlib.sha256(path.read_bytes()).hexdigest())
    assert len(digests) == 1
    loaded = load_weights_into_fresh(cfg, tmp_path / "w0.safetensors")
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name


def load_weights_into_fresh(cfg: ModelConfig, path) -> HookedTransformer:
    from interp_init.model import empty_model, load_weights

    return load_weights(empty_model(cfg), cfg, path)


def test_same_config_and_seed_train_byte_identical_weights(tmp_path) -> None:
    import hashlib

    cfg = make_run_config("tiny", task="symmetric", epochs=1, n_train=300, n_test=100, eval_samples=100, seed=4)
    hashes = []
    for name in ("a", "b"):
        train(cfg, tmp_path / name, device="cpu", progress=False)
        hashes.append(hashlib.sha256((tmp_path / name / "model.safetensors").read_bytes()).hexdigest())
    assert hashes[0] == hashes[1]


def test_the_custom_architecture_example_trains_through_the_command_line(tmp_path) -> None:
    """examples/custom_architecture.py (docs/architectures.md): one module, one registration
    line, and a run folder of the new architecture; in a fresh process, so that the
    registration does not outlive the test."""
    import json
    import subprocess
    import sys

    from helpers import ROOT

    out = tmp_path / "parallel"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "custom_architecture.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "metrics.json").read_text())["status"] == "completed"
    assert json.loads((out / "config.json").read_text())["model"]["architecture"] == "parallel"
    # a process that has not registered it refuses the folder, naming the registered ones
    with pytest.raises(ValueError, match="architecture must be one of"):
        load_model(out)


def test_the_registry_refuses_what_would_make_a_name_or_a_block_ambiguous() -> None:
    from dataclasses import replace

    from interp_init.architectures import (
        Architecture,
        architecture_names,
        get_architecture,
        register_architecture,
        registered,
    )

    journal = get_architecture("journal")
    with pytest.raises(ValueError, match="an architecture named 'journal' is already registered"):
        register_architecture(replace(journal, activation="relu"))
    with pytest.raises(ValueError, match="uses the block class JournalBlock of 'journal'"):
        register_architecture(replace(journal, name="journal2"))
    with pytest.raises(ValueError, match="convention must be one of"):
        replace(journal, name="x", convention="xavier")
    with pytest.raises(ValueError, match="biases must be one of"):
        replace(journal, name="x", biases="some")
    with pytest.raises(ValueError, match="block must be a TransformerBlock subclass"):
        Architecture(**{**vars(journal), "name": "x", "block": torch.nn.Linear})
    with registered(journal):  # already registered: it stays so after the block
        pass
    assert "journal" in architecture_names()


def test_the_docs_show_the_example_as_it_is() -> None:
    """docs/architectures.md quotes examples/custom_architecture.py: every code line of its
    first Python block (comments and the abbreviated Architecture(...) call aside) is in the example."""
    import re

    from helpers import ROOT

    doc = (ROOT / "docs" / "architectures.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    block = block[: block.index("PARALLEL = Architecture(")]
    example = {
        line.strip() for line in (ROOT / "examples" / "custom_architecture.py").read_text(encoding="utf-8").splitlines()
    }
    for line in block.splitlines():
        code = line.split("  #")[0].strip()
        if code.startswith("def "):
            code = code.split("(")[0]
            assert any(e.startswith(code + "(") for e in example), line
        elif code:
            assert code in example, line
