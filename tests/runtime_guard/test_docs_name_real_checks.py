"""The guard's docs name only ops it wraps and checks it has (issue 14, item 14).

The check registry (runtime_guard.checks.CHECKS) is compared with the code that emits checks, and
every op or check the docs name in their tables is looked up in the registry and in ops.ROWS.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from runtime_guard import ops
from runtime_guard.checks import CHECKS

ROOT = Path(__file__).parents[2]
GUARD_DIR = ROOT / "runtime_guard"
RUNTIME_GUARD_MD = ROOT / "docs" / "runtime_guard.md"
TROUBLESHOOTING_MD = ROOT / "docs" / "troubleshooting.md"
OP_NAME = re.compile(r"^_?npu_\w+$")


def emitted_checks() -> set:
    """String literals given as a check name: Violation("x", ...), axis_matches("x", ...), divides("x", ...)."""
    found = set()
    for path in GUARD_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in ("Violation", "axis_matches", "divides") and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def tables(markdown: str) -> list:
    """Each table as (header cells, rows of cells)."""
    found, current = [], None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if current is None:
            current = (cells, [])
            found.append(current)
        elif not all(set(cell) <= set("-: ") for cell in cells):
            current[1].append(cells)
    return found


def code_spans(text: str) -> list:
    return re.findall(r"`([^`]+)`", text)


def test_the_check_registry_is_exactly_what_the_code_emits():
    assert emitted_checks() == CHECKS


def test_runtime_guard_md_describes_every_check_and_no_other():
    table = next(rows for header, rows in tables(RUNTIME_GUARD_MD.read_text()) if header[:2] == ["Check", "Rule"])
    assert {code_spans(row[0])[0] for row in table} == CHECKS


def test_runtime_guard_md_lists_every_guarded_op_by_its_full_name():
    table = next(rows for header, rows in tables(RUNTIME_GUARD_MD.read_text()) if header[0] == "Op")
    listed = {name for row in table for name in code_spans(row[0]) if OP_NAME.match(name)}
    assert listed == set(ops.ROWS_BY_NAME), "the 'What is guarded' table must list each guarded op by its full name"


def test_runtime_guard_md_per_op_sections_name_guarded_ops():
    text = RUNTIME_GUARD_MD.read_text()
    section = text[text.index("## Per op") : text.index("## Your own attention wrappers")]
    headed = {name for heading in re.findall(r"^\*\*(.+?)\*\*", section, re.M) for name in code_spans(heading) if OP_NAME.match(name)}
    assert headed and headed <= set(ops.ROWS_BY_NAME), headed - set(ops.ROWS_BY_NAME)
    assert set(ops.ROWS_BY_NAME) <= headed, f"no per-op section for {set(ops.ROWS_BY_NAME) - headed}"


def test_runtime_guard_md_not_guarded_ops_are_really_not_guarded():
    text = RUNTIME_GUARD_MD.read_text()
    paragraph = text[text.index("Not guarded") :].split("\n\n")[0]
    named = {name for name in code_spans(paragraph) if OP_NAME.match(name)}
    assert named, "the 'Not guarded' paragraph names the ops left unchecked"
    assert not named & set(ops.ROWS_BY_NAME), f"documented as not guarded but guarded: {named & set(ops.ROWS_BY_NAME)}"


def test_every_check_named_anywhere_in_the_docs_exists():
    # Any code span shaped like a check name (snake_case ending as the checks do) must be a real check.
    shaped = re.compile(r"^[a-z][a-z_]*_(match|matches|valid|shape|fit|text|type|types|tensors|dtype|batch|heads)$")
    for doc in (RUNTIME_GUARD_MD, TROUBLESHOOTING_MD):
        named = {span for span in code_spans(doc.read_text()) if shaped.match(span)}
        assert named <= CHECKS, f"{doc.name} names checks that do not exist: {named - CHECKS}"


@pytest.mark.parametrize("header_cell", ["Guard check"])
def test_troubleshooting_rows_name_real_checks_and_only_guarded_ops(header_cell):
    rows_seen = 0
    for header, rows in tables(TROUBLESHOOTING_MD.read_text()):
        if header_cell not in header:
            continue
        op_column, check_column = header.index("Op"), header.index(header_cell)
        for row in rows:
            rows_seen += 1
            checks = {span for span in code_spans(row[check_column]) if "_" in span}
            assert checks <= CHECKS, f"{row[0]!r}: no such check {checks - CHECKS}"
            if checks:  # a row that names a guard check claims it covers the ops it names
                named_ops = {span for span in code_spans(row[op_column]) if OP_NAME.match(span)}
                assert named_ops <= set(ops.ROWS_BY_NAME), f"{row[0]!r}: {named_ops - set(ops.ROWS_BY_NAME)} is not guarded"
    assert rows_seen >= 15
