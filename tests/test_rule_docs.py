"""docs/rules/ is generated from the rules, and the committed pages must match what they generate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from linter.rule_docs import INDEX, main, render_pages, stale_pages, write_pages
from linter.rules import all_rules

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"
REGENERATE = "run `python -m linter.rule_docs docs/rules` and commit the result"


def test_committed_rule_pages_match_the_rules():
    assert stale_pages(DOCS) == [], REGENERATE


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_page_is_exactly_what_kvlint_rule_prints(rule):
    printed = subprocess.run(
        [sys.executable, "-m", "linter", "rule", rule.code], capture_output=True, text=True, check=True
    ).stdout
    assert printed == (DOCS / f"{rule.code}.md").read_text(encoding="utf-8")


def test_index_links_every_rule_page():
    index = render_pages()[INDEX]
    for rule in all_rules():
        assert f"[{rule.code}]({rule.code}.md) | {rule.name} |" in index


def test_write_pages_updates_a_stale_page_and_removes_a_retired_rule(tmp_path):
    write_pages(tmp_path)
    (tmp_path / "KV101.md").write_text("edited by hand\n")
    (tmp_path / "KV999.md").write_text("a rule that no longer exists\n")
    assert stale_pages(tmp_path) == ["KV101.md", "KV999.md"]
    assert write_pages(tmp_path) == ["KV101.md", "KV999.md"]
    assert not (tmp_path / "KV999.md").exists()
    assert stale_pages(tmp_path) == []


def test_check_mode_fails_on_a_missing_page_and_names_the_fix(tmp_path, capsys):
    write_pages(tmp_path)
    (tmp_path / "KV102.md").unlink()
    assert main([str(tmp_path), "--check"]) == 1
    assert "KV102.md: out of date; run python -m linter.rule_docs" in capsys.readouterr().out
    assert not (tmp_path / "KV102.md").exists()
