"""The report's configuration and the choices of its command line (no torch needed).

:class:`ReportConfig` says how much work the report's probes do and what the page is
called; :data:`PROJECTIONS` and :data:`IMAGE_FORMATS` are the choices the ``report``
command lists in its help (``training/cli.py`` imports them from here, so that
``interp-init --help`` imports neither torch nor TransformerLens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp_init.config import check_int

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
        check_int("per_pair", self.per_pair, 2, " (inputs per anchor pair)")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection must be one of {PROJECTIONS}, got {self.projection!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"title must be a non-empty string, got {self.title!r}")
        check_int("threads", self.threads, hint=" (or None: the thread settings as they are)", optional=True)


#: Bytes the report's probes hold per probe input and per unit of d_model x layers (the
#: cached activations of a forward, float32, about a dozen per layer and position).
_PROBE_BYTES = 4 * 12


def check_per_pair(per_pair: int, runs: Sequence[Any], option: str = "--per-pair") -> None:
    """Refuse a ``per_pair`` (probe inputs per group) that the runs' data cannot give or the
    memory cannot hold, before any probe runs: at most a task's
    :attr:`~interp_init.tasks.base.Task.probe_group_inputs` (the anchor tasks: 498, the
    distinct (key, key position) inputs of a pair), and for a task without one, at most
    what the probes' activations of the largest model fit in the available memory."""
    import torch

    from training.trainer.preflight import device_memory  # torch: only when a report is written

    for run in runs:
        task = run.task
        limit = task.probe_group_inputs
        if limit is not None and per_pair > limit:
            raise ValueError(
                f"{option} {per_pair} is more than the {limit} distinct inputs a group of the {task.name!r} task has "
                f"(its anchor pairs' key values and positions; more would only repeat them with other noise tokens): give {option} at most {limit}"
            )
    generic = [run for run in runs if run.task.probe_group_inputs is None]
    have = device_memory(torch.device("cpu"))
    if not generic or have is None:
        return
    worst = max(
        generic, key=lambda run: run.task.seq_len * run.record.config.model.d_model * run.record.config.model.n_layers
    )
    model, task = worst.record.config.model, worst.task
    per_input = (
        _PROBE_BYTES * task.seq_len * model.d_model * (model.n_layers + 1) * 8
    )  # a task's probe inputs: 8 per group
    limit = max(2, have // (2 * per_input))
    if per_pair > limit:
        raise ValueError(
            f"{option} {per_pair} would need about {per_pair * per_input / 1e9:,.1f} GB for the probes of {worst.name} "
            f"(d_model {model.d_model}, {model.n_layers} layers), more than half the {have / 1e9:,.1f} GB available: give {option} at most {limit:,}"
        )
