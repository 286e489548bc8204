"""What a ruff user types, through a fresh ``kvlint`` process: each test fails on a kvlint that
ignored the option, the configuration shape or the case (issue 14, items 7-13 and "Missing")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.linter.test_cli import BUGGY, CLEAN, err, kvlint, out

# KV201: K and V projections of one class with different head counts; KV101 in BUGGY.
PROJ = (
    "import torch.nn as nn\n\n"
    "class Attention(nn.Module):\n"
    "    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):\n"
    "        super().__init__()\n"
    "        self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)\n"
    "        self.v_proj = nn.Linear(hidden, num_heads * head_dim)\n"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "buggy.py").write_text(BUGGY)
    (tmp_path / "proj.py").write_text(PROJ)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def _codes(proc) -> list[str]:
    return sorted(f["code"] for f in json.loads(out(proc)))


def test_the_two_fixtures_have_one_finding_each(tree):
    assert _codes(kvlint("check", "--no-cache", "--format", "json", ".", cwd=tree)) == ["KV101", "KV201"]


# 7
def test_repeated_select_options_merge(tree):
    proc = kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", "--select", "KV201", ".", cwd=tree)
    assert _codes(proc) == ["KV101", "KV201"]


def test_repeated_ignore_options_merge(tree):
    proc = kvlint("check", "--no-cache", "--format", "json", "--ignore", "KV101", "--ignore", "KV201", ".", cwd=tree)
    assert proc.returncode == 0 and _codes(proc) == []


# 8
def test_config_file_with_top_level_keys_is_honoured(tree):
    (tree / "kvlint.toml").write_text('ignore = ["KV101"]\n')
    proc = kvlint("check", "--no-cache", "--format", "json", "--config", "kvlint.toml", ".", cwd=tree)
    assert _codes(proc) == ["KV201"]


def test_kvlint_toml_is_found_without_config_option(tree):
    (tree / ".kvlint.toml").write_text('select = ["KV2"]\n')
    assert _codes(kvlint("check", "--no-cache", "--format", "json", ".", cwd=tree)) == ["KV201"]


def test_unknown_top_level_key_is_an_error_naming_the_file(tree):
    (tree / "kvlint.toml").write_text('selekt = ["KV101"]\n')
    proc = kvlint("check", "--no-cache", "--config", "kvlint.toml", ".", cwd=tree)
    assert proc.returncode == 2 and "kvlint.toml: unknown key 'selekt'" in err(proc)


# 9
def test_statistics_in_json_is_a_json_array(tree):
    proc = kvlint("check", "--no-cache", "--statistics", "--format", "json", ".", cwd=tree)
    rows = json.loads(out(proc))
    assert sorted((r["code"], r["count"]) for r in rows) == [("KV101", 1), ("KV201", 1)]
    assert {r["name"] for r in rows} == {"key-only-reshape", "kv-proj-heads-mismatch"}


# 10
def test_summary_mentions_findings_and_unchecked_files(tree):
    (tree / "binary.py").write_bytes(b"x = 1\0\n")
    proc = kvlint("check", "--no-cache", ".", cwd=tree)
    assert proc.returncode == 2
    summary = out(proc).strip().splitlines()[-1]
    assert "Found 2 findings" in summary and "1 file was not checked" in summary


# 11
NOTEBOOK_CELLS = [
    ("markdown", "# Ring attention\n"),
    ("code", "import torch_npu\n"),
    ("code", "%time\ndef attend(q, k, v, n):\n    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, \"TND\")\n"),
]


def _notebook(cells) -> str:
    return json.dumps({
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True), **({"outputs": [], "execution_count": None} if kind == "code" else {})}
            for kind, text in cells
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    })


def test_a_notebook_cell_with_the_bug_is_reported_by_cell_and_line(tmp_path):
    (tmp_path / "ring.ipynb").write_text(_notebook(NOTEBOOK_CELLS))
    proc = kvlint("check", "--no-cache", "--format", "concise", ".", cwd=tmp_path)
    assert proc.returncode == 1, err(proc)
    # Cell 3 (counting the markdown cell, as ruff does), its third line, the `k[:n]`.
    assert out(proc).startswith("ring.ipynb:cell 3:3:46: KV101 "), out(proc)
    (finding,) = json.loads(out(kvlint("check", "--no-cache", "--format", "json", "ring.ipynb", cwd=tmp_path)))
    assert finding["cell"] == 3 and finding["location"] == {"row": 3, "column": 46}


def test_fix_never_rewrites_a_notebook(tmp_path):
    text = _notebook(NOTEBOOK_CELLS)
    (tmp_path / "ring.ipynb").write_text(text)
    kvlint("check", "--no-cache", "--fix", "ring.ipynb", cwd=tmp_path)
    assert (tmp_path / "ring.ipynb").read_text() == text


def test_a_file_that_is_not_a_notebook_is_a_file_problem(tmp_path):
    (tmp_path / "bad.ipynb").write_text("{not json")
    proc = kvlint("check", "--no-cache", "bad.ipynb", cwd=tmp_path)
    assert proc.returncode == 2 and "bad.ipynb:1: EKV002 not a Jupyter notebook" in err(proc)


def test_an_empty_directory_warns_that_no_python_files_were_found(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = kvlint("check", "--no-cache", "empty", cwd=tmp_path)
    assert proc.returncode == 0 and "No Python files found" in err(proc)


# 12
def test_syntax_error_position_is_the_parsers(tmp_path):
    source = 'import torch_npu\n\ndef attend(q, k, v, n):\n    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, "TND"\n\nx = 1\n'
    (tmp_path / "broken.py").write_text(source)
    proc = kvlint("check", "--no-cache", "--format", "json", "broken.py", cwd=tmp_path)
    (problem,) = json.loads(out(proc))
    try:
        compile(source, "broken.py", "exec")
    except SyntaxError as exc:
        expected = (exc.lineno, exc.offset, exc.msg)
    assert (problem["location"]["row"], problem["location"]["column"]) == expected[:2]
    assert problem["message"] == f"syntax error: {expected[2]}"


# 13
def test_sarif_uris_resolve_from_a_subdirectory(tmp_path):
    (tmp_path / ".git").mkdir()  # the repository root code scanning resolves %SRCROOT% against
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "attn.py").write_text(BUGGY)
    proc = kvlint("check", "--no-cache", "--format", "sarif", "attn.py", cwd=package)
    run = json.loads(out(proc))["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    base = run["originalUriBaseIds"][location["uriBaseId"]]["uri"]
    assert location["uri"] == "src/pkg/attn.py"
    assert base == tmp_path.resolve().as_uri() + "/"


def test_stdin_json_filename_is_a_dash(tmp_path):
    proc = kvlint("check", "--no-cache", "--format", "json", "-", cwd=tmp_path, stdin=BUGGY)
    assert [f["filename"] for f in json.loads(out(proc))] == ["-"]


# Missing options
def test_output_format_is_an_alias_of_format(tree):
    proc = kvlint("check", "--no-cache", "--output-format", "concise", "buggy.py", cwd=tree)
    assert proc.returncode == 1 and out(proc).startswith("buggy.py:4:46: KV101 ")


def test_output_file_receives_the_report(tree):
    proc = kvlint("check", "--no-cache", "--format", "json", "-o", "report.json", "buggy.py", cwd=tree)
    assert proc.returncode == 1 and out(proc) == ""
    assert [f["code"] for f in json.loads((tree / "report.json").read_text())] == ["KV101"]


def test_show_fixes_lists_what_fix_applied(tree):
    proc = kvlint("check", "--no-cache", "--fix", "--show-fixes", "buggy.py", cwd=tree)
    assert proc.returncode == 0, out(proc) + err(proc)
    assert "Fixed 1 finding:\n- buggy.py:\n    1 × KV101 (key-only-reshape)" in out(proc)


def test_unsafe_fixes_flag_is_accepted_and_safe_fix_applies(tree):
    proc = kvlint("check", "--no-cache", "--fix", "--unsafe-fixes", "buggy.py", cwd=tree)
    assert proc.returncode == 0 and "v[:n]" in (tree / "buggy.py").read_text()


def test_extend_exclude_on_the_command_line_and_in_config(tree):
    proc = kvlint("check", "--no-cache", "--format", "json", "--extend-exclude", "buggy.py", ".", cwd=tree)
    assert _codes(proc) == ["KV201"]
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nextend-exclude = ["proj.py"]\n')
    assert _codes(kvlint("check", "--no-cache", "--format", "json", ".", cwd=tree)) == ["KV101"]


def test_force_exclude_applies_excludes_to_named_files(tree):
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["buggy.py"]\n')
    named = kvlint("check", "--no-cache", "--format", "json", "buggy.py", "proj.py", cwd=tree)
    assert _codes(named) == ["KV101", "KV201"]
    forced = kvlint("check", "--no-cache", "--format", "json", "--force-exclude", "buggy.py", "proj.py", cwd=tree)
    assert _codes(forced) == ["KV201"]


def test_force_exclude_in_config_and_under_a_directory_pattern(tree):
    (tree / "third_party").mkdir()
    (tree / "third_party" / "vendored.py").write_text(BUGGY)
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["third_party/"]\nforce-exclude = true\n')
    proc = kvlint("check", "--no-cache", "--format", "json", "third_party/vendored.py", "proj.py", cwd=tree)
    assert _codes(proc) == ["KV201"]


def test_quiet_prints_findings_without_the_summary(tree):
    proc = kvlint("check", "--no-cache", "-q", "--format", "concise", "buggy.py", cwd=tree)
    assert proc.returncode == 1 and out(proc).splitlines() == [out(proc).splitlines()[0]]
    assert "Found" not in out(proc)
    assert out(kvlint("check", "--no-cache", "--quiet", "clean.py", cwd=tree)) == ""


def test_silent_prints_nothing_but_keeps_the_exit_code(tree):
    proc = kvlint("check", "--no-cache", "--silent", "buggy.py", cwd=tree)
    assert proc.returncode == 1 and out(proc) == "" and err(proc) == ""


def test_fix_with_diff_shows_the_diff_and_writes_nothing(tree):
    proc = kvlint("check", "--no-cache", "--fix", "--diff", "buggy.py", cwd=tree)
    assert proc.returncode == 1, err(proc)
    assert "+    return torch_npu.npu_fusion_attention(q, k[:n], v[:n], 8" in out(proc)
    assert (tree / "buggy.py").read_text() == BUGGY


def test_stdin_filename_alone_reads_stdin(tree):
    proc = kvlint("check", "--no-cache", "--format", "concise", "--stdin-filename", "attn.py", cwd=tree, stdin=BUGGY)
    assert proc.returncode == 1 and out(proc).startswith("attn.py:4:46: KV101 ")


def test_rule_accepts_a_name_and_all(tree):
    by_name = kvlint("rule", "key-only-reshape", cwd=tree)
    assert by_name.returncode == 0 and out(by_name).startswith("# KV101 key-only-reshape")
    every = out(kvlint("rule", "--all", cwd=tree))
    assert all(f"# {code} " in every for code in ("KV101", "KV102", "KV103", "KV201", "KV202", "KV203"))


def test_rules_and_rule_in_json(tree):
    listed = json.loads(out(kvlint("rules", "--format", "json", cwd=tree)))
    from linter.checkpoint import checkpoint_codes
    from linter.rules import rules_by_code

    assert [r["code"] for r in listed] == sorted([*rules_by_code(), *checkpoint_codes()])
    assert {"KV101", "KV102", "KV103", "KV201", "KV202", "KV203"} <= {r["code"] for r in listed}
    assert all(r["explanation"].startswith(f"# {r['code']}") and r["name"] for r in listed)
    one = json.loads(out(kvlint("rule", "KV101", "--output-format", "json", cwd=tree)))
    assert one["code"] == "KV101" and one["fixable"] is True


def test_json_url_links_to_the_installed_rule_page(tree):
    (finding,) = json.loads(out(kvlint("check", "--no-cache", "--format", "json", "buggy.py", cwd=tree)))
    page = Path(finding["url"].removeprefix("file://"))
    assert finding["url"].startswith("file://") and page.name == "KV101.md"
    assert page.read_text().startswith("# KV101 key-only-reshape")


def test_sarif_help_uri_is_the_hosted_page_from_the_configuration_never_a_local_file(tree):
    sarif = json.loads(out(kvlint("check", "--no-cache", "--format", "sarif", "buggy.py", cwd=tree)))
    assert "file://" not in json.dumps(sarif["runs"][0]["tool"])
    (tree / "kvlint.toml").write_text('rule-docs-url = "https://git.example.org/ml/kvlint/blob/main/docs/rules/{code}.md"\n')
    sarif = json.loads(out(kvlint("check", "--no-cache", "--format", "sarif", "buggy.py", cwd=tree)))
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert [r["helpUri"] for r in rules] == [f"https://git.example.org/ml/kvlint/blob/main/docs/rules/{r['id']}.md" for r in rules]


def test_sarif_help_uri_defaults_to_the_repository_in_the_project_urls(monkeypatch):
    from linter.report import sarif

    monkeypatch.setattr(sarif, "repository_url", lambda: "https://github.com/org/kvlint")
    assert sarif.help_uri("KV101", None) == "https://github.com/org/kvlint/blob/main/docs/rules/KV101.md"
    monkeypatch.setattr(sarif, "repository_url", lambda: None)
    assert sarif.help_uri("KV101", None) is None


def test_a_rule_docs_url_without_a_code_placeholder_is_an_error(tree):
    (tree / "kvlint.toml").write_text('rule-docs-url = "https://git.example.org/docs/"\n')
    proc = kvlint("check", "--no-cache", "buggy.py", cwd=tree)
    assert proc.returncode == 2 and "rule-docs-url must be an http(s) URL with {code}" in err(proc)


# Polish: the cache lives at the project root found, not in the working directory.
def test_cache_is_kept_next_to_the_project_root_not_the_working_directory(tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.kvlint]\nignore = []\n')
    (project / "src" / "attn.py").write_text(BUGGY)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = kvlint("check", str(project / "src" / "attn.py"), cwd=elsewhere)
    assert proc.returncode == 1
    assert (project / ".kvlint_cache" / "CACHEDIR.TAG").is_file()
    assert not (elsewhere / ".kvlint_cache").exists()


def test_short_flags_and_isolated(tree):
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nignore = ["KV101", "KV201"]\n')
    assert kvlint("check", "-n", ".", cwd=tree).returncode == 0
    isolated = kvlint("check", "-n", "--isolated", "--format", "json", ".", cwd=tree)
    assert _codes(isolated) == ["KV101", "KV201"]
    assert kvlint("check", "-n", "-e", "--isolated", ".", cwd=tree).returncode == 0


def test_exclude_on_the_command_line_replaces_the_configs(tree):
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["buggy.py"]\n')
    assert _codes(kvlint("check", "-n", "--format", "json", ".", cwd=tree)) == ["KV201"]
    assert _codes(kvlint("check", "-n", "--format", "json", "--exclude", "proj.py", ".", cwd=tree)) == ["KV101"]


def test_show_files_lists_what_would_be_linted(tree):
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["buggy.py"]\n')
    proc = kvlint("check", "--show-files", ".", cwd=tree)
    assert proc.returncode == 0
    assert out(proc).splitlines() == [str((tree / name).resolve()) for name in ("clean.py", "proj.py")]


def test_respect_gitignore_can_be_turned_off(tree):
    (tree / ".gitignore").write_text("buggy.py\n")
    assert _codes(kvlint("check", "-n", "--format", "json", ".", cwd=tree)) == ["KV201"]
    assert _codes(kvlint("check", "-n", "--format", "json", "--no-respect-gitignore", ".", cwd=tree)) == ["KV101", "KV201"]


def test_exit_non_zero_on_fix(tree):
    assert kvlint("check", "-n", "--fix", "buggy.py", cwd=tree).returncode == 0
    (tree / "buggy.py").write_text(BUGGY)
    assert kvlint("check", "-n", "--fix", "--exit-non-zero-on-fix", "buggy.py", cwd=tree).returncode == 1
    assert "v[:n]" in (tree / "buggy.py").read_text()
