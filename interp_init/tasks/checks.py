"""What a task returns, checked once where it enters a run: :func:`checked_split` (the
samples of ``make_split``) and :func:`checked_evaluation` (the metrics of ``evaluate``).  A
task's own code is not trusted: any fault is a :class:`BadTaskOutput` (a ``ValueError``,
exit code 2 on the command line) naming the task class, the method and the value."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from interp_init.tasks.base import IGNORE, Task, TaskMetrics


class BadTaskOutput(ValueError):
    """A task's ``make_split`` or ``evaluate`` raised or returned something a run cannot use;
    the message names the task class, the method and the value (one line)."""


def _call(task: Task, method: str, args: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BadTaskOutput:
        raise
    except Exception as err:
        text = " ".join(str(err).split())[:200]
        raise BadTaskOutput(
            f"task {task.name}: {type(task).__qualname__}.{method}({args}) raised {type(err).__name__}: {text}; fix the task (docs/tasks.md)"
        ) from err


def checked_split(task: Task, split: str, n: int, seed: int, d_vocab: int | None = None) -> Any:
    """``task.make_split(split, n, seed)``, checked once where it enters a run: an object
    with ``token_ids [n, seq_len]`` and ``targets [n]`` (a sequence task's ``[n, seq_len]``,
    :data:`~interp_init.tasks.base.IGNORE` allowed) of an integer dtype, exactly ``n``
    samples, every token and target in ``[0, d_vocab)`` (default: the task's vocabulary).
    Anything else (or an exception) is a :class:`BadTaskOutput` naming the task class, the
    method and the value."""
    import torch

    args = f"{split!r}, {n}, {seed}"
    samples = _call(task, "make_split", args, lambda: task.make_split(split, n, seed))
    where = f"task {task.name}: {type(task).__qualname__}.make_split({args})"
    fix = "fix the task (docs/tasks.md)"
    tokens, targets = getattr(samples, "token_ids", None), getattr(samples, "targets", None)
    if not isinstance(tokens, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise BadTaskOutput(
            f"{where} returned {type(samples).__name__} {samples!r:.60}, not samples with token_ids and targets tensors (interp_init.tasks.base.Samples); {fix}"
        )
    vocab = task.vocab_size if d_vocab is None else d_vocab
    sequence = task.output == "sequence"
    for name, value, dims in (("token_ids", tokens, 2), ("targets", targets, 2 if sequence else 1)):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise BadTaskOutput(
                f"{where} returned {name} of dtype {value.dtype}, not an integer dtype (token ids); {fix}"
            )
        if value.dim() != dims:
            raise BadTaskOutput(
                f"{where} returned {name} of shape {tuple(value.shape)}, not {dims}-D ([n{', seq_len' if dims == 2 else ''}]); {fix}"
            )
    if sequence and targets.shape[1:] != tokens.shape[1:]:
        raise BadTaskOutput(
            f"{where} returned targets of shape {tuple(targets.shape)} for token_ids of shape {tuple(tokens.shape)}; a sequence task has a target (or IGNORE) at every position; {fix}"
        )
    if tokens.shape[0] != n or targets.shape[0] != n:
        raise BadTaskOutput(
            f"{where} returned {tokens.shape[0]} token sequences and {targets.shape[0]} targets, not the {n} samples asked for; {fix}"
        )
    if tokens.shape[1] != task.seq_len:
        raise BadTaskOutput(
            f"{where} returned sequences of length {tokens.shape[1]}, not the task's seq_len {task.seq_len}; {fix}"
        )
    for name, value in (("token_ids", tokens), ("targets", targets[targets != IGNORE] if sequence else targets)):
        if value.numel() and (int(value.min()) < 0 or int(value.max()) >= vocab):
            raise BadTaskOutput(
                f"{where} returned {name} in [{int(value.min())}, {int(value.max())}], outside the vocabulary [0, {vocab - 1}]; {fix}"
            )
    return samples


def checked_evaluation(task: Task, call: Callable[[], Any]) -> TaskMetrics:
    """``call()`` (the task's ``evaluate``), checked once where it enters a run: an instance
    of the task's ``metrics_class`` whose numbers are plain finite numbers (accuracies, the
    fields ending in ``acc``, in [0, 1]); anything else is a :class:`BadTaskOutput`.  A run
    with NaN accuracies never finishes as completed, nor writes NaN into ``metrics.json``."""
    import math

    metrics = _call(task, "evaluate", "...", call)
    where = f"task {task.name}: {type(task).__qualname__}.evaluate(...)"
    fix = "fix the task (docs/tasks.md)"
    if not isinstance(metrics, task.metrics_class):
        raise BadTaskOutput(
            f"{where} returned {type(metrics).__name__} {metrics!r:.60}, not a {task.metrics_class.__name__} (the task's metrics_class); {fix}"
        )

    def check(name: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                check(f"{name}[{key!r}]", inner)
            return
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadTaskOutput(
                f"{where} returned {name} = {value!r:.60} ({type(value).__name__}), not a plain number (use float(...)); {fix}"
            )
        if not math.isfinite(value):
            raise BadTaskOutput(f"{where} returned {name} = {value}, not a finite number; {fix}")
        if name.endswith("acc") and not 0.0 <= value <= 1.0:
            raise BadTaskOutput(f"{where} returned {name} = {value}, but an accuracy is in [0, 1]; {fix}")

    for f in fields(metrics):
        check(f.name, getattr(metrics, f.name))
    return metrics
