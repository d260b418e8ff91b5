"""An offline HTML report that compares run folders side by side.

:func:`write_report` reads run folders (``config.json``, ``metrics.json``,
``model.safetensors``), runs the probes of :mod:`probes` on a few hundred inputs per run
and writes one self-contained HTML file that makes no request to any network address;
:func:`write_images` writes its figures as PNG, SVG or PDF.  Modules:

* :mod:`training.studies.report.config`: :class:`ReportConfig` and the command's choices (no torch);
* :mod:`training.studies.report.cells`: the run folders and the probes' inputs (:class:`Run`),
  and what a section is made of (:class:`Section`, :class:`Cell`);
* :mod:`training.studies.report.outcomes`: what the runs learned: the first screen (what the
  runs' preset means, the one table of the runs), verdict, curves, accuracies, populations, races;
* :mod:`training.studies.report.mechanisms`: how they compute (attention, flow, masking,
  similarity) and their weights (condensation, embeddings, ranks, spectra);
* :mod:`training.studies.report.page`: the page's assembly and :func:`write_report`, plotly.js,
  circuitsvis' bundle and the figures each inlined once (gzip-packed), static images through kaleido.

What a user calls: :func:`write_report` (:class:`ReportConfig`), :func:`build_page`,
:func:`write_images`, :func:`load_runs` (:class:`Run`), and, for a section of one's own,
:class:`Context`, :class:`Section`, :class:`Cell`, :class:`NotApplicable` and
:data:`SECTIONS`.  They are imported on first use (PEP 562 ``__getattr__``), so that the
command line can import :mod:`training.studies.report.config` without torch.  Command line::

    interp-init report RUNS/symmetric/small RUNS/symmetric/large --out report.html
    interp-init report RUNS --out report.html        # every run folder under RUNS
    interp-init report RUNS --out report.html --images figures --image-format svg
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_CONFIG = ("IMAGE_FORMATS", "PROJECTIONS", "ReportConfig")
_CELLS = ("Cell", "Context", "NotApplicable", "Run", "Section", "load_runs")
_PAGE = ("SECTIONS", "StaticExportUnavailable", "build_page", "write_images", "write_report")
__all__ = sorted((*_CONFIG, *_CELLS, *_PAGE))


def _module_of(name: str) -> ModuleType:
    if name in _CONFIG:
        from training.studies.report import config as module
    elif name in _CELLS:
        from training.studies.report import cells as module
    elif name in _PAGE:
        from training.studies.report import page as module
    else:
        raise AttributeError(f"module 'training.studies.report' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
