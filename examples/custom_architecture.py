"""A new architecture in one module plus one registration line (docs/architectures.md).

``PARALLEL`` is a GPT-NeoX-style parallel block: attention and MLP both read the block's
input, each through its own LayerNorm, and are added to the residual together,
``resid_post = x + Attn(LN1 x) + MLP(LN2 x)``; a final LayerNorm, GELU, zero biases, the
``"reference"`` init convention.  Everything the toolkit needs is in the
:class:`~interp_init.architectures.Architecture` object at the end; its fast forward is
made of the fused kernels the built-in blocks use.

Run it to register the block and train a tiny model with it through the command line's
own code path::

    python examples/custom_architecture.py --out runs/parallel

A process that loads such a run (``load_model``) must register the architecture first
(import this module and call ``register_architecture(PARALLEL)``).
"""

from __future__ import annotations

import argparse
import sys

from jaxtyping import Float
from torch import Tensor
from transformer_lens.components import TransformerBlock

from interp_init.architectures import Architecture, register_architecture
from interp_init.architectures.base import refuse_extras
from interp_init.architectures.kernels import attention_all_positions, attention_last_position, mlp, norm


class ParallelBlock(TransformerBlock):
    """``resid_post = x + Attn(LN1 x) + MLP(LN2 x)``; ``hook_resid_mid`` is not used (there is no middle)."""

    def forward(
        self, resid_pre: Float[Tensor, "batch pos d_model"], *args: object, **kwargs: object
    ) -> Float[Tensor, "batch pos d_model"]:
        refuse_extras(args, kwargs)
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_out = self.hook_attn_out(
            self.attn(query_input=self.ln1(resid_pre), key_input=self.ln1(resid_pre), value_input=self.ln1(resid_pre))
        )
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_pre)))
        return self.hook_resid_post(resid_pre + attn_out + mlp_out)


def all_positions(
    block: ParallelBlock, resid: Float[Tensor, "batch pos d_model"]
) -> Float[Tensor, "batch pos d_model"]:
    x = norm(block.ln1, resid)
    return resid + attention_all_positions(block.attn, x, x) + mlp(block.mlp, norm(block.ln2, resid))


def last_position(block: ParallelBlock, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch d_model"]:
    x = norm(block.ln1, resid)
    last = resid[:, -1]
    return last + attention_last_position(block.attn, x[:, -1], x) + mlp(block.mlp, norm(block.ln2, last))


PARALLEL = Architecture(
    name="parallel",
    description="GPT-NeoX-style parallel block: x + Attn(LN1 x) + MLP(LN2 x), final LayerNorm, GELU, zero biases",
    block=ParallelBlock,
    convention="reference",
    biases="zero",
    final_norm=True,
    activation="gelu",
    all_positions=all_positions,
    last_position=last_position,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="The run folder to write.")
    args = parser.parse_args(argv)
    register_architecture(PARALLEL)  # the one registration line

    from training.cli import main as cli

    return cli(
        ["train", "--preset", "tiny", "--architecture", "parallel", "--device", "cpu", "--quiet", "--out", args.out]
    )


if __name__ == "__main__":
    sys.exit(main())
