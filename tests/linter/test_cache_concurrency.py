"""The cache through the real command under load and damage (test_cache.py covers the Cache
class and two concurrent runs on a fresh cache): whatever state the cache is in, and however
many runs share it, the findings are those of an uncached run.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ATTENTION = (
    "import torch_npu\n\ndef attend(q, k, v, n):\n"
    "    return torch_npu.npu_fusion_attention(q, k[:n{i}], v, 8, 'TND')\n"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    for i in range(24):
        (root / f"m{i}.py").write_text(ATTENTION.format(i=i))
    (root / "broken.py").write_text(ATTENTION.format(i=0) + "def f(:\n")
    return root


def _cmd(tree: Path, cache: Path | None) -> list[str]:
    where = ["--no-cache"] if cache is None else ["--cache-dir", str(cache)]
    return [sys.executable, "-m", "linter", "check", "--format", "concise", *where, str(tree)]


def _together(tree: Path, cache: Path, runs: int) -> list[tuple[int, str, str]]:
    procs = [subprocess.Popen(_cmd(tree, cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(runs)]
    return [(p.wait(), *p.communicate()) for p in procs]


def _alone(tree: Path) -> tuple[int, str, str]:
    proc = subprocess.run(_cmd(tree, None), capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_four_concurrent_runs_on_a_fresh_cache_match_an_uncached_run(tree, tmp_path):
    alone = _alone(tree)
    assert alone[0] == 2 and alone[1].count("KV101") == 24 and "E999" in alone[2]
    assert _together(tree, tmp_path / "cache", 4) == [alone] * 4
    assert _together(tree, tmp_path / "cache", 2) == [alone] * 2  # and again, from the cache


def test_garbage_and_truncated_entries_are_ignored_by_concurrent_runs(tree, tmp_path):
    cache = tmp_path / "cache"
    _together(tree, cache, 1)
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 25
    for i, entry in enumerate(entries):
        entry.write_bytes(entry.read_bytes()[: len(entry.read_bytes()) // 2] if i % 2 else b"\x00\xff garbage")
    assert _together(tree, cache, 2) == [_alone(tree)] * 2


def test_a_cache_path_that_is_a_file_costs_speed_not_findings(tree, tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("not a directory\n")
    assert _together(tree, cache, 2) == [_alone(tree)] * 2
