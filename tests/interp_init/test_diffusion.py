"""The concept-graph DDPM: its schedule, loss and sampling step against hand computations, the
U-Net's shapes and refusals, the concepts actually conditioning its output, and its gamma init."""

from __future__ import annotations

import math

import pytest
import torch

from interp_init.diffusion import ConceptUNet, DDPMSchedule, UNetConfig, ddpm_loss, ddpm_sample, noised
from interp_init.module_init import gamma_init_module_, module_init_plan


def _net(seed: int = 0, size: int = 16, n_feat: int = 8) -> ConceptUNet:
    torch.manual_seed(seed)
    return ConceptUNet(UNetConfig(image_size=size, n_feat=n_feat))


def test_schedule_is_the_linear_betas_and_their_running_product() -> None:
    s = DDPMSchedule(n_steps=4, beta_start=0.1, beta_end=0.5)
    hand_betas = [0.1, 0.2, 0.3, 0.4, 0.5]  # t = 0..4, linear
    hand_abar = [0.9, 0.9 * 0.8, 0.9 * 0.8 * 0.7, 0.9 * 0.8 * 0.7 * 0.6, 0.9 * 0.8 * 0.7 * 0.6 * 0.5]
    assert s.betas().tolist() == pytest.approx(hand_betas)
    assert s.alphabar().tolist() == pytest.approx(hand_abar)
    for bad in ({"n_steps": 0}, {"beta_start": 0.0}, {"beta_start": 0.5, "beta_end": 0.1}, {"beta_end": 1.0}):
        with pytest.raises(ValueError):
            DDPMSchedule(**bad)


def test_one_loss_step_is_the_mse_of_the_noise_at_the_hand_noised_image() -> None:
    net = _net().eval()
    s = DDPMSchedule(n_steps=4, beta_start=0.1, beta_end=0.5)
    g = torch.Generator().manual_seed(3)
    x = torch.rand(2, 3, 16, 16, generator=g)
    noise = torch.randn(2, 3, 16, 16, generator=g)
    step = torch.tensor([1, 3])
    concepts = torch.tensor([[0, 1, 0], [1, 0, 1]])
    abar = [0.9 * 0.8, 0.9 * 0.8 * 0.7 * 0.6]  # alphabar at t = 1 and t = 3
    x_t = torch.stack([math.sqrt(a) * x[i] + math.sqrt(1 - a) * noise[i] for i, a in enumerate(abar)])
    assert torch.allclose(noised(s, x, step, noise), x_t, atol=1e-6)
    prediction = net(x_t, concepts, torch.tensor([1 / 4, 3 / 4]))
    hand = ((prediction - noise) ** 2).mean()
    assert torch.allclose(ddpm_loss(net, s, x, concepts, step, noise), hand, atol=1e-6)
    with pytest.raises(ValueError, match="1 .. 4"):
        ddpm_loss(net, s, x, concepts, torch.tensor([0, 1]), noise)


def test_sampling_is_the_ancestral_step_by_hand() -> None:
    net = _net().eval()
    s = DDPMSchedule(n_steps=2, beta_start=0.1, beta_end=0.3)  # betas 0.1, 0.2, 0.3; abar 0.9, 0.72, 0.504
    concepts = torch.tensor([[0, 1, 1]])
    got = ddpm_sample(net, s, concepts, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 3, 16, 16, generator=g)
    with torch.no_grad():
        eps = net(x, concepts, torch.tensor([1.0]))
        x = (x - eps * 0.3 / math.sqrt(1 - 0.504)) / math.sqrt(0.7) + math.sqrt(0.3) * torch.randn(
            1, 3, 16, 16, generator=g
        )
        eps = net(x, concepts, torch.tensor([0.5]))
        x = (x - eps * 0.2 / math.sqrt(1 - 0.72)) / math.sqrt(0.8)  # no noise at the last step
    assert torch.allclose(got, x, atol=1e-5)


@pytest.mark.parametrize("size", [16, 32])
def test_forward_keeps_the_image_shape_and_refuses_others(size: int) -> None:
    net = _net(size=size)
    x = torch.rand(3, 3, size, size)
    assert net(x, torch.zeros(3, 3, dtype=torch.long), torch.rand(3)).shape == (3, 3, size, size)
    with pytest.raises(ValueError, match="x must be"):
        net(torch.rand(3, 3, size + 4, size + 4), torch.zeros(3, 3, dtype=torch.long), torch.rand(3))
    with pytest.raises(ValueError, match="concepts must be"):
        net(x, torch.zeros(3, 2, dtype=torch.long), torch.rand(3))
    for bad in ({"image_size": 30}, {"n_feat": 12}, {"image_size": 8}):
        with pytest.raises(ValueError):
            UNetConfig(**bad)


def test_each_concept_changes_the_output_through_its_embeddings() -> None:
    net = _net(1).eval()
    x, t = torch.rand(1, 3, 16, 16).expand(4, -1, -1, -1), torch.full((4,), 0.5)
    concepts = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])  # one concept flipped at a time
    with torch.no_grad():
        out = net(x, concepts, t)
        for i in (1, 2, 3):
            assert (out[i] - out[0]).abs().max() > 1e-6, f"concept {i - 1} does not reach the output"
        # with concept 1's two embeddings made blind to its value, flipping it changes nothing
        for embed in (net.concept1[1], net.concept2[1]):
            embed.net[0].weight[:, 1] = embed.net[0].weight[:, 0]
        blind = net(x, concepts, t)
    assert torch.equal(blind[2], blind[0])
    assert (blind[1] - blind[0]).abs().max() > 1e-6


def test_gamma_init_draws_every_conv_and_linear_of_the_unet() -> None:
    net = _net()
    plan = module_init_plan(net, gamma=1.0)
    for name, param in net.named_parameters():
        assert plan[name].rule in ("draw", "one", "zero"), name
    gamma_init_module_(net, gamma=1.0, distribution="uniform", seed=0)
    for name, param in net.named_parameters():
        if plan[name].rule == "draw":
            assert float(param.detach().abs().max()) <= plan[name].fan_in ** -1.0 + 1e-9, name
    assert plan["init_conv.conv1.0.weight"].fan_in == 3 * 3 * 3
    assert plan["up0.0.weight"].fan_in == 16 * 4 * 4  # ConvTranspose2d(16, 16, 4, 4): PyTorch's convention
