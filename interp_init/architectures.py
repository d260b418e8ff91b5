"""The three transformer architectures, each a ``transformer_lens.HookedTransformer``.

Which block is trained decides what the papers' experiments show (docs/science.md,
"The three architectures"), so the toolkit builds each by name:

* ``"standard"``: TransformerLens' own pre-LN GPT-2 block. Q, K and V all read
  ``LN1(x)``; a final LayerNorm; GELU; zero biases.
* ``"journal"``: the journal paper's released model. Pre-LN, but only the query reads
  the normalized residual: ``Q = W_Q LN1(x)``, ``K = W_K x``, ``V = W_V x``; a final
  LayerNorm; exact (erf) GELU; every linear layer has a bias drawn by PyTorch's default
  rule U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
* ``"neurips"``: the NeurIPS 2024 experiments' model. Post-LN:
  ``x = LN1(x + Attn(x))``, ``x = LN2(x + MLP(x))``; no final LayerNorm; ReLU; no
  biases in attention and MLP (they are zero buffers, not parameters, so nothing trains
  them); the unembedding keeps a bias (PyTorch's default rule).

The non-standard blocks are :class:`JournalBlock` and :class:`PostLNBlock`, subclasses of
TransformerLens' ``TransformerBlock`` whose ``forward`` is the only change. Every hook
point keeps its TransformerLens name and meaning: ``hook_resid_pre``, ``attn.hook_q``/
``hook_k``/``hook_v``/``hook_pattern``/``hook_z``, ``hook_attn_out``, ``hook_resid_mid``
(the stream between attention and MLP: in the post-LN block, after ``LN1``),
``hook_mlp_out``, ``hook_resid_post``, and ``ln1``/``ln2``'s ``hook_scale`` and
``hook_normalized``.

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

import torch
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens import HookedTransformer
from transformer_lens.components import LayerNorm, TransformerBlock

from interp_init.config import ARCHITECTURES

#: Biases that the ``"neurips"`` architecture does not have (registered as zero buffers).
ABSENT_BIASES: dict[str, tuple[str, ...]] = {"attn": ("b_Q", "b_K", "b_V", "b_O"), "mlp": ("b_in", "b_out")}


class JournalBlock(TransformerBlock):
    """Pre-LN block whose keys and values read the raw residual (the journal's model):
    ``resid_mid = x + Attn(q=LN1(x), k=x, v=x)``, ``resid_post = resid_mid + MLP(LN2(resid_mid))``."""

    architecture = "journal"

    def forward(self, resid_pre: Float[Tensor, "batch pos d_model"], *args: object, **kwargs: object) -> Float[Tensor, "batch pos d_model"]:
        _refuse_extras(args, kwargs)
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_out = self.hook_attn_out(self.attn(query_input=self.ln1(resid_pre), key_input=resid_pre, value_input=resid_pre))
        resid_mid = self.hook_resid_mid(resid_pre + attn_out)
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
        return self.hook_resid_post(resid_mid + mlp_out)


class PostLNBlock(TransformerBlock):
    """Post-LN block (the NeurIPS experiments' model):
    ``resid_mid = LN1(x + Attn(x))``, ``resid_post = LN2(resid_mid + MLP(resid_mid))``."""

    architecture = "neurips"

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

    def forward(self, resid_pre: Float[Tensor, "batch pos d_model"], *args: object, **kwargs: object) -> Float[Tensor, "batch pos d_model"]:
        _refuse_extras(args, kwargs)
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_out = self.hook_attn_out(self.attn(query_input=resid_pre, key_input=resid_pre, value_input=resid_pre))
        resid_mid = self.hook_resid_mid(self.ln1(resid_pre + attn_out))
        mlp_out = self.hook_mlp_out(self.mlp(resid_mid))
        return self.hook_resid_post(self.ln2(resid_mid + mlp_out))


_BLOCKS: dict[str, type[TransformerBlock]] = {"journal": JournalBlock, "neurips": PostLNBlock}


def _refuse_extras(args: tuple, kwargs: dict) -> None:
    """The papers' blocks support neither a key-value cache, attention masks nor shortformer
    positions (none of which the anchor tasks use): refuse them rather than ignore them."""
    given = [v for v in (*args, *kwargs.values()) if v is not None]
    if given:
        raise ValueError(
            "the journal and neurips blocks take no key-value cache, attention mask or shortformer "
            "positions; run the model on [batch, pos] tokens without them"
        )


def install_blocks(model: HookedTransformer, architecture: str) -> HookedTransformer:
    """Replace ``model``'s blocks by ``architecture``'s block class (in place) and return it.

    ``"standard"`` keeps TransformerLens' blocks. The model's config must already say
    what the architecture needs (``normalization_type=None`` for ``"neurips"``, which has
    no final LayerNorm); :func:`interp_init.empty_model` builds it so.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")
    block_cls = _BLOCKS.get(architecture)
    if block_cls is None:
        return model
    device = model.embed.W_E.device
    model.blocks = nn.ModuleList([block_cls(model.cfg, i) for i in range(model.cfg.n_layers)]).to(device)
    model.setup()  # re-register the hook points of the new blocks
    return model


def architecture_of(model: HookedTransformer) -> str:
    """The architecture of ``model``'s blocks: ``"journal"``, ``"neurips"``, or ``"standard"``
    for TransformerLens' own (any model built elsewhere)."""
    kinds = {getattr(block, "architecture", "standard") for block in model.blocks}
    if len(kinds) != 1:
        raise ValueError(f"the model mixes block architectures {sorted(kinds)}; each model must use one")
    return kinds.pop()
