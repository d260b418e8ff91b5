"""A study folder is closed to strangers: the record of the runs a study names, the runs its
readers read, and the refusal of a run or study written inside it that it does not name.

A sweep names its runs in its spec, ``DIR/sweep.json``; every other study (a reproduction
or population, the preset search, the GPU suite) records in ``DIR/study.json``
(:data:`interp_init.outputs.STUDY_FILE`) its kind and the runs it names, each with the
digest of its config (``{"kind": "reproduction", "runs": {"symmetric/small-init": "<sha256
of its config.json>", ...}}``), when it holds its folder (:func:`record_study`).  Then:

* a command that writes a run or a study inside a study folder it did not make is refused
  unless every run it would write is one that study names, with the same config
  (:func:`refuse_strangers`): ``interp-init train --out SWEEP/seed=7`` is refused,
  ``reproduce --seed 3 --out POP/seed-3`` (the population's own seed 3) is not;
* a study's readers read only the runs it names (:func:`named_runs`, :func:`study_run_dirs`):
  a run folder it does not name is left out and said so (:func:`strangers`), and a named
  folder whose ``config.json`` is not the named config is unreadable
  (:func:`named_config_problem`).

A reproduction made before records existed names no runs: nothing is written inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from interp_init.fileio import BadRunFile, config_digest, read_json, write_json
from interp_init.outputs import CONFIG_FILE, STUDY_FILE, STUDY_KINDS, SWEEP_SPEC_FILE, as_given, folder_kind
from interp_init.paths import check_path_names
from training.config import RunConfig


def _digest(config: RunConfig) -> str:
    return config_digest(config.to_dict())


def record_study(out: str | Path, kind: str, jobs: Iterable[Any], *, merge: bool = True) -> Path:
    """Write ``out/study.json``: ``kind`` (``reproduction`` or ``search``; a sweep's spec is
    its record) and the runs of ``jobs`` (each with ``run_dir`` under ``out`` and
    ``config``) by their path below ``out``.  ``merge``: keep the runs recorded before (a
    population over more seeds, a search's next candidates); else these runs alone."""
    if kind not in STUDY_KINDS:
        raise ValueError(f"kind must be one of {STUDY_KINDS}, got {kind!r}")
    out = Path(out)
    runs = dict(_recorded_runs(out) or {}) if merge else {}
    for job in jobs:
        runs[Path(job.run_dir).absolute().relative_to(out.absolute()).as_posix()] = _digest(job.config)
    return write_json(out / STUDY_FILE, {"kind": kind, "runs": dict(sorted(runs.items()))})


def _recorded_runs(folder: Path) -> dict[str, str] | None:
    try:
        data = read_json(folder / STUDY_FILE, "")
    except (BadRunFile, OSError):
        return None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in runs.items()):
        return None
    return runs


def named_runs(folder: str | Path) -> dict[str, str] | None:
    """The runs the study folder ``folder`` names (path below it -> config digest): a
    sweep's ``sweep.json`` points, another study's record; None where it names none (not
    a study, or its spec or record is missing or damaged)."""
    folder = Path(folder)
    if (folder / SWEEP_SPEC_FILE).is_file():  # a sweep's spec is its record
        from training.studies.study import StudySpec

        try:
            return {p.name: _digest(p.config) for p in StudySpec.from_file(folder / SWEEP_SPEC_FILE).points()}
        except (ValueError, OSError, UnicodeDecodeError):
            return None
    return _recorded_runs(folder)


def _enclosing_studies(path: Path) -> list[tuple[Path, str]]:
    """The study folders above ``path``, nearest first, each written as the user wrote
    ``path`` (relative where it was)."""
    return [
        (as_given(path, parent), kind)
        for parent in path.absolute().parents
        if (kind := folder_kind(parent)) in STUDY_KINDS
    ]


def refuse_strangers(jobs: Iterable[Any], out: str | Path, what: str, option: str = "--out") -> None:
    """Refuse to write ``what`` (the runs ``jobs``: each with ``run_dir`` and ``config``) at
    ``out`` inside a study folder unless the nearest study above ``out`` that records its
    runs names every one of them with the same config; a folder inside a study that names
    no runs (an older reproduction) is refused.  Nothing is read beyond the records."""
    out = Path(out)
    check_path_names(out, option)
    studies = _enclosing_studies(out)
    if not studies:
        return
    jobs = list(jobs)
    for study, kind in studies:
        names = named_runs(study)
        if names is None:
            continue
        for job in jobs:
            name = Path(job.run_dir).absolute().relative_to(study.absolute()).as_posix()
            if name not in names:
                raise ValueError(
                    f"{out} is inside the {kind} folder {study}, which reads only the runs it names, and {name} is not one of them "
                    f"({what} there would be read as part of that {kind}): choose an {option} outside {study}"
                )
            if names[name] != _digest(job.config):
                raise ValueError(
                    f"{out} is inside the {kind} folder {study}, which names {name} as one of its runs with another config than this "
                    f"one ({what} there would be read as that {kind}'s run): choose an {option} outside {study}"
                )
        return
    study, kind = studies[0]
    raise ValueError(
        f"{out} is inside the {kind} folder {study}, whose record of its runs ({STUDY_FILE}) is missing (an older version made it) or "
        f"damaged, so {what} there could be read as part of it: choose an {option} outside {study}"
    )


def study_run_dirs(folder: str | Path) -> list[Path] | None:
    """The run folders a study folder's readers read: those it names that hold a run
    (sorted by name); None when ``folder`` names no runs (read every run folder in it)."""
    folder = Path(folder)
    names = named_runs(folder)
    if names is None:
        return None
    return [folder / name for name in sorted(names) if (folder / name / CONFIG_FILE).is_file()]


def is_named(run_dir: str | Path, top: str | Path) -> bool:
    """False if a study folder between ``run_dir`` and ``top`` (both included) names runs
    and not this one (its readers leave it out); True otherwise."""
    run_dir, top = Path(run_dir).absolute(), Path(top).absolute()
    for folder in (run_dir.parent, *run_dir.parent.parents):
        names = named_runs(folder)
        if names is not None:
            return run_dir.relative_to(folder).as_posix() in names
        if folder == top or top not in folder.parents:
            return True
    return True


def strangers(folder: str | Path, depth: int = 1) -> list[str]:
    """The run folders in ``folder`` (down to ``depth`` levels) its study does not name: left
    out by its readers (empty when ``folder`` names no runs)."""
    folder = Path(folder)
    names = named_runs(folder)
    if names is None:
        return []
    found, level = [], [folder]
    for _ in range(depth):
        level = [
            child
            for parent in level
            if parent.is_dir()
            for child in sorted(parent.iterdir())
            if child.is_dir() and not child.name.startswith(".")
        ]
        found += [p.relative_to(folder).as_posix() for p in level if (p / CONFIG_FILE).is_file()]
    return [name for name in found if name not in names]


def named_config_problem(folder: str | Path, names: Mapping[str, str], name: str) -> str | None:
    """Why the run folder ``folder/name`` is not the run its study names (its
    ``config.json`` has another digest), or None if it is (or the study names none)."""
    want = names.get(name)
    if want is None:
        return None
    try:
        data = read_json(Path(folder) / name / CONFIG_FILE, "")
    except (BadRunFile, OSError) as err:
        return str(err)
    if config_digest(data) != want:
        return f"{Path(folder) / name / CONFIG_FILE} is not the config its study ({Path(folder) / STUDY_FILE}) names for it: the folder holds another run"
    return None


__all__ = [
    "is_named",
    "named_config_problem",
    "named_runs",
    "record_study",
    "refuse_strangers",
    "strangers",
    "study_run_dirs",
]
