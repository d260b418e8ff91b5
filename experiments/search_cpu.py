"""Search for a CPU-sized preset that shows the memorize-versus-reason flip.

Each ``run`` spec is a comma-separated list of flat options over the base below, e.g.::

    python experiments/search_cpu.py run --root runs/search \
        "task=symmetric,d_model=128,gamma=0.7,lr=2.5e-4,epochs=20"

runs them one after another (1 torch thread each; start two processes for two at a time)
with :func:`training.train`, one run folder per spec (a killed search resumes).
``status`` prints one line per run folder under ``--root`` from its ``metrics.json``
(finished or not), so a running search can be polled.  ``rates`` judges candidates by
rates over seeds: for each sweep folder over seeds (``interp-init sweep`` with a ``seed``
grid) and the regime it stands for, how many seeds meet the reproduction's criteria for
that cell, with 95% exact intervals::

    python experiments/search_cpu.py rates runs/search/sym-small-g0.87:small-init
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import click
import torch

from training.config import make_run_config
from training.loop import read_metrics, train

#: The search's base (2 layers, 1 head, d_head = d_model / 2, d_mlp = 3 d_model).
BASE = dict(
    n_layers=2, n_heads=1, n_train=40_000, n_test=2_000, batch_size=512,
    weight_decay=0.01, grad_clip=1.0, eval_every=1, eval_samples=2_000,
)  # fmt: skip


def parse_spec(spec: str) -> dict:
    """``"d_model=128,gamma=0.7"`` -> flat options (ints, floats, strings)."""
    out: dict = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, _, raw = item.partition("=")
        value: object = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                continue
        out[key] = value
    return out


def options_for(spec: str) -> dict:
    """The full flat options of a spec: base, then spec; derived sizes and schedule."""
    opts = {**BASE, **parse_spec(spec)}
    d = opts.setdefault("d_model", 128)
    opts.setdefault("d_head", d // 2)
    opts.setdefault("d_mlp", 3 * d)
    epochs = opts.setdefault("epochs", 20)
    lr = opts.setdefault("lr", 1e-3)
    warm = opts.setdefault("warmup_epochs", max(0.05 * epochs, 1.0))
    opts.setdefault("cosine_epochs", epochs - warm)
    opts.setdefault("warmup_start_lr", lr * 0.05)
    opts.setdefault("min_lr", lr * 0.05)
    opts.setdefault("seed", 0)
    return opts


def run_name(spec: str) -> str:
    return spec.replace(",", "_").replace("=", "")


def line(name: str, metrics: dict | None) -> str:
    if not metrics or not metrics.get("history"):
        return f"{name:70s} (no epoch yet)"
    h = metrics["history"][-1]
    extra = ""
    if "heldout" in h:
        ho = h["heldout"]["4,3"]
        extra = f"inf {ho['inferential']:.2f} sym {ho['symmetric']:.2f}"
    elif "ood_acc" in h:
        extra = f"ood {h['ood_acc']:.2f} comm {h['commutativity']:.2f}"
    return (
        f"{name:70s} {metrics['status'][:4]} ep {h['epoch']:3d} loss {h['loss']:.3f} "
        f"train {h.get('train_acc', 0):.2f} id {h.get('id_acc', 0):.2f} {extra} {metrics['elapsed_s']:.0f}s"
    )


@click.group()
def cli() -> None:
    """CPU preset search."""


@cli.command("run")
@click.option("--root", default="runs/search", show_default=True)
@click.option("--threads", default=1, show_default=True)
@click.argument("specs", nargs=-1, required=True)
def run_command(root: str, threads: int, specs: tuple[str, ...]) -> None:
    """Train each SPEC (one after another) into ROOT/<spec name>."""
    torch.set_num_threads(threads)
    for spec in specs:
        opts = options_for(spec)
        cfg = make_run_config("paper", **opts)
        folder = Path(root) / run_name(spec)
        t0 = time.perf_counter()
        result = train(cfg, folder, device="cpu", progress=False)
        click.echo(line(run_name(spec), result.metrics) + f" wall {time.perf_counter() - t0:.0f}s", nl=True)


@cli.command("status")
@click.option("--root", default="runs/search", show_default=True)
@click.option("--full", is_flag=True, help="Every epoch, not only the last.")
def status_command(root: str, full: bool) -> None:
    """One line per run folder (its last epoch), finished or not."""
    for folder in sorted(Path(root).glob("*"), key=lambda p: p.stat().st_mtime):
        metrics = read_metrics(folder)
        if full and metrics:
            for i in range(1, len(metrics["history"]) + 1):
                click.echo(line(folder.name, {**metrics, "history": metrics["history"][:i]}))
        else:
            click.echo(line(folder.name, metrics))


@cli.command("json")
@click.option("--root", default="runs/search", show_default=True)
def json_command(root: str) -> None:
    """One JSON line per finished run: its options and final numbers (for the doc)."""
    for folder in sorted(Path(root).glob("*"), key=lambda p: p.stat().st_mtime):
        metrics = read_metrics(folder)
        if metrics and metrics["history"]:
            cfg = json.loads((folder / "config.json").read_text())
            h = metrics["history"][-1]
            click.echo(json.dumps({"name": folder.name, "status": metrics["status"], "elapsed_s": metrics["elapsed_s"],
                                   "config": cfg, "last": {k: v for k, v in h.items() if k != "per_pair"}}))


def _other(model: dict, init: dict, train_cfg: dict) -> str:
    """What differs from the search base besides the table's columns."""
    out = [] if model["n_layers"] == 2 else [f"{model['n_layers']} layers"]
    if model["n_heads"] != 1:
        out.append(f"{model['n_heads']} heads of d_head {model['d_head']}")
    out += [f"{k}={init[k]}" for k in ("gamma_embed", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_unembed") if init.get(k) is not None]
    if "fast_forward" not in train_cfg:
        out.append("full hooked forward")
    return ", ".join(out)


@cli.command("table")
@click.option("--root", default="runs/search", show_default=True)
def table_command(root: str) -> None:
    """A markdown table of every run under ``--root`` (the doc's search record)."""
    click.echo(
        "| task | architecture | d_model | gamma | wd | lr (peak; warmup from, epochs; min) | batch | n_train | epochs run "
        "| conv. | seed | data v. | train | ID | (4,3) inf / sym or OOD / comm. | status | train s | other |"
    )
    click.echo("|" + "---|" * 18)
    for folder in sorted(Path(root).glob("*"), key=lambda p: p.stat().st_mtime):
        metrics = read_metrics(folder)
        if not metrics or not metrics["history"]:
            continue
        c = json.loads((folder / "config.json").read_text())
        m, i, d, t = c["model"], c["init"], c["data"], c["train"]
        h = metrics["history"][-1]
        if "heldout" in h:
            ho = h["heldout"]["4,3"]
            held = f"{ho['inferential']:.2f} / {ho['symmetric']:.2f}"
        else:
            held = f"{h.get('ood_acc', float('nan')):.2f} / {h.get('commutativity', float('nan')):.2f}"
        sched = f"{t['lr']:g}; {t['warmup_start_lr']:g}, {t['warmup_epochs']:g}; {t['min_lr']:g}"
        click.echo(
            f"| {d['task']} | {m.get('architecture', 'standard')} | {m['d_model']} | {i['gamma']} | {t['weight_decay']} | {sched} | {t['batch_size']} "
            f"| {d['n_train']} | {h['epoch']}/{t['epochs']} | {i['convention'] or 'its own'} | {c['seed']} | {c.get('data_version', 1)} | {h['train_acc']:.2f} "
            f"| {h['id_acc']:.2f} | {held} | {'stopped' if metrics['status'] == 'running' else metrics['status']} | {metrics['elapsed_s']:.0f} "
            f"| {_other(m, i, t)} |"
        )


def _cell_criteria() -> dict[str, dict[str, tuple[str, Callable[[dict], bool]]]]:
    """regime -> task -> (the criterion of that cell, its test on a run's final numbers), with
    the thresholds of ``training.reproduce.CRITERIA``."""
    from interp_init.anchor_tasks import heldout_answer
    from training.reproduce import CRITERIA as C

    def answer(f: dict) -> str:
        shares = f["heldout"]["4,3"]
        return heldout_answer(shares.get("inferential"), shares.get("symmetric"), (f.get("per_pair") or {}).get("3,4"), C)

    return {
        "small-init": {
            "symmetric": (f"(4,3) inferential >= {C['min_small_inferential']} with (3,4) fitted", lambda f: answer(f) == "inferential"),
            "id-ood": (f"OOD >= {C['min_small_ood']}", lambda f: f["ood_acc"] >= C["min_small_ood"]),
        },
        "large-init": {
            "symmetric": (f"(4,3) symmetric >= {C['min_large_symmetric']}", lambda f: answer(f) == "symmetric"),
            "id-ood": (f"OOD <= {C['max_large_ood']}", lambda f: f["ood_acc"] <= C["max_large_ood"]),
        },
    }


def _seed_label(cfg: dict) -> str:
    """A run's seed as the rates table names it: ``3``, or ``init 2 data 0`` where the
    init and the data were seeded apart (``--init-seed`` / ``--data-seed``)."""
    init, data = cfg.get("init_seed"), cfg.get("data_seed")
    if init is None and data is None:
        return str(cfg["seed"])
    return f"init {cfg['seed'] if init is None else init} data {cfg['seed'] if data is None else data}"


@cli.command("rates")
@click.argument("folders", nargs=-1, required=True, metavar="SWEEP_DIR:REGIME...")
def rates_command(folders: tuple[str, ...]) -> None:
    """Per candidate (a sweep folder over seeds, with the regime it stands for: small-init or
    large-init), how many finished seeds meet the reproduction's criteria for that cell: ID
    >= 0.9, the cell's own criterion, and both; each k of n with its 95% exact interval.
    Prints one markdown row per folder."""
    from training.population import exact_interval
    from training.reproduce import CRITERIA

    cells = _cell_criteria()

    def rate(k: int, n: int) -> str:
        low, high = exact_interval(k, n)
        return f"{k} of {n} [{low:.2f}, {high:.2f}]"

    click.echo("| candidate | task | regime | seeds | ID >= 0.9 | cell criterion | met | both | per seed |")
    click.echo("|" + "---|" * 9)
    for item in folders:
        path, _, regime = item.rpartition(":")
        if regime not in cells:
            raise click.BadParameter(f"{item!r}: give SWEEP_DIR:small-init or SWEEP_DIR:large-init")
        rows = []
        for folder in sorted(Path(path).glob("*")):
            metrics = read_metrics(folder)  # None for a folder without metrics.json (or a file)
            if metrics and metrics["status"] == "completed":
                cfg = json.loads((folder / "config.json").read_text())
                rows.append((_seed_label(cfg), cfg["data"]["task"], metrics["final"]))
        if not rows:
            click.echo(f"| {Path(path).name} | - | {regime} | 0 finished | | | | | |")
            continue
        task = rows[0][1]
        name, test = cells[regime][task]
        fit = [f["id_acc"] >= CRITERIA["min_id_acc"] for _, _, f in rows]
        met = [test(f) for _, _, f in rows]
        both = [a and b for a, b in zip(fit, met)]
        seeds = ", ".join(f"{s}: {'yes' if b else 'no'} (ID {f['id_acc']:.2f})" for (s, _, f), b in zip(rows, both))
        n = len(rows)
        click.echo(
            f"| {Path(path).name} | {task} | {regime} | {n} | {rate(sum(fit), n)} | {name} | {rate(sum(met), n)} | {rate(sum(both), n)} | {seeds} |"
        )


if __name__ == "__main__":
    cli()
