"""``"journal"``: the journal paper's released model.

Pre-LN, but only the query reads the normalized residual: ``Q = W_Q LN1(x)``,
``K = W_K x``, ``V = W_V x``; ``mid = x + Attn``, ``out = mid + MLP(LN2 mid)``; a final
LayerNorm; exact (erf) GELU; every linear layer has a bias drawn by PyTorch's default
rule U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the ``"reference"`` init convention.
"""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor
from transformer_lens.components import TransformerBlock

from interp_init.architectures.base import Architecture, refuse_extras
from interp_init.architectures.kernels import attention_all_positions, attention_last_position, mlp, norm


class JournalBlock(TransformerBlock):
    """Pre-LN block whose keys and values read the raw residual (the journal's model):
    ``resid_mid = x + Attn(q=LN1(x), k=x, v=x)``, ``resid_post = resid_mid + MLP(LN2(resid_mid))``."""

    def forward(
        self, resid_pre: Float[Tensor, "batch pos d_model"], *args: object, **kwargs: object
    ) -> Float[Tensor, "batch pos d_model"]:
        refuse_extras(args, kwargs)
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_out = self.hook_attn_out(
            self.attn(query_input=self.ln1(resid_pre), key_input=resid_pre, value_input=resid_pre)
        )
        resid_mid = self.hook_resid_mid(resid_pre + attn_out)
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
        return self.hook_resid_post(resid_mid + mlp_out)


def all_positions(block: JournalBlock, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
    mid = resid + attention_all_positions(block.attn, norm(block.ln1, resid), resid)
    return mid + mlp(block.mlp, norm(block.ln2, mid))


def last_position(block: JournalBlock, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch d_model"]:
    mid = resid[:, -1] + attention_last_position(block.attn, norm(block.ln1, resid[:, -1]), resid)
    return mid + mlp(block.mlp, norm(block.ln2, mid))


JOURNAL = Architecture(
    name="journal",
    description="the journal paper's model: pre-LN on the query only (K and V read the raw residual), final LayerNorm, GELU, PyTorch-default biases",
    block=JournalBlock,
    convention="reference",
    biases="default",
    final_norm=True,
    activation="gelu",
    all_positions=all_positions,
    last_position=last_position,
)
