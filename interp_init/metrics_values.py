"""The values of a run's ``metrics.json``, checked where it is read
(:meth:`interp_init.runfolder.RunFolder.read_metrics`): types, ranges, a completed run's
history, and a ``format_version`` newer than this version reads, refused by name."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from interp_init.fileio import BadRunFile

#: The newest ``metrics.json`` layout this version reads (its ``format_version``; today's
#: files carry none, which reads as 1: a later layout writes a higher one, refused here by name).
METRICS_FORMAT_VERSION = 1


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_metric(path: Path, where: str, key: str, value: Any, fix: str) -> None:
    """One metric of ``final`` or a history record: a finite number (an accuracy, a key
    ending in ``acc``, in [0, 1]), null, or an object of such numbers."""
    if isinstance(value, dict):
        for sub, inner in value.items():
            _check_metric(path, where, f"{key}.{sub}", inner, fix)
        return
    if value is None:
        return
    if not _is_number(value) or not math.isfinite(value):
        raise BadRunFile(path, f"has {where}.{key} = {value!r:.60}, not a finite number (or an object of them)", fix)
    if key.split(".")[-1].endswith("acc") and not 0.0 <= value <= 1.0:
        raise BadRunFile(path, f"has {where}.{key} = {value!r}, but an accuracy is in [0, 1]", fix)


def check_metrics_values(path: Path, data: dict[str, Any], fix: str) -> None:
    """The values of a ``metrics.json`` object of the right shape: its ``format_version``
    one this version reads, a completed run's ``final.id_acc`` and a non-empty history,
    each record's epoch, step, loss and lr where given, and every metric a finite number
    (accuracies in [0, 1])."""
    version = data.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadRunFile(path, f"has format_version {version!r}, not a positive integer", fix)
    if version > METRICS_FORMAT_VERSION:
        raise BadRunFile(
            path,
            f"has format_version {version}, newer than the {METRICS_FORMAT_VERSION} this version of interp-init reads",
            "upgrade interp-init (pip install -U interp-init) to read it",
        )
    final, status = data["final"], data["status"]
    if status == "completed":
        if not data["history"]:
            raise BadRunFile(path, "says the run completed but its history is empty", fix)
        if not _is_number(final.get("id_acc")):  # every task's metrics have it
            raise BadRunFile(
                path, f"says the run completed but final.id_acc is {final.get('id_acc')!r:.60}, not a number", fix
            )
    for where, record in [("final", final)] + [(f"history[{i}]", r) for i, r in enumerate(data["history"])]:
        for key in ("epoch", "step"):
            value = record.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BadRunFile(path, f"has {where}.{key} = {value!r:.60}, not an integer >= 0", fix)
        for key in ("loss", "lr"):
            value = record.get(key, 0.0)
            if not _is_number(value) or not math.isfinite(value):
                raise BadRunFile(path, f"has {where}.{key} = {value!r:.60}, not a finite number", fix)
        for key, value in record.items():
            if key not in ("epoch", "step", "loss", "lr"):
                _check_metric(path, where, key, value, fix)
