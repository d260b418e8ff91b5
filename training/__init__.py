"""Anchor-function data, the training loop, run folders and the command line."""

from training.config import (
    OPTIONS,
    PRESETS,
    DataConfig,
    RunConfig,
    TrainConfig,
    derive_seed,
    make_run_config,
    preset_options,
)
from training.data import (
    ANCHORS,
    SHIFTS,
    SPLITS,
    SYMMETRIC_GROUPS,
    TASKS,
    AnchorDataset,
    composite,
    make_dataset,
    task_spec,
)
from training.ensemble import train_ensemble
from training.evaluate import evaluate, predict
from training.fast import last_position_logits
from training.loop import TrainResult, make_run_data, read_metrics, train

__all__ = [
    "ANCHORS",
    "OPTIONS",
    "PRESETS",
    "SHIFTS",
    "SPLITS",
    "SYMMETRIC_GROUPS",
    "TASKS",
    "AnchorDataset",
    "DataConfig",
    "RunConfig",
    "TrainConfig",
    "TrainResult",
    "composite",
    "derive_seed",
    "evaluate",
    "last_position_logits",
    "make_dataset",
    "make_run_config",
    "make_run_data",
    "predict",
    "preset_options",
    "read_metrics",
    "task_spec",
    "train",
    "train_ensemble",
]
