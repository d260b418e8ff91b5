"""The summary files of a population: ``summary.json`` (one schema for one seed or many:
:meth:`~training.studies.population.Population.to_dict`), the protocol's copy beside it, and
each member's own; :func:`read_summary` reads any of them back (also the single-seed
summaries written before one schema), for the report, and refuses a damaged one by name;
:func:`check_summary_file` refuses, before any work, a ``summary.json`` of one's own.
"""

from __future__ import annotations

from pathlib import Path

from interp_init.fileio import BadRunFile, read_json
from interp_init.outputs import SUMMARY_FILE, study_kind
from interp_init.runfolder import write_json
from training.studies.population import Population, SeedRow, regime_results
from training.studies.study import StudySpec

__all__ = ["check_summary_file", "protocol_summary", "read_summary", "write_summaries"]


def read_summary(path: str | Path) -> Population | None:
    """The population a ``summary.json`` holds (None where there is none): today's schema,
    or the single-seed summary written before one schema (task -> regime -> row), read as
    a population of one.  A damaged one is refused (:class:`~interp_init.fileio.BadRunFile`
    naming it): a reader that skipped it would show the runs without their population."""
    path = Path(path)
    if not path.exists():
        return None
    fix = "run the same reproduce command again (it rewrites the summary from the run folders), or remove the file"
    data = read_json(path, fix)
    try:
        if not isinstance(data, dict):
            raise TypeError(f"it holds {type(data).__name__}, not an object")
        if "per_seed" in data:
            return Population.from_dict(data)
        return Population("", "strict", (SeedRow(0, regime_results(data)),))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise BadRunFile(
            path, f"is not a reproduction's summary ({type(err).__name__}: {' '.join(str(err).split())[:120]})", fix
        ) from None


def check_summary_file(out: str | Path, option: str = "--out") -> None:
    """Refuse, before any work, a folder holding a ``summary.json`` that is not a
    reproduction's and that no study recorded (a file of one's own): it is never
    overwritten (a study's own, even damaged, is rewritten)."""
    path = Path(out) / SUMMARY_FILE
    if not path.is_file() or study_kind(out) is not None:
        return
    try:
        read_summary(path)
    except ValueError:
        raise ValueError(
            f"{path} exists and is not a reproduction's summary this toolkit wrote; it is never overwritten: move it away first, "
            f"or choose another {option}"
        ) from None


def protocol_summary(spec: StudySpec, out: str | Path) -> Path:
    """Where a population keeps its protocol's summary beside ``summary.json``:
    ``summary-<protocol>.json`` (``summary-paper-logged-every-K.json`` with ``logged_every``)."""
    return (
        Path(out)
        / f"summary-{spec.protocol}{'' if spec.logged_every is None else f'-logged-every-{spec.logged_every}'}.json"
    )


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
