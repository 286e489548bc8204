"""The end-of-run table of property cases: one line per property, the per-kind breakdown only
with -v (it ran to dozens of entries per line)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = "from tests.runtime_guard.hypothesis_profiles import pytest_terminal_summary  # noqa: F401\n"
TEST = (
    "from tests.runtime_guard.hypothesis_profiles import count\n\n"
    "def test_many_kinds():\n"
    "    for i in range(30):\n"
    "        count('mutations rejected', f'kind{i}')\n"
)


def _session(tmp_path: Path, *args: str) -> str:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_table.py").write_text(TEST)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args, str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_one_line_per_property_by_default(tmp_path):
    output = _session(tmp_path, "-q")
    assert "mutations rejected: 30 cases over 30 kinds" in output
    assert "kind7" not in output


def test_verbose_lists_every_kind(tmp_path):
    output = _session(tmp_path, "-v")
    assert "kind7 1" in output and "kind29 1" in output
