"""``interp-init reproduce``'s text: the runs trained (:func:`training.studies.population.train_study`),
the table or the population, the flip's verdict and ``report.html``; and what did not complete."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from interp_init.runfolder import RunStatus
from training.launch.slurm import submitted_line
from training.studies.population import failed_criteria, protocol_summary, train_study
from training.studies.report import write_report
from training.studies.study import StudySpec
from training.studies.sweep.results import problem_summary


def run_reproduction_cli(
    spec: StudySpec,
    out: str | Path,
    device: str,
    workers: int | None,
    progress: bool,
    backend: str | None = None,
    rerun: str = "the same command",
    **options: Any,
) -> tuple[str, str | None]:
    """``interp-init reproduce``: train ``spec`` with ``backend`` (a launcher's name; None: the
    default) and its ``options``, read, write the summary and the report; return the text to
    print (one seed: its table and the flip's verdict on this one draw; several: the
    population) and one line on the runs that did not complete (None if all did).  Runs only
    submitted (``--slurm-no-wait``) are not a failure: the text says how many and that
    ``rerun`` (the command line) collects them."""
    start = time.perf_counter()
    population, returns = train_study(spec, out, device, workers, progress, backend, **options)
    if population is None:
        return submitted_line(sum(r.status == RunStatus.RUNNING for r in returns), len(returns), out, rerun), None
    first = list(dict.fromkeys(str(r.run_dir) for r in spec.jobs(out) if r.seed == spec.seeds[0]))
    report = write_report(first, Path(out) / "report.html")
    summary = Path(out) / "summary.json"
    if spec.single:
        checks, seed = population.rows[0].checks, spec.seeds[0]
        lines = [
            f"preset {spec.preset}, seed {seed}, {spec.precision}, {time.perf_counter() - start:.0f} s in this call",
            population.format_regimes(),
            "flip reproduced (all criteria met)"
            if checks["all"]
            else f"flip NOT reproduced; failed: {failed_criteria(checks)}",
            f"this is one draw (seed {seed}): how often each criterion holds over seeds is what --seeds 31,32,33,... measures (docs/faithful-models.md)",
            f"summary: {summary}",
            f"report: {report}",
        ]
    else:
        lines = [
            f"preset {spec.preset}, seeds {list(spec.seeds)}, {spec.precision}, {time.perf_counter() - start:.0f} s in this call",
            population.format(),
            f"summary: {summary} (this protocol's also kept as {protocol_summary(spec, out)})",
            f"report: {report} (the runs of seed {spec.seeds[0]}; the population in its verdict)",
        ]
    # the sweep's line on what did not complete, naming the runs
    line = problem_summary({r.name: r.status for r in returns}, len(returns), summary)
    bad = [f"{r.name}: {r.status}" for r in returns if r.status != "completed"]
    problem = (
        None if line is None else f"{line} ({'; '.join(bad[:3])}{'; ...' if len(bad) > 3 else ''}); a rerun resumes"
    )
    return "\n".join(lines), problem
