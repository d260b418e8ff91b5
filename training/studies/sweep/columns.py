"""The metric columns of a sweep's results table and the thresholds of its ``epochs_to_*``
columns: plain constants and the tasks' column names, no pandas, no torch.

The metric columns are every registered task's (:meth:`interp_init.tasks.base.TaskMetrics.column_names`,
in registration order) and, per group a task's metrics name (the anchor pairs: ``"4,3"``),
the first epoch its training accuracy reaches :data:`PAIR_ACC_THRESHOLD`
(``epochs_to_acc_4_3``).  A user's task adds its own columns to the tables of its sweeps.
"""

from __future__ import annotations

from interp_init.tasks.registry import registered_tasks, task_class

#: Training loss below which a run counts as fitted (``epochs_to_loss``).
LOSS_THRESHOLD = 0.05
#: Per-group training accuracy at or above which a group counts as learned (``epochs_to_acc_*``).
PAIR_ACC_THRESHOLD = 0.6
#: Columns from the run's history and weights, after the tasks' metric columns.
RUN_COLUMNS = ("final_loss", "epochs_run", "epochs_to_loss", "stable_rank_wq0", "stable_rank_we")


def task_metric_columns(tasks: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The metric columns of ``tasks`` (default: every registered task), in order, without repeats."""
    names = registered_tasks() if tasks is None else tasks
    return tuple(dict.fromkeys(c for name in names for c in task_class(name).metrics_class.column_names()))


def group_column(group: str) -> str:
    """The results-table column of a group's epochs to :data:`PAIR_ACC_THRESHOLD` (``"4,3"`` -> ``epochs_to_acc_4_3``)."""
    return "epochs_to_acc_" + group.replace(",", "_")


def task_group_columns(tasks: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The ``epochs_to_acc_*`` columns of ``tasks`` (default: every registered task)."""
    names = registered_tasks() if tasks is None else tasks
    groups = (g for name in names for g in task_class(name).group_names)
    return tuple(dict.fromkeys(group_column(g) for g in groups))
