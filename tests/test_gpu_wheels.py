"""The offline GPU node, simulated: a fresh virtual environment with only the node image's
packages, the wheels of ``benchmarks/gpu-wheels.txt`` installed with the printed line into a
``--target`` folder, the project not installed (``PYTHONPATH`` to this tree).

What differs from the node (benchmarks/README.md says so too): this machine's Python (3.11
here, 3.12 there, so the wheels are fetched for this one), torch 2.13.0 for the CPU instead
of 2.11 for CUDA, and whatever versions of the other image packages the index resolves
(transformers pinned to the node's 5.17).  Downloads the image's packages and the wheels, so slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The node image's packages that the toolkit imports (numpy comes with them).
IMAGE_PACKAGES = [
    "torch==2.13.0",
    "transformers==5.17.0",
    "einops",
    "jaxtyping",
    "pandas",
    "scipy",
    "scikit-learn",
    "safetensors",
    "click",
    "tqdm",
]


def _run(args: list[str], **kwargs) -> str:
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, (
        f"{args[:4]} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


@pytest.mark.slow
def test_fresh_environment_with_the_image_packages_and_the_wheels_runs_the_suite() -> None:
    # not pytest's tmp_path: other pytest sessions on this machine prune its base folder
    with tempfile.TemporaryDirectory(prefix="gpu-wheels-") as tmp:
        _simulate_the_node(Path(tmp))


def _simulate_the_node(tmp_path: Path) -> None:
    env_dir, wheels, site = tmp_path / "venv", tmp_path / "whl", tmp_path / "whl" / "site"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", *IMAGE_PACKAGES])
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PATH": f"{env_dir / 'bin'}:{env['PATH']}", "PYTHON_VERSION": version, "WHEEL_DIR": str(wheels)}
    install_line = _run(["bash", "benchmarks/gpu-wheels.sh"], cwd=ROOT, env=env).strip().splitlines()[-1]
    assert install_line.startswith("python3 -m pip install") and f"PYTHONPATH={site}:$PWD" in install_line
    pinned = [
        line
        for line in (ROOT / "benchmarks" / "gpu-wheels.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(pinned) == 10 and len(list(wheels.glob("*.whl"))) == len(pinned)

    check = (
        "import sys, importlib.metadata as md, interp_init, probes, training, transformer_lens, torch\n"
        f"assert sys.prefix == {str(env_dir)!r}, sys.prefix\n"
        f"assert transformer_lens.__file__.startswith({str(site)!r}), transformer_lens.__file__\n"
        f"assert interp_init.__file__.startswith({str(ROOT)!r}) and training.__file__.startswith({str(ROOT)!r})\n"
        # installed = a distribution in the environment or the wheels' folder (the tree itself may
        # hold an egg-info of a developer's editable install: that is not an install on the node)
        f"paths = [p for p in sys.path if p.startswith(({str(env_dir)!r}, {str(site)!r}))]\n"
        "if any(d.metadata['Name'] == 'interp-init' for d in md.distributions(path=paths)):\n    raise SystemExit('the project is installed')\n"
        "print('ok', torch.__version__, md.version('transformer-lens'))\n"
    )
    suite = "python3 benchmarks/gpu_suite.py --scale tiny --device cpu --seeds 0 --epochs 1 --probe-steps 1 --threads 1"
    script = "\n".join(
        [
            "set -euo pipefail",
            install_line,
            f"python3 -c {_quote(check)}",
            f"{suite} --out {tmp_path / 'suite'}",
            f"{suite} --ensemble --out {tmp_path / 'suite-ensemble'}",
        ]
    )
    output = _run(["bash", "-c", script], cwd=ROOT, env=env)
    assert "ok 2.13.0" in output and "3.9.0" in output
    for folder in ("suite", "suite-ensemble"):
        table = (tmp_path / folder / "gpu_suite.md").read_text()
        assert table.count("| completed |") == 4, table


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
