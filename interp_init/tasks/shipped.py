"""The benchmark data shipped inside the package, read checked: every file's source, licence,
line count and sha256 recorded in one place (:data:`SHIPPED`).

The files lie in ``interp_init/tasks/files/<benchmark>/``, xz-compressed
(``<name>.xz``), each benchmark's licence beside them (``LICENSE``); the wheel carries them
(``pyproject.toml``'s package-data).  :func:`read_lines` decompresses one, checks the sha256
of its text against the record (the sha256 of the file as its source publishes it) and
returns its lines; a missing or altered file is a ``ValueError`` in one line naming the file
and the fix.  ``tests/interp_init/test_shipped.py`` checks every record.

Example::

    >>> lines = read_lines("scan/tasks_test_addprim_turn_left.txt")
    >>> len(lines), lines[0].startswith("IN: ")
    (1208, True)
"""

from __future__ import annotations

import hashlib
import lzma
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: The folder the shipped files lie in.
FILES = Path(__file__).parent / "files"


@dataclass(frozen=True)
class ShippedFile:
    """One shipped data file: where it came from (``source``: repository, commit and path),
    its licence's name and file (relative to :data:`FILES`), its lines and the sha256 of its
    uncompressed text."""

    source: str
    licence: str
    licence_file: str
    lines: int
    sha256: str


_SCAN = "github.com/brendenlake/SCAN@c4b756cbc010d75c912f16c42c8f15dc6b7e6c8f"
_COGS = "github.com/najoungkim/COGS@165a7b669eade971fa47bf568a2e51925360fed8"

#: Every shipped file, by its path under :data:`FILES` without the ``.xz``.
SHIPPED: dict[str, ShippedFile] = {
    "scan/tasks_train_addprim_turn_left.txt": ShippedFile(
        f"{_SCAN}:add_prim_split/tasks_train_addprim_turn_left.txt",
        "BSD",
        "scan/LICENSE",
        21_890,
        "1b3fed86055dd7689d217f1b90cc8960aeb1cf200f4f209dc47935761b05304c",
    ),
    "scan/tasks_test_addprim_turn_left.txt": ShippedFile(
        f"{_SCAN}:add_prim_split/tasks_test_addprim_turn_left.txt",
        "BSD",
        "scan/LICENSE",
        1_208,
        "15a82c2d25ac7c3c1fff7e18051fb085974ef3617de895c520d02144396a10e2",
    ),
    "scan/tasks_train_addprim_jump.txt": ShippedFile(
        f"{_SCAN}:add_prim_split/tasks_train_addprim_jump.txt",
        "BSD",
        "scan/LICENSE",
        14_670,
        "e3c78485692e028eed4205e1b8b3fd0e785ef2c12d45b5b89204dadf5b239e23",
    ),
    "scan/tasks_test_addprim_jump.txt": ShippedFile(
        f"{_SCAN}:add_prim_split/tasks_test_addprim_jump.txt",
        "BSD",
        "scan/LICENSE",
        7_706,
        "8147ae2651422c701162e174d9d66158daa57858a26b30317ac61797118ac7a5",
    ),
    "cogs/train.tsv": ShippedFile(
        f"{_COGS}:data/train.tsv",
        "MIT",
        "cogs/LICENSE",
        24_155,
        "220b3804b562c0156ee986eff1bdd15c27e52142549362a64f57baf86e304c78",
    ),
    "cogs/test.tsv": ShippedFile(
        f"{_COGS}:data/test.tsv",
        "MIT",
        "cogs/LICENSE",
        3_000,
        "68f8e51e9f6d9cd22d64efe68dd21d7ea5ba327e9a2359481030161aea757035",
    ),
}

_FIX = "reinstall interp-init (pip install --force-reinstall interp-init) or restore it from the repository (git checkout -- interp_init/tasks/files)"


def read_text(name: str, folder: Path | None = None) -> str:
    """The text of the shipped file ``name`` (a key of :data:`SHIPPED`), its sha256 checked;
    ``folder``: where to read it (default :data:`FILES`)."""
    if name not in SHIPPED:
        raise ValueError(f"no shipped data file {name!r}; the shipped files are {sorted(SHIPPED)}")
    record = SHIPPED[name]
    path = (FILES if folder is None else Path(folder)) / f"{name}.xz"
    try:
        text = lzma.decompress(path.read_bytes())
    except FileNotFoundError:
        raise ValueError(f"data file {path} is missing; {_FIX}") from None
    except (lzma.LZMAError, OSError) as err:
        raise ValueError(f"data file {path} cannot be read ({err}); {_FIX}") from None
    digest = hashlib.sha256(text).hexdigest()
    if digest != record.sha256:
        raise ValueError(
            f"data file {path} is altered: its sha256 is {digest}, not the recorded {record.sha256} ({record.source}); {_FIX}"
        )
    return text.decode("utf-8")


def read_lines(name: str) -> tuple[str, ...]:
    """The lines of the shipped file ``name`` (checked by :func:`read_text`; read once per folder)."""
    return _lines(name, FILES)


@lru_cache(maxsize=32)
def _lines(name: str, folder: Path) -> tuple[str, ...]:
    return tuple(read_text(name, folder).splitlines())
