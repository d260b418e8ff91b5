"""The report's layout in a real headless Chromium (no network), at 1400 px and 900 px wide
: the verdict comes first and names each run's solution, the console stays
clean, every plotly figure is drawn, circuitsvis' head selector is not clipped, and no
table cell breaks a number or a word over two lines.  Skipped, with the reason, where
Chromium, chromedriver or selenium is missing (reuses the tiny runs and the browser of
``tests/training/test_report.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import report, runs_root  # noqa: F401 - fixtures shared with the report's tests

#: Everything the layout checks need, measured in the page.
LAYOUT = r"""
const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
const out = {width: window.innerWidth};
const sections = [...document.querySelectorAll('section')];
out.first_section = sections.length ? sections[0].id : null;
const verdict = document.querySelector('section#verdict');
out.verdict = null;
if (verdict && verdict.querySelector('table')) {
  const table = verdict.querySelector('table');
  const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
  const rows = [...table.querySelectorAll('tbody tr')].map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()));
  out.verdict = rows.map(r => Object.fromEntries(heads.map((h, i) => [h, r[i]])));
}
// every plotly figure: an svg of non-zero size
out.figures = [...document.querySelectorAll('.js-plotly-plot')].map(f => {
  const svg = f.querySelector('svg.main-svg');
  const b = svg ? box(svg) : {width: 0, height: 0};
  const cell = f.closest('.cell');
  const c = cell ? box(cell) : b;
  return {id: f.id, width: b.width, height: b.height, fits: b.left >= c.left - 1 && b.right <= c.right + 1};
});
// the page itself does not scroll sideways
out.page_overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
out.figure_divs = document.querySelectorAll('.plotly-graph-div').length;
// circuitsvis views: everything they draw lies inside their cell
out.views = [...document.querySelectorAll('.circuitsvis-view')].map(v => {
  const cell = v.closest('.cell');
  const c = box(cell);
  const inner = [...v.querySelectorAll('*')].filter(e => { const b = box(e); return b.width > 0 && b.height > 0; });
  const outside = inner.filter(e => { const b = box(e); return b.left < c.left - 1 || b.right > c.right + 1; })
                       .map(e => (e.innerText || e.tagName).slice(0, 30));
  return {id: v.id, mounted: inner.length, outside: outside.slice(0, 5), n_outside: outside.length,
          scroll: cell.scrollWidth - cell.clientWidth};
});
// table cells: no word (a number included) is broken over two lines
const broken = [];
for (const td of document.querySelectorAll('table.scores td, table.scores th, table.runs td, table.runs th')) {
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    for (const m of node.data.matchAll(/\S+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
}
out.broken_words = broken;
return out;
"""


def _at_width(driver, path: Path, width: int) -> dict:  # noqa: ANN001
    from test_report import _open

    driver.set_window_size(width, 1000)
    state, errors, _, failed = _open(driver, path)
    layout = driver.execute_script(LAYOUT)
    layout.update(state=state, errors=errors, failed=failed)
    return layout


@pytest.mark.parametrize("width", [1400, 900])
def test_report_layout_in_headless_chromium(browser, report: tuple[Path, str], tmp_path: Path, width: int) -> None:  # noqa: ANN001, F811
    try:
        page = _at_width(browser, report[0], width)
        assert abs(page["width"] - width) <= 20, page["width"]
        # the verdict comes first and names each run's solution
        assert page["first_section"] == "verdict"
        assert page["verdict"] is not None and len(page["verdict"]) == 3, page["verdict"]
        for row in page["verdict"]:
            assert row.get("learned"), row
        assert sorted(row["run"].split(" ")[0] for row in page["verdict"]) == ["id-ood/one-layer", "symmetric/large-init", "symmetric/small-init"]
        # a clean console, no failed request
        assert page["errors"] == [], page["errors"]
        assert page["failed"] == [], page["failed"]
        # every figure drawn, with a visible size
        assert len(page["figures"]) == page["figure_divs"] >= 3 * 8
        assert all(f["width"] > 50 and f["height"] > 50 for f in page["figures"]), [f for f in page["figures"] if f["width"] <= 50 or f["height"] <= 50]
        # each figure within its cell, and the page no wider than the window
        assert all(f["fits"] for f in page["figures"]), [f for f in page["figures"] if not f["fits"]]
        assert page["page_overflow"] <= 1, page["page_overflow"]
        # the attention views mounted, nothing of them outside their cell
        assert len(page["views"]) == 3 and all(v["mounted"] > 0 for v in page["views"]), page["views"]
        assert all(v["n_outside"] == 0 and v["scroll"] <= 1 for v in page["views"]), page["views"]
        # no number or word in a table broken over two lines
        assert page["broken_words"] == [], page["broken_words"]
    finally:
        browser.set_window_size(1400, 1000)
    if width == 1400:
        pytest.importorskip("PIL", reason="pillow is not installed (pip install -e '.[dev]')")
        total = browser.execute_script("return document.documentElement.scrollHeight")
        shot = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                                   "clip": {"x": 0, "y": 0, "width": width, "height": min(total, 16000), "scale": 1}})  # fmt: skip
        import base64

        (tmp_path / "report-1400.png").write_bytes(base64.b64decode(shot["data"]))
        assert (tmp_path / "report-1400.png").stat().st_size > 10_000
