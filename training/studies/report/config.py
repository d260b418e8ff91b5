"""The report's configuration and the choices of its command line (no torch needed).

:class:`ReportConfig` says how much work the report's probes do and what the page is
called; :data:`PROJECTIONS` and :data:`IMAGE_FORMATS` are the choices the ``report``
command lists in its help (``training/cli.py`` imports them from here, so that
``interp-init --help`` imports neither torch nor TransformerLens).
"""

from __future__ import annotations

from dataclasses import dataclass

#: 2-D projections of the masked outputs: each is a ``method`` that
#: :func:`probes.masking.project` draws.
PROJECTIONS = ("pca", "tsne")
#: Formats :func:`training.studies.report.write_images` writes through kaleido.
IMAGE_FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class ReportConfig:
    """How much work the report's probes do, and what the page is called.

    ``per_pair`` inputs per anchor pair feed the masking projections and cluster scores
    (16 pairs, so 320 inputs at the default; the journal used 50 per pair); the
    similarity heatmaps use fixed grids of 12 keys x 6 or 4 pairs, attention and
    information flow the NeurIPS Fig. 3 input.  ``projection`` is ``"pca"`` (fast,
    deterministic) or ``"tsne"`` (the journal's, perplexity 12).  ``seed`` draws the
    probe inputs.
    """

    per_pair: int = 20
    projection: str = "pca"
    seed: int = 0
    device: str = "cpu"
    title: str = "interp-init report"
    #: torch / BLAS / OpenMP threads while the probes run (restored after): their matrices
    #: are small, and several threads on a busy machine are many times slower than one.
    #: None: leave the thread settings as they are.
    threads: int | None = 1

    def __post_init__(self) -> None:
        if isinstance(self.per_pair, bool) or not isinstance(self.per_pair, int) or self.per_pair < 2:
            raise ValueError(f"per_pair must be an integer >= 2 (inputs per anchor pair), got {self.per_pair!r}")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection must be one of {PROJECTIONS}, got {self.projection!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"title must be a non-empty string, got {self.title!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"threads must be None or an integer >= 1, got {self.threads!r}")
