"""The documentation site (mkdocs.yml): a plain ``mkdocs build`` builds it strictly and quietly,
its API reference is generated from the docstrings (one page per module, found on disk at build
time) and renders in a real headless Chromium (examples as highlighted code, signatures one
parameter a line, pointers to the docs as links), the site opened from disk (``file://``)
searches with no network, and its notebook page shows the stored outputs of the quickstart
notebook, its circuit views drawn. The build and the browser are slow (``.ci/run`` runs them
with the other slow tests); the browser tests skip, saying why, where Chromium, chromedriver or
selenium is missing (the report tests' browser, ``tests/training/test_report.py``)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
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
        name
        for name in names
        if (inspect.isfunction(getattr(module, name)) or inspect.isclass(getattr(module, name)))
        and getattr(module, name).__module__ == dotted
    ]


def _summary(obj: object) -> str:
    """A docstring's first paragraph as the page shows it: a Sphinx role as its name (the last
    part after ``~``; docs/griffe_roles.py), code spans and emphasis as plain text."""
    text = inspect.getdoc(obj).split("\n\n", 1)[0].replace("\n", " ")
    text = re.sub(
        r":(?:py:)?\w+:`(~?)([\w.]+)((?:\(\))?)`", lambda m: (m[2].rsplit(".", 1)[-1] if m[1] else m[2]) + m[3], text
    )
    return re.sub(r"[`*]", "", text).strip()


@dataclass(frozen=True)
class Build:
    """A built site and what ``mkdocs build`` printed."""

    site: Path
    output: str


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """A plain ``mkdocs build --strict`` of this checkout (any warning: a broken link or anchor, a
    reference that does not resolve, a docstring griffe cannot read, fails it), in an environment
    without the variables that silence the theme's and the plugins' banners."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_MKDOCS_2_WARNING", "DISABLE_MKDOCS_2_WARNING")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    return Build(out, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def site(build: Build) -> Path:
    return build.site


def _open(browser, page: Path) -> None:  # noqa: ANN001 - a selenium WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")
    browser.get_log("performance")
    browser.get(page.as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")


def _console_errors(browser) -> list[dict]:  # noqa: ANN001
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _network_requests(browser) -> list[str]:  # noqa: ANN001
    """The URLs the page asked for that are not on disk (file://) or inline (data:)."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return [u for u in urls if u.split(":", 1)[0] in ("http", "https", "ws", "wss")]


@pytest.mark.slow
def test_a_plain_build_prints_only_its_log(build: Build) -> None:
    """No banner (Material's end-of-life notice, ProperDocs' notice) and no hint to install a
    formatter: mkdocs.yml turns the banners off, the docs extra brings ruff."""
    lines = [line for line in build.output.splitlines() if line.strip()]
    assert lines and all(line.startswith("INFO") for line in lines), "\n".join(lines[:40])
    assert "Black or Ruff" not in build.output


@pytest.mark.slow
def test_the_site_has_a_reference_page_per_module_and_the_rendered_notebook(site: Path) -> None:
    for package in ("interp_init", "probes", "training"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if any(p.startswith("_") and p != "__init__" for p in parts):
                continue
            page = (
                site / "reference" / Path(*parts[:-1], "index.html" if parts[-1] == "__init__" else f"{parts[-1]}.html")
            )
            assert page.is_file(), f"no reference page for {path.relative_to(ROOT)}"
    notebook = (site / "examples" / "quickstart.html").read_text(encoding="utf-8")
    assert "layer-0 W_Q stable rank" in notebook and "<b>TrainResult</b>" in notebook  # the stored outputs


@pytest.mark.slow
def test_the_probe_reference_renders_in_headless_chromium(site: Path, browser) -> None:  # noqa: ANN001
    _open(browser, (site / "reference" / Path(*PROBE_MODULE.split("."))).with_suffix(".html"))
    page = browser.execute_script(
        """
        const text = e => e ? e.innerText.replace(/\\s+/g, ' ').trim() : null;
        const objects = {};
        for (const h of document.querySelectorAll('.doc-heading[id]')) {
          const body = h.parentElement.querySelector(':scope > .doc-contents');
          const signature = h.parentElement.querySelector('.doc-signature');
          objects[h.id] = {heading: text(h), signature: text(signature), body: text(body),
                           lines: signature ? signature.innerText.trim().split('\\n') : [],
                           visible: h.getBoundingClientRect().height > 0};
        }
        const module = document.querySelector('.doc-heading[id]').parentElement.querySelector(':scope > .doc-contents');
        const example = [...module.querySelectorAll(':scope > .highlight')].find(b => b.innerText.includes('>>> '));
        return {title: text(document.querySelector('h1')), objects: objects,
                crossrefs: [...document.querySelectorAll('.doc-contents a.autorefs-internal')].map(a => a.getAttribute('href')),
                nav: [...document.querySelectorAll('nav a')].map(a => a.getAttribute('href')),
                paragraphs: [...module.querySelectorAll(':scope > p')].map(p => p.innerText.trim()),
                example: example ? {prompts: example.querySelectorAll('.gp').length, keywords: example.querySelectorAll('.kn, .k').length,
                                    height: example.getBoundingClientRect().height} : null,
                links: [...module.querySelectorAll('a')].map(a => [a.innerText.trim(), a.href])};
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
    # the module's "Example::" is a highlighted Python session, not literal text (docs/griffe_rest.py)
    assert not any(p.endswith("::") for p in page["paragraphs"]), page["paragraphs"]
    example = page["example"]
    assert example and example["height"] > 0 and example["prompts"] >= 5 and example["keywords"] >= 3, example
    # its pointer to the docs is a link to that page and section of the site
    pointer = next(href for text, href in page["links"] if text.startswith("docs/science.md"))
    assert pointer == (site / "science.html").as_uri() + "#the-analyses", pointer
    # a signature is formatted (Black's style, by ruff): each parameter starts a line of its own
    lines = page["objects"][f"{PROBE_MODULE}.masked_run"]["lines"]
    parameters = list(inspect.signature(module.masked_run).parameters)
    assert lines[0] == "masked_run(" and lines[-1].startswith(")"), lines
    assert [m[1] for m in (re.match(r"    (\w+)\b", line) for line in lines[1:-1]) if m] == parameters, lines
    assert max(map(len, lines)) <= 88, lines
    # the navigation links every probe module's page
    for path in (ROOT / "probes").glob("[!_]*.py"):
        assert f"{path.stem}.html" in page["nav"], path.stem
    assert _console_errors(browser) == []
    assert _network_requests(browser) == []


@pytest.mark.slow
def test_no_reference_page_shows_rest_markup(site: Path) -> None:
    """No paragraph ends in a literal block's ``::``, no reST hyperlink or pointer to the docs
    is left as text, on any reference page."""
    shown = []
    for page in sorted((site / "reference").rglob("*.html")):
        text = re.sub(r"<pre.*?</pre>|<a [^>]*>.*?</a>", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"<[^>]+>", "", text)
        shown += [(page.name, m[0]) for m in re.finditer(r"\S*::\s*$|`_|\bdocs/[\w-]+\.md\S*", text, re.M)]
    assert shown == [], shown[:20]


@pytest.mark.slow
def test_the_site_opened_from_disk_searches_offline(site: Path, browser) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    remote = [
        (page.relative_to(site).as_posix(), m[0])
        for page in site.rglob("*.html")
        for m in re.finditer(
            r"<(?:script|img|iframe)[^>]* src=\"(?:https?:)?//[^\"]*\"|<link[^>]* href=\"(?:https?:)?//[^\"]*\"",
            page.read_text(encoding="utf-8"),
        )
    ]
    assert remote == [], remote[:10]  # nothing loads from a server: no CDN, no web font
    _open(browser, site / "index.html")
    box = browser.find_element(By.CSS_SELECTOR, "input.md-search__input")
    assert box.is_displayed()
    box.click()
    box.send_keys("stable rank")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
    found = browser.execute_script(
        "return [...document.querySelectorAll('.md-search-result__item a')].map(a => new URL(a.href).pathname)"
    )
    assert any(path.endswith("/reference/probes/rank.html") for path in found), found
    assert _console_errors(browser) == []
    assert _network_requests(browser) == []


@pytest.mark.slow
def test_the_notebook_page_draws_its_views_and_tables(site: Path, browser) -> None:  # noqa: ANN001
    """Both circuit views draw their zoomed pattern and keep its size through a window made
    narrower and wide again and through a full-page screenshot (which resizes the page); no
    table cell shows ``<NA>``; the page ends at its footer."""
    zoomed = """return [...document.querySelectorAll('[id^="circuits-vis-"] canvas')]
        .map(c => ({width: c.getBoundingClientRect().width, height: c.getBoundingClientRect().height,
                    painted: (() => { const x = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                                      let n = 0; for (let i = 3; i < x.length; i += 4) n += x[i] > 0; return n / (x.length / 4); })()}))
        .filter(c => c.width > 150)"""
    size = browser.get_window_size()
    try:
        _open(browser, site / "examples" / "quickstart.html")
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(browser, 30).until(lambda d: len(d.execute_script(zoomed)) == 2)
        first = browser.execute_script(zoomed)
        assert all(v["height"] > 300 and v["painted"] > 0.5 for v in first), first
        browser.set_window_size(700, size["height"])
        browser.set_window_size(size["width"], size["height"])
        WebDriverWait(browser, 10).until(
            lambda d: [round(v["width"]) for v in d.execute_script(zoomed)] == [round(v["width"]) for v in first]
        )
        browser.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True})
        after = browser.execute_script(zoomed)
        assert [round(v["height"]) for v in after] == [round(v["height"]) for v in first], (first, after)
        page = browser.execute_script(
            """return {cells: [...document.querySelectorAll('.jp-OutputArea-output td')].map(td => td.innerText),
                       blank: document.documentElement.scrollHeight - (document.querySelector('footer').getBoundingClientRect().bottom + scrollY)}"""
        )
        assert page["cells"] and "<NA>" not in page["cells"] and "None" not in page["cells"], page["cells"]
        assert page["blank"] < 5, page["blank"]
        assert _console_errors(browser) == []
        assert _network_requests(browser) == []
    finally:
        browser.set_window_size(size["width"], size["height"])
