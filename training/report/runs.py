"""The runs a report compares, and the inputs its probes read.

:func:`find_run_dirs` expands the folders given on the command line into run folders,
:func:`load_runs` reads each one (config, metrics and, when written, the model) as a
:class:`Run`.  :func:`balanced_inputs` draws the same number of inputs of every anchor
pair (for the masking projections and cluster scores), :func:`sample_input` is the
NeurIPS paper's Fig. 3 input (for attention and information flow) and
:func:`token_labels` names its tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformer_lens import HookedTransformer

from interp_init.data import AnchorDataset, make_dataset
from interp_init.runfolder import CONFIG_FILE, WEIGHTS_FILE, RunFolder
from interp_init.tasks import composite, task_spec
from training.config import RunConfig


@dataclass
class Run:
    """One run folder as the report sees it."""

    name: str
    path: Path
    config: RunConfig
    metrics: dict | None
    model: HookedTransformer | None
    #: Why there is no model (no weights file yet), else "".
    missing: str = ""


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders among ``paths``: a folder with ``config.json`` is a run; any other
    folder stands for every run folder below it (sorted)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ValueError(f"{path} is not a folder; pass run folders (each with {CONFIG_FILE}) or a folder that holds them")
        if (path / CONFIG_FILE).is_file():
            found.append(path)
            continue
        below = sorted(p.parent for p in path.rglob(CONFIG_FILE) if not any(part.startswith(".") for part in p.relative_to(path).parts))
        if not below:
            raise ValueError(f"{path} holds no run folder (no {CONFIG_FILE} in it or below it); train a run first (interp-init train --out DIR)")
        found.extend(below)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise ValueError("no run folder given; pass at least one RUN_DIR")
    return unique


def _run_names(paths: Sequence[Path], configs: Sequence[RunConfig]) -> list[str]:
    """Short distinct names: the folder's path below the common parent, plus the options that differ."""
    if len(paths) == 1:
        return [paths[0].name]
    parts = [p.parts for p in paths]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    names = ["/".join(p[common:]) for p in parts]
    flats = [c.flat() for c in configs]
    differing = [k for k in flats[0] if len({repr(f[k]) for f in flats}) > 1][:3]
    if differing:
        names = [f"{n} ({', '.join(f'{k}={f[k]}' for k in differing)})" for n, f in zip(names, flats, strict=True)]
    return names


def load_runs(run_dirs: Iterable[str | Path], device: str = "cpu") -> list[Run]:
    """:class:`Run` of each run folder (see :func:`find_run_dirs`); a folder without
    weights yet (a run still training) comes without a model."""
    paths = find_run_dirs(run_dirs)
    configs = []
    for path in paths:
        folder = RunFolder(path)
        configs.append(RunConfig.from_dict(folder.read_config(), where=str(folder.config_path)))
    runs = []
    for path, cfg, name in zip(paths, configs, _run_names(paths, configs), strict=True):
        folder = RunFolder(path)
        model, missing = None, ""
        if folder.weights_path.is_file():
            model = folder.load_model(device=device)
        else:
            missing = f"no {WEIGHTS_FILE} in {path} yet (the run has not finished)"
        runs.append(Run(name, path, cfg, folder.read_metrics(), model, missing))
    return runs


# ------------------------------------------------------------------------- probe inputs


def balanced_inputs(task: str, per_pair: int, seed: int, k: int = 0, offset: int = 4) -> AnchorDataset:
    """``per_pair`` inputs of every anchor pair of ``task`` (trained pairs from the train
    split, held-out pairs from the held-out split), ordered by pair."""
    spec = task_spec(task, k=k, offset=offset)
    parts: list[AnchorDataset] = []
    for split, pairs in (("train", spec.train_pairs), ("heldout", spec.heldout_pairs)):
        if not pairs:
            continue
        n = per_pair * len(pairs) * 4 + 64
        pool = make_dataset(task, split, n, seed, k=k, offset=offset)
        first, second = pool.anchor_pairs[:, 0], pool.anchor_pairs[:, 1]
        for a, b in pairs:
            index = ((first == a) & (second == b)).nonzero().squeeze(1)[:per_pair]
            if len(index) < per_pair:  # pragma: no cover - 4x oversampling makes this vanishingly rare
                raise ValueError(f"drew too few inputs of pair ({a},{b}); use another seed")
            parts.append(pool.subset(index))
    return AnchorDataset(
        task,
        "balanced",
        torch.cat([p.token_ids for p in parts]),
        torch.cat([p.targets for p in parts]),
        torch.cat([p.key_positions for p in parts]),
        torch.cat([p.anchor_pairs for p in parts]),
    )


#: The NeurIPS 2024 paper's Fig. 3 input: key 99 at position 2, then the pair (4, 3)
#: (held out in the symmetric and id-ood tasks).
FIG3_TOKENS: tuple[int, ...] = (35, 63, 99, 4, 3, 38, 42, 36, 62)
FIG3_KEY_POSITION = 2


def sample_input(task: str = "symmetric", k: int = 0, offset: int = 4) -> AnchorDataset:
    """The input whose attention and information flow the report draws: the NeurIPS
    paper's Fig. 3 input, with its target under ``task``."""
    spec = task_spec(task, k=k, offset=offset)
    tokens = torch.tensor([FIG3_TOKENS])
    p = FIG3_KEY_POSITION
    a1, a2 = FIG3_TOKENS[p + 1], FIG3_TOKENS[p + 2]
    x = FIG3_TOKENS[p]
    heldout = (a1, a2) in spec.heldout_pairs
    target = composite(x, a1, a2) + (0 if heldout else spec.offset((a1, a2)))
    candidates = {name: torch.tensor([composite(x, a1, a2) + off]) for name, off in spec.candidates.items()} if heldout else {}
    return AnchorDataset(task, "heldout" if heldout else "train", tokens, torch.tensor([target]), torch.tensor([p]), torch.tensor([[a1, a2]]), candidates)


def token_labels(dataset: AnchorDataset, row: int = 0) -> list[str]:
    """Labels of one input's tokens: the key and anchors are marked (``x=57``, ``a1=4``)."""
    tokens = dataset.tokens[row].tolist()
    p = int(dataset.key_positions[row])
    labels = [str(t) for t in tokens]
    labels[p] = f"x={tokens[p]}"
    labels[p + 1] = f"a1={tokens[p + 1]}"
    labels[p + 2] = f"a2={tokens[p + 2]}"
    return labels
