"""``interp-init reproduce``: the flip on one seed (a population of one) or on several.

:func:`reproduce` trains the two regimes of a preset (:mod:`training.studies.regimes`) on the flip's
tasks for one seed into ``out/<task>/<regime>``; ``--seeds`` the same for several seeds
(``out/seed-S/<task>/<regime>``).  Both are a
:class:`training.studies.study.StudySpec` (:meth:`~training.studies.study.StudySpec.reproduction`) trained
by :func:`training.launch.run_study`: a
killed reproduction resumes where it stopped, finished runs are read, not retrained, a run
another process trains is ``running`` (not failed), and a folder holding another preset's
runs is refused before anything trains.  Both write ``out/summary.json``
(:meth:`training.studies.population.Population.to_dict`) and return the
:class:`~training.studies.population.Population`.

Runs train one per CPU core (worker processes of one torch thread), on a CUDA GPU as
ensembles of same-shape runs (:func:`training.launch.backends.local_launcher`).  Example
(CPU: four runs of minutes each, two at a time on 2 cores: ``interp_init.pretrained.training_time()``
says how long the shipped models took; see docs/faithful-models.md for what it shows)::

    interp-init reproduce --preset cpu --seed 31 --out runs/reproduce/cpu-31
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp_init.outputs import check_output_file, refuse_nested
from interp_init.runfolder import RunStatus
from training.config import make_run_config
from training.launch import JobReturn, Launcher, run_study
from training.launch.backends import build_launcher, local_launcher
from training.options import parse_list
from training.studies.population import Population, read_population
from training.studies.regimes import REPRODUCE_BUSY, REPRODUCE_TASKS
from training.studies.study import MAX_POINTS, StudySpec
from training.studies.study_folder import record_study, refuse_strangers
from training.studies.summaries import check_summary_file, write_summaries


def reproduce_study(spec: StudySpec, out: str | Path, launcher: Launcher) -> tuple[Population | None, list[JobReturn]]:
    """Train every run of the reproduction ``spec`` into ``out`` (resumable) with ``launcher``,
    read the population and write its summaries; return it with the launch's returns (the
    population None while a launcher that does not wait, :attr:`~training.launch.Launcher.waits`,
    left runs submitted and unfinished: there is nothing to read yet)."""
    jobs = spec.jobs(out)
    refuse_strangers(jobs, out, "a reproduction")
    returns = run_study(jobs, out, launcher, REPRODUCE_BUSY, lambda: record_study(out, "reproduction", jobs))
    if not launcher.waits and any(r.status == RunStatus.RUNNING for r in returns):
        return None, returns
    population = read_population(spec, out)
    write_summaries(spec, out, population)
    return population, returns


def train_study(
    spec: StudySpec, out: str | Path, device: str, workers: int | None, progress: bool, backend: str | None = None, **options: Any
) -> tuple[Population | None, list[JobReturn]]:
    """Train ``spec`` with ``backend`` (None: :func:`~training.launch.backends.local_launcher`) and its ``options``."""
    refuse_nested(out, "a reproduction", "reproduction")  # before anything is printed or made (asked again when the folder is held)
    refuse_strangers(spec.jobs(out), out, "a reproduction")  # nor inside a study that does not name its runs
    check_summary_file(out)  # the files it writes at the end: never one of one's own
    check_output_file(Path(out) / "report.html", "report")
    launcher = local_launcher(device, workers, progress) if backend is None else build_launcher(backend, device=device, workers=workers, progress=progress, **options)
    if progress:
        jobs = spec.jobs(out)
        for run in jobs:
            print(f"[{run.name}] {run.config.model.architecture}, gamma={run.config.init.gamma}", file=sys.stderr, flush=True)
        print(f"training {len(jobs)} runs with the {launcher.name} launcher", file=sys.stderr, flush=True)
    return reproduce_study(spec, out, launcher)


def reproduce(
    preset: str = "cpu", seed: int = 0, out: str | Path = "runs/reproduce", device: str = "auto", progress: bool = True,
    precision: str = "fp32", workers: int | None = None, tasks: Sequence[str] | None = None, carry: Sequence[str] | None = None,
) -> Population:  # fmt: skip
    """Train both regimes of ``preset`` on ``tasks`` (default every task with a flip) for
    ``seed`` into ``out``; write ``out/summary.json`` and return the population of one.

    ``workers`` runs train at once, in worker processes of one torch thread each when it
    is above 1 (default: one per core on a CPU; on a GPU same-shape runs as one ensemble);
    with one worker the runs train here, one after another.  ``precision="bf16"`` trains
    under bfloat16 autocast (a folder trained at another precision is refused).  ``carry``:
    hold these quantities of the paper's recipe (:attr:`StudySpec.carry`)."""
    spec = reproduction_spec(preset, seed, None, precision=precision, tasks=tasks, carry=carry)
    population = train_study(spec, out, device, workers, progress)[0]
    assert population is not None  # the local launcher waits for its runs
    return population


def reproduction_spec(
    preset: str, seed: int | None, seeds: str | None, protocol: str = "strict", lrs: str | None = None, vary: str = "both",
    fixed_seed: int | None = None, precision: str = "fp32", tasks: Sequence[str] | None = None, carry: Sequence[str] | None = None,
    logged_every: int | None = None,
) -> StudySpec:  # fmt: skip
    """The spec of ``reproduce``: one draw (``seed``, default 0: its runs in the study folder
    itself) or a population (``seeds``, a comma list; ``--fixed-seed`` defaults to the first
    seed when one source is varied; ``logged_every``: the paper protocol reads only the
    epochs the released scripts log)."""
    if seeds is not None and seed is not None:
        raise ValueError("give --seed S (one draw) or --seeds S1,S2,... (a population), not both")
    tasks = REPRODUCE_TASKS if tasks is None else tuple(tasks)
    carry = None if carry is None else tuple(carry)
    if seeds is None:
        if (protocol, lrs, vary, fixed_seed, logged_every) != ("strict", None, "both", None, None):
            raise ValueError("--protocol paper, --lrs, --logged-every, --vary and --fixed-seed describe a population: give --seeds S1,S2,...")
        return StudySpec.reproduction(preset, (0 if seed is None else seed,), precision=precision, tasks=tasks, single=True, carry=carry)
    seed_list = parse_list(seeds, int, "--seeds")
    if vary != "both" and fixed_seed is None:
        fixed_seed = seed_list[0]
    lr_list = parse_list(lrs, float, "--lrs") if lrs is not None else None
    for task in tasks if lr_list else ():  # an lr under the preset's schedule floor: refused naming this command's flag
        train = make_run_config(preset, task=task).train
        floor = max(train.warmup_start_lr, train.min_lr)
        low = [lr for lr in lr_list or () if 0 < lr < floor]  # a non-positive lr is refused by the spec, naming it
        if low:
            raise ValueError(
                f"--lrs {low[0]:g} is below the {preset} preset's lr floor {floor:g} on {task} (its warmup starts and its cosine ends there): "
                f"the schedule would climb above its peak; give --lrs of at least {floor:g}"
            )
    runs = len(seed_list) * len(tasks) * 2 * (len(lr_list) if lr_list else 1)  # counted before a config is built
    if runs > MAX_POINTS:
        raise ValueError(
            f"--seeds and --lrs ask for {runs:,} runs ({len(seed_list):,} seeds x {len(tasks)} tasks x 2 regimes"
            f"{f' x {len(lr_list)} lrs' if lr_list else ''}), more than the {MAX_POINTS:,} a study may have; give fewer seeds (or lrs)"
        )
    return StudySpec.reproduction(preset, seed_list, protocol, lr_list, vary, fixed_seed, precision, tasks, carry=carry, logged_every=logged_every)


__all__ = ["reproduce", "reproduce_study", "reproduction_spec"]
