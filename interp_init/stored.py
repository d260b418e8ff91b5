"""Stored records: finished studies kept without their weights (``experiments/results/``).

A run folder is trained with its weights (``model.safetensors``); a study's records are kept
in the repository without them (``experiments/store.py`` copies a finished study there).
Such a folder is marked explicitly, so that it reads as what it is and a real run folder
whose weights were lost never does::

    STUDY/stored-study.json the stored study's manifest (command, commit, machine, dates, files)
    STUDY/STUDY.md         the same for a reader
    STUDY/.../RUN/stored.json   per run: this run was stored; the weights it finished with
                                (their SHA-256 and size) were left behind

A run folder with ``stored.json`` whose recorded weights are those ``metrics.json`` was
finished with reads as finished (:meth:`interp_init.runfolder.RunFolder.status`) and keeps
its cached stable ranks (``ranks.json``, :func:`training.studies.sweep.results.run_stable_ranks`); one
without it and without weights reads as unfinished, as before.  Nothing is trained,
resumed or written inside a stored study (:func:`refuse_stored`), and loading a stored
run's model says that its weights were left behind (:func:`refuse_stored_weights`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interp_init.fileio import BadRunFile, read_json

#: A stored run's marker, in its run folder.
STORED_FILE = "stored.json"
#: A stored study's manifest, in its study folder; and its page for a reader.
STORED_STUDY_FILE = "stored-study.json"
STUDY_PAGE = "STUDY.md"
#: The format tags of the two files.
STORED_FORMAT = "interp-init-stored-run/1"
STUDY_FORMAT = "interp-init-stored-study/1"


def stored_marker(run_dir: str | Path) -> dict[str, Any] | None:
    """A run folder's ``stored.json`` (validated), or None where it has none."""
    path = Path(run_dir) / STORED_FILE
    if not path.exists():
        return None
    fix = "restore it from the repository (git checkout), or store the study again with experiments/store.py"
    data = read_json(path, fix)
    if not isinstance(data, dict) or data.get("format") != STORED_FORMAT:
        raise BadRunFile(path, f"is not a stored run's marker (format {STORED_FORMAT!r})", fix)
    sha = data.get("weights_sha256")
    if sha is not None and (not isinstance(sha, str) or len(sha) != 64):
        raise BadRunFile(path, f"has a weights_sha256 that is not a SHA-256 ({sha!r:.80})", fix)
    return data


def is_stored(run_dir: str | Path, metrics: Mapping[str, Any] | None) -> bool:
    """True if the run folder is a stored record of the run ``metrics`` (its ``metrics.json``):
    it has ``stored.json`` and, where ``metrics`` records the weights it finished with
    (``weights_sha256``), the marker names the same weights.  A damaged marker is False."""
    try:
        marker = stored_marker(run_dir)
    except BadRunFile:
        return False
    if marker is None or metrics is None:
        return False
    recorded = metrics.get("weights_sha256")
    return recorded is None or marker.get("weights_sha256") == recorded


def stored_study_root(path: str | Path) -> Path | None:
    """The stored study folder (holding ``stored-study.json``) that ``path`` is or lies inside, or None."""
    path = Path(path).absolute()
    return next((p for p in (path, *path.parents) if (p / STORED_STUDY_FILE).is_file()), None)


#: The file that marks a cell of the GPU campaign's records (``benchmarks/gpu_campaign.py``).
CAMPAIGN_CELL_FILE = "cell.json"


def campaign_cell_root(path: str | Path) -> Path | None:
    """The GPU campaign's cell folder (holding :data:`CAMPAIGN_CELL_FILE`) that ``path`` is or lies inside, or None."""
    path = Path(path).absolute()
    return next((p for p in (path, *path.parents) if (p / CAMPAIGN_CELL_FILE).is_file()), None)


def refuse_stored(path: str | Path, what: str, option: str = "--out") -> None:
    """Refuse to write ``what`` at ``path`` in a stored study (or a run folder stored alone),
    or in the GPU campaign's records: records are read, never trained, resumed or written into."""
    cell = campaign_cell_root(path)
    if cell is not None:
        raise ValueError(
            f"{path} is in the GPU campaign's records {cell} (benchmarks/gpu_campaign.py wrote them, without weights), "
            f"so {what} cannot be written there: they are read, never trained or written into; choose another {option}"
        )
    root = stored_study_root(path)
    if root is None and (Path(path) / STORED_FILE).is_file():
        root = Path(path)
    if root is not None:
        raise ValueError(
            f"{path} is in the stored records {root} (experiments/store.py made them; their weights were left behind), "
            f"so {what} cannot be written there: they are read, never trained or written into; choose another {option}"
        )


def refuse_stored_weights(run_dir: str | Path) -> None:
    """Refuse to load the model of a stored run (its weights were left behind), naming the fix."""
    root = stored_study_root(run_dir)
    if (Path(run_dir) / STORED_FILE).is_file():
        where = f"{root / STUDY_PAGE}" if root is not None else "the study's STUDY.md"
        raise BadRunFile(
            Path(run_dir) / "model.safetensors",
            "is absent: this run is a stored record, kept without its weights",
            f"train it again with the command in {where} (into another folder) to load its model",
        )


__all__ = [
    "CAMPAIGN_CELL_FILE",
    "STORED_FILE",
    "STORED_STUDY_FILE",
    "STUDY_PAGE",
    "campaign_cell_root",
    "is_stored",
    "refuse_stored",
    "refuse_stored_weights",
    "stored_marker",
    "stored_study_root",
]
