"""The journal's concept-graph diffusion model (Fig. 6) at any width: a conditional context
U-Net that predicts the noise of a DDPM, and the DDPM's noise schedule, loss and sampler
(docs/concept-graphs.md).

The architecture is the one of the journal's released code (``fig_code/fig6/train.py``,
read, not copied), at a width ``n_feat`` of one's choice:

* ``init_conv``: a residual block (two 3x3 convolutions, each BatchNorm and GELU; the output
  the sum of the two convolutions' outputs);
* two down steps (a block, then 2x2 max pooling), to ``n_feat`` and ``2 n_feat`` channels at a
  quarter of the side; average pooling over what is left and GELU give a vector;
* the time ``t / n_steps`` and each concept embedded by small MLPs (Linear, GELU, Linear);
  the concepts' embeddings summed, **multiplied into the up path** and the time's added:
  ``up = concepts_1 * up0(vector) + time_1`` before the first up step and
  ``concepts_2 * up_1 + time_2`` before the second;
* ``up0``: a transposed convolution back to a quarter of the side, GroupNorm(8), ReLU; two up
  steps (concatenated with the skip, a 2x2 transposed convolution, two residual blocks);
* ``out``: a 3x3 convolution of the last up step and the first block's output, GroupNorm(8),
  ReLU, a 3x3 convolution to the image's channels.

One difference: each of the three concepts (shape, size, colour; :mod:`interp_init.concept_graphs`)
enters as a one-hot of its two values; the released code gives the colour as its RGB vector
and the size as a radius, which the rendered tuples here determine one to one.

The schedule (:class:`DDPMSchedule`) is the released code's: ``beta_t`` linear from
``beta_start`` (1e-4) to ``beta_end`` (0.02) over ``t = 0 .. n_steps``,
``alphabar_t = prod_{s<=t} (1 - beta_s)``; training draws ``t`` uniform in ``1 .. n_steps``,
noises an image ``x_t = sqrt(alphabar_t) x + sqrt(1 - alphabar_t) eps`` and regresses the noise
``eps`` (mean squared error, :func:`ddpm_loss`); sampling (:func:`ddpm_sample`) runs the
ancestral DDPM step from ``t = n_steps`` down to 1. Images are RGB in [0, 1] on a white
background, as the renders are (no rescaling, as the released code).

Example::

    >>> import torch
    >>> from interp_init.diffusion import ConceptUNet, DDPMSchedule, UNetConfig, ddpm_sample
    >>> net = ConceptUNet(UNetConfig(image_size=16, n_feat=8)).eval()
    >>> x = ddpm_sample(net, DDPMSchedule(n_steps=5), torch.tensor([[0, 1, 0]]), torch.Generator().manual_seed(0))
    >>> tuple(x.shape)
    (1, 3, 16, 16)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

__all__ = ["ConceptUNet", "DDPMSchedule", "UNetConfig", "ddpm_loss", "ddpm_sample", "noised"]

#: The concepts a model is conditioned on, each binary (shape, size, colour).
N_CONCEPTS = 3


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


@dataclass(frozen=True)
class UNetConfig:
    """The context U-Net's shape.

    Args:
        image_size: the images' side in pixels, a multiple of 4 from 16 to 256 (two halvings).
        n_feat: the width (the released code's 256); a multiple of 8 (GroupNorm's 8 groups).
        channels: the images' channels (3: RGB).
    """

    image_size: int = 32
    n_feat: int = 32
    channels: int = 3

    def __post_init__(self) -> None:
        _check_int("image_size", self.image_size, 16, 256)
        if self.image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4 (the U-Net halves it twice), got {self.image_size}")
        _check_int("n_feat", self.n_feat, 8, 1024)
        if self.n_feat % 8:
            raise ValueError(f"n_feat must be a multiple of 8 (GroupNorm's 8 groups), got {self.n_feat}")
        _check_int("channels", self.channels, 1, 4)


class ResidualConvBlock(nn.Module):
    """Two 3x3 convolutions, each followed by BatchNorm and GELU; with ``residual``, the output
    is the input plus the second's output (same widths) or the sum of the two outputs."""

    def __init__(self, c_in: int, c_out: int, residual: bool = False) -> None:
        super().__init__()
        self.residual, self.same = residual, c_in == c_out
        self.conv1 = nn.Sequential(nn.Conv2d(c_in, c_out, 3, 1, 1), nn.BatchNorm2d(c_out), nn.GELU())
        self.conv2 = nn.Sequential(nn.Conv2d(c_out, c_out, 3, 1, 1), nn.BatchNorm2d(c_out), nn.GELU())

    def forward(self, x: Float[Tensor, "b c_in h w"]) -> Float[Tensor, "b c_out h w"]:
        x1 = self.conv1(x)
        x2 = self.conv2(x1)
        if not self.residual:
            return x2
        return (x if self.same else x1) + x2


class Embed(nn.Module):
    """Linear, GELU, Linear: a scalar or a one-hot to a ``width`` vector."""

    def __init__(self, d_in: int, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, width), nn.GELU(), nn.Linear(width, width))

    def forward(self, x: Float[Tensor, "b d_in"]) -> Float[Tensor, "b width 1 1"]:
        return self.net(x)[:, :, None, None]


class ConceptUNet(nn.Module):
    """The conditional context U-Net (module docstring): ``forward(x, concepts, t)`` is the
    predicted noise of ``x`` at the time fraction ``t`` (``step / n_steps``) for the tuples
    ``concepts`` (``[b, 3]`` of 0/1: shape, size, colour)."""

    def __init__(self, config: UNetConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or UNetConfig()
        f, c, pool = config.n_feat, config.channels, config.image_size // 4
        self.init_conv = ResidualConvBlock(c, f, residual=True)
        self.down1 = nn.Sequential(ResidualConvBlock(f, f), nn.MaxPool2d(2))
        self.down2 = nn.Sequential(ResidualConvBlock(f, 2 * f), nn.MaxPool2d(2))
        self.to_vec = nn.Sequential(nn.AvgPool2d(pool), nn.GELU())
        self.time1, self.time2 = Embed(1, 2 * f), Embed(1, f)
        self.concept1 = nn.ModuleList(Embed(2, 2 * f) for _ in range(N_CONCEPTS))
        self.concept2 = nn.ModuleList(Embed(2, f) for _ in range(N_CONCEPTS))
        self.up0 = nn.Sequential(nn.ConvTranspose2d(2 * f, 2 * f, pool, pool), nn.GroupNorm(8, 2 * f), nn.ReLU())
        self.up1 = self._up(4 * f, f)
        self.up2 = self._up(2 * f, f)
        self.out = nn.Sequential(nn.Conv2d(2 * f, f, 3, 1, 1), nn.GroupNorm(8, f), nn.ReLU(), nn.Conv2d(f, c, 3, 1, 1))

    @staticmethod
    def _up(c_in: int, c_out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.ConvTranspose2d(c_in, c_out, 2, 2), ResidualConvBlock(c_out, c_out), ResidualConvBlock(c_out, c_out)
        )

    def forward(
        self, x: Float[Tensor, "b c h w"], concepts: Int[Tensor, "b 3"], t: Float[Tensor, " b"]
    ) -> Float[Tensor, "b c h w"]:
        size = self.config.image_size
        if x.dim() != 4 or tuple(x.shape[1:]) != (self.config.channels, size, size):
            raise ValueError(f"x must be [batch, {self.config.channels}, {size}, {size}], got {tuple(x.shape)}")
        if tuple(concepts.shape) != (x.shape[0], N_CONCEPTS) or t.shape != (x.shape[0],):
            raise ValueError(
                f"concepts must be [batch, 3] and t [batch] for a batch of {x.shape[0]}, "
                f"got {tuple(concepts.shape)} and {tuple(t.shape)}"
            )
        x0 = self.init_conv(x)
        down1 = self.down1(x0)
        down2 = self.down2(down1)
        vec = self.to_vec(down2)
        onehots = nn.functional.one_hot(concepts.long(), 2).to(x.dtype)  # [b, 3, 2]
        c1 = sum(embed(onehots[:, i]) for i, embed in enumerate(self.concept1))
        c2 = sum(embed(onehots[:, i]) for i, embed in enumerate(self.concept2))
        t = t.to(x.dtype)[:, None]
        up1 = self.up0(vec)
        up2 = self.up1(torch.cat([c1 * up1 + self.time1(t), down2], 1))
        up3 = self.up2(torch.cat([c2 * up2 + self.time2(t), down1], 1))
        return self.out(torch.cat([up3, x0], 1))


@dataclass(frozen=True)
class DDPMSchedule:
    """The DDPM's noise schedule (module docstring): ``n_steps`` steps (the released code's
    500), ``beta_t`` linear from ``beta_start`` to ``beta_end`` over ``t = 0 .. n_steps``."""

    n_steps: int = 500
    beta_start: float = 1e-4
    beta_end: float = 0.02

    def __post_init__(self) -> None:
        _check_int("n_steps", self.n_steps, 1, 10_000)
        for name in ("beta_start", "beta_end"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not 0 < self.beta_start < self.beta_end < 1:
            raise ValueError(
                f"the betas must satisfy 0 < beta_start < beta_end < 1, got {self.beta_start!r} and {self.beta_end!r}"
            )

    def betas(self) -> Float[Tensor, " steps_plus_one"]:
        """``beta_t`` for ``t = 0 .. n_steps`` (float64)."""
        t = torch.arange(self.n_steps + 1, dtype=torch.float64)
        return self.beta_start + (self.beta_end - self.beta_start) * t / self.n_steps

    def alphabar(self) -> Float[Tensor, " steps_plus_one"]:
        """``alphabar_t = prod_{s <= t} (1 - beta_s)`` for ``t = 0 .. n_steps`` (float64)."""
        return torch.cumprod(1 - self.betas(), 0)


def noised(
    schedule: DDPMSchedule, x: Float[Tensor, "b c h w"], step: Int[Tensor, " b"], noise: Float[Tensor, "b c h w"]
) -> Float[Tensor, "b c h w"]:
    """``x_t = sqrt(alphabar_t) x + sqrt(1 - alphabar_t) noise`` at each image's ``step``."""
    abar = schedule.alphabar().to(x.device)[step].to(x.dtype)[:, None, None, None]
    return abar.sqrt() * x + (1 - abar).sqrt() * noise


def ddpm_loss(
    model: nn.Module,
    schedule: DDPMSchedule,
    x: Float[Tensor, "b c h w"],
    concepts: Int[Tensor, "b 3"],
    step: Int[Tensor, " b"],
    noise: Float[Tensor, "b c h w"],
) -> Float[Tensor, ""]:
    """The mean squared error between ``noise`` and the model's prediction of it from
    ``noised(schedule, x, step, noise)`` at the time fraction ``step / n_steps``."""
    if bool((step < 1).any()) or bool((step > schedule.n_steps).any()):
        raise ValueError(f"step must be in 1 .. {schedule.n_steps}")
    prediction = model(noised(schedule, x, step, noise), concepts, step.to(x.dtype) / schedule.n_steps)
    return nn.functional.mse_loss(prediction, noise)


@torch.no_grad()
def ddpm_sample(
    model: nn.Module,
    schedule: DDPMSchedule,
    concepts: Int[Tensor, "n 3"],
    generator: torch.Generator,
    batch_size: int = 256,
) -> Float[Tensor, "n c h w"]:
    """Images of the tuples ``concepts`` by ancestral DDPM sampling (``x_T ~ N(0, 1)``, then
    ``x_{t-1} = (x_t - beta_t / sqrt(1 - alphabar_t) eps) / sqrt(1 - beta_t) + sqrt(beta_t) z``,
    ``z = 0`` at the last step), the noise drawn on the CPU from ``generator`` in batches of
    ``batch_size``; the model as it is (call ``eval()`` first for BatchNorm's running
    statistics). Not clipped: the raw ``x_0``."""
    cfg: UNetConfig = model.config  # type: ignore[assignment]
    device = next(model.parameters()).device
    betas, abar = schedule.betas(), schedule.alphabar()
    shape = (cfg.channels, cfg.image_size, cfg.image_size)
    out = []
    for start in range(0, len(concepts), batch_size):
        c = concepts[start : start + batch_size].to(device)
        n = len(c)
        x = torch.randn((n, *shape), generator=generator).to(device)
        for i in range(schedule.n_steps, 0, -1):
            eps = model(x, c, torch.full((n,), i / schedule.n_steps, device=device))
            mean = (x - eps * float(betas[i] / (1 - abar[i]).sqrt())) / float((1 - betas[i]).sqrt())
            if i > 1:
                mean = mean + float(betas[i].sqrt()) * torch.randn((n, *shape), generator=generator).to(device)
            x = mean
        out.append(x.cpu())
    return torch.cat(out)
