"""What a Slurm launch asks the cluster for: :class:`SlurmOptions` (each field names the
``sbatch`` option it sets) and the command line's ``--slurm-*`` options
(:data:`SLURM_FLAGS`, read by :func:`slurm_options_from`).  Imports neither torch nor submitit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CLUSTERS = ("slurm", "local")
#: The command line's --slurm-* options: name -> (kind, default, help naming the sbatch option it sets).
SLURM_FLAGS: dict[str, tuple[str, Any, str]] = {
    "partition": ("str", None, "Slurm partition (sbatch --partition) [default: the cluster's default]."),
    "time": (
        "int1",
        60,
        "Minutes one job may run (sbatch --time): a chunk's limit, not the run's; a longer run checkpoints and is requeued.",
    ),
    "gpus": ("int0", 0, "GPUs per job (sbatch --gpus-per-node)."),
    "cpus": ("int1", 1, "CPUs per job (sbatch --cpus-per-task), also each run's torch threads."),
    "mem": ("float", None, "Memory per job in GB (sbatch --mem) [default: the partition's]."),
    "array_parallelism": ("int1", 256, "At most this many jobs of the array at once (the %N of sbatch --array)."),
    "account": ("str", None, "Account to charge (sbatch --account)."),
    "qos": ("str", None, "Quality of service (sbatch --qos)."),
    "constraint": ("str", None, "Node features, e.g. a GPU type (sbatch --constraint)."),
    "signal_delay": (
        "int1",
        90,
        "Seconds before the time limit Slurm warns a job (sbatch --signal=USR2@S); a chunk ends twice this before the limit.",
    ),
    "chunk_seconds": (
        "float",
        None,
        "Seconds a job trains before it checkpoints and requeues itself [default: until twice --slurm-signal-delay before --slurm-time].",
    ),
    "ensemble_size": (
        "int1",
        None,
        "Train up to this many same-shape runs together in one job (GPUs) [default: one run per job].",
    ),
}

#: The sbatch options (long and short names) a --slurm-* option sets: --slurm-sbatch may not set them again.
SBATCH_OWNED = {
    "partition": "--slurm-partition",
    "p": "--slurm-partition",
    "time": "--slurm-time",
    "t": "--slurm-time",
    "gpus-per-node": "--slurm-gpus",
    "cpus-per-task": "--slurm-cpus",
    "c": "--slurm-cpus",
    "mem": "--slurm-mem",
    "account": "--slurm-account",
    "A": "--slurm-account",
    "qos": "--slurm-qos",
    "q": "--slurm-qos",
    "constraint": "--slurm-constraint",
    "C": "--slurm-constraint",
    "signal": "--slurm-signal-delay",
    "array": "--slurm-array-parallelism",
    "a": "--slurm-array-parallelism",
}
#: The sbatch options the launcher sets itself (where the jobs' logs go, the job's name).
SBATCH_LAUNCHER = {"output", "o", "error", "e", "open-mode", "job-name", "J"}


def check_sbatch_option(key: str, value: str) -> None:
    """Refuse an extra sbatch option (``--slurm-sbatch KEY=VALUE``) that a ``--slurm-*``
    option or the launcher itself sets: given twice, one of the two would silently win."""
    name = key.strip("-")
    name = name if len(name) == 1 else name.replace("_", "-")
    if name in SBATCH_OWNED:
        flag = SBATCH_OWNED[name]
        raise ValueError(f"--slurm-sbatch {key}={value} sets what {flag} sets; give it once, with {flag}")
    if name in SBATCH_LAUNCHER:
        raise ValueError(
            f"--slurm-sbatch {key}={value} sets what the launcher sets itself (the jobs' logs in STUDY/.slurm/logs, "
            "their name); leave it out"
        )


@dataclass(frozen=True)
class SlurmOptions:
    """What a Slurm launch asks the cluster for (each field names the ``sbatch`` option it sets).

    ``partition`` (``--partition``), ``time_min`` (``--time``, minutes: each chunk's time
    limit, not the run's: a longer run is requeued), ``gpus`` (``--gpus-per-node``),
    ``cpus`` (``--cpus-per-task``, also each run's torch threads), ``mem_gb`` (``--mem``),
    ``array_parallelism`` (the ``%P`` of ``--array``: at most this many jobs at once),
    ``account`` (``--account``), ``qos`` (``--qos``), ``constraint`` (``--constraint``),
    ``signal_delay_s`` (``--signal=USR2@S``: the warning before the time limit),
    ``sbatch_args`` (any other ``sbatch`` option, ``(("reservation", "x"),)`` for
    ``--reservation=x``) and ``setup`` (shell lines run before each job, e.g.
    ``module load cuda``).

    A job trains until twice ``signal_delay_s`` before its time limit (an epoch that ends
    past that still ends before Slurm's signal, unless one epoch takes longer than the
    signal delay), or for ``chunk_seconds`` from its process's start if that is sooner;
    then it checkpoints and requeues itself.  ``ensemble_size``: train up
    to this many same-shape runs together in one job (GPUs) [default: one run per job].
    ``max_requeues``: how many times one job may be requeued.  ``device``: where a job
    trains (``auto``: its GPU when it has one).  ``wait``: wait for the jobs (else return
    once they are submitted); ``poll_s``: how often to look while waiting.  ``cluster``:
    ``slurm``, or ``local`` for submitit's local executor (tests).
    """

    partition: str | None = None
    time_min: int = 60
    gpus: int = 0
    cpus: int = 1
    mem_gb: float | None = None
    array_parallelism: int = 256
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    signal_delay_s: int = 90
    sbatch_args: tuple[tuple[str, str], ...] = ()
    setup: tuple[str, ...] = ()
    chunk_seconds: float | None = None
    ensemble_size: int | None = None
    max_requeues: int = 1000
    device: str = "auto"
    wait: bool = True
    poll_s: float = 10.0
    cluster: str = "slurm"

    def __post_init__(self) -> None:
        for name in ("time_min", "cpus", "array_parallelism", "signal_delay_s", "max_requeues"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"slurm {name} must be an integer >= 1, got {value!r}")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 0:
            raise ValueError(f"slurm gpus must be an integer >= 0, got {self.gpus!r}")
        if self.ensemble_size is not None and (
            isinstance(self.ensemble_size, bool) or not isinstance(self.ensemble_size, int) or self.ensemble_size < 1
        ):
            raise ValueError(
                f"slurm ensemble_size must be an integer >= 1 (or None: one run per job), got {self.ensemble_size!r}"
            )
        for name in ("mem_gb", "chunk_seconds", "poll_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"slurm {name} must be a positive number, got {value!r}")
        if self.cluster not in CLUSTERS:
            raise ValueError(f"slurm cluster must be one of {CLUSTERS}, got {self.cluster!r}")
        if self.chunk_seconds is None and self.time_min * 60 <= 2 * self.signal_delay_s:
            raise ValueError(
                f"slurm time_min {self.time_min} leaves no chunk: a chunk ends twice the signal delay ({self.signal_delay_s} s) "
                "before the time limit; give a longer --slurm-time or a shorter --slurm-signal-delay"
            )
        for pair in self.sbatch_args:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair)):
                raise ValueError(
                    f"slurm sbatch_args must be (option, value) pairs such as ('reservation', 'gpu-day'), got {pair!r}"
                )
            check_sbatch_option(*pair)
        keys = [pair[0].strip("-").replace("_", "-") for pair in self.sbatch_args]
        if len(set(keys)) < len(keys):
            twice = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"--slurm-sbatch sets {twice} twice; give each sbatch option once")

    def executor_parameters(self) -> dict[str, Any]:
        """The submitit executor's parameters (``SlurmExecutor``'s are ``sbatch`` options)."""
        if self.cluster == "local":
            return {"timeout_min": self.time_min, "gpus_per_node": self.gpus, "signal_delay_s": self.signal_delay_s}
        params: dict[str, Any] = {
            "time": self.time_min,
            "cpus_per_task": self.cpus,
            "signal_delay_s": self.signal_delay_s,
            "array_parallelism": self.array_parallelism,
            "job_name": "interp-init",
        }
        if self.gpus:
            params["gpus_per_node"] = self.gpus
        optional = {
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "constraint": self.constraint,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        if self.mem_gb is not None:
            params["mem"] = f"{max(1, round(self.mem_gb * 1024))}M"
        if self.setup:
            params["setup"] = list(self.setup)
        if self.sbatch_args:
            params["additional_parameters"] = dict(self.sbatch_args)
        return params


def slurm_options_from(backend: str, device: str, flags: dict[str, Any]) -> SlurmOptions | None:
    """The :class:`SlurmOptions` of the command line's ``--slurm-*`` options (popped from
    ``flags``); None unless ``backend`` is ``slurm`` (where any --slurm-* given is refused)."""
    values = {k[len("slurm_") :]: flags.pop(k) for k in list(flags) if k.startswith("slurm_")}
    if backend != "slurm":
        defaults = {k: v[1] for k, v in SLURM_FLAGS.items()} | {
            "setup": (),
            "sbatch": (),
            "no_wait": False,
            "cluster": "slurm",
        }
        given = sorted(k for k, v in values.items() if v != defaults[k])
        if given:
            raise ValueError(f"--slurm-{given[0].replace('_', '-')} applies to --backend slurm only")
        return None
    pairs = []
    for item in values["sbatch"]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip("-") or not value:
            raise ValueError(f"--slurm-sbatch takes OPTION=VALUE (e.g. reservation=gpu-day), got {item!r}")
        pairs.append((key.strip("-"), value))
    return SlurmOptions(
        partition=values["partition"],
        time_min=values["time"],
        gpus=values["gpus"],
        cpus=values["cpus"],
        mem_gb=values["mem"],
        array_parallelism=values["array_parallelism"],
        account=values["account"],
        qos=values["qos"],
        constraint=values["constraint"],
        signal_delay_s=values["signal_delay"],
        sbatch_args=tuple(pairs),
        setup=tuple(values["setup"]),
        chunk_seconds=values["chunk_seconds"],
        ensemble_size=values["ensemble_size"],
        device=device,
        wait=not values["no_wait"],
        cluster=values["cluster"],
    )
