"""A file the pre-filter rules out is checked without loading libcst, the rules or rich.

That is what keeps ``kvlint check FILE`` (the pre-commit case) close to the cost of starting
Python; each check runs in a fresh interpreter so earlier imports cannot hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from linter.rules import all_rules, rule_codes

_PROBE = """
import json, sys
from linter.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("libcst", "rich", "linter.rules.base", "linter.engine") if m in sys.modules)
print(json.dumps({"code": code, "loaded": heavy}))
"""


def _check_in_fresh_interpreter(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, "check", "--no-cache", *args],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_rule_codes_come_from_file_names_and_match_the_rules() -> None:
    assert rule_codes() == tuple(rule.code for rule in all_rules())


def test_a_clean_file_without_kv_code_loads_no_parser(tmp_path: Path) -> None:
    path = tmp_path / "util.py"
    path.write_text("def add(a, b):\n    return a + b\n")
    assert _check_in_fresh_interpreter(str(path)) == {"code": 0, "loaded": []}


def test_a_file_with_attention_code_is_still_parsed(tmp_path: Path) -> None:
    path = tmp_path / "attn.py"
    path.write_text("def attention(q, k, v, t):\n    k = k[:, :t]\n    return flash_attn_func(q, k, v)\n")
    result = _check_in_fresh_interpreter(str(path))
    assert result["code"] == 1
    assert "libcst" in result["loaded"]


_RULES_PROBE = """
import json, sys
from linter.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "rules": sorted(m for m in sys.modules if m.startswith("linter.rules.kv") and m.endswith(".rule"))}))
"""


def test_a_file_only_one_rule_can_report_in_loads_that_rule_alone(tmp_path: Path) -> None:
    # KV101's shape, nothing any other rule's screen lets through.
    path = tmp_path / "attn.py"
    path.write_text("def attention(q, k, v, t):\n    k = k[:, :t]\n    return flash_attn_func(q, k, v)\n")
    out = subprocess.run([sys.executable, "-c", _RULES_PROBE, "check", "--no-cache", str(path)],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"code": 1, "rules": ["linter.rules.kv101.rule"]}


def test_rule_class_is_the_registry_s_rule() -> None:
    from linter.rules import rule_class, rules_by_code

    assert all(rule_class(code) is rule for code, rule in rules_by_code().items())
