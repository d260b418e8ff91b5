"""A stored study read back: its manifest, its spec, its runs and its population.

``experiments/store.py`` copies a finished study (a reproduction, a sweep, a folder of runs
such as the preset search) into ``experiments/results/<study>/`` without weights or
checkpoints, marked as stored (:mod:`interp_init.stored`).  :class:`StoredStudy` reads such
a folder through the project's one reader: its runs are :class:`~training.studies.records.RunRecord`
s (a stored run reads as finished, with its cached stable ranks), a reproduction's
population is :func:`~training.studies.population.read_population` of its spec, and a sweep's spec
is its ``sweep.json``.  A reproduction records its spec in ``reproduction.json``
(:func:`reproduction_record`: the arguments of
:meth:`~training.studies.study.StudySpec.reproduction`), as a sweep does in ``sweep.json``.

Example::

    >>> from training.studies.stored import StoredStudy
    >>> study = StoredStudy.read("experiments/results/gpu-suite-h200-2026-11-26")
    >>> study.kind, len(study.run_dirs())
    ('gpu-suite', 6)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.fileio import BadRunFile, read_json
from interp_init.outputs import CONFIG_FILE, SUMMARY_FILE, SWEEP_SPEC_FILE
from interp_init.stored import STORED_STUDY_FILE, STUDY_FORMAT, STUDY_PAGE
from training.studies.records import RunRecord

if TYPE_CHECKING:
    from training.studies.population import Population
    from training.studies.study import StudySpec

#: A stored reproduction's spec (:func:`reproduction_record`).
REPRODUCTION_FILE = "reproduction.json"
#: The kinds of stored study: what ``stored-study.json``'s ``kind`` may say.
KINDS: tuple[str, ...] = ("reproduction", "sweep", "runs", "gpu-suite")
#: How deep below a study folder its run folders lie at most (a population's: seed-S/task/regime).
RUN_DEPTH = 3
_FIX = "restore the file from the repository (git checkout), or store the study again with experiments/store.py"


def reproduction_record(spec: StudySpec) -> dict[str, Any]:
    """What ``reproduction.json`` holds for the reproduction ``spec``: the arguments of
    :meth:`~training.studies.study.StudySpec.reproduction` that rebuild it."""
    return {
        "preset": spec.preset,
        "seeds": list(spec.seeds),
        "protocol": spec.protocol,
        "lrs": None if spec.lrs is None else list(spec.lrs),
        "vary": spec.vary,
        "fixed_seed": spec.fixed_seed,
        "precision": spec.precision,
        "tasks": list(spec.tasks),
        "single": spec.single,
        "carry": None if spec.carry is None else list(spec.carry),
    }


def reproduction_from_record(data: Mapping[str, Any], where: str = REPRODUCTION_FILE) -> StudySpec:
    """The reproduction's :class:`~training.studies.study.StudySpec` from :func:`reproduction_record`'s
    dict (``where``: the file the messages name)."""
    from training.studies.study import StudySpec

    if not isinstance(data, Mapping) or not {"preset", "seeds", "tasks"} <= set(data):
        raise ValueError(
            f"{where} is not a reproduction's record (it needs preset, seeds and tasks); store the study again with experiments/store.py"
        )
    listed = {key: None if data.get(key) is None else tuple(data[key]) for key in ("lrs", "carry")}
    return StudySpec.reproduction(
        data["preset"],
        tuple(data["seeds"]),
        data.get("protocol", "strict"),
        listed["lrs"],
        data.get("vary", "both"),
        data.get("fixed_seed"),
        data.get("precision", "fp32"),
        tuple(data["tasks"]),
        bool(data.get("single", False)),
        listed["carry"],
    )


def run_folders(root: str | Path, depth: int = RUN_DEPTH) -> list[Path]:
    """The run folders (folders with ``config.json``) at or below ``root``, ``depth`` levels
    down at most, sorted; a run folder's own subfolders are not searched."""
    root = Path(root)
    if (root / CONFIG_FILE).is_file():
        return [root]
    if depth == 0 or not root.is_dir():
        return []
    return [
        run
        for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
        for run in run_folders(child, depth - 1)
    ]


@dataclass(frozen=True)
class StoredStudy:
    """A stored study folder (``stored-study.json``, see the module docstring): its path and manifest."""

    path: Path
    manifest: Mapping[str, Any]

    @classmethod
    def read(cls, path: str | Path) -> StoredStudy:
        """Read ``path``'s ``stored-study.json`` (validated); a one-line ``ValueError`` naming the fix where it has none."""
        path = Path(path)
        if not (path / STORED_STUDY_FILE).is_file():
            raise ValueError(
                f"{path} is not a stored study (it has no {STORED_STUDY_FILE}); store a finished study with experiments/store.py"
            )
        data = read_json(path / STORED_STUDY_FILE, _FIX)
        if not isinstance(data, dict) or data.get("format") != STUDY_FORMAT:
            raise BadRunFile(
                path / STORED_STUDY_FILE, f"is not a stored study's manifest (format {STUDY_FORMAT!r})", _FIX
            )
        if data.get("kind") not in KINDS:
            raise BadRunFile(path / STORED_STUDY_FILE, f"has kind {data.get('kind')!r}, not one of {list(KINDS)}", _FIX)
        return cls(path, data)

    @property
    def kind(self) -> str:
        """What the study is (:data:`KINDS`): ``reproduction``, ``sweep``, ``runs`` or ``gpu-suite``."""
        return str(self.manifest["kind"])

    @property
    def name(self) -> str:
        """The study's name: its folder's."""
        return self.path.name

    @property
    def page(self) -> Path:
        """The study's ``STUDY.md``."""
        return self.path / STUDY_PAGE

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the manifest (``command``, ``commit``, ``machine``, ``beside``, ``dates``, ...)."""
        return self.manifest.get(key, default)

    def spec(self) -> StudySpec:
        """The study's spec: a sweep's ``sweep.json`` or a reproduction's ``reproduction.json``."""
        from training.studies.study import StudySpec

        if self.kind == "sweep":
            return StudySpec.from_file(self.path / SWEEP_SPEC_FILE)
        if self.kind == "reproduction":
            return reproduction_from_record(
                read_json(self.path / REPRODUCTION_FILE, _FIX), str(self.path / REPRODUCTION_FILE)
            )
        raise ValueError(
            f"{self.path} is a stored {self.kind} study, which has no spec file (a sweep and a reproduction have one)"
        )

    def run_dirs(self) -> list[Path]:
        """Every run folder of the study."""
        return run_folders(self.path)

    def records(self) -> list[RunRecord]:
        """Every run of the study, read by the one reader."""
        return [RunRecord.read(run) for run in self.run_dirs()]

    def population(self, seeds: tuple[int, ...] | None = None) -> Population:
        """A stored reproduction's population (of ``seeds``, default all), read from its runs
        under its own protocol (:func:`~training.studies.population.read_population`)."""
        from training.studies.population import read_population

        if self.kind != "reproduction":
            raise ValueError(
                f"{self.path} is a stored {self.kind} study; a population is read from a stored reproduction"
            )
        return read_population(self.spec(), self.path, seeds)

    def summary_path(self) -> Path:
        """The ``summary.json`` the study's command wrote (a reproduction's)."""
        return self.path / SUMMARY_FILE


__all__ = [
    "KINDS",
    "REPRODUCTION_FILE",
    "StoredStudy",
    "reproduction_from_record",
    "reproduction_record",
    "run_folders",
]
