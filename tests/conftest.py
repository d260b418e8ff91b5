"""Shared fixtures: every test starts from a fixed global seed (SAELens style)."""

from __future__ import annotations

import os
import random
import shutil
import tempfile

import numpy as np
import pytest
import torch

# A Ray that a test starts stays on the loopback address: without this, Ray announces a local
# instance on the machine's outward address.  (tests/training/test_cluster.py sets it to 1 for the one
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


#: Headless Chromium, offline, for the browser tests of the report (tests/training/test_report.py)
#: and of the site (tests/test_site.py); they skip, saying why, where it is missing.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: nothing can leave the machine
)


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201 - a selenium WebDriver
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("headless Chromium is not installed: apt-get install chromium chromium-driver (as .ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tempfile.mkdtemp(prefix="interp-init-chromium-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0},
        )
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
