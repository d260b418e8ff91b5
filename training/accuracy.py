"""Accuracy metrics of a model on anchor-function data (the numbers the papers report).

* ``accuracy``: fraction of samples whose last-position argmax equals the target.
* ``per_pair``: accuracy per anchor pair, keys like ``"4,3"``.
* held-out pairs: accuracy against each candidate target (``symmetric`` task:
  ``inferential`` = x - 10, ``symmetric`` = x - 6).
* ``commutativity`` (journal): the fraction of held-out inputs whose prediction is
  unchanged when the pair (a, b) is swapped to (b, a), key and noise kept.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from interp_init.data import AnchorDataset
from interp_init.tasks import AnchorPair

LogitsFn = Callable[[HookedTransformer, Tensor], Tensor]


def full_forward_last(model: HookedTransformer, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch vocab"]:
    """``model(tokens)[:, -1]``: the plain hooked forward, last position."""
    return model(tokens)[:, -1]


@torch.inference_mode()
def predict(
    model: HookedTransformer,
    tokens: Int[Tensor, "n pos"],
    batch_size: int = 4096,
    logits_fn: LogitsFn = full_forward_last,
) -> Int[Tensor, " n"]:
    """The argmax token at the last position for every input, computed in batches."""
    out = [logits_fn(model, tokens[i : i + batch_size]).argmax(-1) for i in range(0, len(tokens), batch_size)]
    return torch.cat(out)


def pair_masks(pairs: Int[Tensor, "n 2"]) -> dict[str, Tensor]:
    """For each anchor pair present in ``pairs``, its key (``AnchorPair.key``, ``"4,3"``)
    and the mask of its rows."""
    return {AnchorPair(*pair).key: (pairs == torch.tensor(pair, device=pairs.device)).all(dim=1) for pair in torch.unique(pairs, dim=0).tolist()}


def per_pair_accuracy(preds: Tensor, targets: Tensor, pairs: Int[Tensor, "n 2"]) -> dict[str, float]:
    """Accuracy per anchor pair present in ``pairs``."""
    correct = (preds == targets).float()
    return dict(sorted((key, float(correct[mask].mean())) for key, mask in pair_masks(pairs).items()))


def evaluate(
    model: HookedTransformer,
    train: AnchorDataset,
    id_test: AnchorDataset,
    heldout: AnchorDataset | None = None,
    logits_fn: LogitsFn = full_forward_last,
) -> dict:
    """All metrics of ``model`` on a train subset, the ID test set and the held-out set.

    Returns ``{"train_acc", "id_acc", "per_pair", ...}``; with a held-out set of the
    ``symmetric`` task also ``heldout: {"4,3": {"inferential": .., "symmetric": ..}}``,
    of the ``id-ood`` task ``ood_acc`` and ``commutativity``. ``per_pair`` covers the
    training pairs (on the train subset) and the held-out pairs (on the held-out set,
    against the composite f).
    """
    was_training = model.training
    model.eval()
    try:
        train_pred = predict(model, train.tokens, logits_fn=logits_fn)
        id_pred = predict(model, id_test.tokens, logits_fn=logits_fn)
        out: dict = {
            "train_acc": float((train_pred == train.targets).float().mean()),
            "id_acc": float((id_pred == id_test.targets).float().mean()),
            "per_pair": per_pair_accuracy(train_pred, train.targets, train.anchor_pairs),
        }
        if heldout is not None:
            ho_pred = predict(model, heldout.tokens, logits_fn=logits_fn)
            out["per_pair"].update(per_pair_accuracy(ho_pred, heldout.targets, heldout.anchor_pairs))
            out["per_pair"] = dict(sorted(out["per_pair"].items()))
            if heldout.candidate_targets:
                out["heldout"] = {
                    key: {name: float((ho_pred[mask] == cand[mask]).float().mean()) for name, cand in heldout.candidate_targets.items()}
                    for key, mask in pair_masks(heldout.anchor_pairs).items()
                }
            else:
                out["ood_acc"] = float((ho_pred == heldout.targets).float().mean())
                swapped_pred = predict(model, heldout.swapped().tokens, logits_fn=logits_fn)
                out["commutativity"] = float((swapped_pred == ho_pred).float().mean())
        return out
    finally:
        model.train(was_training)
