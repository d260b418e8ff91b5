"""The ``interp-init`` command line: a thin layer over the library's dataclasses.

``main(argv)`` is the testable entry point; it returns the exit code:

* 0: everything the command was asked to do was done;
* 1: the command ran but some of its work failed or diverged (a diverged ``train``, a
  sweep with failed or diverged runs, a report or phase diagram over failed, diverged or
  missing runs); it ends with one line on stderr, ``interp-init: ...``, saying what and
  where to look;
* 2: bad input (one line naming the problem, ``interp-init: error: ...``, no traceback;
  nothing is written) or a usage error;
* 130 / 143: interrupted by SIGINT / SIGTERM.

The ``train`` command has one flag per run-config field (``--d-model``,
``--weight-decay``, ...), named like a sweep spec's keys (with underscores).  The flags
and their help come from :data:`FIELDS`, not from the config dataclasses, so that
``interp-init --help`` and ``interp-init train --help`` import neither torch nor
TransformerLens; ``tests/test_cli_help.py`` checks that :data:`FIELDS` matches the
dataclasses.  Every module that needs torch is imported inside the command that uses it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

#: The anchor-function tasks (``interp_init.tasks.TASKS``; checked by tests/test_cli_help.py).
TASK_CHOICES: tuple[str, ...] = ("symmetric", "id-ood", "complexity")
#: The run presets (``training.config.PRESETS``; checked by tests/test_cli_help.py).
PRESET_CHOICES: tuple[str, ...] = ("cpu", "paper", "tiny")

_MODEL, _INIT, _DATA, _TRAIN = "model", "init", "data", "train"

#: Every run-config field but ``task`` (its own option) and ``seed``: flat name ->
#: (section, type, what it means, choices or None).  The section is the config class
#: (``interp_init.ModelConfig``, ``interp_init.InitConfig``, ``training.DataConfig``,
#: ``training.TrainConfig``); the type is ``int``, ``float``, ``str`` or ``bool``.
FIELDS: dict[str, tuple[str, str, str, tuple[str, ...] | None]] = {
    # model
    "architecture": (_MODEL, "str", "Transformer block: neurips (post-LN, ReLU, no attention or MLP biases: the NeurIPS 2024 model), "
                     "journal (pre-LN on the query only, with biases: the journal paper's model) or standard "
                     "(TransformerLens' GPT-2 block). Default: the task's paper's (neurips for symmetric and complexity, journal for id-ood).",
                     ("neurips", "journal", "standard")),
    "n_layers": (_MODEL, "int", "Number of transformer blocks.", None),
    "d_model": (_MODEL, "int", "Width of the residual stream (the embedding size).", None),
    "n_heads": (_MODEL, "int", "Attention heads per layer.", None),
    "d_head": (_MODEL, "int", "Width of each attention head (its query, key and value size).", None),
    "d_mlp": (_MODEL, "int", "Hidden width of each MLP.", None),
    "d_vocab": (_MODEL, "int", "Vocabulary size; the anchor tasks use tokens 0..200, so 201.", None),
    "n_ctx": (_MODEL, "int", "Context length in tokens; the anchor tasks' sequences have 9.", None),
    "act_fn": (_MODEL, "str", "MLP activation. Default: the architecture's (relu for neurips, gelu otherwise).",
               ("gelu", "gelu_new", "relu", "silu", "gelu_fast")),
    "normalization_type": (_MODEL, "str", "Normalization layer: LayerNorm (LN) or its variants; other than LN for --architecture standard only.",
                           ("LN", "LNPre", "RMS", "RMSPre")),
    # init
    "gamma": (_INIT, "float", "Initialization scale: weights drawn from N(0, std = d_in^-gamma). Large gamma is small init "
              "(the papers' reasoning regime), small gamma is large init (memorizing).", None),
    "convention": (_INIT, "str", "What d_in is: reference (d_model for every matrix, output projections further divided by "
                   "sqrt(2 n_layers): the journal's code) or fan_in (each matrix's true input width: the NeurIPS experiments). "
                   "Default: the architecture's (fan_in for neurips, reference otherwise).", ("reference", "fan_in")),
    "gamma_embed": (_INIT, "float", "Gamma of the embeddings W_E and W_pos. Default: --gamma.", None),
    "gamma_qk": (_INIT, "float", "Gamma of the attention's W_Q and W_K. Default: --gamma.", None),
    "gamma_vo": (_INIT, "float", "Gamma of the attention's W_V and W_O. Default: --gamma.", None),
    "gamma_mlp": (_INIT, "float", "Gamma of the MLPs' W_in and W_out. Default: --gamma.", None),
    "gamma_unembed": (_INIT, "float", "Gamma of the unembedding W_U. Default: --gamma.", None),
    # data
    "n_train": (_DATA, "int", "Number of training samples.", None),
    "n_test": (_DATA, "int", "Number of samples in each test split (in-distribution test, held-out pairs).", None),
    "k": (_DATA, "int", "complexity task only: how many of the 6 symmetric anchor-pair groups get a non-inferential "
          "target, shifted by --offset (0..6).", None),
    "offset": (_DATA, "int", "complexity task only: the shift (non-zero) of a non-inferential target from the composite x + s(a1) + s(a2).", None),
    # train
    "epochs": (_TRAIN, "int", "Passes over the training set.", None),
    "batch_size": (_TRAIN, "int", "Samples per optimizer step.", None),
    "lr": (_TRAIN, "float", "Peak learning rate of AdamW, reached at the end of the warmup.", None),
    "warmup_start_lr": (_TRAIN, "float", "Learning rate at the start of the linear warmup.", None),
    "min_lr": (_TRAIN, "float", "Learning rate at the end of the cosine decay, and after it.", None),
    "warmup_epochs": (_TRAIN, "float", "Epochs of linear warmup from --warmup-start-lr to --lr (may be fractional).", None),
    "cosine_epochs": (_TRAIN, "float", "Epochs of cosine decay from --lr to --min-lr after the warmup (0: --lr throughout).", None),
    "weight_decay": (_TRAIN, "float", "AdamW weight decay.", None),
    "beta1": (_TRAIN, "float", "AdamW decay rate of the gradient's running mean, in [0, 1).", None),
    "beta2": (_TRAIN, "float", "AdamW decay rate of the squared gradient's running mean, in [0, 1).", None),
    "eps": (_TRAIN, "float", "AdamW epsilon (added to the denominator).", None),
    "grad_clip": (_TRAIN, "float", "Clip the gradient's norm to this value (0: no clipping).", None),
    "eval_every": (_TRAIN, "int", "Evaluate every this many epochs (and after the last one).", None),
    "eval_samples": (_TRAIN, "int", "Training samples on which each evaluation measures the training accuracy.", None),
    "checkpoint_every": (_TRAIN, "int", "Write checkpoint.pt, the point a killed run resumes from, every this many epochs.", None),
    "fast_forward": (_TRAIN, "bool", "Train through the forward restricted to the last position (the same function, faster), "
                     "or, with --no-fast-forward, through the full hooked forward.", None),
    "precision": (_TRAIN, "str", "Forward precision: fp32, or bf16 (bfloat16 autocast; weights, optimizer and evaluation stay fp32).",
                  ("fp32", "bf16")),
}  # fmt: skip

_CLICK_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str}
_METAVARS: dict[str, str] = {"int": "INTEGER", "float": "NUMBER"}


def config_options(func: Any) -> Any:
    """Decorate a click command with one ``--flag`` per run-config field (default: the preset's)."""
    for name, (_section, kind, meaning, choices) in reversed(list(FIELDS.items())):
        flag = "--" + name.replace("_", "-")
        if kind == "bool":
            func = click.option(f"{flag}/--no-{name.replace('_', '-')}", name, default=None, help=meaning)(func)
            continue
        # Choices are listed, not enforced by click: the config's own validation names the
        # field and the allowed values in one line (docs/bad-input.md).
        metavar = "[" + "|".join(choices) + "]" if choices else _METAVARS[kind]
        func = click.option(flag, name, type=_CLICK_TYPES[kind], default=None, metavar=metavar, help=meaning)(func)
    return func


_TASK_HELP = (
    "Anchor-function task: symmetric (pair (4,3) held out; does the model infer x - 10 or copy the symmetric x - 6?), "
    "id-ood (pairs (3,4) and (4,3) held out: in- and out-of-distribution accuracy) or complexity (all 16 pairs, "
    "k groups with non-inferential targets)."
)
_PRESET_HELP = (
    "Run size, the defaults of every option below: tiny (seconds, for smoke tests), cpu (7-9 minutes per model on "
    "one CPU core) or paper (the papers' scale: d_model 400, 900k samples, 210 epochs; hours, for a GPU). "
    "Default: paper where a CUDA GPU is used, else cpu."
)
_DEVICE_HELP = "Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N."


def run_options(func: Any) -> Any:
    """The options every training command shares: task, preset, seed, device, progress."""
    func = click.option("--quiet", is_flag=True, help="No progress bar.")(func)
    func = click.option("--device", default="auto", show_default=True, metavar="[auto|cpu|cuda|cuda:N]", help=_DEVICE_HELP)(func)
    func = click.option("--seed", type=int, default=0, show_default=True, metavar="INTEGER", help="Run seed; every random source (init, data, shuffling) derives from it.")(func)
    func = click.option("--preset", default=None, metavar="[" + "|".join(PRESET_CHOICES) + "]", help=_PRESET_HELP)(func)
    func = click.option("--task", default="symmetric", show_default=True, metavar="[" + "|".join(TASK_CHOICES) + "]", help=_TASK_HELP)(func)
    return func


def overrides_from(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The flat run options a user actually gave (those not left at None)."""
    return {k: v for k, v in kwargs.items() if k in FIELDS and v is not None}


def default_preset(device: str) -> tuple[str, str]:
    """The run preset ``train`` uses without ``--preset``, and why: ``paper`` on a CUDA GPU,
    ``cpu`` otherwise (never a paper-scale run on a CPU by default)."""
    if device == "cpu":
        return "cpu", "--device cpu"
    if device.startswith("cuda"):
        return "paper", f"--device {device}"
    import torch  # only here: --help must not pay for it

    if torch.cuda.is_available():
        return "paper", "a CUDA GPU is available"
    return "cpu", "no CUDA GPU found; --preset paper would take hours on a CPU"


#: Subcommands implemented in other modules, imported only when used (click's lazy-group
#: pattern), so that ``interp-init train`` and ``--help`` do not pay for their imports.
LAZY_COMMANDS: dict[str, str] = {
    "reproduce": "training.reproduce:reproduce_command",
    "sweep": "training.sweep:sweep_command",
    "phase-diagram": "training.phase:phase_diagram_command",
    "report": "training.report:report_command",
}
#: Their one-line help in ``interp-init --help`` (listing them must not import them).
LAZY_HELP: dict[str, str] = {
    "reproduce": "Train small-init and large-init on the symmetric and id-ood tasks; print the flip.",
    "sweep": "Train every point of a grid SPEC (JSON or TOML) into --out; resumable; writes results.csv.",
    "phase-diagram": "Rebuild SWEEP_DIR/results.csv and write the papers' figures it supports as offline HTML.",
    "report": "Write one offline HTML page comparing RUN_DIRS (run folders, or folders that hold them).",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            import importlib

            module_name, _, attr = LAZY_COMMANDS[name].partition(":")
            self.add_command(getattr(importlib.import_module(module_name), attr), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
            else:
                rows.append((name, LAZY_HELP.get(name, "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Train gamma-initialized transformers on anchor functions and probe what they learned.

    Exit codes: 0 done; 1 some of the work failed or diverged (one line on stderr says
    what); 2 bad input or usage; 130/143 interrupted.
    """


@cli.command(
    "train",
    short_help="Train one model into a run folder.",
    epilog="Options not given take the --preset's value. A diverged run (non-finite loss) exits with code 1.",
)
@run_options
@config_options
@click.option("--out", required=True, type=click.Path(file_okay=False), metavar="DIR", help="Run folder to write (resumed if it holds an unfinished run of the same config).")
def train_command(task: str, preset: str | None, seed: int, device: str, quiet: bool, out: str, **kwargs: Any) -> None:
    """Train one model into a run folder (config.json, metrics.json, model.safetensors)."""
    from training.config import make_run_config
    from training.loop import train

    if preset is None:
        preset, why = default_preset(device)
        click.echo(f"interp-init: no --preset given: using --preset {preset} ({why})", err=True)
    cfg = make_run_config(preset, task=task, seed=seed, **overrides_from(kwargs))
    result = train(cfg, out, device=device, progress=not quiet)
    final = result.metrics["final"]
    summary = {k: v for k, v in final.items() if k in ("train_acc", "id_acc", "ood_acc", "commutativity", "heldout")}
    status = result.metrics["status"]
    click.echo(f"{status}: {out}  {summary}")
    if status != "completed":
        step = result.metrics.get("diverged_at_step")
        where = f" at step {step}" if step is not None else ""
        click.echo(
            f"interp-init: the run {status}{where} (non-finite training loss): see {out}/metrics.json; "
            "a lower --lr, gradient clipping (--grad-clip) or a larger --gamma may keep it finite",
            err=True,
        )
        raise click.exceptions.Exit(1)


# ---------------------------------------------------------------- reproduce
# (slot: the `reproduce` command)


# ---------------------------------------------------------------- sweep
# (slot: the `sweep` command)


# ---------------------------------------------------------------- phase-diagram
# (slot: the `phase-diagram` command)


# ---------------------------------------------------------------- report
# (slot: the `report` command)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot write or read {exc.filename}: {exc.strerror}"
    return " ".join(str(exc).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    In click's non-standalone mode ``ctx.exit(code)`` and ``raise click.exceptions.Exit(code)``
    come back as ``cli.main``'s return value (commands themselves return ``None``), so an
    integer returned there is the exit code.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name="interp-init", standalone_mode=False)
    except click.exceptions.Exit as exc:  # pragma: no cover - click returns it in non-standalone mode
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort as exc:
        # click turns KeyboardInterrupt (Ctrl-C, SIGINT) into Abort; a sweep's SIGTERM
        # handler raises a KeyboardInterrupt that carries its own exit code (143).
        code = getattr(exc.__cause__, "signal_exit_code", 130)
        click.echo("interp-init: aborted" if code == 130 else "interp-init: terminated (SIGTERM)", err=True)
        return code
    except (ValueError, OSError) as exc:
        click.echo(f"interp-init: error: {_one_line(exc)}", err=True)
        return 2
    if isinstance(rv, int) and not isinstance(rv, bool):
        return rv
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
