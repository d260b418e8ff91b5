"""How probe results display: circuit views that show themselves in Jupyter offline, and tables.

* :func:`attention_html` draws one input's attention patterns (:func:`probes.flow.attention_patterns`,
  NeurIPS 2024 Fig. 3) with circuitsvis as a :class:`CircuitView`.
* :class:`CircuitView` is a circuitsvis view (:func:`probes.attention_html` returns one).
  In Jupyter it displays itself (``_repr_html_``) with no network: circuitsvis' JavaScript
  bundle (1.3 MB) is inlined once per notebook, in the output of the first view shown,
  and every later view draws with it.  ``view.save(path)`` writes a self-contained page
  (the bundle inlined once) and ``view.html()`` returns that page.
* :class:`TableDisplay` makes a result dataclass print as a table (``print(result)``) and
  display as an HTML table in Jupyter, from its ``table()`` DataFrame.
* :func:`read_paths` reads a :func:`probes.top_paths` table back from a Parquet or CSV file,
  its paths tuples again.

"Once per notebook" is remembered on the IPython shell that runs the notebook (one per
kernel): a new kernel, or ``CircuitView.bundle_again()``, inlines it again.  Outside
IPython, and in Google Colab (which shows each output in a frame of its own), every
``_repr_html_`` carries the bundle, so any one of them renders alone.

Shapes: :func:`attention_html` takes one input (``tokens [pos]``) and draws ``layers x
heads`` patterns ``[query, source]``, each weight rounded to 4 decimals.

Example::

    >>> import torch
    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import quiet_deprecation
    >>> from probes import attention_html
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    >>> with quiet_deprecation():
    ...     model = HookedTransformer(cfg)
    >>> view = attention_html(model, torch.arange(20, 29), layers=-1)  # the last layer's two heads
    >>> view.props["attentionHeadNames"], view.props["attention"].shape
    (['L1H0', 'L1H1'], (2, 9, 9))
    >>> view.html().count("data-circuitsvis-bundle")  # the page carries circuitsvis' JavaScript once
    1
"""

from __future__ import annotations

import ast
import html as html_lib
import re
import sys
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import circuitsvis
import numpy as np
import pandas as pd
import torch
from circuitsvis.utils.convert_props import convert_props
from circuitsvis.utils.render import RenderedHTML
from jaxtyping import Int
from torch import Tensor

from probes._common import bidirectional, check_indices, check_int
from probes.flow import attention_patterns, token_labels
from probes.inputs import as_inputs
from probes.protocol import HookedModel, check_model

#: The attribute of the IPython shell that records the bundle version already sent to its notebook.
SHELL_FLAG = "_probes_circuitsvis_bundle"
_SELF_CLOSED_DIV = re.compile(r'<div(\s+id="[^"]*"[^<>]*?)\s*/>')
_SOURCE_MAP = re.compile(r"^\s*//# sourceMappingURL=.*$", re.MULTILINE)


def fix_self_closing_divs(html: str) -> str:
    """Rewrite circuitsvis' ``<div id="..." .../>`` to ``<div id="..." ...></div>``.

    HTML has no self-closing ``div``: a browser reads ``<div/>`` as an open tag, so the
    next view's elements end up inside it and are replaced when the first renders.
    """
    return _SELF_CLOSED_DIV.sub(r"<div\1></div>", html)


def offline_html(rendered: RenderedHTML | str) -> str:
    """The fragment of a circuitsvis view with its JavaScript inlined (no network), divs fixed."""
    source = rendered.local_src if isinstance(rendered, RenderedHTML) else rendered
    return fix_self_closing_divs(source)


def standalone_html(fragments: Sequence[str], title: str = "Attention patterns") -> str:
    """A complete HTML document holding the given fragments (e.g. from :func:`offline_html`)."""
    body = "\n".join(fix_self_closing_divs(f) for f in fragments)
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html_lib.escape(title)}</title></head>\n<body>\n<h2>{html_lib.escape(title)}</h2>\n{body}\n</body></html>\n'


def bundle_script() -> str:
    """circuitsvis' browser bundle as one classic ``<script>`` (it defines ``window.CircuitsVis``)."""
    source = (Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js").read_text(encoding="utf-8")
    source = _SOURCE_MAP.sub("", source).replace(
        "</script", "<\\/script"
    )  # no map to fetch; a closing tag would end the script
    return f'<script data-circuitsvis-bundle="{circuitsvis.__version__}">\n{source}\n</script>'


def _fill_width_style(target: str) -> str:
    """A stylesheet that gives the square plots of the view in ``#target`` their row's width.

    circuitsvis sizes the box of a zoomed pattern (``aspect-ratio: 1 / 1``, width ``initial``,
    a flex item) by the canvas it holds, and the chart sizes its canvas by that box: a resize
    can only shrink it, so a window made narrower and wide again, or a full-page screenshot,
    leaves the zoomed view small or empty. With the row's width (its ``max-width`` still caps
    it) the box no longer depends on the canvas."""
    return f'<style>#{target} div[style*="aspect-ratio"] {{ width: 100% !important; }}</style>\n'


def _notebook_shell() -> object | None:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


@dataclass(frozen=True)
class CircuitView:
    """One circuitsvis view: ``element`` (e.g. ``"AttentionHeads"``) drawn with ``props``.

    ``props`` are the keyword arguments of the circuitsvis element, camel-cased as
    circuitsvis passes them (``attentionHeadNames``, ...)."""

    element: str
    props: dict = field(repr=False)
    title: str = "Attention patterns"

    def fragment(self, with_bundle: bool) -> str:
        """The view's ``<div>`` and the script that draws into it (after the bundle, if asked for).

        The script waits for ``window.CircuitsVis`` (the bundle may come from an earlier
        output); if it never comes it says so in the view's place."""
        target = f"circuits-vis-{uuid.uuid4().hex[:13]}"
        draw = f"""{_fill_width_style(target)}<div id="{target}" style="margin: 15px 0;"></div>
<script>
(function draw(tries) {{
  if (window.CircuitsVis) {{ window.CircuitsVis.render("{target}", window.CircuitsVis.{self.element}, {convert_props(self.props)}); }}
  else if (tries < 200) {{ setTimeout(function () {{ draw(tries + 1); }}, 50); }}
  else {{ document.getElementById("{target}").textContent = "circuitsvis' JavaScript is not on this page: run CircuitView.bundle_again() and show the view again"; }}
}})(0);
</script>"""
        return (bundle_script() + "\n" + draw) if with_bundle else draw

    def html(self) -> str:
        """A self-contained HTML page of this view (the bundle inlined; opens with no network)."""
        return standalone_html([self.fragment(with_bundle=True)], title=self.title)

    def save(self, path: str | Path) -> Path:
        """Write :meth:`html` to ``path`` (parent folders created); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html(), encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        shell = _notebook_shell()
        if shell is None or "google.colab" in sys.modules:  # Colab shows each output in its own frame
            return self.fragment(with_bundle=True)
        first = getattr(shell, SHELL_FLAG, None) != circuitsvis.__version__
        if first:
            setattr(shell, SHELL_FLAG, circuitsvis.__version__)
        return self.fragment(with_bundle=first)

    def __str__(self) -> str:
        heads = len(self.props.get("attentionHeadNames") or [])
        tokens = len(self.props.get("tokens") or [])
        return f"CircuitView {self.element} {self.title!r} ({heads} heads, {tokens} tokens): .save(path) writes the page, .html() returns it"

    @staticmethod
    def bundle_again() -> None:
        """Make the next view shown in this notebook carry the bundle again (after its output was cleared)."""
        shell = _notebook_shell()
        if shell is not None and hasattr(shell, SHELL_FLAG):
            delattr(shell, SHELL_FLAG)


class TableDisplay:
    """A result that prints as a text table and displays as an HTML table in Jupyter.

    Subclasses define ``table()``, a DataFrame of what a reader wants to see first."""

    def table(self) -> pd.DataFrame:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{type(self).__name__}\n{self.table().to_string(index=False)}"

    def _repr_html_(self) -> str:
        return f"<p><b>{type(self).__name__}</b></p>\n{self.table().to_html(index=False)}"


#: The most attention weights one :func:`attention_html` page holds (about 6 MB of page).
MAX_VIEW_WEIGHTS = 1_000_000


def attention_html(
    model: HookedModel,
    tokens: Int[Tensor, " pos"] | str,
    path: str | Path | None = None,
    labels: Sequence[str] | None = None,
    title: str = "Attention patterns",
    *,
    layers: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
    max_weights: int = MAX_VIEW_WEIGHTS,
) -> CircuitView:
    """One input's attention patterns (``layers`` x ``heads``, default all) as a circuitsvis view.

    Drawn with circuitsvis' ``AttentionHeads`` (heads named ``L{l}H{h}``) from its local
    JavaScript bundle: the returned :class:`~probes.views.CircuitView` displays itself in
    Jupyter offline, ``.save(path)`` writes a self-contained page and ``.html()`` returns
    it.  Written to ``path`` too if given.  A page holds at most ``max_weights`` weights
    (heads x pos^2, rounded to 4 decimals): beyond that only the first heads that fit are
    drawn, with a warning naming how many were left out and how to page through the
    rest (``layers=``, ``heads=``).  The upper triangle is masked only for causal attention.
    """
    inputs = as_inputs(tokens, check_model(model))
    if inputs.tokens.shape[0] != 1:
        raise ValueError(f"attention_html draws one input; got a batch of {inputs.tokens.shape[0]} (pass tokens[i])")
    n_pos = inputs.tokens.shape[1]
    labels = token_labels(inputs.tokens[0]) if labels is None else [str(s) for s in labels]
    if len(labels) != n_pos:
        raise ValueError(f"labels has {len(labels)} entries for {n_pos} positions")
    layers = check_indices(layers, model.cfg.n_layers, "layers", f"layer of this {model.cfg.n_layers}-layer model")
    heads = check_indices(heads, model.cfg.n_heads, "heads", f"head of this {model.cfg.n_heads}-head model")
    max_weights = check_int(max_weights, "max_weights", low=1)
    pairs = [(l, h) for l in layers for h in heads]
    fits = max(1, max_weights // (n_pos * n_pos))
    if len(pairs) > fits:
        warnings.warn(
            f"attention_html draws the first {fits} of {len(pairs)} heads (max_weights={max_weights} at {n_pos} positions); "
            f"page through the rest with layers=... or heads=..., or raise max_weights",
            stacklevel=2,
        )
        pairs = pairs[:fits]
    shown = sorted({l for l, _ in pairs})
    patterns = attention_patterns(model, inputs, layers=shown)[:, 0]  # [layer, head, q, k]
    chosen = torch.stack([patterns[shown.index(l), h] for l, h in pairs])
    props = {
        "attention": np.round(chosen.float().numpy(), 4),
        "tokens": labels,
        "attentionHeadNames": [f"L{l}H{h}" for l, h in pairs],
        "maskUpperTri": not bidirectional(model),
    }
    view = CircuitView("AttentionHeads", props, title=title)
    if path is not None:
        view.save(path)
    return view


def read_paths(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """A :func:`top_paths` table read back from a ``.parquet`` or ``.csv`` file (or the
    DataFrame read from one), with ``path`` a tuple of ints and ``weights`` a tuple of
    floats again, as :func:`top_paths` returned them."""
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
    else:
        file = Path(source)
        if file.suffix not in (".parquet", ".csv"):
            raise ValueError(f"read_paths reads a .parquet or .csv file written from top_paths, got {file}")
        frame = pd.read_parquet(file) if file.suffix == ".parquet" else pd.read_csv(file)
    missing = [c for c in ("path", "weights") if c not in frame.columns]
    if missing:
        raise ValueError(f"the table has no column(s) {missing}: read_paths reads what top_paths returned")
    for column, kind in (("path", int), ("weights", float)):
        cells = [ast.literal_eval(v) if isinstance(v, str) else v for v in frame[column]]
        frame[column] = [tuple(kind(x) for x in np.atleast_1d(np.asarray(v, dtype=object))) for v in cells]
    return frame
