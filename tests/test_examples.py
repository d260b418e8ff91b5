"""Every walkthrough in examples/ runs at the ``tiny`` preset, as a script with argv,
prints its table and writes its report."""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: script -> extra arguments that keep it small, and what its output must contain.
WALKTHROUGHS = {
    "symmetric_vs_inferential.py": ((), ("(4,3) inferential x-10", "small-init", "large-init")),
    "mechanisms_via_probes.py": ((), ("top path", "residual block score", "W_Q stable rank")),
    "phases_and_commutativity.py": (("--gamma", "0.4", "--gamma", "0.8"), ("phase", "commutativity", "W_Q stable rank")),
    "complexity_and_speed.py": ((), ("epochs to loss < 0.05", "all offset pairs at 60%")),
}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # shared, so mechanisms_via_probes reuses the runs of symmetric_vs_inferential
    return tmp_path_factory.mktemp("examples")


def run_script(path: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "argv", [str(path), *args])
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(path), run_name="__main__")
    assert exit_info.value.code in (0, None), stdout.getvalue()
    return stdout.getvalue()


#: Walkthroughs run by other test modules: the phase sweeps (tests/test_phase.py), the
#: probes walkthrough (tests/test_probes_api.py), the custom architecture
#: (tests/test_architectures.py) and the custom task (tests/test_user_task.py).
ELSEWHERE = {"phase_neurips_fig2.py", "phase_journal_fig3.py", "phase_complexity.py", "probes_walkthrough.py", "custom_architecture.py", "custom_task.py"}


def test_every_example_is_covered() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts <= set(WALKTHROUGHS) | ELSEWHERE, "a walkthrough in examples/ that no test runs"
    assert set(WALKTHROUGHS) | ELSEWHERE <= scripts, "a test names a walkthrough that does not exist"


@pytest.mark.parametrize("script", list(WALKTHROUGHS))
def test_walkthrough_runs_at_tiny_scale(script: str, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra, expected = WALKTHROUGHS[script]
    args = ["--preset", "tiny", "--out", str(out), "--device", "cpu", "--per-pair", "2", *extra]
    stdout = run_script(EXAMPLES / script, args, monkeypatch)
    for text in expected:
        assert text in stdout, stdout
    report = out / script.replace(".py", ".html")
    assert f"report: {report}" in stdout
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count("Plotly.newPlot(") > 8
