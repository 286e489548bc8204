"""benchmarks/run.py's timed(): a run that fails or answers differently fails the benchmark, and
peak memory counts the worker processes, not only the largest one; torch_tree(): which torch
tree is measured."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import run
from benchmarks.run import BenchmarkRunFailed, timed

# A parent that starts three workers, each holding about 60 MB for a while.
WORKERS = """
import subprocess, sys
hold = "import time; block = bytearray(60 * 1024 * 1024); block[::4096] = b'x' * len(block[::4096]); time.sleep(0.6)"
workers = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(3)]
print(sum(worker.wait() for worker in workers))
"""


def test_a_command_that_exits_non_zero_fails_the_benchmark():
    with pytest.raises(BenchmarkRunFailed, match="exited with 3"):
        timed([sys.executable, "-c", "import sys; print('1 finding'); sys.exit(3)"])


def test_a_run_whose_findings_differ_from_the_reference_fails_the_benchmark():
    command = [sys.executable, "-c", "print('a.py:1:1: KV101 finding')"]
    _, _, reference = timed(command)
    assert timed(command, expect=reference)[2] == reference
    with pytest.raises(BenchmarkRunFailed, match="differently"):
        timed([sys.executable, "-c", "print('a.py:1:1: KV101 finding'); print('a.py:2:1: KV102 another')"], expect=reference)


def test_peak_memory_counts_every_worker_of_the_tree():
    _, peak_mb, output = timed([sys.executable, "-c", WORKERS])
    assert output.strip() == "0"
    assert peak_mb >= 3 * 60, f"{peak_mb} MB: the three 60 MB workers were not summed"


def test_the_torch_tree_is_the_one_unpacked_under_trees_dir_before_the_installed_package(tmp_path):
    (tmp_path / "torch" / "torch").mkdir(parents=True)
    assert run.torch_tree(str(tmp_path)) == str(tmp_path / "torch" / "torch")
    # A DIR without a torch tree falls back to the installed package.
    (tmp_path / "other").mkdir()
    installed = run.torch_tree(str(tmp_path / "other"), required=False)
    assert installed is None or Path(installed, "__init__.py").is_file()


def test_without_any_torch_tree_a_trees_only_run_skips_torch_and_a_full_run_stops(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run.importlib.util, "find_spec", lambda name: None)
    assert run.torch_tree(str(tmp_path), required=False) is None
    assert "skipped torch" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="torch is not installed"):
        run.torch_tree(str(tmp_path))
