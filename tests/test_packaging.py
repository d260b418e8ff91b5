"""What a researcher installs and cites: the version, the licence, type information, the
citation file, dependency floors that work together, and where the deprecation warning of
TransformerLens' HookedTransformer is filtered."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tomllib
import warnings
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

import interp_init
from helpers import ROOT
from training.cli import main

PACKAGES = ("interp_init", "probes", "training")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_is_the_installed_metadata_version() -> None:
    installed = version("interp-init")
    assert interp_init.__version__ == installed
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["--version"]) == 0
    assert stdout.getvalue().strip() == f"interp-init {installed}"
    done = subprocess.run(
        [sys.executable, "-m", "training.cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == f"interp-init {installed}", done.stderr


def test_the_source_version_is_the_installed_one() -> None:
    # an editable install made from an older pyproject would report a stale version
    assert PYPROJECT["project"]["version"] == version("interp-init")


def test_licence_file_and_type_markers_exist_and_are_packaged() -> None:
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and PYPROJECT["project"]["license"] == {"text": "MIT"}
    package_data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for package in PACKAGES:
        assert (ROOT / package / "py.typed").is_file(), package
        assert package_data[package] == ["py.typed"], package


@pytest.mark.slow
def test_the_wheel_holds_the_licence_and_the_type_markers(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    names = zipfile.ZipFile(next(tmp_path.glob("interp_init-*.whl"))).namelist()
    assert {f"{p}/py.typed" for p in PACKAGES} <= set(names)
    assert any(n.endswith("LICENSE") for n in names)
    # the report's plotly.js bundle and its licence (training/studies/report/cells.py)
    assert {
        "training/studies/report/vendor/plotly-cartesian.min.js",
        "training/studies/report/vendor/plotly-LICENSE",
    } <= set(names)
    # the shipped models interp_init.from_pretrained opens: each run folder and the index of their SHA-256
    shipped = {
        f"interp_init/pretrained/{name}/{file}"
        for name in ("symmetric-small-init", "id-ood-large-init")
        for file in ("config.json", "metrics.json", "model.safetensors")
    }
    assert shipped | {"interp_init/pretrained/index.json"} <= set(names)
    # the sequence tasks' benchmark data (interp_init/tasks/shipped.py), each benchmark's licence beside its files
    from interp_init.tasks.shipped import SHIPPED

    data = {f"interp_init/tasks/files/{name}.xz" for name in SHIPPED} | {
        f"interp_init/tasks/files/{r.licence_file}" for r in SHIPPED.values()
    }
    assert data <= set(names)


def test_citation_file_cites_both_papers_and_the_readme_links_them() -> None:
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0" and citation["version"] == version("interp-init")
    references = citation["references"]
    titles = [r["title"] for r in references]
    assert any(t.startswith("Initialization is Critical") for t in titles)
    assert any(t.startswith("Complexity Control") for t in titles)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for reference in references:
        assert [a["family-names"] for a in reference["authors"]] == ["Zhang", "Lin", "Wang", "Zhang", "Xu"]
        assert reference["url"] in readme, f"the README does not link {reference['url']}"
    assert "CITATION.cff" in readme


def test_changelog_starts_at_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## \[?([^\]\s]+)\]?", changelog, re.M)
    assert first and first.group(1) in ("Unreleased", version("interp-init"))


def test_changelog_has_a_dated_section_per_version_newest_first() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## \[([^\]]+)\](.*)$", changelog, re.M)
    released = [(Version(name), rest) for name, rest in sections if name != "Unreleased"]
    assert [name for name, _ in sections if name == "Unreleased"] in ([], [sections[0][0]]), (
        "Unreleased comes first, once"
    )
    for number, rest in released:
        assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest), f"## [{number}] has no date (## [{number}] - YYYY-MM-DD)"
    dates = [rest for _, rest in released]
    assert [n for n, _ in released] == sorted((n for n, _ in released), reverse=True) and dates == sorted(
        dates, reverse=True
    )
    assert Version(PYPROJECT["project"]["version"]) in [n for n, _ in released], "the current version has no section"


def _floor(requirements: list[str], name: str) -> Version:
    for text in requirements:
        requirement = Requirement(text)
        if requirement.name == name:
            floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
            assert floors, f"{name} has no floor"
            return floors[0]
    raise AssertionError(f"{name} is not a dependency")


def test_dependency_floors_work_together() -> None:
    project = PYPROJECT["project"]
    plotly = _floor(project["dependencies"], "plotly")
    for extra in ("images", "dev"):
        if _floor(project["optional-dependencies"][extra], "kaleido") >= Version("1.0"):
            assert plotly >= Version("6.1.1"), "kaleido 1.x needs plotly 6.1.1 or later"
    for name in (
        "nbclient",
        "nbformat",
        "ipykernel",
        "submitit",
    ):  # the notebook test's tools; the Slurm launcher's tests
        _floor(project["optional-dependencies"]["dev"], name)


def test_the_deprecation_warning_is_filtered_only_where_our_models_are_built() -> None:
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    from interp_init import InitConfig, ModelConfig, build_model

    assert not any(
        "HookedTransformer" in f for f in PYPROJECT["tool"]["pytest"]["ini_options"].get("filterwarnings", [])
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_model(ModelConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, d_mlp=16), InitConfig(gamma=0.5), seed=0)
    assert not [w for w in caught if "HookedTransformer is deprecated" in str(w.message)]
    with pytest.warns(
        DeprecationWarning, match="HookedTransformer is deprecated"
    ):  # a model of the user's own: not hidden
        HookedTransformer(
            HookedTransformerConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, n_ctx=9, d_vocab=201, act_fn="relu")
        )
