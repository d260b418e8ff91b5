"""``"neurips"``: the NeurIPS 2024 experiments' model.

Post-LN: ``x = LN1(x + Attn(x))``, ``x = LN2(x + MLP(x))``; no final LayerNorm; ReLU; no
biases in attention and MLP (zero buffers, not parameters, so nothing trains them); the
unembedding keeps a bias (PyTorch's default rule); the ``"fan_in"`` init convention.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.components import LayerNorm, TransformerBlock

from interp_init.architectures.base import Architecture, refuse_extras
from interp_init.architectures.kernels import attention_all_positions, attention_last_position, mlp, norm

#: Biases that the ``"neurips"`` architecture does not have (registered as zero buffers).
ABSENT_BIASES: dict[str, tuple[str, ...]] = {"attn": ("b_Q", "b_K", "b_V", "b_O"), "mlp": ("b_in", "b_out")}


class PostLNBlock(TransformerBlock):
    """Post-LN block (the NeurIPS experiments' model):
    ``resid_mid = LN1(x + Attn(x))``, ``resid_post = LN2(resid_mid + MLP(resid_mid))``."""

    def __init__(self, cfg: object, block_index: int) -> None:
        super().__init__(cfg, block_index)
        # The model's config has no normalization (no final LayerNorm); the block has two.
        self.ln1 = LayerNorm(self.cfg)
        self.ln2 = LayerNorm(self.cfg)
        for module_name, names in ABSENT_BIASES.items():
            module = getattr(self, module_name)
            for name in names:
                zeros = torch.zeros_like(getattr(module, name).data)
                delattr(module, name)
                module.register_buffer(name, zeros, persistent=False)

    def forward(
        self, resid_pre: Float[Tensor, "batch pos d_model"], *args: object, **kwargs: object
    ) -> Float[Tensor, "batch pos d_model"]:
        refuse_extras(args, kwargs)
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_out = self.hook_attn_out(self.attn(query_input=resid_pre, key_input=resid_pre, value_input=resid_pre))
        resid_mid = self.hook_resid_mid(self.ln1(resid_pre + attn_out))
        mlp_out = self.hook_mlp_out(self.mlp(resid_mid))
        return self.hook_resid_post(self.ln2(resid_mid + mlp_out))


def all_positions(block: PostLNBlock, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
    mid = norm(block.ln1, resid + attention_all_positions(block.attn, resid, resid))
    return norm(block.ln2, mid + mlp(block.mlp, mid))


def last_position(block: PostLNBlock, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch d_model"]:
    mid = norm(block.ln1, resid[:, -1] + attention_last_position(block.attn, resid[:, -1], resid))
    return norm(block.ln2, mid + mlp(block.mlp, mid))


NEURIPS = Architecture(
    name="neurips",
    description="the NeurIPS 2024 model: post-LN, no final LayerNorm, ReLU, no attention or MLP biases",
    block=PostLNBlock,
    convention="fan_in",
    biases="none",
    final_norm=False,
    activation="relu",
    all_positions=all_positions,
    last_position=last_position,
)
