"""Runs the real-package tier (tests/real_npu) in .venv-npu, so README's one test command covers it.

The tier needs the real torch-npu, which must not live in .venv: it would autoload on every
`import torch` and replace the test double the rest of the suite runs on. So this test runs the
tier's own pytest in .venv-npu and fails with its output; where .ci/setup-npu could not build that
environment, it is SKIPPED with the reason setup recorded (shown in the summary by -ra), never silently.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-npu"
RESULT: dict = {}  # read by conftest.py's terminal summary


def _unavailable() -> str | None:
    if (VENV / "UNAVAILABLE").is_file():
        return (VENV / "UNAVAILABLE").read_text().strip()
    if not (VENV / "bin" / "python").is_file():
        return f"{VENV.name} does not exist (bash .ci/setup-npu builds it)"
    return None


def test_real_torch_npu_tier():
    reason = _unavailable()
    if reason:
        RESULT["line"] = f"SKIPPED: {reason}"
        pytest.skip(f"real torch_npu tier unavailable: {reason}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVGUARD", "PYTEST_"))}
    run = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pytest", "tests/real_npu", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )
    output = run.stdout + run.stderr
    tail = output.strip().splitlines()[-1] if output.strip() else "(no output)"
    RESULT["line"] = tail.strip("= ")
    # Exit 5 is "no tests collected": a tier that ran nothing must not look like a pass.
    assert run.returncode == 0, f"the real torch_npu tier failed (exit {run.returncode}):\n{output[-20000:]}"
    assert re.search(r"\d+ passed", tail), f"the real torch_npu tier passed nothing:\n{output[-5000:]}"
