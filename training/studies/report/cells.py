"""What a report section is made of, and what the section builders share.

A section (:class:`Section`) is a title, a caption and its cells: one :class:`Cell` for
all runs together, or one per run side by side.  A builder takes the :class:`Context`
(the runs, the :class:`~training.studies.report.config.ReportConfig` and probe inputs cached per
task) and returns its section; :func:`per_run` builds one cell per run and turns a probe
that does not apply to a run (:class:`NotApplicable`, or a probe's ``ValueError``) into a
note in place of its figure.  Each caption says what the papers expect and, through
:func:`measured`, what the runs on the page measured.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from transformer_lens import HookedTransformer

from interp_init.runfolder import CONFIG_FILE, WEIGHTS_FILE, RunFolder
from interp_init.tasks.base import Task
from interp_init.tasks.data import AnchorDataset
from interp_init.tasks.registry import registered_tasks, task_class
from training.studies.records import RunRecord
from training.studies.report.config import ReportConfig
from training.studies.study import run_dirs

# ------------------------------------------------------------------ runs
# The runs a report compares: :func:`find_run_dirs` expands the folders given on the command
# line into run folders, :func:`load_runs` reads each one (its record,
# :class:`training.studies.records.RunRecord`, and, when written, the model) as a :class:`Run`;
# :func:`token_labels` names an input's tokens.


@dataclass
class Run:
    """One run folder as the report sees it: its short label in the report (``name``,
    :func:`run_labels`), its record
    (:class:`training.studies.records.RunRecord`) and its model."""

    name: str
    record: RunRecord
    #: None while the folder has no weights file (a run still training).
    model: HookedTransformer | None

    @cached_property
    def task(self) -> Task:
        """The run's task (from its config)."""
        return self.record.task

    @property
    def status(self) -> str:
        """The status ``metrics.json`` records, or ``no metrics``."""
        return self.record.recorded_status or "no metrics"


#: The most runs one report page compares (a page of 200 took about 290 s and 2 GB to write
#: 66 MB on the development machine: issue 33).
MAX_REPORT_RUNS = 100


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders among ``paths``: a folder with ``config.json`` is a run; a study folder
    stands for the runs it names, any other folder for every run folder below it (sorted)
    that no study in it leaves out (:func:`~training.studies.study.run_dirs`).
    One run given twice (the same folder, or a folder and one that holds it) is refused."""
    given: dict[Path, str] = {}
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ValueError(
                f"{path} is not a folder; pass run folders (each with {CONFIG_FILE}) or a folder that holds them"
            )
        below = run_dirs(path)
        if not below:
            raise ValueError(
                f"{path} holds no run folder (no {CONFIG_FILE} in it or below it); train a run first (interp-init train --out DIR)"
            )
        for run in below:
            key = run.resolve()
            if key in given:
                twice = f"as {given[key]} and as {raw}" if given[key] != str(raw) else f"as {raw}"
                raise ValueError(
                    f"the run {run} is given twice ({twice}): a report compares each run once; give each run folder (or a folder holding it) once"
                )
            given[key] = str(raw)
    unique = list(given)
    if not unique:
        raise ValueError("no run folder given; pass at least one RUN_DIR")
    if len(unique) > MAX_REPORT_RUNS:  # one page of 200 runs took about 290 s and 2 GB to write 66 MB
        raise ValueError(
            f"{len(unique)} run folders found, more than the {MAX_REPORT_RUNS} one report page compares (each run adds about 1.5 s "
            "and 0.3 MB); pass fewer folders (some seeds or grid values, or a phase diagram of a sweep: interp-init phase-diagram)"
        )
    return unique


def run_labels(paths: Sequence[Path]) -> list[str]:
    """Each run's short label in the report: its folder below the runs' common parent
    (``symmetric/small-init``); a lone run, its folder's name.  The label names the run
    everywhere on the page; its settings are in the page's one table of runs."""
    if len(paths) == 1:
        return [paths[0].name]
    parts = [p.parts for p in paths]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    return ["/".join(p[common:]) for p in parts]


def load_runs(run_dirs: Iterable[str | Path], device: str = "cpu") -> list[Run]:
    """:class:`Run` of each run folder (see :func:`find_run_dirs`); a folder without
    weights yet (a run still training) comes without a model."""
    paths = find_run_dirs(run_dirs)
    records = [RunRecord.read(path) for path in paths]
    names = run_labels(paths)
    models = [
        f.load_model(device=device) if f.weights_path.is_file() else None for f in (RunFolder(r.path) for r in records)
    ]
    return [Run(*run) for run in zip(names, records, models, strict=True)]


def token_labels(dataset: AnchorDataset, row: int = 0) -> list[str]:
    """Labels of one input's tokens: for the anchor tasks the key and anchors are marked
    (``x=57``, ``a1=4``); another task's samples are labelled by the task
    (:meth:`interp_init.tasks.base.Task.token_labels`)."""
    tokens = dataset.tokens[row].tolist()
    if not isinstance(dataset, AnchorDataset):
        return task_class(dataset.task)().token_labels(tokens)
    p = int(dataset.key_positions[row])
    labels = [str(t) for t in tokens]
    labels[p] = f"x={tokens[p]}"
    labels[p + 1] = f"a1={tokens[p + 1]}"
    labels[p + 2] = f"a2={tokens[p + 2]}"
    return labels


#: Colours of the runs, in order (plotly's default qualitative palette).
RUN_COLOURS = (
    "#636efa",
    "#EF553B",
    "#00cc96",
    "#ab63fa",
    "#FFA15A",
    "#19d3f3",
    "#FF6692",
    "#B6E880",
    "#FF97FF",
    "#FECB52",
)


class NotApplicable(Exception):  # noqa: N818 - a reason shown in the report, not an error
    """A probe that does not apply to a run; its message is shown in the report."""


@dataclass
class Cell:
    """What one section shows for one run (or for all runs together)."""

    figure: go.Figure | None = None
    html: str = ""
    note: str = ""
    height: int = 360


@dataclass
class Section:
    """One part of the page: its anchor ``key``, title, caption and cells."""

    key: str
    title: str
    sentence: str
    #: One cell for all runs together, or one per run (side by side).
    cells: list[Cell] = field(default_factory=list)
    combined: bool = False
    #: At most this many cells side by side (None: every run's, at most 4).
    columns: int | None = None
    seconds: float = 0.0


@dataclass
class Context:
    """What the section builders share: the runs, the config and per-task probe inputs."""

    runs: list[Run]
    config: ReportConfig
    _cache: dict = field(default_factory=dict)
    #: The section being built (its builder's name without ``section_``); runs whose task
    #: lacks it (``Task.report_sections``) get a note instead of a cell.
    section: str = ""

    def known_sections(self) -> set[str]:
        """The sections some registered task lists (a section no task lists applies to every run)."""
        return {key for name in registered_tasks() for key in task_class(name).report_sections}

    def applies(self, run: Run) -> bool:
        """Whether the section being built is one of ``run``'s task's sections."""
        return self.section not in self.known_sections() or self.section in run.task.report_sections

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def balanced(self, run: Run) -> AnchorDataset:
        """The run's task's probe inputs (the anchor tasks: ``per_pair`` inputs of every pair)."""
        return self.cached(
            ("balanced", run.task),
            lambda: run.task.probe_inputs(self.config.per_pair, self.config.seed).to(self.config.device),
        )

    def sample(self, run: Run) -> AnchorDataset:
        """The one input the run's task draws attention and information flow for."""
        return self.cached(("sample", run.task), lambda: run.task.sample_input().to(self.config.device))


def per_run(ctx: Context, build: Callable[[Run, Context], Cell]) -> list[Cell]:
    """``build``'s cell of each run; a note instead where the run has no model or the probe does not apply."""
    cells = []
    for run in ctx.runs:
        if run.model is None:
            cells.append(Cell(note=f"no model: no {WEIGHTS_FILE} in {run.record.path} yet (the run has not finished)"))
            continue
        if not ctx.applies(run):
            cells.append(Cell(note=f"not a section of the {run.record.config.data.task!r} task"))
            continue
        try:
            cells.append(build(run, ctx))
        except NotApplicable as reason:
            cells.append(Cell(note=str(reason)))
        except ValueError as err:  # a probe's clear refusal of this model or input
            cells.append(Cell(note=f"not applicable to this run: {err}"))
    return cells


def measured(ctx: Context, what: str, value: Callable[[Run], str | None], *, needs_model: bool = True) -> str:
    """A caption's measured part, `` Measured here, <what>: <run> <value>; ...``, over the runs
    whose ``value`` is known (not ``None``; with ``needs_model``, only runs with a model, and
    not where the probe does not apply); ``""`` where no run has one."""
    items = []
    for run in ctx.runs:
        if (needs_model and run.model is None) or not ctx.applies(run):
            continue
        try:
            text = value(run)
        except (NotApplicable, ValueError):
            continue
        if text is not None:
            items.append(f"{run.name} {text}")
    return f" Measured here, {what}: {'; '.join(items)}." if items else ""


#: What a table cell shows where a value is missing (None, NaN, pandas' NA): a dash, never
#: ``None`` or ``<NA>``; a table whose missing values mean something (an epoch not reached)
#: says so in words before it gets here.
MISSING = "–"


def table_cell(value: Any, digits: int = 3) -> str:
    """One table cell as the page shows it: floats to ``digits`` places, booleans as yes/no,
    a missing value as :data:`MISSING`."""
    if value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value))):
        return MISSING
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}f}"
    return str(value)


def html_table(frame: pd.DataFrame, digits: int = 3, *, wrap: bool = False, wrap_names: bool = False) -> str:
    """``frame`` as the page's compact score table (every cell through :func:`table_cell`);
    a cell's text stays on one line unless ``wrap`` (between words, for narrow cells), and
    the first column's (a row's name, such as a run's label, which would break at a hyphen)
    unless ``wrap_names`` too."""
    shown = frame.astype(object).map(lambda value: table_cell(value, digits))
    classes = ["scores", *(["wrap"] if wrap else []), *(["wrap-names"] if wrap and wrap_names else [])]
    return shown.to_html(index=False, border=0, classes=classes)


def compact(fig: go.Figure, height: int = 340, title: str | None = None) -> go.Figure:
    """``fig`` at ``height`` pixels with small margins (and ``title``, if given)."""
    fig.update_layout(height=height, margin=dict(l=40, r=10, t=40 if title else 20, b=40), title=title)
    return fig


# ------------------------------------------------------------------ inline
# JavaScript the report inlines in its page: plotly's and circuitsvis' bundles and the
# figures, each once, gzip-packed, and circuitsvis views that wait for them.
#
# Nothing is fetched from the network.  plotly.js is plotly's own *cartesian* partial bundle
# (``vendor/plotly-cartesian.min.js``: the trace types bar, box, contour, heatmap, histogram,
# histogram2d, histogram2dcontour, image, pie, scatter, scatterternary and violin; MIT,
# ``vendor/plotly-LICENSE``), a third of the full bundle, used when the page's figures need no
# other trace type and the installed plotly's plotly.js has the same major version; otherwise
# the full bundle of the installed ``plotly`` package.  circuitsvis' bundle comes from the
# installed ``circuitsvis`` package.  Each script is gzip-compressed and base64-encoded into a
# ``<script type="application/x-gzip-base64">`` element (:func:`packed_script`), which no browser
# runs by itself; :data:`LOADER` unpacks them with the browser's ``DecompressionStream``
# (Chrome and Edge 80, Firefox 113, Safari 16.4 and later) and runs them in page order, then
# the views queued with ``interpInitReady`` (:func:`circuitsvis_view`).  A page of four tiny
# runs is about 1.6 MB instead of 7.4 MB.

_SOURCE_MAP = re.compile(r"^\s*//# sourceMappingURL=.*$", re.MULTILINE)
_VENDOR = Path(__file__).parent / "vendor"
#: plotly's cartesian partial bundle, as published on npm (plotly.js-cartesian-dist-min).
CARTESIAN_BUNDLE = _VENDOR / "plotly-cartesian.min.js"
#: The trace types :data:`CARTESIAN_BUNDLE` draws (its README).
CARTESIAN_TRACES = frozenset(
    (
        "bar",
        "box",
        "contour",
        "heatmap",
        "histogram",
        "histogram2d",
        "histogram2dcontour",
        "image",
        "pie",
        "scatter",
        "scatterternary",
        "violin",
    )
)
_VERSION = re.compile(r"plotly\.js(?: \([^)]*\))? v(\d+)\.(\d+)\.(\d+)")
#: The ``type`` of a packed script's element: data to a browser, run by :data:`LOADER`.
PACKED_TYPE = "application/x-gzip-base64"


def inline_js(source: str) -> str:
    """JavaScript safe to inline in a ``<script>`` element, without a source-map link."""
    return _SOURCE_MAP.sub("", source).replace("</script", "<\\/script")


def plotly_version(source: str) -> tuple[int, int, int]:
    """The version a plotly.js bundle's banner names (``plotly.js v4.1.1``)."""
    found = _VERSION.search(source[:400])
    if found is None:
        raise ValueError("not a plotly.js bundle: its banner names no version (plotly.js vX.Y.Z)")
    major, minor, patch = map(int, found.groups())
    return major, minor, patch


def plotly_js(trace_types: Iterable[str] = ()) -> str:
    """plotly.js for figures of ``trace_types``: the vendored cartesian bundle where it draws
    them all and matches the installed plotly's plotly.js in major version, else the full bundle."""
    import plotly.offline

    full = plotly.offline.get_plotlyjs()
    cartesian = CARTESIAN_BUNDLE.read_text(encoding="utf-8")
    if set(trace_types) <= CARTESIAN_TRACES and plotly_version(cartesian)[0] == plotly_version(full)[0]:
        return cartesian
    return full


def circuitsvis_bundle() -> str:
    """circuitsvis' browser bundle (defines the global ``CircuitsVis``), from the installed package."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    if not path.is_file():
        raise ValueError(
            f"circuitsvis' bundle {path} is missing; reinstall circuitsvis (pip install --force-reinstall circuitsvis)"
        )
    return inline_js(path.read_text(encoding="utf-8"))


def packed_script(source: str, name: str) -> str:
    """``source`` as a gzip-packed, base64-encoded script element that :data:`LOADER` runs
    (``name`` says what it is, in its ``data-name``); the same source packs to the same bytes."""
    packed = base64.b64encode(gzip.compress(source.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
    return f'<script type="{PACKED_TYPE}" data-name="{name}">{packed}</script>'


def unpack_scripts(page: str) -> dict[str, str]:
    """The packed scripts of ``page`` by name (what :data:`LOADER` runs), for tests and tools."""
    found = re.findall(rf'<script type="{re.escape(PACKED_TYPE)}" data-name="([^"]+)">([^<]*)</script>', page)
    return {name: gzip.decompress(base64.b64decode(body)).decode("utf-8") for name, body in found}


#: Defines ``interpInitReady(f)`` in the page head: ``f`` runs once the packed scripts have
#: run (at once after that).  Put before any view that uses it.
READY = """<script>
window.interpInitReady = (() => {
  const queue = [];
  let done = false;
  const run = f => { try { f(); } catch (err) { console.error(err); } };
  const ready = f => (done ? run(f) : queue.push(f));
  ready.release = () => { done = true; queue.splice(0).forEach(run); };
  return ready;
})();
</script>"""

#: Unpacks and runs the page's packed scripts in page order, then the queued views; shows
#: ``#unpack-problem`` where the browser cannot.  Put at the end of the body.
LOADER = (
    """<script>
(async () => {
  const packed = [...document.querySelectorAll('script[type="%s"]')];
  try {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot unpack the page's figures (it lacks DecompressionStream): open it in Chrome or Edge 80, Firefox 113, Safari 16.4 or later");
    }
    const texts = await Promise.all(packed.map(el => {
      const bytes = Uint8Array.from(atob(el.textContent.trim()), c => c.charCodeAt(0));
      return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
    }));
    for (const text of texts) {
      const script = document.createElement("script");
      script.textContent = text;
      document.head.appendChild(script);
    }
    window.interpInitReady.release();
  } catch (err) {
    const problem = document.getElementById("unpack-problem");
    if (problem) { problem.textContent = String(err.message || err); problem.hidden = false; }
    console.error(err);
  }
})();
</script>"""
    % PACKED_TYPE
)


def figures_js(figures: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """JavaScript that draws each plotly figure of ``figures`` (element id -> figure) into its
    element with plotly.js ``config``; the figures' templates are written once and shared."""
    from plotly.io.json import to_json_plotly

    templates: dict[str, int] = {}
    entries = []
    for element, fig in figures.items():
        spec = fig.to_dict()
        layout = dict(spec.get("layout", {}))
        template = layout.pop("template", None)
        index = "null" if template is None else templates.setdefault(to_json_plotly(template), len(templates))
        entries.append(
            f"[{json.dumps(element)}, {to_json_plotly(spec.get('data', []))}, {to_json_plotly(layout)}, {index}]"
        )
    rows = ",\n".join(entries)
    return (
        f"(() => {{\nconst templates = [{', '.join(templates)}];\nconst config = {json.dumps(dict(config))};\n"
        f"const figures = [\n{rows}\n];\n"
        "for (const [id, data, layout, t] of figures) {\n  if (t !== null) layout.template = templates[t];\n"
        "  const element = document.getElementById(id);\n  if (element) Plotly.newPlot(element, data, layout, config);\n}\n})();\n"
    )


def circuitsvis_view(component: str, **props: Any) -> str:
    """A circuitsvis ``component`` as an HTML fragment for a page that loads
    :func:`circuitsvis_bundle` once: inlined in its head, or packed (:func:`packed_script`)
    on a page with :data:`READY` and :data:`LOADER`, where the view waits for the bundle.

    Unlike circuitsvis' own fragment, the container is an explicit ``<div ...></div>``
    (circuitsvis writes a self-closed ``<div/>``, which HTML reads as an open tag, so the
    next view would be nested in it and replaced when this one mounts), and the bundle is
    not repeated per view.
    """
    from circuitsvis.utils.convert_props import convert_props

    element = "circuits-vis-" + uuid.uuid4().hex[:12]
    render = f"CircuitsVis.render({json.dumps(element)}, CircuitsVis.{component}, {convert_props(props)})".replace(
        "</", "<\\/"
    )
    return (
        f'<div id="{element}" class="circuitsvis-view" style="margin: 15px 0;"></div>\n'
        f"<script>(window.interpInitReady || (f => f()))(() => {render});</script>"
    )
