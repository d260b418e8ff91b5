"""Ship a reproduction's trained models with the package (``interp_init/pretrained/``).

Copies each run folder of a one-seed reproduction (``interp-init reproduce --preset P --seed S
--out SOURCE``) into ``interp_init/pretrained/<task>-<regime>/``: its ``config.json``,
``metrics.json`` and ``model.safetensors`` (weights only; no checkpoint, optimizer state or
report), and writes ``interp_init/pretrained/index.json``: per model its task, init, seed,
preset, training seconds and each file's SHA-256, and for all of them the command, the
commit, the machine and what ran beside it::

    python experiments/package_pretrained.py /work/pretrained-201 \\
        --command "interp-init reproduce --preset cpu --seed 201 --out /work/pretrained-201 --workers 1 --quiet" \\
        --commit a0dfdcd --machine "2-core CPU, one torch thread" --beside "two sweeps" \\
        --records experiments/results/verify-cpu-201-208/seed-201

With ``--records`` each run is compared with the stored record of the same run (its
``metrics.json``): the index says, per model, whether the weights' SHA-256 and the final
metrics are equal, or how far apart the final metrics are.  Refuses a run that did not
complete, and an ``interp_init/pretrained/`` model folder it did not make (``--replace``
replaces what it made).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import click

from interp_init.fileio import file_sha256
from interp_init.pretrained import INDEX_FILE, MODEL_FILES, PRETRAINED_DIR
from training.cli.errors import Script

ROOT = Path(__file__).resolve().parents[1]

#: The index's format; and the mark of a model folder this script made.
FORMAT = 1
MADE_BY = "experiments/package_pretrained.py"


def _runs(source: Path) -> list[Path]:
    return sorted(p.parent for p in source.glob("*/*/config.json"))


def _compare(run: Path, record: Path) -> dict[str, Any]:
    """How ``run``'s metrics compare with the stored record's: equal weights and finals, or the largest difference."""
    ours, theirs = (json.loads((p / "metrics.json").read_text()) for p in (run, record))
    same_weights = ours.get("weights_sha256") == theirs.get("weights_sha256")
    finals = [(k, ours["final"].get(k), theirs["final"].get(k)) for k in set(ours["final"]) | set(theirs["final"])]
    gaps = [abs(a - b) for _, a, b in finals if isinstance(a, (int, float)) and isinstance(b, (int, float))]
    return {
        "record": record.relative_to(ROOT).as_posix() if record.is_relative_to(ROOT) else str(record),
        "weights_sha256_equal": same_weights,
        "final_equal": ours["final"] == theirs["final"],
        "largest_final_difference": max(gaps, default=0.0),
    }


@click.command(cls=Script, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--command", "command_", required=True, help="The exact command that trained SOURCE.")
@click.option("--commit", required=True, help="The commit of the code that trained it.")
@click.option("--machine", required=True, help="The machine: cores, accelerator, threads per run.")
@click.option("--beside", required=True, help="What ran beside it on the same machine ('nothing' if nothing).")
@click.option(
    "--records",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The stored records of the same runs (<task>/<regime> folders) to compare with.",
)
@click.option("--replace", is_flag=True, help="Replace models this script shipped before (and nothing else).")
def main(
    source: Path, command_: str, commit: str, machine: str, beside: str, records: Path | None, replace: bool
) -> None:
    """Copy SOURCE's trained run folders into interp_init/pretrained/ and write its index."""
    runs = _runs(source)
    if not runs:
        raise click.UsageError(
            f"{source}: no run folders (<task>/<regime>/config.json); pass the --out of interp-init reproduce --seed S"
        )
    models: dict[str, Any] = {}
    for run in runs:
        metrics = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").is_file() else {}
        if metrics.get("status") != "completed" or not (run / "model.safetensors").is_file():
            raise click.UsageError(
                f"{run}: not a completed run with weights (status {metrics.get('status')!r}); let it finish first"
            )
        config = json.loads((run / "config.json").read_text())
        task, regime = run.parent.name, run.name
        name = f"{task}-{regime}"
        models[name] = {
            "task": task,
            "regime": regime,
            "gamma": config["init"]["gamma"],
            "seed": config["seed"],
            "preset": config["preset"],
            "elapsed_s": metrics["elapsed_s"],
            "sha256": {f: file_sha256(run / f) for f in MODEL_FILES},
            **({"compared": _compare(run, records / task / regime)} if records is not None else {}),
        }
    index_path = PRETRAINED_DIR / INDEX_FILE
    old = json.loads(index_path.read_text()) if index_path.is_file() else None
    for name in models:
        if (PRETRAINED_DIR / name).exists() and not (
            replace and old is not None and old.get("made_by") == MADE_BY and name in old.get("models", {})
        ):
            raise click.UsageError(
                f"{PRETRAINED_DIR / name} exists: pass --replace to replace the models this script shipped"
            )
    for name, entry in models.items():
        target = PRETRAINED_DIR / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for file in MODEL_FILES:
            shutil.copy2(source / entry["task"] / entry["regime"] / file, target / file)
    index = {
        "format": FORMAT,
        "made_by": MADE_BY,
        "command": command_,
        "commit": commit,
        "machine": machine,
        "beside": beside,
        "models": models,
    }
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    total = sum((PRETRAINED_DIR / n / f).stat().st_size for n in models for f in MODEL_FILES)
    click.echo(f"shipped {len(models)} models in {PRETRAINED_DIR.relative_to(ROOT)}: {total / 1e6:.1f} MB")
    for name, entry in models.items():
        if "compared" in entry:
            c = entry["compared"]
            click.echo(
                f"{name}: weights {'equal' if c['weights_sha256_equal'] else 'differ'}, final metrics "
                f"{'equal' if c['final_equal'] else 'differ by up to ' + format(c['largest_final_difference'], '.3g')} to {c['record']}"
            )


if __name__ == "__main__":
    main()
