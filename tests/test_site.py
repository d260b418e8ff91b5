"""The documentation site (mkdocs.yml): it builds strictly, its API reference is generated from
the docstrings (one page per module, found on disk at build time) and renders in a real
headless Chromium, and its notebook page shows the stored outputs of the quickstart notebook.
The build and the browser are slow (``.ci/run`` runs them with the other slow tests); the
browser test skips, saying why, where Chromium, chromedriver or selenium is missing (the
report tests' browser, ``tests/training/test_report.py``)."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
RENDERED = ROOT / "docs" / "examples" / "quickstart.ipynb"
#: The probe module whose reference page the browser opens.
PROBE_MODULE = "probes.masking"


def test_the_rendered_notebook_is_the_example_run() -> None:
    """docs/examples/quickstart.ipynb (what the site shows) holds the example's cells, executed
    (``python docs/render_notebook.py`` writes it)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[dev]')")
    source, rendered = nbformat.read(NOTEBOOK, as_version=4), nbformat.read(RENDERED, as_version=4)
    assert [(c.cell_type, c.source) for c in rendered.cells] == [(c.cell_type, c.source) for c in source.cells], (
        "docs/examples/quickstart.ipynb is out of date: run python docs/render_notebook.py"
    )
    code = [c for c in rendered.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert all(c.outputs for c in code[1:]), "a code cell of the rendered notebook has no output"
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)


def _public_definitions(dotted: str) -> list[str]:
    """The public functions and classes ``dotted`` defines (what its reference page documents)."""
    module = importlib.import_module(dotted)
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return [
        name for name in names
        if (inspect.isfunction(getattr(module, name)) or inspect.isclass(getattr(module, name))) and getattr(module, name).__module__ == dotted
    ]  # fmt: skip


def _summary(obj: object) -> str:
    """A docstring's first paragraph as the page shows it: a Sphinx role as its name (the last
    part after ``~``; docs/griffe_roles.py), code spans and emphasis as plain text."""
    text = inspect.getdoc(obj).split("\n\n", 1)[0].replace("\n", " ")
    text = re.sub(r":(?:py:)?\w+:`(~?)([\w.]+)((?:\(\))?)`", lambda m: (m[2].rsplit(".", 1)[-1] if m[1] else m[2]) + m[3], text)
    return re.sub(r"[`*]", "", text).strip()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` of this checkout: any warning (a broken link or anchor, a
    reference that does not resolve, a docstring griffe cannot read) fails it."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    return out


@pytest.mark.slow
def test_the_site_has_a_reference_page_per_module_and_the_rendered_notebook(site: Path) -> None:
    for package in ("interp_init", "probes", "training"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if any(p.startswith("_") and p != "__init__" for p in parts):
                continue
            page = site / "reference" / Path(*parts[:-1], "index.html" if parts[-1] == "__init__" else f"{parts[-1]}.html")
            assert page.is_file(), f"no reference page for {path.relative_to(ROOT)}"
    notebook = (site / "examples" / "quickstart.html").read_text(encoding="utf-8")
    assert "layer-0 W_Q stable rank" in notebook and "<b>TrainResult</b>" in notebook  # the stored outputs


@pytest.mark.slow
def test_the_probe_reference_renders_in_headless_chromium(site: Path, browser) -> None:  # noqa: ANN001
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")
    browser.get((site / "reference" / Path(*PROBE_MODULE.split("."))).with_suffix(".html").as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")
    page = browser.execute_script(
        """
        const text = e => e ? e.innerText.replace(/\\s+/g, ' ').trim() : null;
        const objects = {};
        for (const h of document.querySelectorAll('.doc-heading[id]')) {
          const body = h.parentElement.querySelector(':scope > .doc-contents');
          const signature = h.parentElement.querySelector('.doc-signature');
          objects[h.id] = {heading: text(h), signature: text(signature), body: text(body),
                           visible: h.getBoundingClientRect().height > 0};
        }
        return {title: text(document.querySelector('h1')), objects: objects,
                crossrefs: [...document.querySelectorAll('.doc-contents a.autorefs-internal')].map(a => a.getAttribute('href')),
                nav: [...document.querySelectorAll('nav a')].map(a => a.getAttribute('href'))};
        """
    )
    assert PROBE_MODULE in page["title"], page["title"]
    module = importlib.import_module(PROBE_MODULE)
    assert _summary(module).split(" (")[0] in page["objects"][PROBE_MODULE]["body"]
    names = _public_definitions(PROBE_MODULE)
    assert "masked_run" in names
    for name in names:
        shown = page["objects"].get(f"{PROBE_MODULE}.{name}")
        assert shown and shown["visible"], f"{PROBE_MODULE}.{name} is not on its reference page"
        assert _summary(getattr(module, name)) in shown["body"], (name, shown["body"][:300])
    # the docstrings' Sphinx roles became links to what they name (docs/griffe_roles.py)
    assert f"#{PROBE_MODULE}.masked_run" in page["crossrefs"], page["crossrefs"]
    signature = page["objects"][f"{PROBE_MODULE}.masked_run"]["signature"]
    for parameter in inspect.signature(module.masked_run).parameters:
        assert parameter in signature, (parameter, signature)
    # the navigation links every probe module's page
    for path in (ROOT / "probes").glob("[!_]*.py"):
        assert f"{path.stem}.html" in page["nav"], path.stem
    # a clean console, but for the search's iframe shim, which the offline browser cannot fetch
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE" and "iframe-worker" not in e["message"]]
    assert errors == [], errors
