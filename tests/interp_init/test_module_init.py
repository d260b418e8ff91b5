"""gamma_init_module_: each layer type's fan-in against hand values, the draws against a
hand-written sequence from the same generator, the empirical spread against its formula, and
gamma_init_'s TransformerLens path unchanged."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import foreign_model
from torch import nn

from interp_init import ModuleInitConfig, gamma_init_, gamma_init_module_, init_stds, module_init_plan
from interp_init.init import bias_bounds


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.GELU(),
        nn.Conv2d(8, 8, (3, 5), groups=4),
        nn.GroupNorm(2, 8),
        nn.ConvTranspose2d(8, 6, 2, stride=2, groups=2),
        nn.Flatten(),
    )


def test_fan_in_of_each_layer_type_is_its_hand_value() -> None:
    model = nn.ModuleDict(
        {
            "lin": nn.Linear(7, 3),
            "c1": nn.Conv1d(6, 4, 5, groups=2),  # 6/2 x 5
            "c2": nn.Conv2d(8, 8, (3, 5), groups=4),  # 8/4 x 15
            "c3": nn.Conv3d(2, 4, (1, 2, 3)),  # 2 x 6
            "t1": nn.ConvTranspose1d(4, 6, 3),  # weight (4, 6, 3): 6 x 3
            "t2": nn.ConvTranspose2d(6, 8, (3, 2), groups=2),  # weight (6, 4, 3, 2): 8/2 x 6
            "t3": nn.ConvTranspose3d(3, 5, 2),  # weight (3, 5, 2, 2, 2): 5 x 8
            "emb": nn.Embedding(50, 12),
            "bil": nn.Bilinear(5, 9, 2),
            "mha": nn.MultiheadAttention(16, 2, kdim=10, vdim=6, add_bias_kv=True),
            "ln": nn.LayerNorm(4),
        }
    )
    hand = {
        "lin": 7,
        "c1": 15,
        "c2": 30,
        "c3": 12,
        "t1": 18,
        "t2": 24,
        "t3": 40,
        "emb": 12,
        "bil": 5,
    }
    plan = module_init_plan(model, gamma=0.7)
    for layer, fan_in in hand.items():
        for leaf in ("weight", "bias"):
            if f"{layer}.{leaf}" in plan:
                assert plan[f"{layer}.{leaf}"].fan_in == fan_in, (layer, leaf)
                assert plan[f"{layer}.{leaf}"].scale == pytest.approx(fan_in**-0.7)
    # the transposed convs follow PyTorch's own helper, as the released diffusion code does
    for layer in ("t1", "t2", "t3", "c1", "c2", "c3", "lin"):
        assert plan[f"{layer}.weight"].fan_in == nn.init._calculate_fan_in_and_fan_out(model[layer].weight)[0]
    mha = {k.removeprefix("mha."): v.fan_in for k, v in plan.items() if k.startswith("mha.")}
    assert mha == {
        "q_proj_weight": 16,
        "k_proj_weight": 10,
        "v_proj_weight": 6,
        "in_proj_bias": 16,
        "bias_k": 10,
        "bias_v": 6,
        "out_proj.weight": 16,
        "out_proj.bias": 16,
    }
    assert plan["ln.weight"].rule == "one" and plan["ln.bias"].rule == "zero"


@pytest.mark.parametrize("distribution", ["normal", "uniform"])
def test_draws_equal_a_hand_written_sequence_from_the_same_generator(distribution: str) -> None:
    model = _cnn()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(3.0)  # norms must come back to one and zero
    gamma_init_module_(model, gamma=0.6, distribution=distribution, seed=11)
    g = torch.Generator().manual_seed(11)
    # named_parameters order; fan-ins by hand
    expected: dict[str, torch.Tensor] = {}
    for name, shape, fan_in in [
        ("0.weight", (8, 3, 3, 3), 27),
        ("0.bias", (8,), 27),
        ("3.weight", (8, 2, 3, 5), 30),
        ("3.bias", (8,), 30),
        ("5.weight", (8, 3, 2, 2), 12),
        ("5.bias", (6,), 12),
    ]:
        bound = fan_in**-0.6
        if distribution == "normal":
            expected[name] = torch.randn(shape, generator=g) * bound
        else:
            expected[name] = (torch.rand(shape, generator=g) * 2 - 1) * bound
    params = dict(model.named_parameters())
    for name, want in expected.items():
        assert torch.equal(params[name].detach(), want), name
    for name in ("1.weight", "4.weight"):
        assert torch.all(params[name] == 1), name
    for name in ("1.bias", "4.bias"):
        assert torch.all(params[name] == 0), name
    assert torch.all(model[1].running_var == 1)  # running statistics untouched


def _sample_tolerance(n: int, distribution: str) -> float:
    """Five standard errors of the sample std's relative error: sqrt((kurtosis - 1) / (4 n))."""
    kurtosis = 3.0 if distribution == "normal" else 1.8
    return 5 * math.sqrt((kurtosis - 1) / (4 * n))


@pytest.mark.parametrize("distribution", ["normal", "uniform"])
def test_large_layers_have_the_stated_spread(distribution: str) -> None:
    model = nn.Sequential(
        nn.Linear(400, 300), nn.Conv2d(16, 64, 5), nn.ConvTranspose2d(64, 32, 4), nn.Embedding(2000, 48)
    )
    gamma = 0.8
    gamma_init_module_(model, gamma=gamma, distribution=distribution, seed=0)
    for name, fan_in in (("0.weight", 400), ("1.weight", 16 * 25), ("2.weight", 32 * 16), ("3.weight", 48)):
        w = dict(model.named_parameters())[name].detach().double()
        scale = fan_in**-gamma
        std = scale if distribution == "normal" else scale / math.sqrt(3)
        assert abs(float(w.std()) / std - 1) < _sample_tolerance(w.numel(), distribution), name
        assert abs(float(w.mean())) < 5 * std / math.sqrt(w.numel()), name
        if distribution == "uniform":
            assert float(w.abs().max()) <= scale
            assert float(w.abs().max()) > scale * (1 - 20 / w.numel())  # the bound is reached
    # the bias uses its layer's fan-in too
    b = model[0].bias.detach()
    assert float(b.abs().max()) <= (400**-gamma) * (5 if distribution == "normal" else 1)


def test_mlp_and_transformer_are_re_initialized_by_the_rule() -> None:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.LayerNorm(32), nn.Linear(32, 3))
    gamma_init_module_(mlp, gamma=1.0, distribution="uniform", seed=2)
    w0, w2, b4, b0 = (t.detach() for t in (mlp[0].weight, mlp[2].weight, mlp[4].bias, mlp[0].bias))
    assert float(w0.abs().max()) <= 0.1 and float(w2.abs().max()) <= 1 / 32
    assert float(b4.abs().max()) <= 1 / 32 and float(b0.abs().max()) > 0

    transformer = nn.Transformer(
        d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=24, batch_first=True
    )
    gamma_init_module_(transformer, gamma=1.2, seed=3, biases="zero")
    g = torch.Generator().manual_seed(3)
    for name, param in transformer.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if "norm" in name:
            assert torch.all(param == (1 if leaf == "weight" else 0)), name
        elif "bias" in leaf:
            assert torch.all(param == 0), name
        else:
            fan_in = 24 if "linear2" in name else 16
            assert torch.equal(param.detach(), torch.randn(param.shape, generator=g) * fan_in**-1.2), name
    out = transformer(torch.randn(2, 5, 16), torch.randn(2, 4, 16))
    assert out.shape == (2, 4, 16) and torch.isfinite(out).all()


def test_ties_padding_and_kept_parameters() -> None:
    emb = nn.Embedding(10, 6, padding_idx=0)
    head = nn.Linear(6, 10, bias=False)
    head.weight = emb.weight  # tied: drawn once, under its first name
    model = nn.Sequential(emb, head)
    plan = module_init_plan(model, gamma=0.5)
    assert list(plan) == ["0.weight"]
    gamma_init_module_(model, gamma=0.5, seed=0)
    assert torch.all(emb.weight[0] == 0)

    class Custom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.full((3,), 5.0))
            self.lin = nn.Linear(3, 3)

    with pytest.raises(ValueError, match=r"parameter 'scale' .* no known fan-in.*unknown='keep'"):
        gamma_init_module_(Custom(), gamma=0.5, seed=0)
    kept = gamma_init_module_(Custom(), gamma=0.5, seed=0, unknown="keep", biases="keep", norms="keep")
    assert torch.all(kept.scale == 5)


def test_same_seed_same_weights_generator_equals_seed() -> None:
    a = gamma_init_module_(_cnn(), gamma=0.5, seed=4)
    b = gamma_init_module_(_cnn(), gamma=0.5, generator=torch.Generator().manual_seed(4))
    c = gamma_init_module_(_cnn(), gamma=0.5, seed=5)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if "weight" in name and name[0] in "035":
            assert not torch.equal(pa, pc), name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma": 0}, "gamma must be a finite positive number"),
        ({"gamma": float("nan")}, "gamma must be a finite positive number"),
        ({"gamma": 0.5, "distribution": "xavier"}, "distribution must be one of"),
        ({"gamma": 0.5, "biases": "default"}, "biases must be one of"),
        ({"gamma": 0.5, "norms": "draw"}, "norms must be one of"),
        ({"gamma": 0.5, "unknown": "skip"}, "unknown must be one of"),
        ({"gamma": 0.5, "convention": "fan_in"}, r"unknown option\(s\) \['convention'\]"),
        ({}, "gamma is required"),
        ({"gamma": 0.5, "config": ModuleInitConfig()}, "not both"),
        ({"gamma": 0.5, "seed": 1, "generator": torch.Generator()}, "at most one source of randomness"),
        ({"gamma": 0.5, "seed": -1}, "seed must be a non-negative integer"),
        ({"gamma": 40.0}, "below float32's smallest normal number"),
    ],
)
def test_bad_options_are_refused_in_one_line(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        gamma_init_module_(nn.Linear(100, 2), **kwargs)
    assert "\n" not in str(info.value)


def test_models_it_cannot_take_are_refused() -> None:
    with pytest.raises(ValueError, match="use interp_init.gamma_init_"):
        gamma_init_module_(foreign_model(n_layers=1, d_model=16, n_heads=2, n_ctx=8), gamma=0.5, seed=0)
    with pytest.raises(ValueError, match="lazy module"):
        gamma_init_module_(nn.LazyLinear(3), gamma=0.5, seed=0)
    with pytest.raises(ValueError, match=r"'weight' is on the meta device"):
        gamma_init_module_(nn.Linear(3, 3, device="meta"), gamma=0.5, seed=0)
    with pytest.raises(ValueError, match="must be a torch.nn.Module"):
        gamma_init_module_("net", gamma=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gamma_init_module_"):
        gamma_init_(nn.Linear(3, 3), gamma=0.5, seed=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("arch", ["standard", "journal", "neurips"])
def test_gamma_init_of_a_hooked_transformer_is_unchanged(arch: str) -> None:
    """gamma_init_ draws, in order: each weight randn * std (init_stds' order), then each bias
    (rand * 2 - 1) * bound, or zero: the sequence it drew before gamma_init_module_ existed."""
    from interp_init import InitConfig, ModelConfig, build_model

    model = build_model(
        ModelConfig(architecture=arch, n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32),
        InitConfig(gamma=0.5),
        seed=0,
    )
    gamma_init_(model, gamma=0.9, seed=21)
    g = torch.Generator().manual_seed(21)
    params = dict(model.named_parameters())
    for name, std in init_stds(model, gamma=0.9).items():
        assert torch.equal(params[name].detach(), torch.randn(params[name].shape, generator=g) * std), name
    for name, bound in bias_bounds(model).items():
        want = (
            torch.zeros(params[name].shape)
            if bound == 0
            else (torch.rand(params[name].shape, generator=g) * 2 - 1) * bound
        )
        assert torch.equal(params[name].detach(), want), name


def test_the_docs_example_and_the_docstring_example_run() -> None:
    import doctest
    import re
    import subprocess
    import sys
    from pathlib import Path

    import interp_init.module_init as module

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "science.md").read_text()
    code = re.search(r"<!-- example:gamma_init_module_ -->\n```python\n(.*?)```", page, re.DOTALL)
    assert code, "docs/science.md lost its gamma_init_module_ example"
    done = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, cwd=root, check=False)
    assert done.returncode == 0, done.stderr
    assert "0.weight draw 27" in done.stdout and "3.weight draw 32" in done.stdout  # ConvTranspose: 8 x 2 x 2
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
