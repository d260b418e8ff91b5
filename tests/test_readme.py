"""The README's Python quickstart runs as a script and prints what it computes, and the site's
pages that open with the README's commands give the same lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from helpers import ROOT


def first_bash_block(path: str) -> str:
    """The first ``bash`` block of a Markdown file (the README's: install, first minute, main job, tests)."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / path).read_text(encoding="utf-8"), re.S)
    assert blocks, f"{path} has no bash block"
    return blocks[0]


def test_the_site_gives_the_readme_install_lines() -> None:
    readme = first_bash_block("README.md")
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme  # CPU users get the CPU build, not CUDA's
    for page in ("docs/index.md", "docs/getting-started.md"):
        assert first_bash_block(page) == readme, f"{page}'s command block differs from the README's: copy the README's"


def quickstart_code() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the README's Quickstart section has no python block"
    return blocks[0]


def test_readme_quickstart_runs_as_a_script_and_prints_its_results(tmp_path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart_code())
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for gamma in ("0.8", "0.3"):
        line = next(line for line in lines if line.startswith(f"gamma {gamma} (neurips model): ID accuracy "))
        numbers = [float(x) for x in re.findall(r"\d+\.\d+", line.split(":", 1)[1])]
        assert len(numbers) == 4 and all(0 <= x <= 1 for x in numbers[:3]) and numbers[3] >= 1
    assert any("with attention to the key masked: ID accuracy" in line for line in lines)
    assert (tmp_path / "runs" / "quickstart" / "gamma0.8" / "model.safetensors").is_file()
