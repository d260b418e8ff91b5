"""The benchmark data shipped with the package (interp_init.tasks.shipped): every recorded file
is there with its licence, its text has the recorded sha256 and line count (computed here
with hashlib, apart from the module's check), and a missing or altered file is one line."""

from __future__ import annotations

import hashlib
import lzma
import shutil
from pathlib import Path

import pytest

from interp_init.tasks import shipped
from interp_init.tasks.shipped import FILES, SHIPPED, read_text

#: The line counts the benchmarks publish (SCAN's README and the issue's), typed here apart from SHIPPED.
PUBLISHED_LINES = {
    "scan/tasks_train_addprim_turn_left.txt": 21_890,
    "scan/tasks_test_addprim_turn_left.txt": 1_208,
    "scan/tasks_train_addprim_jump.txt": 14_670,
    "scan/tasks_test_addprim_jump.txt": 7_706,
    "cogs/train.tsv": 24_155,
    "cogs/test.tsv": 3_000,
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_file_has_its_recorded_sha256_lines_and_licence(name: str) -> None:
    record = SHIPPED[name]
    text = lzma.decompress((FILES / f"{name}.xz").read_bytes())
    assert hashlib.sha256(text).hexdigest() == record.sha256
    assert text.count(b"\n") == record.lines == PUBLISHED_LINES.get(name, record.lines)
    licence = (FILES / record.licence_file).read_text(encoding="utf-8")
    assert record.licence.split()[0] in licence and record.source.startswith("github.com/")


def test_the_published_counts_cover_every_shipped_file() -> None:
    assert set(SHIPPED) == set(PUBLISHED_LINES)


def test_a_missing_or_altered_file_is_one_line_naming_it(tmp_path: Path) -> None:
    name = "scan/tasks_test_addprim_turn_left.txt"
    with pytest.raises(
        ValueError, match=r"data file .*tasks_test_addprim_turn_left.txt.xz is missing; reinstall interp-init"
    ):
        read_text(name, tmp_path)
    (tmp_path / "scan").mkdir()
    shutil.copy(FILES / f"{name}.xz", tmp_path / f"{name}.xz")
    assert read_text(name, tmp_path).count("\n") == 1_208
    altered = lzma.decompress((FILES / f"{name}.xz").read_bytes()).replace(b"I_JUMP", b"I_WALK", 1)
    (tmp_path / f"{name}.xz").write_bytes(lzma.compress(altered))
    with pytest.raises(
        ValueError,
        match=rf"is altered: its sha256 is {hashlib.sha256(altered).hexdigest()}, not the recorded {SHIPPED[name].sha256}",
    ) as err:
        read_text(name, tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / f"{name}.xz").write_bytes(b"not xz")
    with pytest.raises(ValueError, match="cannot be read"):
        read_text(name, tmp_path)
    with pytest.raises(ValueError, match="no shipped data file 'nope'"):
        shipped.read_lines("nope")
