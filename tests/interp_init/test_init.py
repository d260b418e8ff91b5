"""gamma_init_: every weight matrix's empirical std follows its convention's formula."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from helpers import foreign_model

from interp_init import InitConfig, ModelConfig, build_model, gamma_init_, init_stds

#: A model built directly with TransformerLens, not by our builder (n_ctx 64 for a well-estimated W_pos std).
_foreign_model = functools.partial(foreign_model, n_layers=3, d_model=64, n_heads=4, n_ctx=64)


def _expected(
    name: str, convention: str, gamma: float, d_model: int, n_heads: int, d_head: int, d_mlp: int, n_layers: int
) -> float:
    """An independent statement of the gamma init rule (docs/science.md#gamma-scaled-initialization)."""
    leaf = name.rsplit(".", 1)[-1]
    if convention == "reference":
        std = d_model**-gamma
        return std / math.sqrt(2 * n_layers) if leaf in ("W_O", "W_out") else std
    fan_in = {"W_O": n_heads * d_head, "W_out": d_mlp}.get(leaf, d_model)
    return fan_in**-gamma


@pytest.mark.parametrize("convention", ["reference", "fan_in"])
@pytest.mark.parametrize("gamma", [0.3, 0.8])
def test_empirical_std_matches_formula(convention: str, gamma: float) -> None:
    model = gamma_init_(_foreign_model(), gamma=gamma, convention=convention, seed=1)
    params = dict(model.named_parameters())
    weights = [n for n in params if n.rsplit(".", 1)[-1].startswith("W_")]
    assert len(weights) == 3 + 3 * 6  # W_E, W_pos, W_U + 6 per block
    for name in weights:
        want = _expected(name, convention, gamma, d_model=64, n_heads=4, d_head=16, d_mlp=256, n_layers=3)
        got = float(params[name].detach().double().std())
        assert abs(got / want - 1) < 0.05, (name, got, want)
        assert abs(float(params[name].detach().double().mean())) < 0.1 * want


def test_fan_in_of_w_o_is_merged_heads_not_d_head() -> None:
    model = _foreign_model(n_heads=4, d_head=8, d_model=64)
    stds = init_stds(model, gamma=0.5, convention="fan_in")
    assert stds["blocks.0.attn.W_O"] == pytest.approx(32**-0.5)  # TransformerLens' helper would give 8**-0.5
    assert stds["blocks.0.mlp.W_out"] == pytest.approx(256**-0.5)


def test_group_gammas_override_each_group() -> None:
    model = _foreign_model()
    stds = init_stds(model, gamma=0.5, gamma_embed=0.2, gamma_qk=0.9, gamma_vo=0.7, gamma_mlp=0.6, gamma_unembed=1.0)
    assert stds["embed.W_E"] == pytest.approx(64**-0.2)
    assert stds["pos_embed.W_pos"] == pytest.approx(64**-0.2)
    assert stds["blocks.1.attn.W_K"] == pytest.approx(64**-0.9)
    assert stds["blocks.1.attn.W_V"] == pytest.approx(64**-0.7)
    assert stds["blocks.1.attn.W_O"] == pytest.approx(64**-0.7 / math.sqrt(6))
    assert stds["blocks.2.mlp.W_in"] == pytest.approx(64**-0.6)
    assert stds["unembed.W_U"] == pytest.approx(64**-1.0)


def test_biases_and_layernorm_keep_defaults() -> None:
    model = gamma_init_(_foreign_model(), gamma=0.5, seed=0)
    for name, param in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("b"):
            assert torch.all(param == 0), name
        if leaf == "w":
            assert torch.all(param == 1), name


def test_seed_reproducible_and_distinct() -> None:
    cfg, init = ModelConfig(d_model=32, d_head=8, n_heads=4, d_mlp=64), InitConfig(gamma=0.7)
    a, b, c = build_model(cfg, init, seed=3), build_model(cfg, init, seed=3), build_model(cfg, init, seed=4)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if name.rsplit(".", 1)[-1].startswith("W_"):
            assert not torch.equal(pa, pc), name


def test_generator_equals_seed() -> None:
    m1 = gamma_init_(_foreign_model(n_layers=1), gamma=0.5, seed=7)
    m2 = gamma_init_(_foreign_model(n_layers=1), gamma=0.5, generator=torch.Generator().manual_seed(7))
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(p1, p2)


@pytest.mark.parametrize("gamma", [0, -1, float("nan"), float("inf"), "0.5", True])
def test_bad_gamma_is_rejected(gamma: object) -> None:
    with pytest.raises(ValueError, match="gamma must be a finite positive number"):
        gamma_init_(_foreign_model(n_layers=1), gamma=gamma, seed=0)  # type: ignore[arg-type]


def test_bad_convention_and_randomness_are_rejected() -> None:
    model = _foreign_model(n_layers=1)
    with pytest.raises(ValueError, match="convention must be one of"):
        gamma_init_(model, gamma=0.5, convention="xavier", seed=0)
    with pytest.raises(ValueError, match="at most one source of randomness"):
        gamma_init_(model, gamma=0.5, seed=1, generator=torch.Generator())
    with pytest.raises(ValueError, match="unknown group gamma"):
        gamma_init_(model, gamma=0.5, seed=0, gamma_mlpp=0.3)
