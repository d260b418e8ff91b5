"""Greedy decoding from a decoder-only model: :func:`greedy_decode`.

Each sample's prompt (its first ``prompt_lengths[i]`` tokens) is extended one token at a
time by the model's argmax next token until the end token or the last position.  Prompts
of different lengths decode together: at step ``t`` every sample whose prompt ended before
``t`` and that has not ended gets its token at ``t`` (a causal model's logits at ``t - 1``
do not read later positions, so the padding after a prompt changes nothing).  It calls the
model's hooked forward once per position (no key-value cache): slow, and independent of the
training code's fast paths (``tests/training/test_sequence.py`` checks the one-pass exact
match of :func:`interp_init.tasks.base.exact_match` against it).

Example::

    >>> import torch
    >>> from interp_init import InitConfig, ModelConfig, build_model
    >>> model = build_model(ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=10, n_ctx=8), InitConfig(), seed=0)
    >>> out = greedy_decode(model, torch.tensor([[3, 4, 0, 0, 0, 0]]), torch.tensor([2]), eos=2)
    >>> out.shape, out[0, :2].tolist()
    (torch.Size([1, 6]), [3, 4])
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Int
from torch import Tensor

__all__ = ["greedy_decode"]


@torch.inference_mode()
def greedy_decode(
    model: Callable[[Tensor], Tensor],
    tokens: Int[Tensor, "n pos"],
    prompt_lengths: Int[Tensor, " n"],
    *,
    eos: int,
    pad: int = 0,
) -> Int[Tensor, "n pos"]:
    """``tokens`` with every position after each prompt replaced by greedy decoding from
    ``model`` (a ``HookedTransformer`` or any callable ``tokens [n, t] -> logits [n, t,
    vocab]``); after a sample's end token (``eos``) its positions are ``pad``."""
    if tokens.ndim != 2 or prompt_lengths.shape != tokens.shape[:1]:
        raise ValueError(
            f"tokens must be [n, pos] and prompt_lengths [n], got {tuple(tokens.shape)} and {tuple(prompt_lengths.shape)}"
        )
    if int(prompt_lengths.min()) < 1 or int(prompt_lengths.max()) > tokens.shape[1]:
        raise ValueError(
            f"prompt lengths must be in 1..{tokens.shape[1]}, got {int(prompt_lengths.min())}..{int(prompt_lengths.max())}"
        )
    out = tokens.long().clone()
    positions = torch.arange(out.shape[1], device=out.device)
    out[positions[None, :] >= prompt_lengths[:, None]] = pad
    done = torch.zeros(len(out), dtype=torch.bool, device=out.device)
    for t in range(int(prompt_lengths.min()), out.shape[1]):
        active = (prompt_lengths <= t) & ~done
        if not bool(active.any()):
            if bool(done.all()):
                break
            continue
        nxt = model(out[:, :t])[:, -1].argmax(-1)
        out[active, t] = nxt[active]
        done |= active & (nxt == eos)
    return out
