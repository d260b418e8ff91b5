"""Render examples/quickstart.ipynb for the documentation site: run it headless (nbclient) in a
scratch folder and store the executed copy, outputs included, as docs/examples/quickstart.ipynb.

The site shows the stored outputs (mkdocs-jupyter does not execute), so the page is what this
command printed: ``python docs/render_notebook.py`` (about a minute on a CPU). The example itself
stays stored without outputs; tests/test_site.py checks that the two hold the same cells.
What the kernel writes to stderr (warnings about the rendering environment) is left out.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "examples" / "quickstart.ipynb"
RENDERED = ROOT / "docs" / "examples" / "quickstart.ipynb"


def render(source: Path = SOURCE, rendered: Path = RENDERED) -> Path:
    """Execute ``source`` in a scratch folder and write the executed notebook to ``rendered``."""
    notebook = nbformat.read(source, as_version=4)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="interp-init-notebook-") as scratch:
        client = nbclient.NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": scratch}}
        )
        client.execute()
    for (
        cell
    ) in notebook.cells:  # the rendering kernel's own warnings (e.g. tqdm's about ipywidgets) are not the notebook's
        if cell.cell_type == "code":
            cell.outputs = [
                o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
            ]
    rendered.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, rendered)
    return rendered


if __name__ == "__main__":
    print(f"wrote {render().relative_to(ROOT)}")
