"""Shared fixtures: every test starts from a fixed global seed (SAELens style)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session", autouse=True)
def _few_threads() -> None:
    # CI has 2 cores; tiny models run fastest single-threaded and tests stay stable.
    torch.set_num_threads(1)
