"""JavaScript the report inlines in its page: plotly's and circuitsvis' bundles, each once
in the page head, and circuitsvis views that use the inlined bundle.

Nothing is fetched from the network: the bundles come from the installed ``plotly`` and
``circuitsvis`` packages, without their source-map links.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

_SOURCE_MAP = re.compile(r"^\s*//# sourceMappingURL=.*$", re.MULTILINE)


def inline_js(source: str) -> str:
    """JavaScript safe to inline in a ``<script>`` element, without a source-map link."""
    return _SOURCE_MAP.sub("", source).replace("</script", "<\\/script")


def plotly_script() -> str:
    """plotly.js from the installed plotly package, as an inlined ``<script>`` element."""
    import plotly
    import plotly.offline

    return f"<script>/* plotly.js {plotly.__version__} (plotly.py), inlined once for every figure */\n{inline_js(plotly.offline.get_plotlyjs())}\n</script>"


def circuitsvis_bundle() -> str:
    """circuitsvis' browser bundle (defines the global ``CircuitsVis``), from the installed package."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    if not path.is_file():
        raise ValueError(f"circuitsvis' bundle {path} is missing; reinstall circuitsvis (pip install --force-reinstall circuitsvis)")
    return inline_js(path.read_text(encoding="utf-8"))


def circuitsvis_view(component: str, **props: Any) -> str:
    """A circuitsvis ``component`` as an HTML fragment for a page that loads
    :func:`circuitsvis_bundle` once in its head.

    Unlike circuitsvis' own fragment, the container is an explicit ``<div ...></div>``
    (circuitsvis writes a self-closed ``<div/>``, which HTML reads as an open tag, so the
    next view would be nested in it and replaced when this one mounts), and the bundle is
    not repeated per view.
    """
    from circuitsvis.utils.convert_props import convert_props

    element = "circuits-vis-" + uuid.uuid4().hex[:12]
    return (
        f'<div id="{element}" class="circuitsvis-view" style="margin: 15px 0;"></div>\n'
        f"<script>CircuitsVis.render({json.dumps(element)}, CircuitsVis.{component}, {convert_props(props)});</script>"
    )
