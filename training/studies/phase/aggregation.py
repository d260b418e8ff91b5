"""Aggregation of a sweep's results table as in the papers, and the phases (pandas only).

Within a cell (e.g. one gamma and one depth) and a seed, take the best of each metric
over the learning rates (:func:`best_over`); then the mean and the sample standard
deviation over seeds (:func:`aggregate`); NeurIPS Sec. 3, journal Sec. V.  Phases (the
journal's; docs/science.md) come from the aggregated ID and OOD accuracies
(:func:`classify_phase`, the rule of :func:`interp_init.tasks.anchor.journal_phase`):
Phase 1 = ID < 0.9 (poor ID), Phase 2 = good ID and OOD <= 0.5, Phase 3 = good ID and
OOD > 0.5; the thresholds are parameters (their defaults live with the tasks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from interp_init.tasks.anchor import ID_THRESHOLD, OOD_THRESHOLD, journal_phase
from interp_init.tasks.base import Task, task_name

#: Metrics where less is better (best over learning rates = minimum).
LOWER_IS_BETTER_PREFIXES = ("epochs_to", "final_loss")


def param_columns(df: pd.DataFrame) -> list[str]:
    """The configuration columns of a results table (those between ``run`` and ``status``)."""
    if "status" not in df.columns:
        raise ValueError(
            "not a results table: it has no 'status' column (load it with training.studies.sweep.load_results)"
        )
    cols = list(df.columns[: df.columns.get_loc("status")])
    return [c for c in cols if c != "run"]


def check_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Refuse a table that lacks any of ``columns`` (a ``ValueError`` naming ``what`` needed them)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: the table has no column(s) {missing}; it has {list(df.columns)}")


def task_rows(df: pd.DataFrame, task_cls: type[Task], keep: Sequence[str], what: str) -> pd.DataFrame:
    """The completed runs of the task ``task_cls`` (the figure ``what``'s own), refusing a table
    where a configuration column other than ``keep`` varies (it would be averaged away)."""
    task = task_name(task_cls)
    check_columns(df, ["task", "status"], what)
    rows = df[(df["task"] == task) & (df["status"] == "completed")]
    if rows.empty:
        raise ValueError(f"{what} needs completed runs of the {task!r} task; the table has none")
    varying = [c for c in param_columns(rows) if c not in keep and rows[c].nunique(dropna=False) > 1]
    if varying:
        raise ValueError(
            f"{what}: {varying} vary in the table besides {list(keep)}; filter the table first (e.g. df[df.{varying[0]} == ...])"
        )
    return rows


def best_over(
    df: pd.DataFrame,
    metrics: Sequence[str],
    cell: Sequence[str],
    over: str = "lr",
    seed: str = "seed",
    target: str | None = None,
) -> pd.DataFrame:
    """Per ``cell`` and ``seed``, the best of each metric over the values of ``over`` (learning rates).

    With ``target=None`` every metric takes its own best (NeurIPS Fig. 2 selects "the
    highest accuracy for the inferential and symmetric mappings" separately); with a
    ``target`` metric, the row (learning rate) best on the target is chosen and all
    metrics are read from it.  Best is the maximum, or the minimum for metrics named
    ``epochs_to*`` / ``final_loss``.  NaN values are skipped; a group with no value is NaN.
    Returns one row per (cell, seed) with the columns ``cell + [seed] + metrics``
    (and ``over``: the chosen value, when ``target`` is given).
    """
    groups = [*cell, seed]
    check_columns(df, [*groups, *metrics] + ([target] if target else []), "best_over")
    if over not in df.columns or target is None:
        if df.empty:
            return pd.DataFrame(columns=[*groups, *metrics])
        agg = {m: ("min" if m.startswith(LOWER_IS_BETTER_PREFIXES) else "max") for m in metrics}
        return df.groupby(groups, sort=True, dropna=False)[list(metrics)].agg(agg).reset_index()
    valid = df.dropna(subset=[target])
    lower = target.startswith(LOWER_IS_BETTER_PREFIXES)
    order = valid.sort_values([*groups, target, over], ascending=[True] * len(groups) + [lower, True], kind="stable")
    chosen = order.groupby(groups, sort=True, dropna=False).head(1)
    all_groups = df[groups].drop_duplicates()
    out = all_groups.merge(chosen[[*groups, over, *[m for m in metrics if m != over]]], on=groups, how="left")
    return out.sort_values(groups, kind="stable").reset_index(drop=True)


def aggregate(
    df: pd.DataFrame,
    metrics: Sequence[str],
    cell: Sequence[str] | None = None,
    over: str = "lr",
    seed: str = "seed",
    target: str | None = None,
    statuses: Sequence[str] | None = ("completed",),
) -> pd.DataFrame:
    """The papers' aggregation: best over ``over`` (learning rates), then mean and spread over seeds.

    ``cell`` defaults to every configuration column that varies in the table except
    ``over`` and ``seed``.  Only rows whose ``status`` is in ``statuses`` count
    (``None``: all rows).  Returns one row per cell: the cell columns, ``{metric}_mean``,
    ``{metric}_std`` (sample standard deviation over seeds, ddof=1: NaN for one seed) and
    ``n_seeds`` (seeds with at least one counted run).
    """
    if statuses is not None and "status" in df.columns:
        df = df[df["status"].isin(statuses)]
    if cell is None:
        cell = [c for c in param_columns(df) if c not in (over, seed) and df[c].nunique(dropna=False) > 1]
    cell = list(cell)
    best = best_over(df, metrics, cell, over=over, seed=seed, target=target)
    if best.empty:
        cols = [*cell, *(f"{m}_{s}" for m in metrics for s in ("mean", "std")), "n_seeds"]
        return pd.DataFrame(columns=cols)
    grouped = best.groupby(cell, sort=True, dropna=False) if cell else best.assign(_all=0).groupby("_all")
    out = grouped[list(metrics)].agg(["mean", "std"])  # pandas' std is the sample one (ddof=1)
    out.columns = [f"{m}_{s}" for m, s in out.columns]
    out["n_seeds"] = grouped[seed].nunique()
    return out.reset_index().drop(columns=["_all"], errors="ignore")


def classify_phase(
    id_acc: Any, ood_acc: Any, id_threshold: float = ID_THRESHOLD, ood_threshold: float = OOD_THRESHOLD
) -> pd.Series:
    """The journal's phase of each (ID accuracy, OOD accuracy), as a nullable integer Series.

    1: ID < ``id_threshold`` (poor ID; the papers' Phase 1 also has poor OOD, and a
    poor-ID cell counts as Phase 1 whatever its OOD); 2: ID >= ``id_threshold`` and OOD <=
    ``ood_threshold``; 3: ID >= ``id_threshold`` and OOD > ``ood_threshold``.  NA where a
    needed value is NaN.
    """
    for name, value in (("id_threshold", id_threshold), ("ood_threshold", ood_threshold)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    index = id_acc.index if isinstance(id_acc, pd.Series) else None
    phase = journal_phase(id_acc, ood_acc, id_threshold, ood_threshold)
    return pd.Series(pd.array([pd.NA if np.isnan(p) else int(p) for p in phase], dtype="Int64"), index=index)


def add_phase(
    agg: pd.DataFrame,
    id_col: str = "id_acc_mean",
    ood_col: str | None = None,
    id_threshold: float = ID_THRESHOLD,
    ood_threshold: float = OOD_THRESHOLD,
) -> pd.DataFrame:
    """``agg`` with a ``phase`` column from its ID and OOD columns.

    ``ood_col`` defaults to ``ood_acc_mean`` (id-ood task), else ``heldout_inferential_mean``
    (the symmetric task's held-out pair against the inferential target).
    """
    if ood_col is None:
        ood_col = "ood_acc_mean" if "ood_acc_mean" in agg.columns else "heldout_inferential_mean"
    check_columns(agg, [id_col, ood_col], "add_phase")
    return agg.assign(phase=classify_phase(agg[id_col], agg[ood_col], id_threshold, ood_threshold).to_numpy())
