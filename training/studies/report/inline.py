"""JavaScript the report inlines in its page: plotly's and circuitsvis' bundles and the
figures, each once, gzip-packed, and circuitsvis views that wait for them.

Nothing is fetched from the network.  plotly.js is plotly's own *cartesian* partial bundle
(``vendor/plotly-cartesian.min.js``: the trace types bar, box, contour, heatmap, histogram,
histogram2d, histogram2dcontour, image, pie, scatter, scatterternary and violin; MIT,
``vendor/plotly-LICENSE``), a third of the full bundle, used when the page's figures need no
other trace type and the installed plotly's plotly.js has the same major version; otherwise
the full bundle of the installed ``plotly`` package.  circuitsvis' bundle comes from the
installed ``circuitsvis`` package.  Each script is gzip-compressed and base64-encoded into a
``<script type="application/x-gzip-base64">`` element (:func:`packed_script`), which no browser
runs by itself; :data:`LOADER` unpacks them with the browser's ``DecompressionStream``
(Chrome and Edge 80, Firefox 113, Safari 16.4 and later) and runs them in page order, then
the views queued with ``interpInitReady`` (:func:`circuitsvis_view`).  A page of four tiny
runs is about 1.6 MB instead of 7.4 MB.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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
