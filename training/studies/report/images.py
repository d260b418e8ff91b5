"""Static images of the report's figures: PNG, SVG or PDF through plotly's exporter kaleido.

kaleido drives a system Chromium or Chrome (Debian: ``apt-get install chromium``; found on
``PATH``, or set ``BROWSER_PATH``).  Without kaleido or a browser, :func:`write_images`
raises :class:`StaticExportUnavailable` saying what to install, and
:func:`static_export_problem` says so without raising.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import plotly.graph_objects as go

from interp_init.outputs import check_distinct_outputs, check_output_folder, write_output
from interp_init.paths import check_path_names
from training.studies.report.config import IMAGE_FORMATS

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
