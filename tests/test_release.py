"""The release: ``python -m build`` makes an sdist and a wheel that ``twine check`` passes, and
the wheel, installed with its dependencies into a fresh virtual environment (no editable
install, nothing of this checkout on the path), runs ``interp-init --version`` and the README's
first minute.  Slow: the fresh environment resolves the dependencies from the index (about four
minutes on the 2-core machine); `.ci/run` runs it with the other slow tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
#: The README's first minute, as the wheel's console script runs it.
FIRST_MINUTE = ["reproduce", "--preset", "tiny", "--seed", "0", "--device", "cpu", "--quiet"]


def _run(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``'s sdist and wheel of this checkout (setuptools from this environment)."""
    pytest.importorskip("build", reason="build is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)], cwd=out)
    return out


@pytest.mark.slow
def test_build_makes_an_sdist_and_a_wheel_that_twine_passes(dist: Path) -> None:
    pytest.importorskip("twine", reason="twine is not installed (pip install -e '.[docs]')")
    wheel, sdist = dist / f"interp_init-{VERSION}-py3-none-any.whl", dist / f"interp_init-{VERSION}.tar.gz"
    assert wheel.is_file() and sdist.is_file(), sorted(p.name for p in dist.iterdir())
    done = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], cwd=dist)
    assert done.stdout.count("PASSED") == 2, done.stdout
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "training/studies/sweep/presets/journal-fig3-cpu.json" in names  # package data travels
    assert not any(n.startswith(("tests/", "docs/", "examples/")) for n in names)
    with tarfile.open(sdist) as archive:
        members = {Path(*Path(n).parts[1:]).as_posix() for n in archive.getnames()}
    assert {"pyproject.toml", "README.md", "LICENSE", "probes/__init__.py"} <= members


@pytest.mark.slow
def test_the_wheel_installs_in_a_fresh_environment_and_runs_the_first_minute(dist: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(env_dir)], cwd=tmp_path)
    python = env_dir / "bin" / "python"
    # the pinned CPU build first: an unpinned torch would pull the newest CUDA build (gigabytes)
    _run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0"], cwd=tmp_path)
    _run(
        [str(python), "-m", "pip", "install", "-q", str(dist / f"interp_init-{VERSION}-py3-none-any.whl")], cwd=tmp_path
    )
    where = _run(
        [
            str(python),
            "-c",
            "import json, interp_init, probes, training; print(json.dumps([m.__file__ for m in (interp_init, probes, training)]))",
        ],
        cwd=tmp_path,
    )
    site = (env_dir / "lib").resolve()
    assert all(Path(f).resolve().is_relative_to(site) for f in json.loads(where.stdout)), (
        where.stdout
    )  # the wheel's, not this checkout's
    direct_url = next(site.glob("python3*/site-packages/interp_init-*.dist-info")) / "direct_url.json"
    assert not direct_url.is_file() or '"editable": true' not in direct_url.read_text()

    script = env_dir / "bin" / "interp-init"
    assert _run([str(script), "--version"], cwd=tmp_path).stdout.strip() == f"interp-init {VERSION}"
    out = tmp_path / "first-minute"
    done = _run([str(script), *FIRST_MINUTE, "--out", str(out)], cwd=tmp_path)
    assert "preset tiny, seed 0" in done.stdout and f"report: {out / 'report.html'}" in done.stdout, done.stdout
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    statuses = [
        run["status"] for task in ("symmetric", "id-ood") for run in summary["per_seed"][0]["runs"][task].values()
    ]
    assert statuses == ["completed"] * 4, summary
    assert (out / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
