"""A model's metrics on a task's splits: the task's own (:meth:`interp_init.tasks.base.Task.evaluate`)
on the model's argmax predictions at the last position.

* :func:`predict`: the argmax token at the last position of every input, in batches;
* :func:`evaluate`: the task's typed metrics (:class:`~interp_init.tasks.base.TaskMetrics`) of
  a model on a training subset, the ID test set and the held-out set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer

from interp_init.tasks.base import Task, TaskMetrics
from interp_init.tasks.checks import checked_evaluation

__all__ = ["LogitsFn", "evaluate", "full_forward_last", "predict"]

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


def evaluate(
    model: HookedTransformer,
    task: Task,
    train: Any,
    id_test: Any,
    heldout: Any | None = None,
    logits_fn: LogitsFn = full_forward_last,
) -> TaskMetrics:
    """The metrics of ``model`` on a train subset, the ID test set and the held-out set, as
    ``task`` defines them (e.g. the ``symmetric`` task's
    :class:`~interp_init.tasks.anchor.SymmetricMetrics`); ``to_json()`` gives what
    ``metrics.json`` records.  The model is evaluated in eval mode and left as it was."""
    was_training = model.training
    model.eval()
    try:
        return checked_evaluation(
            task,
            lambda: task.evaluate(lambda tokens: predict(model, tokens, logits_fn=logits_fn), train, id_test, heldout),
        )
    finally:
        model.train(was_training)
