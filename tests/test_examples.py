"""examples/ keeps its promises: kvlint flags every bug where it is, nothing else, and the guard demo runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# Every finding `kvlint check examples/` must report: file -> (code, the line it is on).
# Lines are named by their text so that editing an example's docstring does not break this.
EXPECTED = {
    "ring_attention/buggy.py": [("KV101", "k_chunk = key[:, :, start:end]")],
    "gqa_module/buggy.py": [
        ("KV201", "self.k_proj = nn.Linear("),
        ("KV202", "key_states = self.k_proj(hidden_states).view("),
    ],
    "paged_kv_pool/buggy.py": [("KV103", "self.k_buffer[layer_id][k_loc] = cache_k")],
    "tnd_truncated/buggy.py": [("KV101", "key = key[:num_tokens]")],
}
# Examples whose findings all carry a safe fix: `kvlint check --fix` must turn buggy.py into fixed.py.
FIXABLE = ["ring_attention", "tnd_truncated"]


def _row_of(relative: str, text: str) -> int:
    rows = [n for n, line in enumerate((EXAMPLES / relative).read_text().splitlines(), 1) if text in line]
    assert len(rows) == 1, f"{relative}: expected one line containing {text!r}, found rows {rows}"
    return rows[0]


@cache
def _kvlint_examples() -> tuple[int, tuple[tuple[str, str, int], ...]]:
    run = subprocess.run(
        [sys.executable, "-m", "linter", "check", "examples/", "--format", "json"],
        check=False, cwd=ROOT, capture_output=True, text=True,
    )
    findings = tuple(
        (Path(f["filename"]).resolve().relative_to(EXAMPLES).as_posix(), f["code"], f["location"]["row"])
        for f in json.loads(run.stdout)
    )
    return run.returncode, findings


def test_every_example_folder_has_a_buggy_and_a_fixed_version_and_expectations():
    folders = {p.name for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert {key.split("/")[0] for key in EXPECTED} == folders
    for folder in folders:
        assert {"buggy.py", "fixed.py", "README.md"} <= {p.name for p in (EXAMPLES / folder).iterdir()}


@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_buggy_example_is_flagged_with_exactly_the_expected_codes_and_lines(relative):
    returncode, findings = _kvlint_examples()
    assert returncode == 1
    got = sorted((code, row) for path, code, row in findings if path == relative)
    assert got == sorted((code, _row_of(relative, text)) for code, text in EXPECTED[relative])


def test_nothing_is_reported_outside_the_buggy_files():
    _, findings = _kvlint_examples()
    assert [f for f in findings if f[0] not in EXPECTED] == []


def test_fixed_examples_pass_kvlint_with_exit_zero():
    fixed = sorted(str(p.relative_to(ROOT)) for p in EXAMPLES.glob("*/fixed.py"))
    run = subprocess.run([sys.executable, "-m", "linter", "check", *fixed], check=False, cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("folder", FIXABLE)
def test_fix_rewrites_the_buggy_example_into_the_fixed_one(folder, tmp_path):
    target = tmp_path / "buggy.py"
    shutil.copy(EXAMPLES / folder / "buggy.py", target)
    run = subprocess.run([sys.executable, "-m", "linter", "check", "--fix", str(target)], check=False, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert target.read_text() == (EXAMPLES / folder / "fixed.py").read_text()


def test_run_guarded_stops_the_truncated_tnd_call_then_runs_the_fixed_one():
    run = subprocess.run([sys.executable, str(EXAMPLES / "run_guarded.py")], check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    caught, _, after = run.stdout.partition("fixed call ran:")
    assert "caught KVConsistencyError" in caught
    # The message names the op and layout, both tensors with their shapes, the cause and the call site.
    assert "varlen_attention (layout TND)" in caught
    assert "k (12, 2, 16)" in caught and "v (16, 2, 16)" in caught  # the decorated function's own parameter names
    assert "K was sliced without V" in caught
    assert "run_guarded.py:" in caught and "in main" in caught
    assert after.strip() == "out (12, 4, 16)"
