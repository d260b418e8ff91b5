"""examples/quickstart.ipynb is stored without outputs and runs headless (nbclient) from top to
bottom: its results display as tables and its two circuit views share one inlined bundle."""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[dev]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install -e '.[dev]')")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e '.[dev]')")

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def html_outputs(cell) -> list[str]:  # noqa: ANN001 - an nbformat cell
    return [o["data"]["text/html"] for o in cell.get("outputs", []) if "text/html" in o.get("data", {})]


def test_the_notebook_is_stored_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                "clear the notebook's outputs before committing it"
            )


def test_the_notebook_runs_headless(tmp_path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell where one fails
    code = [c for c in notebook.cells if c.cell_type == "code"]
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs if o.get("output_type") == "stream")
    html = [h for c in code for h in html_outputs(c)]
    assert (tmp_path / "runs" / "quickstart-notebook" / "gamma0.8" / "model.safetensors").is_file()
    assert sum("<b>TrainResult</b>" in h and "heldout 4,3 inferential" in h for h in html) == 2
    assert "small init: ID accuracy with the key masked" in text and "layer-0 W_Q stable rank" in text
    assert any("<b>MaskedRun</b>" in h for h in html) and any(
        "<b>SimilarityResult</b>" in h and "block score" in h for h in html
    )
    views = [h for h in html if "CircuitsVis.render(" in h]
    assert len(views) == 2 and [v.count("data-circuitsvis-bundle") for v in views] == [
        1,
        0,
    ]  # the bundle once per notebook
    assert any("stable_rank" in h for h in html)  # weight_stable_ranks' DataFrame
    # no red warning box (tqdm.auto's "IProgress not found" where ipywidgets is missing)
    stderr = "\n".join(
        o.get("text", "")
        for c in code
        for o in c.outputs
        if o.get("output_type") == "stream" and o.get("name") == "stderr"
    )
    assert "Warning" not in stderr, stderr
    assert "cpu preset: " in text and "minutes a model" in text  # the time, from the shipped models' records


def test_the_notebook_writes_under_an_ignored_folder() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "examples/runs/quickstart-notebook/gamma0.8/model.safetensors"],
        cwd=ROOT,
        check=False,
    )
    assert ignored.returncode == 0, (
        "examples/runs/ (where the notebook writes when run from examples/) is not ignored: add it to .gitignore"
    )
