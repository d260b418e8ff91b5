"""The runs a report compares: :func:`find_run_dirs` expands the folders given on the command
line into run folders, :func:`load_runs` reads each one (its record,
:class:`training.studies.records.RunRecord`, and, when written, the model) as a :class:`Run`;
:func:`token_labels` names an input's tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from transformer_lens import HookedTransformer

from interp_init.runfolder import CONFIG_FILE, RunFolder
from interp_init.tasks.base import Task
from interp_init.tasks.data import AnchorDataset
from interp_init.tasks.registry import task_class
from training.studies.records import RunRecord
from training.studies.study_folder import is_named, study_run_dirs


@dataclass
class Run:
    """One run folder as the report sees it: its short label in the report (``name``,
    :func:`run_labels`), its record
    (:class:`training.studies.records.RunRecord`) and its model."""

    name: str
    record: RunRecord
    #: None while the folder has no weights file (a run still training).
    model: HookedTransformer | None

    @cached_property
    def task(self) -> Task:
        """The run's task (from its config)."""
        return self.record.task

    @property
    def status(self) -> str:
        """The status ``metrics.json`` records, or ``no metrics``."""
        return self.record.recorded_status or "no metrics"


#: The most runs one report page compares (a page of 200 took about 290 s and 2 GB to write
#: 66 MB on the development machine: issue 33).
MAX_REPORT_RUNS = 100


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders among ``paths``: a folder with ``config.json`` is a run; a study folder
    stands for the runs it names (:func:`~training.studies.study_folder.study_run_dirs`), any
    other folder for every run folder below it (sorted) that no study in it leaves out.
    One run given twice (the same folder, or a folder and one that holds it) is refused."""
    given: dict[Path, str] = {}
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ValueError(
                f"{path} is not a folder; pass run folders (each with {CONFIG_FILE}) or a folder that holds them"
            )
        if (path / CONFIG_FILE).is_file():
            below = [path]
        else:
            named = study_run_dirs(path)
            below = (
                named
                if named is not None
                else [
                    p.parent
                    for p in sorted(path.rglob(CONFIG_FILE))
                    if not any(part.startswith(".") for part in p.relative_to(path).parts) and is_named(p.parent, path)
                ]
            )
        if not below:
            raise ValueError(
                f"{path} holds no run folder (no {CONFIG_FILE} in it or below it); train a run first (interp-init train --out DIR)"
            )
        for run in below:
            key = run.resolve()
            if key in given:
                twice = f"as {given[key]} and as {raw}" if given[key] != str(raw) else f"as {raw}"
                raise ValueError(
                    f"the run {run} is given twice ({twice}): a report compares each run once; give each run folder (or a folder holding it) once"
                )
            given[key] = str(raw)
    unique = list(given)
    if not unique:
        raise ValueError("no run folder given; pass at least one RUN_DIR")
    if len(unique) > MAX_REPORT_RUNS:  # one page of 200 runs took about 290 s and 2 GB to write 66 MB
        raise ValueError(
            f"{len(unique)} run folders found, more than the {MAX_REPORT_RUNS} one report page compares (each run adds about 1.5 s "
            "and 0.3 MB); pass fewer folders (some seeds or grid values, or a phase diagram of a sweep: interp-init phase-diagram)"
        )
    return unique


def run_labels(paths: Sequence[Path]) -> list[str]:
    """Each run's short label in the report: its folder below the runs' common parent
    (``symmetric/small-init``); a lone run, its folder's name.  The label names the run
    everywhere on the page; its settings are in the page's one table of runs."""
    if len(paths) == 1:
        return [paths[0].name]
    parts = [p.parts for p in paths]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    return ["/".join(p[common:]) for p in parts]


def load_runs(run_dirs: Iterable[str | Path], device: str = "cpu") -> list[Run]:
    """:class:`Run` of each run folder (see :func:`find_run_dirs`); a folder without
    weights yet (a run still training) comes without a model."""
    paths = find_run_dirs(run_dirs)
    records = [RunRecord.read(path) for path in paths]
    names = run_labels(paths)
    models = [
        f.load_model(device=device) if f.weights_path.is_file() else None for f in (RunFolder(r.path) for r in records)
    ]
    return [Run(*run) for run in zip(names, records, models, strict=True)]


def token_labels(dataset: AnchorDataset, row: int = 0) -> list[str]:
    """Labels of one input's tokens: for the anchor tasks the key and anchors are marked
    (``x=57``, ``a1=4``); another task's samples are labelled by the task
    (:meth:`interp_init.tasks.base.Task.token_labels`)."""
    tokens = dataset.tokens[row].tolist()
    if not isinstance(dataset, AnchorDataset):
        return task_class(dataset.task)().token_labels(tokens)
    p = int(dataset.key_positions[row])
    labels = [str(t) for t in tokens]
    labels[p] = f"x={tokens[p]}"
    labels[p + 1] = f"a1={tokens[p + 1]}"
    labels[p + 2] = f"a2={tokens[p + 2]}"
    return labels
