""".ci/setup never starts a silent multi-GB CUDA torch download: it asks pip which torch it would
install and stops, saying how to choose the CPU wheel, unless it is the CPU build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / ".ci" / "check_cpu_torch.py"


def _report(version: str, url: str) -> str:
    return json.dumps({"install": [{"metadata": {"name": "torch", "version": version}, "download_info": {"url": url}}]})


def _check(report: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "KVLINT_ALLOW_CUDA_TORCH"}
    return subprocess.run([sys.executable, str(CHECK)], input=report, capture_output=True, text=True, env={**environment, **env}, check=False)


@pytest.mark.skipif(sys.platform != "linux", reason="PyPI's torch is CUDA on Linux only")
def test_pypi_cuda_build_is_refused_with_what_to_do():
    run = _check(_report("2.13.0", "https://files.pythonhosted.org/packages/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"))
    assert run.returncode == 1
    assert "download.pytorch.org/whl/cpu" in run.stderr and "PIP_FIND_LINKS" in run.stderr


def test_cpu_build_passes():
    assert _check(_report("2.13.0+cpu", "file:///opt/wheels/torch-2.13.0%2Bcpu.whl")).returncode == 0


def test_the_override_accepts_any_build():
    assert _check(_report("2.13.0", "https://example.invalid/torch.whl"), KVLINT_ALLOW_CUDA_TORCH="1").returncode == 0


def test_setup_checks_before_installing_torch():
    setup = (ROOT / ".ci" / "setup").read_text()
    assert "check_cpu_torch.py" in setup
    assert setup.index("check_cpu_torch.py") < setup.index("pip install -q --disable-pip-version-check torch==2.13.0")


def test_this_machine_resolves_the_pin_to_the_cpu_build():
    plan = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--no-deps", "--report", "-", "torch==2.13.0"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if plan.returncode != 0:
        pytest.skip(f"no torch 2.13.0 reachable here: {plan.stderr.strip()[-200:]}")
    run = _check(plan.stdout)
    assert run.returncode == 0, run.stderr
