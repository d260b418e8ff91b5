"""Running a sweep: :func:`run_sweep` trains every pending point of a spec with one of the
launchers (:mod:`training.launch`), resumably, and rebuilds the results table.

Each point is one job (:meth:`~training.studies.study.StudySpec.jobs`) trained through
:func:`training.launch.run_study`, as every study is: a finished run is never trained
twice, a killed sweep resumes, a run that raises is ``failed`` (``error.txt``) and the
sweep goes on (the next sweep retries it), a run another process trains is ``running``,
a diverged run is not retried.  The launcher is named by ``SweepOptions.backend``:
``local`` (``serial`` with one worker, else a ``pool``), ``ray``, ``ensemble`` or any
registered launcher (:func:`training.launch.launcher_names`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from interp_init.outputs import looks_like_run, refuse_inside_run, refuse_nested
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus, write_json
from training.launch import JobReturn, run_study
from training.launch.backends import build_launcher
from training.studies.study import StudySpec, refuse_strangers
from training.studies.sweep.results import check_results_file, collect_results
from training.studies.sweep.spec import SPEC_FILE, SweepOptions, check_sweep_folder

#: What a second sweep into a held sweep folder is told.
SWEEP_BUSY = "is being swept by another process ({owner}); wait for it to finish, or choose another --out"


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: run name -> status, which runs it skipped as already done, and how
    many runs a launcher that does not wait (:attr:`~training.launch.Launcher.waits`) left
    submitted and unfinished."""

    statuses: Mapping[str, str]
    skipped: tuple[str, ...]
    results: pd.DataFrame
    submitted: int = 0

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)

    def _repr_html_(self) -> str:
        """In Jupyter: how many runs ended how, then the results table."""
        counts = ", ".join(f"{self.count(s)} {s}" for s in sorted(set(self.statuses.values())))
        head = f"<p><b>SweepSummary</b>: {len(self.statuses)} runs ({counts}); {len(self.skipped)} already done before this call</p>"
        return f"{head}\n{self.results.to_html(index=False)}"


def check_sweep_out(out: str | Path, spec: StudySpec | None = None) -> None:
    """Refuse a sweep folder inside a run folder, or one that is a run folder, naming it;
    with ``spec``, also one inside another study that does not name its runs
    (:func:`~training.studies.study.refuse_strangers`)."""
    out = Path(out)
    refuse_inside_run(out, "a sweep")
    if looks_like_run(out):
        raise ValueError(
            f"{out} is a run folder, not a sweep folder; a run folder holds one run and nothing else: choose another --out"
        )
    refuse_nested(out, "a sweep", "sweep")  # nor a reproduction's folder, nor one holding other sweeps
    if spec is not None:
        refuse_strangers(spec.jobs(out), out, "a sweep")
    check_results_file(out)  # a results.csv of one's own in a folder that is not yet a sweep's


def run_sweep(
    spec: StudySpec, out: str | Path, options: SweepOptions | None = None, *, extend: bool = False
) -> SweepSummary:
    """Run every point of ``spec`` under ``out`` (skipping finished ones), then rebuild the table.

    Validates the whole spec first (nothing trains if any point is invalid), refuses a
    folder that holds another sweep (:func:`~training.studies.sweep.spec.check_sweep_folder`;
    ``extend``: add ``spec``'s grid values to the folder's sweep, same base and grid keys
    only), writes the spec to ``out/sweep.json``, trains the pending points with the
    chosen backend and returns their statuses with the rebuilt results table (also
    ``out/results.csv``).
    """
    options = options or SweepOptions()
    out = Path(out)
    check_sweep_out(out, spec)
    check_sweep_folder(spec, out, extend=extend)
    jobs = spec.jobs(out)
    if options.backend == "ensemble":  # the runs trained at once must fit together
        from interp_init.model import resolve_device
        from training.trainer.preflight import check_ensemble_fits

        check_ensemble_fits([job.config for job in jobs], resolve_device(options.device), options.ensemble_size)
    launcher = build_launcher(
        options.backend,
        device=options.device,
        workers=options.workers,
        threads=options.threads,
        address=options.address,
        ensemble_size=options.ensemble_size,
        **dict(options.extra),
    )
    done_before = {j.name for j in jobs if RunFolder(j.run_dir).status() in FINISHED_STATUSES}
    bar = tqdm(total=len(jobs), initial=len(done_before), desc="sweep", unit="run", disable=not options.progress)
    counts: dict[str, int] = {}

    def returned(ret: JobReturn) -> None:
        counts[ret.status] = counts.get(ret.status, 0) + 1
        bar.update(1)
        bar.set_postfix({k: v for k, v in counts.items() if k in ("completed", "diverged", "failed")})
        if ret.error:
            bar.write(f"run {ret.name} {'failed' if ret.status == RunStatus.FAILED else 'not trained'}: {ret.error}")

    def held() -> None:  # the spec is checked again now that this process holds the folder
        write_json(
            out / SPEC_FILE, check_sweep_folder(spec, out, extend=extend).to_dict()
        )  # also the runs its readers read

    launcher.notify(returned)
    try:
        returns = run_study(jobs, out, launcher, SWEEP_BUSY, held, kind="sweep")
    finally:
        bar.close()
    statuses = {r.name: r.status for r in returns}
    submitted = 0 if launcher.waits else sum(s == RunStatus.RUNNING for s in statuses.values())
    results = collect_results(out)
    # a run its folder calls finished but whose files do not hold (metrics past its epochs, another run's
    # files) is what the table says, never counted completed
    statuses |= {
        str(r): RunStatus.UNREADABLE
        for r, s in zip(results["run"], results["status"], strict=True)
        if s == RunStatus.UNREADABLE and r in statuses
    }
    return SweepSummary(statuses, tuple(n for n in statuses if n in done_before), results, submitted)
