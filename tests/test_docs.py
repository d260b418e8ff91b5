"""The documentation is what the code does: the bad-input tables are what the code prints, and the
API reference reads the docstrings' reST as Markdown (docs/griffe_rest.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import ROOT, load_script


def test_bad_input_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(
        r"^\| `interp-init (.+?)` \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M
    )
    assert len(rows) == len(module.CASES)
    for case, code, message in rows:
        assert module.run_case(case, tmp_path) == (int(code), message), case


def test_the_layout_table_is_what_its_generator_writes(tmp_path: Path) -> None:
    """docs/layout.md's table of what stands on what is docs/make_layout_table.py's output; a
    planted row is rewritten."""
    module = load_script("docs/make_layout_table.py")
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    assert module.rewritten(text) == text, "run python docs/make_layout_table.py"
    planted = text.replace("| `probes` | `interp_init/tasks` |", "| `probes` | `training` |")
    assert planted != text and module.rewritten(planted) == text


def test_damaged_file_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(
        r"^\| `([\w.]+)` \| (.+?) \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M
    )
    assert [(name, what) for name, what, _, _ in rows] == [(name, what) for name, what, _ in module.FILE_CASES]
    for index, (_, _, code, message) in enumerate(rows):
        assert module.run_file_case(index, tmp_path) == (int(code), message), rows[index]


def test_data_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(
        r"^\| ([\w-]+) \| `([\w./]+)` \| (.+?) \| (\d+) \| `(.+)` \|$",
        (ROOT / "docs" / "bad-input.md").read_text(),
        re.M,
    )
    assert [(task, name, what) for task, name, what, _, _ in rows] == module.DATA_CASES
    for index, (*_, code, message) in enumerate(rows):
        assert module.run_data_case(index, tmp_path) == (int(code), message), rows[index]


def test_leaf_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(
        r"^\| ([\w. ,]+?) \| `interp-init (.+?)` \| (\d+) \| `(.+)` \|$",
        (ROOT / "docs" / "bad-input.md").read_text(),
        re.M,
    )
    assert [(what, command) for what, command, _, _ in rows] == [
        (what, command) for what, _, command in module.LEAF_CASES
    ]
    for index, (_, _, code, message) in enumerate(rows):
        assert module.run_leaf_case(index, tmp_path) == (int(code), message), rows[index]


def test_the_reference_reads_rest_docstrings_as_markdown() -> None:
    """docs/griffe_rest.py: a literal block becomes a fenced block highlighted by what it holds,
    a reST hyperlink and a pointer to a docs page become links (the page's path in docs/), and
    what is already code or a link stays as it is."""
    pytest.importorskip("griffe", reason="griffe is not installed (pip install -e '.[dev]')")
    rest = load_script("docs/griffe_rest.py")
    text = "\n".join(
        [
            "Runs it (`docs/science.md <../docs/science.md#training>`_; docs/tasks.md, ``docs/sweeps.md``).",
            "See [docs/cli.md](/cli.md) and `the paper <https://arxiv.org/abs/2405.05409>`_.",
            "",
            "Example::",
            "",
            "    >>> 1 + 1",
            "    2",
            "",
            "Command line::",
            "",
            "    interp-init report RUNS --out report.html  # docs/tasks.md is not linked here",
            "",
            "A spec ::",
            "",
            '    {"base": {"preset": "cpu"}}',
            "",
            "::",
            "",
            "    DIR/config.json   the run config",
            "",
            "Done.",
        ]
    )
    assert rest.markdown(text).split("\n") == [
        "Runs it ([docs/science.md](/science.md#training); [docs/tasks.md](/tasks.md), [`docs/sweeps.md`](/sweeps.md)).",
        "See [docs/cli.md](/cli.md) and [the paper](https://arxiv.org/abs/2405.05409).",
        "",
        "Example:",
        "",
        "```pycon",
        ">>> 1 + 1",
        "2",
        "```",
        "",
        "Command line:",
        "",
        "```bash",
        "interp-init report RUNS --out report.html  # docs/tasks.md is not linked here",
        "```",
        "",
        "A spec",
        "",
        "```json",
        '{"base": {"preset": "cpu"}}',
        "```",
        "",
        "```text",
        "DIR/config.json   the run config",
        "```",
        "",
        "Done.",
    ]


# ------------------------------------------------------- pages that stay right (issue 57)

#: The pages a reader meets: README and the site's hand-written pages.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Folders of the machine a page was written on, never of a reader's checkout (``/tmp`` is left
#: out: commands write there on purpose).
MACHINE_FOLDERS = re.compile(r"(?<![\w.~$-])/(?:work|home|Users|root|mnt|scratch|data)/[\w./-]+")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _prose_lines(page: Path) -> list[tuple[int, str]]:
    """The lines of ``page`` outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def outside_paths(page: Path) -> list[str]:
    """Where ``page`` points a reader outside the repository: a link or a code span whose relative
    path climbs out of it, or a path of the machine the page was written on."""
    found = []
    for number, line in _prose_lines(page):
        for match in MACHINE_FOLDERS.finditer(line):
            found.append(f"{page.relative_to(ROOT)}:{number}: {match.group().rstrip('.,;:')}")
        # a link resolves from its page; a path in a code span from the repository's root, where commands run
        targets = [(page.parent, t) for t in re.findall(r"\]\(([^)\s#]+)", line)] + [
            (ROOT, t) for t in re.findall(r"`(\.\./[^`\s]+)`", line)
        ]
        for base, target in targets:
            if "://" in target or target.startswith(("mailto:", "/")):
                continue
            if not (base / target).resolve().is_relative_to(ROOT):
                found.append(f"{page.relative_to(ROOT)}:{number}: {target}")
    return found


def unintended_blockquotes(page: Path) -> list[str]:
    """Lines that Markdown renders as a blockquote although they do not mean one: a line
    (or a list item's continuation) that starts with ``>`` followed by no space, e.g. ``>= 6 of 8``."""
    return [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in _prose_lines(page)
        if re.match(r"^\s*>[^\s>]", line)
    ]


def _stored_presets_on_a_gpu() -> set[str]:
    """The presets of which a stored study holds runs trained on a GPU (their metrics' ``device``)."""
    presets = set()
    for metrics in (ROOT / "experiments" / "results").glob("**/metrics.json"):
        config = metrics.parent / "config.json"
        if config.is_file() and str(json.loads(metrics.read_text()).get("device", "")).startswith("cuda"):
            presets.add(json.loads(config.read_text()).get("preset"))
    return presets


def contradicted_not_yet(page: Path, on_gpu: set[str], stored: set[str]) -> list[str]:
    """Lines saying "not yet" of what the stored records show done: a preset "not yet run" on a
    GPU where a stored study trained it on one, or a stored study named as not yet trained or stored."""
    found = []
    for number, line in _prose_lines(page):
        if "not yet" not in line or "<!--" in line:
            continue
        for preset in re.findall(r"`(\w+)` preset", line):
            if preset in on_gpu and "GPU" in line and re.search(r"not yet (?:been )?(?:run|trained)", line):
                found.append(
                    f"{page.relative_to(ROOT)}:{number}: the `{preset}` preset is stored as run on a GPU: {line.strip()}"
                )
        for study in stored:
            if re.search(rf"\b{re.escape(study)}\b[^.]*not yet (?:been )?(?:run|trained|stored)", line):
                found.append(f"{page.relative_to(ROOT)}:{number}: {study} is stored: {line.strip()}")
    return found


def test_no_page_points_outside_the_repository() -> None:
    assert [f for page in PAGES for f in outside_paths(page)] == []


def test_no_line_renders_as_an_unintended_blockquote() -> None:
    assert [f for page in PAGES for f in unintended_blockquotes(page)] == []


def test_no_not_yet_that_the_records_contradict() -> None:
    on_gpu = _stored_presets_on_a_gpu()
    assert "paper" in on_gpu  # the GPU suite's records: what the check compares against
    stored = {p.parent.name for p in (ROOT / "experiments" / "results").glob("*/stored-study.json")}
    assert [f for page in PAGES for f in contradicted_not_yet(page, on_gpu, stored)] == []


def test_the_page_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    page = ROOT / "docs" / "_page_check_tmp.md"
    page.write_text(
        "A lead (`../shared/FINDINGS.md`) and [notes](../../elsewhere.md), run in /work/exp/run-1.\n"
        "1. a rule (the flip: small init infers on\n   >= 6 of 8 seeds)\n> a real quote\n"
        "```\n>= in a code block is fine\n```\n"
        "The `paper` preset, for a GPU, not yet run on one; pc-depth2-const is not yet trained.\n"
    )
    try:
        assert [f.split(": ", 1)[1] for f in outside_paths(page)] == [
            "/work/exp/run-1",
            "../../elsewhere.md",
            "../shared/FINDINGS.md",
        ]
        assert [f.split(": ", 1)[1] for f in unintended_blockquotes(page)] == [">= 6 of 8 seeds)"]
        assert len(contradicted_not_yet(page, {"paper"}, {"pc-depth2-const"})) == 2
    finally:
        page.unlink()
