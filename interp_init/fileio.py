"""Files the toolkit reads and writes: validated JSON, atomic writes, digests.

* :func:`read_json` reads UTF-8 JSON and raises :class:`BadRunFile` (a ``ValueError``)
  naming the file, the problem and the fix; :class:`MissingRunFile` is also a
  ``FileNotFoundError``.
* :func:`atomic_write` writes a temporary file next to the target and renames it, so a
  kill never leaves a half-written file; on failure the temporary file is removed, a full
  disk raises ``OSError(ENOSPC)`` naming the path and saying that the same command
  resumes, and :func:`remove_stale_temporaries` removes those left by killed processes.
* ``INTERP_INIT_KILL_AT="<before|after>:<file name>:<n>"`` SIGKILLs the process at the
  n-th atomic write of that file, before or after its rename: deterministic kill points
  for the tests of what a kill leaves behind.
* :func:`config_digest` and :func:`file_sha256` bind a run's files together
  (:mod:`interp_init.runfolder`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any


class BadRunFile(ValueError):
    """A file the toolkit reads is missing, unreadable or of the wrong shape.

    The message names the file, the problem and the fix: ``"<path> <problem>; <fix>"``.
    """

    def __init__(self, path: str | Path, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = Path(path), problem, fix
        super().__init__(f"{path} {problem}; {fix}")


class MissingRunFile(BadRunFile, FileNotFoundError):
    """A :class:`BadRunFile` for a file that does not exist (also a ``FileNotFoundError``)."""


def read_json(path: str | Path, fix: str) -> Any:
    """The JSON value in ``path`` (UTF-8); :class:`BadRunFile` if it cannot be read or parsed."""
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
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BadRunFile(path, f"is not valid JSON ({err})", fix) from None


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``null``, ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp(?P<pid>\d+)$")


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
    tmp = _temporary(path)
    try:
        _write_temporary(tmp, data)
        _fault_point(path, "before")
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            raise OSError(
                errno.ENOSPC, "no space left on the device; free some space and run the same command again to resume", str(path)
            ) from err
        raise
    _fault_point(path, "after")
    return path


def write_json(path: str | Path, data: Any) -> Path:
    """``data`` as indented JSON, written atomically."""
    return atomic_write(path, json.dumps(data, indent=2) + "\n")


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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files in ``folder`` left by processes that are gone; return them."""
    removed = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        match = _TEMPORARY.match(entry.name)
        if match and entry.is_file() and not _pid_alive(int(match["pid"])):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed
