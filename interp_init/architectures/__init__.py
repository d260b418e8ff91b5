"""The transformer architectures, each a ``transformer_lens.HookedTransformer``, registered by name.

Which block is trained decides what the papers' experiments show (docs/science.md,
"The three architectures").  An architecture is one :class:`Architecture` object declared
in one module (its block class, init convention, bias rule, final norm, activation and
its last-position forward for the fast training path) and registered below, one line
each (docs/architectures.md says how to add one):

* ``"standard"`` (:mod:`~interp_init.architectures.standard`): TransformerLens' pre-LN GPT-2 block;
* ``"journal"`` (:mod:`~interp_init.architectures.journal`): the journal paper's model,
  pre-LN on the query only, with biases (:class:`JournalBlock`);
* ``"neurips"`` (:mod:`~interp_init.architectures.neurips`): the NeurIPS 2024 model,
  post-LN, ReLU, no attention or MLP biases, no final LayerNorm (:class:`PostLNBlock`).

Every hook point of the project's blocks keeps its TransformerLens name and meaning:
``hook_resid_pre``, ``attn.hook_q``/``hook_k``/``hook_v``/``hook_pattern``/``hook_z``,
``hook_attn_out``, ``hook_resid_mid`` (the stream between attention and MLP: in the
post-LN block, after ``LN1``), ``hook_mlp_out``, ``hook_resid_post``, and ``ln1``/``ln2``'s
``hook_scale`` and ``hook_normalized``.  An unknown name is an error everywhere
(:func:`get_architecture`).

Example::

    >>> import torch
    >>> from interp_init import InitConfig, ModelConfig, build_model
    >>> from interp_init.architectures import architecture_of
    >>> cfg = ModelConfig(architecture="neurips", d_model=32, d_head=16, d_mlp=64)
    >>> model = build_model(cfg, InitConfig(gamma=0.8), seed=0)
    >>> architecture_of(model), type(model.blocks[0]).__name__, hasattr(model, "ln_final")
    ('neurips', 'PostLNBlock', False)
    >>> logits, cache = model.run_with_cache(torch.randint(20, 100, (2, 9)))
    >>> tuple(cache["blocks.1.hook_resid_mid"].shape)
    (2, 9, 32)
"""

from __future__ import annotations

from torch import nn
from transformer_lens import HookedTransformer

from interp_init.architectures.base import (
    BIAS_RULES,
    Architecture,
    architecture_names,
    architecture_of_block,
    get_architecture,
    register_architecture,
    registered,
    unregister_architecture,
)
from interp_init.architectures.journal import JOURNAL, JournalBlock
from interp_init.architectures.neurips import NEURIPS, PostLNBlock
from interp_init.architectures.standard import STANDARD

__all__ = [
    "BIAS_RULES",
    "Architecture",
    "JournalBlock",
    "PostLNBlock",
    "architecture_names",
    "architecture_of",
    "get_architecture",
    "install_blocks",
    "register_architecture",
    "registered",
    "unregister_architecture",
]

# The built-in architectures: one registration line each.
register_architecture(STANDARD)
register_architecture(JOURNAL)
register_architecture(NEURIPS)


def install_blocks(model: HookedTransformer, architecture: str) -> HookedTransformer:
    """Replace ``model``'s blocks by ``architecture``'s block class (in place) and return it.

    The model's config must already say what the architecture needs (``normalization_type=None``
    for one without a final norm); :func:`interp_init.model.empty_model` builds it so.
    """
    block_cls = get_architecture(architecture).block
    if all(type(block) is block_cls for block in model.blocks):
        return model
    device = model.embed.W_E.device
    model.blocks = nn.ModuleList([block_cls(model.cfg, i) for i in range(model.cfg.n_layers)]).to(device)
    model.setup()  # re-register the hook points of the new blocks
    return model


def architecture_of(model: HookedTransformer) -> str:
    """The name of the registered architecture of ``model``'s blocks (``"standard"`` for
    TransformerLens' own, so for any model built elsewhere); a block class no architecture
    registered, or a model mixing architectures, is an error."""
    kinds = {architecture_of_block(block).name for block in model.blocks}
    if len(kinds) != 1:
        raise ValueError(f"the model mixes block architectures {sorted(kinds)}; each model must use one")
    return kinds.pop()
