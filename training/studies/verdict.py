"""What a run learned, in words and numbers: the verdict the report opens with.

:func:`run_verdict` reads a run's final metrics and asks its task
(:meth:`interp_init.tasks.base.Task.verdict`) to name the solution the way the papers do
(docs/science.md): for ``symmetric`` ``inferential``, ``symmetric``, ``neither`` or ``did
not fit``; for ``id-ood`` the journal's phases; for ``complexity`` ``fit`` or ``did not
fit``; for ``addition`` ``rule-based`` or ``case-based``.  The thresholds live with the
tasks (:mod:`interp_init.tasks.anchor`, :mod:`interp_init.tasks.addition`).

Example::

    >>> v = run_verdict("id-ood", {"id_acc": 0.99, "ood_acc": 0.79, "commutativity": 0.68}, "completed")
    >>> v.solution, v.evidence
    ('Phase 3', 'ID accuracy 0.99, OOD accuracy 0.79, commutativity 0.68')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from interp_init.tasks.base import Task, TaskMetrics, Verdict
from interp_init.tasks.registry import make_task

__all__ = ["Verdict", "run_verdict"]


def _partial(task: Task, final: Mapping[str, Any]) -> TaskMetrics | None:
    """The final metrics as the task's dataclass; fields a partial record lacks are ``None``."""
    names = [f.name for f in fields(task.metrics_class)]
    if not any(name in final for name in names):
        return None
    return task.metrics_class(**{name: final.get(name) for name in names})


def run_verdict(
    task: str | Task, final: TaskMetrics | Mapping[str, Any] | None, status: str, stable_rank: float | None = None
) -> Verdict:
    """The :class:`~interp_init.tasks.base.Verdict` of a run from its final metrics (the task's
    dataclass, or ``metrics.json``'s ``final`` object) and status; ``stable_rank`` (the
    first layer's merged W_Q) is added to the evidence when given."""
    task = make_task(task) if isinstance(task, str) else task
    metrics = final if isinstance(final, TaskMetrics) or final is None else _partial(task, final)
    v = task.verdict(metrics, status)
    if stable_rank is not None:
        return Verdict(v.solution, f"{v.evidence}, stable rank of layer 0's W_Q {stable_rank:.1f}", v.expected)
    return v
