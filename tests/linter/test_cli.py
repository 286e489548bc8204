"""The kvlint command through a real subprocess, on the real rules."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BUGGY = 'import torch_npu\n\ndef attend(q, k, v, n):\n    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, "TND")\n'
FIXED = BUGGY.replace("v, 8", "v[:n], 8")
CLEAN = "def add(a, b):\n    return a + b\n"


def kvlint(*args: str, cwd: Path, stdin: str | bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "linter", *args], cwd=cwd, input=data, capture_output=True, check=False,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def out(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.decode()


def err(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.decode()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_findings_exit_1_with_the_finding_shown(tree):
    proc = kvlint("check", "--no-cache", "buggy.py", cwd=tree)
    assert proc.returncode == 1
    assert "KV101 [*] " in out(proc) and " --> buggy.py:4:46" in out(proc) and "help:" in out(proc)


def test_a_clean_file_exits_0(tree):
    proc = kvlint("check", "--no-cache", "clean.py", cwd=tree)
    assert proc.returncode == 0 and "All checks passed!" in out(proc)


def test_default_path_is_the_current_directory(tree):
    proc = kvlint("check", "--no-cache", "--format", "concise", cwd=tree)
    assert proc.returncode == 1 and out(proc).startswith("buggy.py:4:46: KV101 ")


def test_exit_zero_keeps_findings_but_exits_0(tree):
    proc = kvlint("check", "--no-cache", "--exit-zero", "buggy.py", cwd=tree)
    assert proc.returncode == 0 and "KV101" in out(proc)


def test_an_unparsable_file_exits_2_and_every_other_file_is_still_linted(tree):
    # Attention code with a syntax error: even a pre-filter that skips code without K/V content
    # must hand this one to the parser.
    (tree / "broken.py").write_text(BUGGY + "def f(:\n")
    (tree / "binary.py").write_bytes(b"x = '\xff'\n")
    proc = kvlint("check", "--no-cache", "--format", "concise", ".", cwd=tree)
    assert proc.returncode == 2
    assert "broken.py:5: E999 " in err(proc) and "binary.py:1: EKV002 " in err(proc)
    assert "buggy.py:4:46: KV101" in out(proc)
    assert "Traceback" not in err(proc)


def test_a_missing_path_exits_2(tree):
    proc = kvlint("check", "--no-cache", "nope.py", cwd=tree)
    assert proc.returncode == 2 and "nope.py:1: EKV001 no such file" in err(proc)


def test_select_and_ignore_choose_rules(tree):
    assert kvlint("check", "--no-cache", "--select", "KV2", "buggy.py", cwd=tree).returncode == 0
    assert kvlint("check", "--no-cache", "--ignore", "KV101", "buggy.py", cwd=tree).returncode == 0
    assert kvlint("check", "--no-cache", "--select", "KV2", "--extend-select", "KV101", "buggy.py", cwd=tree).returncode == 1


def test_an_unknown_code_is_a_one_line_usage_error(tree):
    proc = kvlint("check", "--no-cache", "--select", "KV999", "buggy.py", cwd=tree)
    assert proc.returncode == 2 and len(err(proc).strip().splitlines()) == 1 and "KV101" in err(proc)


def test_a_malformed_pyproject_is_a_one_line_error(tree):
    (tree / "pyproject.toml").write_text("[tool.kvlint\n")
    proc = kvlint("check", "--no-cache", "buggy.py", cwd=tree)
    assert proc.returncode == 2 and len(err(proc).strip().splitlines()) == 1 and "pyproject.toml" in err(proc)


def test_config_ignore_and_per_file_ignores_apply(tree):
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nper-file-ignores = { "buggy.py" = ["KV101"] }\n')
    assert kvlint("check", "--no-cache", ".", cwd=tree).returncode == 0


def test_excluded_directories_are_skipped_but_explicit_files_are_not(tree):
    (tree / "gen").mkdir()
    (tree / "gen" / "g.py").write_text(BUGGY)
    (tree / "buggy.py").write_text(CLEAN)
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["gen"]\n')
    assert kvlint("check", "--no-cache", ".", cwd=tree).returncode == 0
    assert kvlint("check", "--no-cache", "gen/g.py", cwd=tree).returncode == 1


def test_noqa_suppresses_the_finding(tree):
    (tree / "buggy.py").write_text(BUGGY.replace('"TND")', '"TND")  # noqa: KV101'))
    assert kvlint("check", "--no-cache", "buggy.py", cwd=tree).returncode == 0


def test_stdin_is_linted_under_stdin_filename(tree):
    proc = kvlint("check", "--format", "concise", "--stdin-filename", "pkg/attn.py", "-", cwd=tree, stdin=BUGGY)
    assert proc.returncode == 1 and out(proc).startswith("pkg/attn.py:4:46: KV101")


def test_fix_on_stdin_writes_only_the_fixed_source_to_stdout(tree):
    proc = kvlint("check", "--fix", "-", cwd=tree, stdin=BUGGY)
    assert out(proc) == FIXED and proc.returncode == 0 and sorted(os.listdir(tree)) == ["buggy.py", "clean.py"]


def test_fix_on_stdin_without_fixes_echoes_the_source(tree):
    assert out(kvlint("check", "--fix", "-", cwd=tree, stdin=CLEAN)) == CLEAN


def test_fix_rewrites_the_file_and_exits_0_when_nothing_remains(tree):
    proc = kvlint("check", "--no-cache", "--fix", "buggy.py", cwd=tree)
    assert proc.returncode == 0 and (tree / "buggy.py").read_text() == FIXED
    assert "Fixed 1 finding" in out(proc)


def test_fixing_twice_equals_fixing_once(tree):
    kvlint("check", "--no-cache", "--fix", "buggy.py", cwd=tree)
    once = (tree / "buggy.py").read_bytes()
    kvlint("check", "--no-cache", "--fix", "buggy.py", cwd=tree)
    assert (tree / "buggy.py").read_bytes() == once


def test_fix_never_touches_a_file_without_fixes(tree):
    before = (tree / "clean.py").stat()
    kvlint("check", "--no-cache", "--fix", ".", cwd=tree)
    after = (tree / "clean.py").stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_fix_keeps_a_bom_and_crlf_line_ends(tree):
    (tree / "buggy.py").write_bytes(b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode())
    kvlint("check", "--no-cache", "--fix", "buggy.py", cwd=tree)
    assert (tree / "buggy.py").read_bytes() == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode()


def test_diff_prints_the_change_writes_nothing_and_exits_1(tree):
    proc = kvlint("check", "--no-cache", "--diff", "buggy.py", cwd=tree)
    assert proc.returncode == 1 and (tree / "buggy.py").read_text() == BUGGY
    assert '-    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, "TND")' in out(proc)
    assert '+    return torch_npu.npu_fusion_attention(q, k[:n], v[:n], 8, "TND")' in out(proc)


def test_diff_without_changes_exits_0(tree):
    assert kvlint("check", "--no-cache", "--diff", "clean.py", cwd=tree).returncode == 0


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github"])
def test_every_format_reports_the_finding(tree, fmt):
    proc = kvlint("check", "--no-cache", "--format", fmt, "buggy.py", cwd=tree)
    assert proc.returncode == 1 and "KV101" in out(proc)
    if fmt in ("json", "sarif"):
        json.loads(out(proc))


def test_statistics_counts_per_rule(tree):
    (tree / "second.py").write_text(BUGGY)
    proc = kvlint("check", "--no-cache", "--statistics", ".", cwd=tree)
    assert out(proc).splitlines()[0].split() == ["2", "KV101", "[*]", "key-only-reshape"]


def test_baseline_reports_only_new_findings(tree):
    assert kvlint("check", "--no-cache", "--write-baseline", "base.json", ".", cwd=tree).returncode == 0
    (tree / "buggy.py").write_text("# a new first line\n" + BUGGY)
    assert kvlint("check", "--no-cache", "--baseline", "base.json", ".", cwd=tree).returncode == 0
    (tree / "new.py").write_text(BUGGY.replace("k[:n]", "k[:m]"))
    proc = kvlint("check", "--no-cache", "--format", "concise", "--baseline", "base.json", ".", cwd=tree)
    assert proc.returncode == 1 and out(proc).startswith("new.py:4")


def test_the_cache_is_used_and_gives_the_same_output(tree):
    first = kvlint("check", "--format", "concise", ".", cwd=tree)
    second = kvlint("check", "--format", "concise", ".", cwd=tree)
    assert (tree / ".kvlint_cache" / "CACHEDIR.TAG").exists() and out(first) == out(second)


def test_rules_lists_every_rule_with_fixability(tree):
    lines = out(kvlint("rules", cwd=tree)).splitlines()
    assert lines[0].split()[:3] == ["code", "name", "fixable"]
    assert [line.split()[0] for line in lines[1:]] == [
        "KV101", "KV102", "KV103", "KV104", "KV105", "KV106", "KV107", "KV201", "KV202", "KV203", "KV204", "KV205",
        "KV206", "KV207", "KV208", "KV209", "KV210", "KV211", "KV212", "KV301",
        "KV401", "KV402", "KV403", "KV404", "KV405", "KV406", "KV407", "KV408",  # checkpoint rules
    ]


def test_rule_prints_the_rule_documentation(tree):
    from linter.rules import rules_by_code

    assert out(kvlint("rule", "KV101", cwd=tree)) == rules_by_code()["KV101"].doc_text()


def test_unknown_rule_exits_2_listing_valid_codes(tree):
    proc = kvlint("rule", "KV999", cwd=tree)
    assert proc.returncode == 2 and "KV101, KV102" in err(proc) and len(err(proc).splitlines()) == 1


def test_version(tree):
    import linter

    assert out(kvlint("--version", cwd=tree)).strip() == f"kvlint {linter.__version__}"


def test_usage_errors_exit_2(tree):
    assert kvlint("check", "--format", "xml", cwd=tree).returncode == 2
    assert kvlint("check", "-", "buggy.py", cwd=tree, stdin="").returncode == 2


def test_the_linter_never_imports_torch(tree):
    probe = "import sys, runpy; sys.argv = ['kvlint', 'check', '--no-cache', 'buggy.py']\n" \
        "try:\n    runpy.run_module('linter', run_name='__main__')\nexcept SystemExit:\n    pass\n" \
        "print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True, check=False)
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_preview_rules_run_with_preview_or_by_name_only(tmp_path):
    (tmp_path / "attend.py").write_text(
        "import torch\n\n\ndef attend(q, k, v, t):\n    k = k[:, :t].transpose(1, 2)\n    v = v[:, :t]\n"
        "    return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"
    )
    codes = lambda *flags: [line.split()[1] for line in out(kvlint("check", "--isolated", "--no-cache", "-e", "--output-format", "concise", *flags, "attend.py", cwd=tmp_path)).splitlines() if ": KV" in line]
    assert codes() == []
    assert codes("--preview") == ["KV107"]
    assert codes("--select", "KV107") == ["KV107"]
    assert codes("--select", "KV1") == []
