"""The list of mutation survivors that ``python -m benchmarks.exemptions`` compares against:
every entry explains itself, names a mutant the rule still has, and the comparison fails on
what the list does not explain."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.exemptions import ROOT, compare, listed, mutants, write
from linter.rules import rule_codes

# How a reason opens: what kind of survivor it is.
KINDS = ("equivalent", "unpinned", "limit", "bound", "message only", "fix only", "duplicate guard",
         "not examined")


def _entry(rule: str, mutation: str, reason: str = "why", line: int = 1) -> dict:
    return {"rule": rule, "line": line, "mutation": mutation, "reason": reason}


def test_a_survivor_the_list_does_not_name_fails():
    problems = compare([_entry("KV101", "a")], [], ["KV101"])
    assert len(problems) == 1 and "not in" in problems[0]


def test_a_listed_survivor_passes_and_other_rules_entries_are_ignored():
    known = [_entry("KV101", "a"), _entry("KV102", "b")]
    assert compare([_entry("KV101", "a")], known, ["KV101"]) == []


def test_a_survivor_listed_without_a_reason_fails():
    problems = compare([_entry("KV101", "a")], [_entry("KV101", "a", reason=" ")], ["KV101"])
    assert problems and "without a reason" in problems[0]


def test_a_listed_survivor_that_is_killed_now_fails():
    problems = compare([], [_entry("KV101", "a")], ["KV101"])
    assert problems and "killed now" in problems[0]


def test_a_mutation_a_rule_has_twice_needs_two_entries():
    found = [_entry("KV104", "a", line=3), _entry("KV104", "a", line=9)]
    assert compare(found, [_entry("KV104", "a")], ["KV104"])
    assert compare(found, [_entry("KV104", "a"), _entry("KV104", "a")], ["KV104"]) == []


def test_update_keeps_each_reason_of_a_repeated_mutation_with_its_line(tmp_path):
    known = [_entry("KV104", "a", "first", line=3), _entry("KV104", "a", "second", line=9),
             _entry("KV102", "b", "other rule", line=5)]
    found = [_entry("KV104", "a", "", line=10), _entry("KV104", "a", "", line=4), _entry("KV104", "c", "", line=1)]
    path = tmp_path / "survivors.toml"
    write([{k: e[k] for k in ("rule", "line", "mutation")} for e in found], known, ["KV104"], path)
    written = {(e["rule"], e["line"]): e["reason"] for e in listed(path)}
    assert written == {("KV102", 5): "other rule", ("KV104", 1): "", ("KV104", 4): "first", ("KV104", 10): "second"}


@pytest.fixture(scope="module")
def survivors() -> list[dict]:
    entries = listed()
    assert entries, "benchmarks/exemption_survivors.toml lists the survivors"
    return entries


def test_every_listed_survivor_says_what_kind_it_is_and_why(survivors):
    for entry in survivors:
        assert entry["rule"] in rule_codes(), entry
        reason = entry["reason"]
        assert reason.startswith(KINDS), entry
        if not reason.startswith("not examined"):
            assert len(reason.split(":", 1)[1].split()) >= 5, f"a reason of its own: {entry}"


@pytest.mark.parametrize("code", rule_codes())
def test_every_listed_survivor_is_a_mutant_the_rule_still_has(survivors, code):
    path = ROOT / "linter" / "rules" / code.lower() / "rule.py"
    have = Counter(m.what for m in mutants(code, path))
    # Rules listed as not examined change under other hands; their entries are regenerated
    # (`--update`) when they settle.
    want = Counter(e["mutation"] for e in survivors
                   if e["rule"] == code and not e["reason"].startswith("not examined"))
    assert want - have == Counter(), f"{code}: listed mutations its rule.py no longer has"
