"""``"standard"``: TransformerLens' own pre-LN GPT-2 block.

Q, K and V all read ``LN1(x)``: ``mid = x + Attn(LN1 x)``, ``out = mid + MLP(LN2 mid)``;
a final LayerNorm (or RMSNorm, and their ``Pre`` variants); GELU; zero biases; the
``"reference"`` init convention.
"""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor
from transformer_lens.components import TransformerBlock

from interp_init.architectures.base import Architecture
from interp_init.architectures.kernels import attention_all_positions, attention_last_position, mlp, norm


def all_positions(
    block: TransformerBlock, resid: Float[Tensor, "batch pos d_model"]
) -> Float[Tensor, "batch pos d_model"]:
    x = norm(block.ln1, resid)
    mid = resid + attention_all_positions(block.attn, x, x)
    return mid + mlp(block.mlp, norm(block.ln2, mid))


def last_position(block: TransformerBlock, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch d_model"]:
    x = norm(block.ln1, resid)
    mid = resid[:, -1] + attention_last_position(block.attn, x[:, -1], x)
    return mid + mlp(block.mlp, norm(block.ln2, mid))


STANDARD = Architecture(
    name="standard",
    description="TransformerLens' GPT-2 block: pre-LN, Q, K and V from LN1(x), final LayerNorm, GELU, zero biases",
    block=TransformerBlock,
    convention="reference",
    biases="zero",
    final_norm=True,
    activation="gelu",
    all_positions=all_positions,
    last_position=last_position,
    normalizations=("LN", "LNPre", "RMS", "RMSPre"),
)
