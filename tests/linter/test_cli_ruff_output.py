"""What ruff's current output looks like, through a fresh ``kvlint`` process: ruff 0.17's
``full`` frame, ``[*]`` and colour in ``concise``, the closing lines of ``--statistics`` and
``--diff``, and no empty frame for a finding in a binary file."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from tests.linter.test_cli import BUGGY, CLEAN, kvlint, out

ESC = "\x1b["


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_full_has_ruffs_header_then_an_arrow_to_the_location(tree):
    lines = out(kvlint("check", "--no-cache", "buggy.py", cwd=tree)).splitlines()
    assert lines[0].startswith("KV101 [*] key `k` is reshaped")
    assert lines[1] == " --> buggy.py:4:46"
    assert lines[2] == "  |"
    assert lines[3] == '4 |     return torch_npu.npu_fusion_attention(q, k[:n], v, 8, "TND")'
    assert "help: pass `v[:n]` as the value" in lines
    assert "note: fix available with --fix: pass `v[:n]` as the value" in lines


def test_concise_marks_a_fixable_finding(tree):
    text = out(kvlint("check", "--no-cache", "--output-format", "concise", "buggy.py", cwd=tree))
    assert text.startswith("buggy.py:4:46: KV101 [*] key `k` is reshaped")


def test_concise_is_coloured_with_color_always_and_plain_otherwise(tree):
    coloured = out(kvlint("check", "--no-cache", "--output-format", "concise", "--color", "always", "buggy.py", cwd=tree))
    first = coloured.splitlines()[0]
    assert ESC in first and "KV101 [*]" in first
    # Stripped of its escapes, the coloured line is the plain one.
    plain = out(kvlint("check", "--no-cache", "--output-format", "concise", "buggy.py", cwd=tree)).splitlines()[0]
    assert ESC not in plain
    assert re.sub(r"\x1b\[[0-9;]*m", "", first) == plain


def test_statistics_ends_with_the_summary_line(tree):
    lines = out(kvlint("check", "--no-cache", "--statistics", "buggy.py", cwd=tree)).splitlines()
    assert lines[0].split("\t")[:2] == ["    1", "KV101"]
    assert lines[-1] == "Found 1 finding (1 fixable with --fix)."


def test_statistics_of_a_clean_run_prints_nothing(tree):
    proc = kvlint("check", "--no-cache", "--statistics", "clean.py", cwd=tree)
    assert proc.returncode == 0 and out(proc) == ""


def test_diff_ends_with_would_fix(tree):
    proc = kvlint("check", "--no-cache", "--diff", "buggy.py", cwd=tree)
    text = out(proc)
    assert proc.returncode == 1 and text.startswith("--- a/buggy.py")
    assert text.rstrip().splitlines()[-1] == "Would fix 1 finding."
    assert (tree / "buggy.py").read_text() == BUGGY


def test_quiet_diff_prints_only_the_diff(tree):
    text = out(kvlint("check", "--no-cache", "--diff", "-q", "buggy.py", cwd=tree))
    assert text.startswith("--- a/buggy.py") and "Would fix" not in text


def _safetensors(path: Path, tensors: dict[str, list[int]]) -> None:
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 2 * shape[0] * shape[1]
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_a_finding_in_a_safetensors_file_has_no_empty_frame(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    }))
    _safetensors(model / "model.safetensors", {
        "model.layers.0.self_attn.k_proj.weight": [64, 64], "model.layers.0.self_attn.v_proj.weight": [32, 64],
    })
    proc = kvlint("check", "--no-cache", "model", cwd=tmp_path)
    lines = out(proc).splitlines()
    assert proc.returncode == 1 and lines[0].startswith("KV404 model.layers.0.self_attn.k_proj.weight has shape [64, 64]")
    assert lines[1].startswith(" --> model/model.safetensors:1:")
    assert lines[2].startswith("help: ")
    assert not any(line.strip() == "|" for line in lines)
