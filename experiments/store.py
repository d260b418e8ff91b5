"""Store a finished study's records in the repository, without weights or checkpoints.

Copies a study folder (a reproduction, ``interp-init reproduce --seed`` or ``--seeds``; a
sweep, ``interp-init sweep``; a concept-graph study, ``interp-init concept-graphs``; a folder
of runs such as ``experiments/search_cpu.py run``'s) into ``DEST``
(``experiments/results/<study>``)::

    python experiments/store.py runs/verify-cpu experiments/results/verify-cpu-201-208 \\
        --command "interp-init reproduce --preset cpu --seeds 201,...,208 --out runs/verify-cpu --workers 1" \\
        --commit 3c9d633 --machine "2-core CPU (the project's VM), one torch thread a run" \\
        --beside "the paper-statistic sweep on the other core"

Per run it keeps ``config.json``, ``metrics.json`` (with its history), ``ranks.json`` (the
stable ranks, computed from the weights first where the run has not cached them),
``error.txt`` of a failed run, and ``stored.json``, which marks the run as a stored record
and names the weights it was stored without (their SHA-256, bound to ``metrics.json``);
per study the spec (``sweep.json``, or ``reproduction.json`` for a reproduction, rebuilt
from its ``summary.json`` and checked against every run's config), the summaries
(``summary*.json``, ``results.csv``), ``stored-study.json`` (the manifest: the command, the commit,
the machine, what ran beside it, the dates from the run folders' own files, every file with
its size and SHA-256) and ``STUDY.md`` (the same for a reader).  Weights, checkpoints,
reports and figures are left behind, and said so, but for a concept-graph study's
``fig6b.png``: its samples are drawn by the weights that are not kept.  A run of another
kind than a transformer (a concept-graph diffusion run) is kept alike, without ``ranks.json``.

Before anything is written, it refuses a study still training (a held folder or run), runs
that did not finish (``--partial`` stores them as they are, and says so), a ``DEST`` it did
not make (``--replace`` replaces one it made, and nothing else), and any file over
``--max-file-mb``.  The copy is made beside ``DEST`` and renamed into place, then read back
through the project's reader (:class:`training.studies.population.StoredStudy`): every run must read with
its status, and a reproduction's population must equal the source's.  It prints the total size.

It works under the project's lock (:func:`interp_init.fileio.hold_folder` on ``DEST``'s parent: a
second ``store.py`` into the same place is refused by name), writes every file through the
atomic writer, and replaces a stored study in one exchange of the two folders (``renameat2``
on Linux).  The temporary folders a killed store leaves beside ``DEST`` (``.DEST.storing-<pid>``,
``.DEST.replaced-<pid>``) are found and removed by the next store into that place, whoever
left them (a ``.replaced-`` folder is put back first where ``DEST`` is missing).  Symlinks,
one rule: records are plain files and folders, so a symlink inside ``SOURCE`` (or inside a
folder ``--mark`` marks) and a ``DEST`` that is a symlink are refused by name before anything
is written; ``SOURCE`` itself and ``DEST``'s parents may be reached through links.

``--mark DIR`` marks records stored before this command existed (run folders that already
lie in the repository without weights, such as the GPU suite's) the same way, adding only
``stored.json``, ``stored-study.json`` and ``STUDY.md``; ``--dates`` then says when they ran.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import errno
import glob
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from interp_init.fileio import (
    LOCK_FILE,
    STORING,
    file_sha256,
    folder_is_held,
    hold_folder,
    read_json,
    storing_copies,
    write_files,
)
from interp_init.outputs import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    ERROR_FILE,
    METRICS_FILE,
    STUDY_FILE,
    SUMMARY_FILE,
    SWEEP_SPEC_FILE,
    refuse_inside_run,
)
from interp_init.runfolder import FINISHED_STATUSES, RunFolder
from interp_init.stored import (
    STORED_FILE,
    STORED_FORMAT,
    STORED_STUDY_FILE,
    STUDY_FORMAT,
    STUDY_PAGE,
    stored_study_root,
)
from training.cli.errors import Script
from training.cli.flags import Number
from training.config import RunConfig
from training.studies.concept_graphs import SPEC_FILE as CONCEPT_SPEC_FILE
from training.studies.concept_graphs import STUDY_KIND as CONCEPT_STUDY
from training.studies.population import REPRODUCTION_FILE, StoredStudy, reproduction_record
from training.studies.records import RunRecord
from training.studies.study import StudySpec
from training.studies.study import run_dirs as run_folders
from training.studies.sweep.results import RANKS_FILE, cached_stable_ranks, ranks_record, stable_ranks_of

#: The files kept from a run folder as they are (besides ``ranks.json`` and ``stored.json``).
RUN_FILES: tuple[str, ...] = (CONFIG_FILE, METRICS_FILE, ERROR_FILE)
#: The files kept from a study folder, at any level above its runs: its spec and summaries.
STUDY_FILES = re.compile(
    r"^(summary(-[a-z-]+[0-9]*)?\.json|results\.csv|sweep\.json|study\.json|gpu_suite\.md|suite\.log"
    r"|concept-graphs\.json|fig6-summary\.json|fig6-table\.md|fig6b\.png)$"
)
#: What this command is, as the manifest names it.
MADE_BY = "experiments/store.py"
#: The most bytes one stored file may have, by default.
MAX_FILE_MB = 4.0


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, allow_nan=False) + "\n").encode()


@dataclass(frozen=True)
class StudyInfo:
    """What the records cannot say about how a study was made: the exact command, the commit
    of the code that trained it, the machine, what ran beside it; a note; and, for records
    whose files no longer carry their times (``--mark``), the dates."""

    command: str
    commit: str
    machine: str
    beside: str
    note: str = ""
    dates: str = ""

    def __post_init__(self) -> None:
        for name in ("command", "machine", "beside"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"--{name} is empty; say it (for --beside, 'nothing' if nothing ran beside the study)")
        if not re.fullmatch(r"[0-9a-f]{7,40}", self.commit):
            raise ValueError(
                f"--commit {self.commit!r} is not a git commit hash (7-40 hex digits); give the commit of the code that trained the study"
            )


@dataclass
class Plan:
    """The files of a stored study, before any is written: relative path -> bytes."""

    kind: str
    files: dict[str, bytes] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    left_behind: dict[str, list[int]] = field(default_factory=dict)  # name -> [files, bytes]
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    seconds: float = 0.0
    description: str = ""

    def leave(self, path: Path) -> None:
        entry = self.left_behind.setdefault(path.name if path.is_file() else path.name + "/", [0, 0])
        entry[0] += 1
        entry[1] += path.stat().st_size if path.is_file() else 0


def study_kind(source: Path) -> str:
    """What ``source`` holds: ``sweep`` (``sweep.json``), ``reproduction`` (the ``summary.json``
    of ``interp-init reproduce``), ``concept-graphs`` (``interp-init concept-graphs``: its spec,
    ``concept-graphs.json``, and its ``study.json``) or ``runs`` (run folders, e.g. the preset search's)."""
    if (source / CONCEPT_SPEC_FILE).is_file() and (source / STUDY_FILE).is_file():
        recorded = read_json(source / STUDY_FILE, "run the study's command again (it rewrites study.json)")
        if isinstance(recorded, dict) and recorded.get("kind") == CONCEPT_STUDY:
            return CONCEPT_STUDY
    if (source / SWEEP_SPEC_FILE).is_file():
        return "sweep"
    if (source / SUMMARY_FILE).is_file():
        return "reproduction"
    if not run_folders(source):
        raise ValueError(f"{source} holds no run folders (folders with {CONFIG_FILE}); give a finished study's folder")
    return "runs"


def reproduction_spec(source: Path, carry: tuple[str, ...] | None = None) -> StudySpec:
    """The spec of the reproduction in ``source``, rebuilt from its ``summary.json`` (preset,
    seeds, protocol, lrs, vary, fixed seed; its rows' tasks and precision) and checked
    against every run's ``config.json``."""
    summary = read_json(source / SUMMARY_FILE, "give the folder `interp-init reproduce` wrote")
    if not isinstance(summary, dict) or "per_seed" not in summary:
        raise ValueError(
            f"{source / SUMMARY_FILE} is not a population's summary (written before one schema); it cannot name the runs' spec"
        )
    try:
        rows = summary["per_seed"][0]["runs"]
        precision = next(iter(next(iter(rows.values())).values())).get("precision") or "fp32"
        single = len(summary["seeds"]) == 1 and (source / next(iter(rows))).is_dir()
        lrs = summary.get("lrs")
        preset, seeds, protocol = summary["preset"], tuple(summary["seeds"]), summary["protocol"]
        lrs = None if lrs is None else tuple(lrs)
    except (KeyError, IndexError, TypeError, AttributeError, StopIteration) as err:
        what = (
            f"has no {err.args[0]!r}"
            if isinstance(err, KeyError)
            else "has an empty or misshapen per_seed, seeds or runs"
        )
        raise ValueError(
            f"{source / SUMMARY_FILE} {what}: it is not a whole population's summary; run the reproduce command again (it rewrites the summary from the run folders)"
        ) from None
    spec = StudySpec.reproduction(
        preset,
        seeds,
        protocol,
        lrs,
        summary.get("vary", "both"),
        summary.get("fixed_seed"),
        precision,
        tuple(rows),
        single,
        carry,
    )
    for job in spec.jobs(source):
        if not (job.run_dir / CONFIG_FILE).is_file():
            raise ValueError(
                f"{job.run_dir} has no {CONFIG_FILE}: {SUMMARY_FILE} names a run the folder does not hold; store the finished study"
            )
        folder = RunFolder(
            job.run_dir
        )  # both read through today's RunConfig, so options added since (at their defaults) agree
        recorded, asked = (
            RunConfig.from_dict(folder.read_config(), where=str(folder.config_path)).flat(),
            job.config.flat(),
        )
        diffs = [
            f"{key} {recorded.get(key)!r}, the spec's {asked.get(key)!r}"
            for key in sorted(set(recorded) | set(asked))
            if recorded.get(key) != asked.get(key)
        ]
        if diffs:
            raise ValueError(
                f"{job.run_dir} is not the run {SUMMARY_FILE} names ({'; '.join(diffs[:4])}); "
                "if the reproduction held the paper's recipe, give its quantities with --carry"
            )
    return spec


def refuse_links(folder: Path, what: str) -> None:
    """The one rule on symlinks: records are plain files and folders, so a symlink anywhere
    inside ``folder`` is refused by name (storing what it points to would keep files that are
    not the study's; skipping it would drop a run without a word)."""
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(top) / name
            if path.is_symlink():
                raise ValueError(
                    f"{path} is a symlink (to {os.readlink(path)}); {what} holds plain files and folders only: replace the link by a copy of what it points to, or remove it"
                )


def _is_transformer(run: Path) -> bool:
    """Whether the run in ``run`` is a transformer's (its ``config.json`` names no other kind of run)."""
    return "kind" not in RunFolder(run).read_config()


def _read_run(run: Path) -> tuple[str, float | None, dict[str, Any] | None]:
    """A run's status, ``elapsed_s`` and metrics, through the one reader of its kind: a
    transformer's :class:`RunRecord`, another kind's run folder."""
    if _is_transformer(run):
        record = RunRecord.read(run)
        return str(record.status), record.elapsed_s, record.metrics
    folder = RunFolder(run)
    metrics = folder.read_metrics()
    elapsed = metrics.get("elapsed_s") if metrics else None
    return str(folder.status()), elapsed if isinstance(elapsed, (int, float)) else None, metrics


def _plan_run(plan: Plan, source: Path, run: Path, partial: bool) -> None:
    """Add one run's files and its marker to ``plan``; refuse a run that is not finished."""
    (status, elapsed, _), folder = _read_run(run), RunFolder(run)
    if folder.is_busy() or status == "running":
        raise ValueError(f"{run} is being trained now; store the study once it has finished")
    if status not in FINISHED_STATUSES and not partial:
        raise ValueError(
            f"{run} is {status}, not finished; finish it (rerun the study's command) or give --partial to store it as it is"
        )
    rel = run.relative_to(source).as_posix()
    rel = "" if rel == "." else rel + "/"
    for name in RUN_FILES:
        if (run / name).is_file():
            plan.files[rel + name] = (run / name).read_bytes()
    marker: dict[str, Any] = {
        "format": STORED_FORMAT,
        "status": status,
        "weights_sha256": None,
        "weights_bytes": None,
    }
    if folder.weights_path.exists():
        folder.check_bound()  # weights or metrics of another run are refused
        if _is_transformer(run):  # stable ranks are a transformer's
            ranks = cached_stable_ranks(run)
            plan.files[rel + RANKS_FILE] = _json_bytes(
                ranks_record(run, stable_ranks_of(folder.load_model()) if ranks is None else ranks)
            )
        marker.update(weights_sha256=file_sha256(folder.weights_path), weights_bytes=folder.weights_path.stat().st_size)
    elif (run / RANKS_FILE).is_file():
        plan.files[rel + RANKS_FILE] = (run / RANKS_FILE).read_bytes()
    for other in sorted(run.iterdir()):
        if other.name not in (*RUN_FILES, RANKS_FILE) and not other.name.startswith("."):
            plan.leave(other)
    marker["left_behind"] = sorted(
        p.name for p in run.iterdir() if p.name not in (*RUN_FILES, RANKS_FILE) and not p.name.startswith(".")
    )
    plan.files[rel + STORED_FILE] = _json_bytes(marker)
    plan.statuses[status] += 1
    plan.starts.append((run / CONFIG_FILE).stat().st_mtime)
    if (run / METRICS_FILE).exists():
        plan.ends.append((run / METRICS_FILE).stat().st_mtime)
    plan.seconds += elapsed or 0.0


def plan_study(source: Path, partial: bool = False, carry: tuple[str, ...] | None = None) -> Plan:
    """Everything a stored copy of ``source`` holds (nothing written yet)."""
    if not source.is_dir():
        raise ValueError(f"{source} is not a folder; give a finished study's folder")
    if stored_study_root(source) is not None:
        raise ValueError(
            f"{source} is already stored records ({stored_study_root(source)}); give the study folder its command trained"
        )
    if folder_is_held(source):
        raise ValueError(f"{source} is held by a running command (its .lock); store the study once it has finished")
    refuse_links(source, "a stored study")
    plan = Plan(study_kind(source))
    runs = run_folders(source)
    if plan.kind == "reproduction":
        plan.files[REPRODUCTION_FILE] = _json_bytes(reproduction_record(reproduction_spec(source, carry)))
    elif plan.kind == "sweep":
        plan.description = StudySpec.from_file(source / SWEEP_SPEC_FILE).description
    for run in runs:
        _plan_run(plan, source, run, partial)
    run_set = set(runs)
    for folder in [source, *(p for p in source.rglob("*") if p.is_dir())]:
        if folder in run_set or any(parent in run_set for parent in folder.parents):
            continue
        for entry in sorted(folder.iterdir()):
            if entry.is_file() and STUDY_FILES.match(entry.name):
                plan.files[entry.relative_to(source).as_posix()] = entry.read_bytes()
            elif entry.is_file() and not entry.name.startswith("."):
                plan.leave(entry)
    return plan


def _refuse_big(files: dict[str, bytes], max_bytes: int) -> None:
    big = [(rel, len(data)) for rel, data in files.items() if len(data) > max_bytes]
    if big:
        rel, size = big[0]
        raise ValueError(
            f"{rel} has {size / 1e6:.1f} MB, over --max-file-mb {max_bytes / 1e6:g} ({len(big)} such files); raise the limit if it must be kept"
        )


def _check_dest(dest: Path, replace: bool) -> StoredStudy | None:
    """The stored study ``dest`` holds that ``--replace`` may replace, or None where ``dest``
    is free; refuses anything else."""
    refuse_inside_run(dest, "stored records")
    if dest.is_symlink():
        raise ValueError(
            f"DEST {dest} is a symlink (to {os.readlink(dest)}); stored records are written into a plain folder: give the folder itself, or a new path"
        )
    if not dest.exists():
        return None
    if not dest.is_dir():
        raise ValueError(f"DEST {dest} exists and is not a folder; it is never overwritten: choose another DEST")
    refuse_links(dest, "stored records")
    if not (dest / STORED_STUDY_FILE).is_file():
        if not [p for p in dest.iterdir() if p.name != LOCK_FILE]:
            return None
        raise ValueError(
            f"{dest} exists and was not made by {MADE_BY} (it has no {STORED_STUDY_FILE}); it is never overwritten: choose another DEST"
        )
    old = StoredStudy.read(dest)
    if old.get("made_by") != MADE_BY:
        raise ValueError(
            f"{dest} holds records marked by hand or by --mark, not a copy {MADE_BY} made; it is never overwritten: choose another DEST"
        )
    if not replace:
        raise ValueError(
            f"{dest} holds stored records already (made {old.get('stored', {}).get('at')}); give --replace to store the study there again"
        )
    made = set(old.get("files", {})) | {STORED_STUDY_FILE, STUDY_PAGE}
    foreign = sorted(
        p.relative_to(dest).as_posix()
        for p in dest.rglob("*")
        if p.is_file() and p.relative_to(dest).as_posix() not in made and p.name != LOCK_FILE
    )
    if foreign:
        raise ValueError(
            f"{dest} holds {foreign[0]}, which {MADE_BY} did not make ({len(foreign)} such files); it is never overwritten: move it away first"
        )
    return old


def manifest(plan: Plan, name: str, info: StudyInfo, source: str, made_by: str, partial: bool) -> dict[str, Any]:
    """``stored-study.json``: how the study was made, when, and every file kept."""
    files = {
        rel: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for rel, data in sorted(plan.files.items())
    }
    if info.dates:
        dates = {"text": info.dates}
    else:
        dates = {
            "first_run_started": _utc(min(plan.starts)) if plan.starts else None,
            "last_run_finished": _utc(max(plan.ends)) if plan.ends else None,
            "from": "the modification times of the run folders' config.json (written when a run starts) and metrics.json (when it ends)",
        }
    return {
        "format": STUDY_FORMAT,
        "name": name,
        "kind": plan.kind,
        "description": plan.description,
        "command": info.command,
        "commit": info.commit,
        "machine": info.machine,
        "beside": info.beside,
        "note": info.note,
        "dates": dates,
        "source": source,
        "made_by": made_by,
        "stored": {"at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "partial": partial},
        "runs": {
            "count": sum(plan.statuses.values()),
            "statuses": dict(sorted(plan.statuses.items())),
            "training_seconds": round(plan.seconds, 1),
        },
        "left_behind": {k: {"files": v[0], "bytes": v[1]} for k, v in sorted(plan.left_behind.items())},
        "files": files,
        "total_bytes": sum(f["bytes"] for f in files.values()),
    }


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def study_page(data: dict[str, Any]) -> str:
    """``STUDY.md``: the manifest for a reader."""
    runs, dates = data["runs"], data["dates"]
    when = (
        dates.get("text")
        or f"first run started {dates['first_run_started']}, last finished {dates['last_run_finished']} ({dates['from']})"
    )
    statuses = ", ".join(f"{n} {s}" for s, n in runs["statuses"].items())
    left = (
        "; ".join(
            name
            if not v["files"]
            else f"{name} ({v['files']} file{'s' if v['files'] != 1 else ''}, {_size(v['bytes'])})"
            for name, v in data["left_behind"].items()
        )
        or "nothing"
    )
    lines = [
        f"# {data['name']}",
        "",
        *([data["description"], ""] if data["description"] else []),
        f"The records of a {data['kind']} study: {runs['count']} runs ({statuses}), kept without weights or checkpoints.",
        (
            "Read them with `training.studies.population.StoredStudy` and `training.studies.concept_graphs.read_rows` (diffusion runs);"
            if data["kind"] == CONCEPT_STUDY
            else "Read them with `training.studies.population.StoredStudy` (a stored run reads as finished through `training.studies.records.RunRecord`);"
        ),
        "`python experiments/tables.py` writes the docs' tables from them.",
        "",
        f"- **Command**: `{data['command']}`",
        f"- **Commit**: {data['commit']}",
        f"- **Machine**: {data['machine']}",
        f"- **Beside it**: {data['beside']}",
        f"- **Dates**: {when}",
        *(
            [f"- **Training time**: {runs['training_seconds'] / 3600:.2f} h summed over the runs (their `elapsed_s`)"]
            if runs["training_seconds"]
            else []
        ),
        f"- **Stored**: {data['stored']['at']} by `{data['made_by']}`"
        + (" (--partial: unfinished runs kept as they were)" if data["stored"]["partial"] else ""),
        (
            f"- **Kept**: {len(data['files'])} files, {_size(data['total_bytes'])} in all (besides stored-study.json and this page); "
            f"the largest {_size(max((f['bytes'] for f in data['files'].values()), default=0))}"
        ),
        f"- **Left behind**: {left}",
        *([f"- **Note**: {data['note']}"] if data["note"] else []),
    ]
    return "\n".join(lines) + "\n"


def _without_run_dirs(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_run_dirs(v) for k, v in value.items() if k != "run_dirs"}
    if isinstance(value, list):
        return [_without_run_dirs(v) for v in value]
    return value


def verify(stored: Path, source: Path) -> None:
    """Read the stored copy back through the project's reader: every run with its source's
    status, and a reproduction's population equal to the source's."""
    study = StoredStudy.read(stored)
    for run in study.run_dirs():
        mine, theirs = _read_run(run), _read_run(source / run.relative_to(stored))
        if mine[0] != theirs[0] or mine[2] != theirs[2]:
            raise RuntimeError(f"the stored {run} reads as {mine[0]}, its source as {theirs[0]}: nothing was stored")
    if study.kind == "reproduction":
        spec = study.spec()
        from training.studies.population import read_population

        if _without_run_dirs(study.population().to_dict()) != _without_run_dirs(
            read_population(spec, source).to_dict()
        ):
            raise RuntimeError(f"the stored population of {stored} differs from its source's: nothing was stored")


#: The temporary folder beside DEST that holds the records it replaces (the copy being made is
#: :data:`interp_init.fileio.STORING`, the one writer's, as the GPU campaign's parts are).
_TRASH = ".{name}.replaced-"


def remove_stale(dest: Path) -> list[Path]:
    """Remove the temporary folders a killed store left beside ``dest``, whoever left them
    (called under the lock on ``dest``'s parent, which every store into that place holds
    while such folders exist); a ``.replaced-`` folder is put back first where ``dest`` is
    missing (a store killed between the two renames of a replacement). Returns what was removed."""
    removed = []
    for trash in sorted(dest.parent.glob(glob.escape(_TRASH.format(name=dest.name)) + "*")):
        if not dest.exists() and (trash / STORED_STUDY_FILE).is_file():
            trash.rename(dest)
            continue
        shutil.rmtree(trash)
        removed.append(trash)
    for work in storing_copies(dest):
        shutil.rmtree(work)
        removed.append(work)
    return removed


def exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system or the file system cannot (the caller then renames twice)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
        if renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
            return True
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(b))
    return False


def store(
    source: str | Path,
    dest: str | Path,
    info: StudyInfo,
    *,
    replace: bool = False,
    partial: bool = False,
    carry: tuple[str, ...] | None = None,
    max_file_mb: float = MAX_FILE_MB,
    made_by: str = MADE_BY,
) -> dict[str, Any]:
    """Store the finished study ``source`` in ``dest`` (see the module docstring); returns the manifest."""
    source, dest = Path(source).absolute(), Path(dest).absolute()
    if source == dest or source in dest.parents or dest in source.parents:
        raise ValueError(f"{dest} and {source} lie in one another; store the study in a folder outside it")
    if not isinstance(max_file_mb, (int, float)) or isinstance(max_file_mb, bool) or not 0 < max_file_mb <= 1e6:
        raise ValueError(
            f"--max-file-mb {max_file_mb!r} is not a finite number > 0 and <= 1e+06; give the largest file to keep, in MB"
        )
    _check_dest(dest, replace)  # refused before the lock: nothing of this call is written
    made = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with hold_folder(
            dest.parent,
            "is being stored into by another experiments/store.py ({owner}); wait for it to finish, or choose another DEST",
        ):
            remove_stale(dest)
            return _store_held(source, dest, info, replace, partial, carry, max_file_mb, made_by)
    except ValueError:
        for folder in made:  # refused input leaves no folder behind
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _store_held(
    source: Path,
    dest: Path,
    info: StudyInfo,
    replace: bool,
    partial: bool,
    carry: tuple[str, ...] | None,
    max_file_mb: float,
    made_by: str,
) -> dict[str, Any]:
    """:func:`store`, under the lock on ``dest``'s parent."""
    old = _check_dest(dest, replace)
    plan = plan_study(source, partial, carry)
    _refuse_big(plan.files, int(max_file_mb * 1e6))
    data = manifest(plan, dest.name, info, str(source), made_by, partial)
    work = dest.parent / (STORING.format(name=dest.name) + str(os.getpid()))
    try:
        write_files(work, {**plan.files, STORED_STUDY_FILE: _json_bytes(data), STUDY_PAGE: study_page(data).encode()})
        verify(work, source)
        if dest.exists() and exchange(work, dest):  # one step: DEST holds the old records or the new, never neither
            pass
        elif old is not None:
            trash = dest.parent / (_TRASH.format(name=dest.name) + str(os.getpid()))
            dest.rename(trash)
            work.rename(dest)
            shutil.rmtree(trash)
        else:
            if dest.exists():
                (dest / LOCK_FILE).unlink(missing_ok=True)
                dest.rmdir()  # an empty folder
            work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the copy, or after the exchange the records it replaced
    return data


def mark(folder: str | Path, info: StudyInfo, kind: str) -> dict[str, Any]:
    """Mark records stored before this command existed (run folders without weights already
    in ``folder``) as a stored study of ``kind``: add ``stored.json`` per run, ``stored-study.json``
    and ``STUDY.md``; nothing else is written or changed."""
    folder = Path(folder).absolute()
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give a folder of stored runs")
    if (folder / STORED_STUDY_FILE).exists():
        raise ValueError(f"{folder} is marked already (it has {STORED_STUDY_FILE}); nothing to do")
    refuse_links(folder, "a marked study")
    with hold_folder(folder, "is being marked by another experiments/store.py ({owner}); wait for it to finish"):
        return _mark_held(folder, info, kind)


def _mark_held(folder: Path, info: StudyInfo, kind: str) -> dict[str, Any]:
    """:func:`mark`, under the lock on ``folder``."""
    runs = run_folders(folder)
    if not runs:
        raise ValueError(f"{folder} holds no run folders (folders with {CONFIG_FILE}); give a folder of stored runs")
    plan = Plan(kind)
    markers: dict[str, bytes] = {}
    for run in runs:
        if any((run / name).exists() for name in (RunFolder(run).weights_path.name, CHECKPOINT_FILE, STORED_FILE)):
            raise ValueError(
                f"{run} holds weights, a checkpoint or a marker; --mark is for records already kept without them (store a study with SOURCE DEST)"
            )
        record = RunRecord.read(run)
        raw = RunFolder(run).read_metrics() or {}
        status = (
            raw["status"] if raw.get("status") in FINISHED_STATUSES else str(record.status)
        )  # a finished run without weights: stored, once marked
        rel = run.relative_to(folder).as_posix()
        markers[f"{rel}/{STORED_FILE}"] = _json_bytes(
            {
                "format": STORED_FORMAT,
                "status": status,
                "weights_sha256": raw.get("weights_sha256"),
                "weights_bytes": None,
                "left_behind": [],
            }
        )
        plan.statuses[status] += 1
        plan.seconds += record.elapsed_s or 0.0
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p != folder / LOCK_FILE):
        plan.files[path.relative_to(folder).as_posix()] = path.read_bytes()
    plan.files.update(markers)
    data = manifest(plan, folder.name, info, str(folder), f"{MADE_BY} --mark", False)
    data["left_behind"] = {
        "not known: these records were kept before experiments/store.py existed (see the note)": {
            "files": 0,
            "bytes": 0,
        }
    }
    write_files(folder, {**markers, STORED_STUDY_FILE: _json_bytes(data), STUDY_PAGE: study_page(data).encode()})
    read = Counter(str(r.status) for r in StoredStudy.read(folder).records())  # read back through the one reader
    if read != plan.statuses:
        raise RuntimeError(f"{folder}'s runs read as {dict(read)} once marked, not {dict(plan.statuses)}")
    return data


@click.command(cls=Script, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path), required=False)
@click.option("--command", "command_", required=True, help="The exact command that trained the study.")
@click.option("--commit", required=True, help="The commit of the code that trained it (a frozen copy's).")
@click.option("--machine", required=True, help="The machine: cores, accelerator, threads per run.")
@click.option("--beside", required=True, help="What ran beside it on the same machine ('nothing' if nothing).")
@click.option("--note", default="", help="Anything else a reader should know.")
@click.option("--replace", is_flag=True, help="Replace records this command stored in DEST before (and nothing else).")
@click.option("--partial", is_flag=True, help="Store runs that did not finish as they are (said in STUDY.md).")
@click.option("--carry", default=None, help="A reproduction made with --carry-recipe: its quantities, comma-separated.")
@click.option(
    "--max-file-mb",
    type=Number(0, 1e6, min_open=True),
    default=MAX_FILE_MB,
    show_default=True,
    help="Refuse any file larger than this many MB (a number > 0, at most 1e6).",
)
@click.option(
    "--mark",
    "mark_kind",
    type=click.Choice(["reproduction", "sweep", "runs", "gpu-suite"]),
    default=None,
    help="Mark SOURCE, records already kept without weights, as a stored study of this kind (no DEST).",
)
@click.option("--dates", default="", help="When the study ran (with --mark: the files' own times are the checkout's).")
def main(
    source: Path,
    dest: Path | None,
    command_: str,
    commit: str,
    machine: str,
    beside: str,
    note: str,
    replace: bool,
    partial: bool,
    carry: str | None,
    max_file_mb: float,
    mark_kind: str | None,
    dates: str,
) -> None:
    """Store the finished study SOURCE in DEST (experiments/results/<study>) without weights; or --mark SOURCE."""
    # Errors go through the command line's one layer (training.cli.errors): one line, exit 2.
    info = StudyInfo(command_, commit, machine, beside, note, dates)
    if mark_kind is not None:
        if dest is not None:
            raise ValueError("--mark marks SOURCE where it lies; give no DEST")
        data = mark(source, info, mark_kind)
        where = source
    else:
        if dest is None:
            raise ValueError("give SOURCE and DEST (experiments/results/<study>), or --mark KIND SOURCE")
        data = store(
            source,
            dest,
            info,
            replace=replace,
            partial=partial,
            carry=None if carry is None else tuple(carry.split(",")),
            max_file_mb=max_file_mb,
        )
        where = dest
    statuses = ", ".join(f"{n} {s}" for s, n in data["runs"]["statuses"].items())
    click.echo(
        f"stored {data['runs']['count']} runs ({statuses}) of the {data['kind']} study in {where}: "
        f"{len(data['files'])} files, {_size(data['total_bytes'])} in all (besides {STORED_STUDY_FILE} and {STUDY_PAGE})"
    )


if __name__ == "__main__":
    main()
