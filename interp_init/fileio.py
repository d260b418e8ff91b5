"""Files the toolkit reads and writes: validated JSON, atomic writes, digests.

* :func:`read_json` reads UTF-8 JSON and raises :class:`BadRunFile` (a ``ValueError``)
  naming the file, the problem and the fix; :class:`MissingRunFile` is also a
  ``FileNotFoundError``.
* :func:`atomic_write` writes a temporary file next to the target and renames it, so a
  kill never leaves a half-written file; on failure the temporary file is removed, a full
  disk raises ``OSError(ENOSPC)`` naming the path and saying that the same command
  resumes, and :func:`remove_stale_temporaries` removes those left by killed processes.
  A temporary file is named with a random owner token, never a PID, and its writer holds
  an ``flock`` on it until the rename: the kernel releases that lock however the writer
  ends, in whatever PID namespace, so a temporary file nobody holds is a dead writer's.
* ``INTERP_INIT_KILL_AT="<before|after>:<file name>:<n>"`` SIGKILLs the process at the
  n-th atomic write of that file, before or after its rename: deterministic kill points
  for the tests of what a kill leaves behind.
* :func:`config_digest` and :func:`file_sha256` bind a run's files together
  (:mod:`interp_init.runfolder`).
* :func:`parse_json` is strict (a key twice in one object, ``NaN``, are errors) and
  :func:`write_json` never writes a non-finite number; a temporary file's name is cut to
  fit the file system; a quota or a file-size limit (``EDQUOT``, ``EFBIG``) is reported as
  a full disk is (:func:`is_disk_full`), and any other write error names the target, never
  its temporary file (:func:`temporary_target`), a failed clean-up included.
* The checks of a path before a write live in :mod:`interp_init.paths` (``check_name_length``,
  ``check_folder_path``, imported here too); :func:`new_folder` removes the folders it made
  when the block refuses its input.
* :func:`hold_folder` holds a folder for one process (an ``flock`` on ``DIR/.lock``) and
  :func:`folder_is_held` tells whether a live process holds it.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from interp_init.paths import (  # also the names this module has always offered
    NAME_MAX,
    check_folder_path,
    check_name_length,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locks; temporaries are then never removed
    fcntl = None  # type: ignore[assignment]


class BadRunFile(ValueError):
    """A file the toolkit reads is missing, unreadable or of the wrong shape.

    The message names the file, the problem and the fix: ``"<path> <problem>; <fix>"``.
    """

    def __init__(self, path: str | Path, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = Path(path), problem, fix
        super().__init__(f"{path} {problem}; {fix}")


class MissingRunFile(BadRunFile, FileNotFoundError):
    """A :class:`BadRunFile` for a file that does not exist (also a ``FileNotFoundError``)."""


class RunFolderBusy(ValueError):
    """Another live process holds the folder (:func:`hold_folder`)."""


#: The file a folder's holder keeps an ``flock`` on (:func:`hold_folder`).
LOCK_FILE = ".lock"
#: Attempts (20 ms apart) to take a folder's lock before it is reported busy.
_LOCK_TRIES = 25


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object (the first value would be dropped silently)")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str) -> Any:
    """Strict JSON: a key twice in one object, or ``NaN``/``Infinity``, is a ``ValueError``
    (``json.JSONDecodeError`` for syntax) rather than silently read."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)


def read_json(path: str | Path, fix: str) -> Any:
    """The JSON value in ``path`` (UTF-8, strict: :func:`parse_json`); :class:`BadRunFile`
    if it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise MissingRunFile(path, "does not exist", fix) from None
    except UnicodeDecodeError as err:
        raise BadRunFile(path, f"is not UTF-8 text (byte {err.start})", fix) from None
    except OSError as err:
        raise BadRunFile(path, f"cannot be read ({err.strerror})", fix) from None
    try:
        return parse_json(text)
    except json.JSONDecodeError as err:
        raise BadRunFile(path, f"is not valid JSON ({err})", fix) from None
    except ValueError as err:
        raise BadRunFile(path, f"is not valid JSON ({err})", fix) from None


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``null``, ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


#: What a temporary file's name adds to its target's: ``.`` before, ``.tmp-`` and 16 hex digits after.
_TEMPORARY_EXTRA = len(".") + len(".tmp-") + 16


def temporary_target(path: str | Path) -> Path | None:
    """The file a temporary file ``path`` (``DIR/.NAME.tmp-...``) is written for, or None
    if ``path`` is not one: messages name the target, never the temporary."""
    match = _TEMPORARY.match(Path(path).name)
    return None if match is None else Path(path).with_name(match["name"])


def _temporary_stem(path: Path) -> str:
    """The part of a temporary file's name that names its target: the target's name, cut so
    that the temporary's whole name fits in :data:`NAME_MAX` bytes."""
    name = path.name
    while len(os.fsencode(name)) + _TEMPORARY_EXTRA > NAME_MAX:
        name = name[:-1]
    return name


def _temporary(path: Path) -> Path:
    return path.with_name(f".{_temporary_stem(path)}.tmp-{secrets.token_hex(8)}")


#: The errors of a full disk, a quota or a file-size limit, and what they mean.
_FULL = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file is larger than this process may write (a file-size limit, ulimit -f, or the file system's)",
}


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a full disk, a quota or a file-size limit: the machine refusing
    every write alike, which stops a whole command (not one run of a study)."""
    return isinstance(err, OSError) and err.errno in _FULL


#: Temporary files: ``.NAME.tmp-<owner token>`` (and ``.NAME.tmp<pid>``, from older versions).
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp(-[0-9a-f]+|\d+)$")
#: A temporary file this young and still empty may be one whose writer has created it and
#: not yet locked it (two system calls apart): it is left for the next clean-up.
_FRESH_S = 10.0


#: Atomic writes per (stage, file name) seen by :func:`_fault_point` in this process.
_FAULT_WRITES: Counter[tuple[str, str]] = Counter()


def _fault_point(path: Path, stage: str) -> None:
    """Deterministic kill points for tests: ``INTERP_INIT_KILL_AT="<stage>:<file name>:<n>"``
    SIGKILLs this process at the n-th atomic write of that file, ``before`` its rename (the
    temporary file is complete) or ``after`` it."""
    spec = os.environ.get("INTERP_INIT_KILL_AT")
    if not spec:
        return
    want_stage, name, count = spec.split(":")
    if want_stage != stage or name != path.name:
        return
    _FAULT_WRITES[stage, name] += 1
    if _FAULT_WRITES[stage, name] == int(count):
        os.kill(os.getpid(), signal.SIGKILL)


def _write_temporary(tmp: Path, data: bytes | str | Callable[[Path], None]) -> None:
    # Each writes the file (inode) the caller created and locked: the lock covers it.
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    elif isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        data(tmp)


def atomic_write(path: str | Path, data: bytes | str | Callable[[Path], None]) -> Path:
    """Write ``data`` (bytes, text, or a function writing a given path) to ``path`` atomically.

    A temporary file next to ``path`` is written, then renamed onto it.  On any failure
    the temporary file is removed; a full disk raises ``OSError(ENOSPC)`` naming ``path``.
    """
    path = Path(path)
    check_name_length(path)
    remove_stale_temporaries(path.parent, path)  # a killed earlier write of this file
    tmp = _temporary(path)
    handle = None
    try:
        handle = open(tmp, "xb")  # noqa: SIM115 - held (locked) until the rename
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)  # this writer owns it while it lives
        _write_temporary(tmp, data)
        _fault_point(path, "before")
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(
            OSError
        ):  # a read-only file system refuses the unlink too: the first error is the one to tell
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in _FULL:
            raise OSError(
                err.errno, f"{_FULL[err.errno]}; free some space and run the same command again to resume", str(path)
            ) from err
        if isinstance(err, OSError):  # name the target, never its temporary
            raise OSError(err.errno, err.strerror or str(err).replace(str(tmp), str(path)), str(path)) from err
        if isinstance(err, Exception) and tmp.name in str(
            err
        ):  # a library's writer (torch, safetensors) naming the temporary
            raise OSError(
                errno.EIO, str(err).replace(str(tmp), str(path)).replace(tmp.name, path.name), str(path)
            ) from err
        raise
    finally:
        if handle is not None:
            handle.close()
    _fault_point(path, "after")
    return path


def write_json(path: str | Path, data: Any) -> Path:
    """``data`` as indented JSON, written atomically; a non-finite number (which JSON has
    no way to write) is a ``ValueError`` naming the file, and nothing is written."""
    try:
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError:
        raise ValueError(
            f"{path} would hold a NaN or infinite number, which JSON cannot hold; nothing was written (the numbers come from a run that went non-finite)"
        ) from None
    return atomic_write(path, text + "\n")


def config_digest(config: dict) -> str:
    """SHA-256 of a run config's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _remove_if_unowned(entry: Path) -> bool:
    """Remove the temporary file ``entry`` if no live writer holds its lock; True if removed."""
    if fcntl is None:  # pragma: no cover - no way to tell a live writer's file
        return False
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its writer is alive (in this process or another)
            return False
        info = os.fstat(fd)
        if info.st_size == 0 and time.time() - info.st_mtime < _FRESH_S:
            return False
        entry.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def remove_stale_temporaries(folder: Path, target: Path | None = None) -> list[Path]:
    """Remove the temporary files in ``folder`` (only ``target``'s, if given) whose writers
    are gone; return them.

    A writer holds an ``flock`` on its temporary file until it renames it, so a file
    nobody holds was left by a process that died (however it died, in whatever PID
    namespace); PIDs, which the system reuses, are never consulted."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    entries = folder.glob(f".{glob.escape(_temporary_stem(target))}.tmp*") if target is not None else folder.iterdir()
    for entry in entries:
        if _TEMPORARY.match(entry.name) and entry.is_file() and _remove_if_unowned(entry):
            removed.append(entry)
    return removed


# ------------------------------------------------------------------ held folders


def _owner() -> str:
    return f"pid {os.getpid()}"


@contextlib.contextmanager
def hold_folder(path: Path, busy: str) -> Iterator[None]:
    """Hold ``path`` (a folder) for this process: ``flock`` on ``path/.lock``, released by
    the kernel however the process ends (a kill included, in whatever PID namespace);
    the file is removed when the block ends.  Another process holding it meanwhile raises
    :class:`RunFolderBusy` with ``f"{path} {busy}"`` (``{owner}``: the holder's pid, for
    the reader: the lock, not the pid, decides)."""
    lock_path = path / LOCK_FILE
    while True:
        handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the block ends
        for _ in range(_LOCK_TRIES):  # a reader testing the lock (folder_is_held) holds it for microseconds
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.02)
        else:
            handle.seek(0)
            owner = handle.read().strip() or "owner unknown"
            handle.close()
            raise RunFolderBusy(f"{path} " + busy.format(owner=owner)) from None
        if lock_path.exists() and os.fstat(handle.fileno()).st_ino == lock_path.stat().st_ino:
            break
        handle.close()  # the holder removed the file as we opened it: take the new one
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(_owner())
        handle.flush()
        yield
    finally:
        lock_path.unlink(missing_ok=True)
        handle.close()


def folder_is_held(path: Path) -> bool:
    """True if a live process holds ``path`` (:func:`hold_folder`); reads nothing else."""
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# ------------------------------------------------------------------ output folders


@contextlib.contextmanager
def new_folder(path: str | Path, option: str = "--out") -> Iterator[Path]:
    """Make the folder ``path`` (and its parents) for the block; if the block raises a
    ``ValueError`` (bad input, refused before any work), the folders it made are removed
    again if nothing but a lock file is in them: refused input leaves nothing behind."""
    path = Path(path)
    check_folder_path(path, option)
    made = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the folder {path}: {err.strerror}; choose another {option}") from None
    try:
        yield path
    except ValueError:
        remove_made_folders(made)
        raise


def remove_made_folders(made: list[Path]) -> None:
    """Remove the folders ``made`` (deepest first) that hold nothing but a lock file."""
    for folder in made:
        try:
            if not folder_is_held(folder):
                (folder / LOCK_FILE).unlink(missing_ok=True)
            folder.rmdir()
        except OSError:  # not empty (or gone): keep it and its parents
            return


# ------------------------------------------------------------------ a folder of records, whole or absent

#: The copy of a folder being written beside it (``.NAME.storing-<pid>``): :func:`place_folder`.
STORING = ".{name}.storing-"


def write_files(folder: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (a path relative to ``folder`` -> its bytes) through :func:`atomic_write`."""
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)


def place_folder(dest: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` into a copy beside ``dest`` (:data:`STORING`), then rename it to ``dest``
    in one step: a kill leaves ``dest`` whole or absent, never part-written; refused (``OSError``)
    where ``dest`` holds anything. What a killed call left is :func:`storing_copies`."""
    work = dest.parent / (STORING.format(name=dest.name) + str(os.getpid()))
    shutil.rmtree(work, ignore_errors=True)
    try:
        write_files(work, files)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def storing_copies(dest: Path) -> list[Path]:
    """The copies of ``dest`` that killed writers left beside it (:func:`place_folder`), whoever left them."""
    return sorted(dest.parent.glob(glob.escape(STORING.format(name=dest.name)) + "*"))
