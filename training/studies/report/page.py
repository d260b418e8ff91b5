"""The report's page: every section run on the runs and assembled into one offline HTML file.

:func:`write_report` loads the run folders, runs each section of :data:`SECTIONS` (with
at most :attr:`~training.studies.report.config.ReportConfig.threads` threads:
:func:`limited_threads`) and writes the page that :func:`build_page` assembles: a table
first what the runs' preset means and the one table of the runs, each under the short
label the page uses after (:mod:`training.studies.report.outcomes`), then one ``<section>``
per builder, its cells side by side.  plotly.js, circuitsvis' bundle and the figures are
inlined once each, gzip-packed (:mod:`training.studies.report.page`), so the page makes no
request to any network address; with ``images`` every figure is also written as a static
image (:mod:`training.studies.report.page`).
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
import torch

from interp_init.outputs import check_distinct_outputs, check_output_file, check_output_folder, write_output, write_page
from interp_init.paths import check_path_names
from training.studies.report.cells import (
    LOADER,
    READY,
    Cell,
    Context,
    NotApplicable,
    Run,
    Section,
    circuitsvis_bundle,
    figures_js,
    inline_js,
    load_runs,
    packed_script,
    plotly_js,
)
from training.studies.report.config import IMAGE_FORMATS, ReportConfig, check_per_pair
from training.studies.report.mechanisms import (
    section_attention,
    section_condensation,
    section_eigenvalues,
    section_embedding,
    section_flow,
    section_key_masking,
    section_residual_similarity,
    section_second_anchor_masking,
    section_spectra,
    section_stable_ranks,
    section_value_similarity,
)
from training.studies.report.outcomes import (
    preset_lead,
    runs_table,
    section_accuracies,
    section_curves,
    section_race,
    section_verdict,
)

# ------------------------------------------------------------------ images
# Static images of the report's figures: PNG, SVG or PDF through plotly's exporter kaleido.
#
# kaleido drives a system Chromium or Chrome (Debian: ``apt-get install chromium``; found on
# ``PATH``, or set ``BROWSER_PATH``).  Without kaleido or a browser, :func:`write_images`
# raises :class:`StaticExportUnavailable` saying what to install, and
# :func:`static_export_problem` says so without raising.

#: The purpose the report's images are recorded with (a later report may replace them).
IMAGE_PURPOSE = "report image"


class StaticExportUnavailable(RuntimeError):
    """kaleido or a Chromium/Chrome for it is missing; the message says what to install."""


def slug(text: str) -> str:
    """``text`` as a file or element name: runs of other characters than letters, digits, ``_.-`` become ``-``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def _find_browser() -> str | None:
    explicit = os.environ.get("BROWSER_PATH")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    found = next(
        filter(
            None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"))
        ),
        None,
    )
    if found:
        return found
    try:
        from choreographer.browsers.chromium import Chromium

        return Chromium.find_browser(skip_local=False)
    except ImportError:  # pragma: no cover - choreographer comes with kaleido
        return None


def static_export_problem() -> str | None:
    """``None`` when figures can be written as PNG/SVG/PDF here, else what to install."""
    if importlib.util.find_spec("kaleido") is None:
        return "static images need kaleido: pip install kaleido (or pip install 'interp-init[images]'), and a Chromium or Chrome (Debian: apt-get install chromium)"
    browser = _find_browser()
    if browser is None:
        where = f"BROWSER_PATH={os.environ['BROWSER_PATH']!r} is not a file; " if os.environ.get("BROWSER_PATH") else ""
        return (
            f"static images need a Chromium or Chrome for kaleido and none was found: {where}install Debian's chromium "
            "(apt-get install chromium) or Google Chrome, or set BROWSER_PATH to its executable "
            "(kaleido.get_chrome_sync() would download one, which needs internet access)"
        )
    return None


def write_images(
    figures: dict[str, go.Figure],
    out_dir: str | Path,
    image_format: str = "png",
    *,
    width: int = 900,
    height: int | None = None,
    scale: float = 2.0,
    option: str = "--images",
) -> list[Path]:
    """Write each figure to ``out_dir/<name>.<image_format>`` (PNG, SVG or PDF) with one
    headless browser; returns the paths.  Each goes through the output guard: a file it
    did not write is never replaced, nor is one written into a folder of runs
    (:func:`check_images_folder`; ``option`` is the flag the messages name).

    Raises :class:`StaticExportUnavailable` naming what to install when kaleido or a
    Chromium/Chrome is missing.  Works offline: MathJax is off and plotly.js comes from
    the installed plotly package.
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    problem = static_export_problem()
    if problem:
        raise StaticExportUnavailable(problem)
    import tempfile

    import kaleido

    out = Path(out_dir)
    names = [f"{slug(name)}.{image_format}" for name in figures]
    check_output_folder(out, IMAGE_PURPOSE, names, option)
    check_distinct_outputs((out / name, f"the figure {name}") for name in names)
    with tempfile.TemporaryDirectory(
        prefix="interp-init-images-"
    ) as scratch:  # kaleido writes there; the guard moves each file in
        jobs = [
            {
                "fig": fig,
                "path": Path(scratch) / name,
                "opts": {
                    "format": image_format,
                    "width": width,
                    "height": height or fig.layout.height or 500,
                    "scale": scale,
                },
            }
            for name, fig in zip(names, figures.values(), strict=True)
        ]
        if jobs:
            kaleido.write_fig_from_object_sync(
                jobs, kopts={"mathjax": False, "path": _find_browser()}, cancel_on_error=True
            )
        return [write_output(out / name, (Path(scratch) / name).read_bytes(), IMAGE_PURPOSE, option) for name in names]


def check_images_folder(out_dir: str | Path, image_format: str = "png", option: str = "--images") -> Path:
    """Refuse a folder for the report's images (before any work): a run, sweep,
    reproduction or search folder, one inside a run folder or holding folders of runs, one
    that cannot be written, or one holding a ``.<image_format>`` file that is not a report
    image this toolkit wrote (:func:`interp_init.outputs.check_output_folder`)."""
    out = Path(out_dir)
    check_path_names(out, option)
    held = sorted(p.name for p in out.glob(f"*.{image_format}")) if out.is_dir() else []
    return check_output_folder(out, IMAGE_PURPOSE, held, option)


def check_image_file(out: str | Path, option: str = "--out", formats: tuple[str, ...] = ("png",)) -> Path:
    """Refuse one image path (before any work): not a file of one of ``formats`` (``.png`` unless
    told) named with letters, digits and ``_ . -`` only, in a run or study folder, or over a file
    this toolkit did not write (:func:`interp_init.outputs.check_output_folder`); ``ValueError``
    naming ``option``."""
    out = Path(out)
    if out.suffix.lstrip(".") not in formats:
        names = ["." + f for f in formats]
        listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        raise ValueError(f"{option} {out}: name a {listed} file")
    check_path_names(out, option)
    check_output_folder(out.parent, IMAGE_PURPOSE, [out.name], option)
    if slug(out.stem) != out.stem:
        raise ValueError(
            f"{option} {out}: name the file with letters, digits and _ . - only (e.g. {slug(out.stem)}{out.suffix})"
        )
    return out


#: The page's sections, in order: what each run learned, how it computes it, and its weights.
SECTIONS: tuple[Callable[[Context], Section], ...] = (
    section_verdict,
    section_curves,
    section_race,
    section_accuracies,
    section_attention,
    section_flow,
    section_key_masking,
    section_second_anchor_masking,
    section_residual_similarity,
    section_value_similarity,
    section_condensation,
    section_embedding,
    section_eigenvalues,
    section_stable_ranks,
    section_spectra,
)

#: plotly.js options of every figure: a short mode bar (download as PNG, zoom, pan, reset)
#: that shows only while the pointer is over the figure, so that it never sits on the
#: titles of narrow side-by-side figures.
PLOTLY_CONFIG = {
    "displayModeBar": "hover",
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": [
        "select2d",
        "lasso2d",
        "zoomIn2d",
        "zoomOut2d",
        "autoScale2d",
        "toggleSpikelines",
        "hoverClosestCartesian",
        "hoverCompareCartesian",
    ],
}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 2em; }
h2.runs { margin-top: 1em; }
h3 { font-size: 0.95em; margin: 0 0 6px 0; color: #444; overflow-wrap: anywhere; }
p.what { color: #444; max-width: 70em; }
.lead { background: #f4f6fb; border-left: 4px solid #636efa; padding: 4px 14px; max-width: 70em; }
.lead p { margin: 8px 0; }
.lead code { white-space: nowrap; }
.problem { color: #b00; font-weight: 600; }
p.shared { color: #555; font-size: 0.85em; max-width: 70em; }
nav { margin-top: 1em; }
nav a { margin-right: 1em; }
footer.meta { margin-top: 3em; border-top: 1px solid #ddd; padding-top: 8px; }
.grid { display: grid; gap: 16px; grid-template-columns: repeat(var(--wide, 1), minmax(0, 1fr)); }
@media (max-width: 1250px) { .grid { grid-template-columns: repeat(var(--medium, 1), minmax(0, 1fr)); } }
@media (max-width: 760px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.table-wrap { overflow-x: auto; max-width: 100%; }
.cell { border: 1px solid #e4e4e4; border-radius: 6px; padding: 8px; min-width: 0; overflow-x: auto; }
.note { color: #775; font-style: italic; font-size: 0.9em; }
table.scores, table.runs { border-collapse: collapse; font-size: 0.85em; margin: 6px 0; max-width: 100%; }
table.scores th, table.scores td, table.runs th, table.runs td { border-bottom: 1px solid #eee; padding: 2px 6px; text-align: right; vertical-align: top; }
/* headers wrap between words (never inside one), so that no table is wider than its cell;
   a cell's value stays on one line, the verdict's evidence wraps */
table.scores th, table.runs th { white-space: normal; overflow-wrap: normal; word-break: normal; }
table.scores td, table.runs td { white-space: nowrap; }
#verdict table.scores td, table.scores.wrap td { white-space: normal; overflow-wrap: normal; word-break: normal; }
/* but a row's name (a run's label: "symmetric/small-init" would break at its hyphen) */
table.scores td:first-child, #verdict table.scores td:first-child { white-space: nowrap; }
table.scores.wrap-names td:first-child { white-space: normal; }
table.scores th, table.runs th { font-weight: 600; }
table.scores td:first-child, table.runs td:first-child, #verdict table.scores td, #verdict table.scores th,
table.scores th:first-child, table.runs th:first-child { text-align: left; }
p.verdict { font-weight: 600; }
/* circuitsvis' head selector sizes each head's tile to 1/12 of its container, narrower
   than the tile's label ("L0H0") in a side-by-side cell: fixed tiles that wrap instead */
.circuitsvis-view > div > h3:first-child + div { margin-left: 0 !important; margin-right: 0 !important; }
.circuitsvis-view > div > h3:first-child + div > div { flex: 0 0 64px !important; width: 64px !important; max-width: 64px !important; }
/* its zoomed pattern sizes itself to its content ("width: initial" in a flex row), which a
   chart.js canvas does not give it: the cell's width instead, as tall as wide */
.circuitsvis-view div[style*="aspect-ratio"] { width: 100% !important; flex: 1 1 100%; }
.meta { color: #666; font-size: 0.85em; }
"""


@dataclass
class Page:
    """The report's HTML and its figures by name (for :func:`write_images`)."""

    html: str
    figures: dict[str, go.Figure]


def svg_only(fig: go.Figure) -> go.Figure:
    """``fig`` with any WebGL ``scattergl`` trace (plotly express picks it past 1000 points)
    redrawn as an SVG ``scatter``: WebGL needs a GPU or a software fallback that headless
    and locked-down browsers may refuse, SVG draws everywhere."""
    if not any(trace.type == "scattergl" for trace in fig.data):
        return fig
    traces = [
        go.Scatter({k: v for k, v in trace.to_plotly_json().items() if k != "type"}, skip_invalid=True)
        if trace.type == "scattergl"
        else trace
        for trace in fig.data
    ]
    return go.Figure(data=traces, layout=fig.layout)


#: Pixels above every figure's plot area and title kept free for plotly's mode bar, which
#: browsers without hover (touch screens, headless) show at all times.
MODEBAR_ROOM = 28


def _room_for_modebar(fig: go.Figure) -> go.Figure:
    """``fig`` with its top margin grown by :data:`MODEBAR_ROOM` and its title placed just
    above the plot area, so that the mode bar (top right) never sits on a title."""
    top = fig.layout.margin.t
    fig.update_layout(margin=dict(t=(80 if top is None else top) + MODEBAR_ROOM))
    if fig.layout.title.text:
        fig.update_layout(title=dict(yref="paper", y=1, yanchor="bottom", pad=dict(b=8)))
    return fig


def _figure_div(element: str, fig: go.Figure, height: int) -> str:
    """The element a figure is drawn into: the figure's own width and height where it sets
    them (as plotly's ``to_html`` does), else the cell's width and ``height``."""
    width = f"{fig.layout.width}px" if fig.layout.width else "100%"
    tall = f"{fig.layout.height}px" if fig.layout.height else f"{height}px"
    return f'<div id="{element}" class="plotly-graph-div" style="height: {tall}; width: {width};"></div>'


def build_page(runs: list[Run], config: ReportConfig, out_dir: str | Path | None = None) -> Page:
    """Run every section on ``runs`` and assemble the page; the run table shows each run's
    folder relative to ``out_dir`` (the report's folder; default the working directory)."""
    ctx = Context(runs, config)
    sections = []
    # the sections the runs' tasks have (Task.report_sections); the others show why they are empty
    wanted = {key for run in runs for key in run.task.report_sections}
    known = {*wanted, *ctx.known_sections()}
    for builder in SECTIONS:
        t0 = time.perf_counter()
        try:
            ctx.section = builder.__name__.removeprefix("section_")
            if ctx.section in known and ctx.section not in wanted:
                raise NotApplicable(f"not a section of the task(s) {sorted({r.record.config.data.task for r in runs})}")
            section = builder(ctx)
        except NotApplicable as reason:
            doc = (builder.__doc__ or builder.__name__).strip().splitlines()[0]
            section = Section(ctx.section, doc, "", [Cell(note=str(reason))], combined=True)
        section.seconds = time.perf_counter() - t0
        sections.append(section)

    figures: dict[str, go.Figure] = {}
    elements: dict[str, go.Figure] = {}  # element id -> figure, drawn by the packed figures script
    body: list[str] = []
    uses_circuitsvis = False
    n = len(runs)
    for section in sections:
        cells_html = []
        names = ["all runs"] if section.combined else [r.name for r in runs]
        for name, cell in zip(names, section.cells, strict=True):
            parts = [] if section.combined else [f"<h3>{html.escape(name)}</h3>"]
            if cell.figure is not None:
                cell.figure = _room_for_modebar(svg_only(cell.figure))
                fig_name = section.key if section.combined else f"{section.key}-{slug(name)}"
                figures[fig_name] = cell.figure
                elements[f"fig-{fig_name}"] = cell.figure
                parts.append(_figure_div(f"fig-{fig_name}", cell.figure, cell.height))
            if cell.html:
                uses_circuitsvis |= "CircuitsVis.render(" in cell.html
                parts.append(cell.html)
            if cell.note:
                parts.append(f'<p class="note">{html.escape(cell.note)}</p>')
            cells_html.append(f'<div class="cell">{"".join(parts)}</div>')
        # a fixed number of columns (plotly sizes a figure once, as the page is parsed): every
        # run side by side on a wide window (at most 4, or the section's own limit), 2 on a
        # medium one, 1 on a narrow one
        columns = 1 if section.combined else min(n, section.columns or n)
        style = f"--wide: {min(columns, 4)}; --medium: {min(columns, 2)};"
        body.append(
            f'<section id="{section.key}"><h2>{html.escape(section.title)}</h2>'
            f'<p class="what">{html.escape(section.sentence)}</p>'
            f'<div class="grid" style="{style}">{"".join(cells_html)}</div></section>'
        )

    nav = "".join(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s in sections)
    trace_types = {trace.type or "scatter" for fig in figures.values() for trace in fig.data}
    scripts = [packed_script(inline_js(plotly_js(trace_types)), "plotly.js")] if figures else []
    if uses_circuitsvis:
        scripts.append(packed_script(circuitsvis_bundle(), "circuitsvis"))
    if figures:
        scripts.append(packed_script(figures_js(elements, PLOTLY_CONFIG), "figures"))
    timing = ", ".join(f"{s.key} {s.seconds:.1f}s" for s in sections)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(config.title)}</title>
<style>{_STYLE}</style>
{READY}
</head>
<body>
<h1>{html.escape(config.title)}</h1>
<p id="unpack-problem" class="problem" hidden></p>
{preset_lead(runs)}
<h2 class="runs">The runs</h2>
{runs_table(runs, out_dir)}
<nav>{nav}</nav>
{"".join(body)}
<footer class="meta">{n} run(s); probes on {config.per_pair} inputs per anchor pair (seed {config.seed}), projection {config.projection}.
Section times: {html.escape(timing)}. Figures: plotly.js; attention views: circuitsvis; both inlined in this file, which needs no network.</footer>
{"".join(scripts)}
{LOADER}
</body>
</html>
"""
    return Page(page, figures)


@contextlib.contextmanager
def limited_threads(threads: int | None) -> Iterator[None]:
    """Run the block with at most ``threads`` torch, BLAS and OpenMP threads (``None``:
    unchanged), then restore the previous settings."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits  # scikit-learn's dependency

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def write_report(
    run_dirs: Iterable[str | Path],
    out_path: str | Path,
    config: ReportConfig | None = None,
    *,
    images: str | Path | None = None,
    image_format: str = "png",
) -> Path:
    """Write the HTML report of ``run_dirs`` to ``out_path`` and return its path.

    ``run_dirs``: run folders, or folders holding run folders (see :func:`find_run_dirs`).
    With ``images``, every figure is also written there as ``image_format`` (see
    :func:`write_images`).
    """
    config = config or ReportConfig()
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    out = check_output_file(out_path, "report")  # never replaces what is not a previous report
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(
            f"--out {out_path}: the report is one HTML page; give a file name ending in .html (e.g. {out.with_suffix('.html')})"
        )
    if images is not None:  # every output is checked before the work
        check_distinct_outputs([(out, "--out"), (images, "--images")])
        check_images_folder(images, image_format)
    runs = load_runs(run_dirs, device=config.device)
    check_per_pair(config.per_pair, runs)
    with limited_threads(config.threads):
        page = build_page(runs, config, out_dir=out.parent)
    write_page(out, page.html, "report")
    if images is not None:
        write_images(page.figures, images, image_format)
    return out
