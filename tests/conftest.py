"""Shared fixtures: every test starts from a fixed global seed (SAELens style)."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

# A Ray that a test starts stays on the loopback address: without this, Ray announces a local
# instance on the machine's outward address.  (tests/test_cluster.py sets it to 1 for the one
# process that joins a second node, whose address it gives as 127.0.0.2.)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session", autouse=True)
def _few_threads() -> None:
    # CI has 2 cores; tiny models run fastest single-threaded and tests stay stable.
    torch.set_num_threads(1)
