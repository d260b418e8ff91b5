"""The stable ranks a run folder caches, an analysis read after a study, never in the job path.

The results table (:mod:`training.studies.sweep.results`) and the report read the stable
ranks of a run's first-layer W_Q (heads merged) and of its W_E (journal Fig. 5C's
complexity measure, :func:`probes.stable_rank`) through :func:`run_stable_ranks`: computed
from the run's weights on first read and cached in the folder's ``ranks.json``, keyed by the
weights file's size and modification time, so the model is loaded again only when the
weights changed since.  A stored record (kept without its weights, :mod:`interp_init.stored`)
gives the ranks it was stored with; any other folder without weights gives none.

Example::

    >>> from training.studies.sweep.ranks import run_stable_ranks
    >>> run_stable_ranks("runs/first-minute/symmetric/small-init")  # doctest: +SKIP
    {'stable_rank_wq0': 1.9, 'stable_rank_we': 3.2}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.runfolder import FINISHED_STATUSES, RunFolder, write_json

if TYPE_CHECKING:
    from transformer_lens import HookedTransformer

__all__ = ["RANKS_FILE", "cached_stable_ranks", "ranks_record", "run_stable_ranks", "stable_ranks_of"]

#: A run folder's cached stable ranks (:func:`run_stable_ranks`).
RANKS_FILE = "ranks.json"


def _weights_stamp(folder: RunFolder) -> dict[str, int]:
    stat = folder.weights_path.stat()
    return {"weights_size": stat.st_size, "weights_mtime_ns": stat.st_mtime_ns}


def ranks_record(run_dir: str | Path, ranks: dict[str, float]) -> dict[str, Any]:
    """What ``ranks.json`` holds: ``ranks`` keyed by the run folder's weights as they are now."""
    return {"stamp": _weights_stamp(RunFolder(run_dir)), "ranks": ranks}


def stable_ranks_of(model: HookedTransformer) -> dict[str, float]:
    """The stable ranks a run folder caches: the first layer's W_Q (heads merged) and W_E."""
    from probes import merged_weight, stable_rank

    return {
        "stable_rank_wq0": stable_rank(merged_weight(model, "W_Q", 0)),
        "stable_rank_we": stable_rank(merged_weight(model, "W_E")),
    }


def cached_stable_ranks(run_dir: str | Path) -> dict[str, float] | None:
    """The ranks ``ranks.json`` holds for the run folder's weights as they are now (None:
    no cache, a damaged one, or one of other weights).  A stored record
    (:mod:`interp_init.stored`) keeps the ranks of the weights it was stored without."""
    folder = RunFolder(run_dir)
    try:
        data: Any = json.loads((folder.path / RANKS_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not _valid_ranks(data.get("ranks")):
        return None  # a damaged or invalid cache is computed again, never read
    if folder.weights_path.exists():
        return data["ranks"] if data.get("stamp") == _weights_stamp(folder) else None
    return data["ranks"] if folder.status() in FINISHED_STATUSES else None  # without weights: finished only if stored


def _valid_ranks(ranks: Any) -> bool:
    """Whether a cached ``ranks`` object is what :func:`stable_ranks_of` gives: both stable
    ranks, each a finite number >= 0 (a stable rank is 0 or at least 1)."""
    keys = ("stable_rank_wq0", "stable_rank_we")
    return (
        isinstance(ranks, dict)
        and set(ranks) == set(keys)
        and all(
            isinstance(ranks[k], (int, float))
            and not isinstance(ranks[k], bool)
            and math.isfinite(ranks[k])
            and ranks[k] >= 0
            for k in keys
        )
    )


def run_stable_ranks(run_dir: str | Path) -> dict[str, float]:
    """Stable ranks of the first layer's W_Q (heads merged) and of W_E, cached in
    ``ranks.json`` (see the module docstring); empty for a folder without weights that is
    not a stored record."""
    folder = RunFolder(run_dir)
    cached = cached_stable_ranks(folder.path)
    if cached is not None or not folder.weights_path.exists():
        return cached or {}
    ranks = stable_ranks_of(folder.load_model(device="cpu"))
    write_json(folder.path / RANKS_FILE, ranks_record(folder.path, ranks))
    return ranks
