"""The checks of a path before anything is read or written at it: names the file system
would refuse half way (:func:`check_path_names`, :func:`check_name_length`), and a folder
that cannot be one or cannot be written (:func:`check_folder_path`).  Each names the flag
that gave the path and the fix; :mod:`interp_init.fileio` and :mod:`interp_init.outputs`
ask them first."""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: The longest file name (bytes) most file systems take.
NAME_MAX = 255


def check_name_length(path: str | Path, what: str = "file") -> None:
    """Refuse a ``path`` whose last component is longer than :data:`NAME_MAX` bytes (the
    file system would refuse it half way), naming it; every writer and every dry run asks
    this one function."""
    name = Path(path).name
    size = len(os.fsencode(name))
    if size > NAME_MAX:
        raise ValueError(
            f"the {what} name {name[:40]}... is {size} bytes long, more than the {NAME_MAX} a file name may have ({Path(path).parent}); choose a shorter name"
        )


#: The longest path (bytes) Linux takes.
PATH_MAX = 4096


def check_path_names(path: str | Path, option: str = "--out") -> None:
    """Refuse a ``path`` the file system would refuse half way: a component longer than
    :data:`NAME_MAX` bytes, or the whole longer than :data:`PATH_MAX`, naming ``option``
    and the component (asked before anything is read or written at ``path``)."""
    text = os.fsencode(str(path))
    if len(text) >= PATH_MAX:
        raise ValueError(
            f"{option} {str(path)[:60]}... is {len(text):,} bytes long, more than the {PATH_MAX:,} a path may have; choose a shorter {option}"
        )
    for part in Path(path).parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise ValueError(
                f"{option} {str(path)[:60]}...: its folder or file name {part[:40]}... is {size} bytes long, more than the {NAME_MAX} "
                f"a name may have; choose a shorter {option}"
            )


def check_folder_path(path: str | Path, option: str = "--out", what: str | Path | None = None) -> None:
    """Refuse a folder path that cannot be one: a name too long, a dangling symbolic link or
    a loop of them, an existing file, or a place that cannot be written (a read-only file
    system, no permission), naming ``option`` and ``what`` (the output the folder is for;
    default the folder), before anything is written."""
    path = Path(path)
    check_path_names(path, option)
    _check_writable(path, option, path if what is None else what)
    if path.is_symlink():
        try:
            path.resolve(strict=True)
        except RuntimeError:  # Python < 3.13 reports a loop so
            raise ValueError(
                f"{option} {path} is a symbolic link that loops back on itself; remove the link or choose another {option}"
            ) from None
        except OSError as err:
            what = (
                "loops back on itself"
                if err.errno == errno.ELOOP
                else f"points to {os.readlink(path)}, which does not exist"
            )
            raise ValueError(
                f"{option} {path} is a symbolic link that {what}; remove the link, create its target, or choose another {option}"
            ) from None
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is a file, not a folder; choose another {option}")


def _check_writable(path: Path, option: str, what: str | Path) -> None:
    """Refuse ``path`` when its nearest existing folder (itself, or an ancestor) cannot be
    written by this process: a read-only file system, or no permission."""
    existing = next((p for p in (path, *path.absolute().parents) if p.exists() or p.is_symlink()), None)
    if existing is None or not existing.is_dir():
        return  # a file in the way is refused by the caller, naming it
    if os.access(existing, os.W_OK | os.X_OK):
        return
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "it is on a read-only file system" if read_only else "this user may not write there"
    raise ValueError(f"{option} {what}: cannot write in {existing} ({why}); choose another {option}")
