"""The summary files of a population: ``summary.json`` (one schema for one seed or many:
:meth:`~training.studies.population.Population.to_dict`), the protocol's copy beside it, and
each member's own; :func:`read_summary` reads any of them back (also the single-seed
summaries written before one schema), for the report.
"""

from __future__ import annotations

from pathlib import Path

from interp_init.fileio import read_json
from interp_init.outputs import SUMMARY_FILE
from interp_init.runfolder import write_json
from training.studies.population import Population, SeedRow, regime_results
from training.studies.study import StudySpec

__all__ = ["protocol_summary", "read_summary", "write_summaries"]


def read_summary(path: str | Path) -> Population | None:
    """The population a ``summary.json`` holds (None where there is none, or it is damaged or
    unfinished): today's schema, or the single-seed summary written before one schema
    (task -> regime -> row), read as a population of one."""
    try:
        data = read_json(Path(path), "")
        if not isinstance(data, dict):
            return None
        if "per_seed" in data:
            return Population.from_dict(data)
        return Population("", "strict", (SeedRow(0, regime_results(data)),))
    except (ValueError, KeyError, TypeError, AttributeError, OSError):
        return None


def protocol_summary(spec: StudySpec, out: str | Path) -> Path:
    """Where a population keeps its protocol's summary beside ``summary.json``:
    ``summary-<protocol>.json`` (``summary-paper-logged-every-K.json`` with ``logged_every``)."""
    return Path(out) / f"summary-{spec.protocol}{'' if spec.logged_every is None else f'-logged-every-{spec.logged_every}'}.json"


def write_summaries(spec: StudySpec, out: str | Path, population: Population) -> None:
    """``out/summary.json`` (and with several seeds ``summary-<protocol>.json`` and, under
    ``strict``, each member's own summary: a population of one)."""
    write_json(Path(out) / SUMMARY_FILE, population.to_dict())
    if spec.single:
        return
    write_json(protocol_summary(spec, out), population.to_dict())
    if spec.protocol == "strict":
        for row in population.rows:
            one = Population(spec.preset, spec.protocol, (row,), spec.lrs, spec.vary, spec.fixed_seed)
            write_json(spec.member_dir(out, row.seed) / SUMMARY_FILE, one.to_dict())
