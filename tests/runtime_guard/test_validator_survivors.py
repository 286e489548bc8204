"""The list of validator mutation survivors that ``python -m tests.runtime_guard.mutate_validators``
compares against: every entry says what kind of survivor it is and why, names a mutant the code
still has, and the comparison fails on what the list does not explain."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from tests.runtime_guard.mutate_validators import KINDS, ROOT, compare, listed, mutants, scope_of, write

SCOPE = {"runtime_guard/validators.py": None, "runtime_guard/checks.py": None}


def _entry(mutation: str, function: str = "attention", reason: str = "equivalent: why", line: int = 1, file: str = "runtime_guard/validators.py") -> dict:
    return {"file": file, "function": function, "line": line, "mutation": mutation, "reason": reason}


def test_a_survivor_the_list_does_not_name_fails():
    problems = compare([_entry("a")], [], SCOPE)
    assert len(problems) == 1 and "not in" in problems[0]


def test_a_listed_survivor_passes_and_entries_outside_the_run_are_ignored():
    known = [_entry("a"), _entry("b", function="cache_write")]
    assert compare([_entry("a")], known, {"runtime_guard/validators.py": {"attention"}}) == []


def test_a_survivor_listed_without_a_reason_fails():
    problems = compare([_entry("a")], [_entry("a", reason=" ")], SCOPE)
    assert problems and "without a reason" in problems[0]


def test_a_listed_survivor_that_is_killed_now_fails():
    problems = compare([], [_entry("a")], SCOPE)
    assert problems and "killed now" in problems[0]


def test_a_mutation_a_function_has_twice_needs_two_entries():
    found = [_entry("a", line=3), _entry("a", line=9)]
    assert compare(found, [_entry("a")], SCOPE)
    assert compare(found, [_entry("a"), _entry("a")], SCOPE) == []


def test_update_keeps_reasons_and_the_entries_of_functions_not_run(tmp_path):
    known = [_entry("a", reason="first", line=3), _entry("a", reason="second", line=9), _entry("b", function="cache_write", reason="other", line=5)]
    found = [_entry("a", reason="", line=10), _entry("a", reason="", line=4), _entry("c", reason="", line=1)]
    path = tmp_path / "survivors.toml"
    write([{k: e[k] for k in ("file", "function", "line", "mutation")} for e in found], known, {"runtime_guard/validators.py": {"attention"}}, path)
    written = {(e["function"], e["line"]): e["reason"] for e in listed(path)}
    assert written == {("cache_write", 5): "other", ("attention", 1): "", ("attention", 4): "first", ("attention", 10): "second"}


def test_several_functions_of_one_module_are_all_in_scope():
    validators, checks = ROOT / "runtime_guard" / "validators.py", ROOT / "runtime_guard" / "checks.py"
    scope = scope_of([(None, validators, {"cache_write"}), (None, checks, {"host_ints"}), (None, validators, {"ring_mla"})])
    assert scope == {"runtime_guard/validators.py": {"cache_write", "ring_mla"}, "runtime_guard/checks.py": {"host_ints"}}
    known = [_entry("a", function="cache_write"), _entry("b", function="ring_mla")]
    assert compare([_entry("b", function="ring_mla")], known, scope) and "killed now" in compare([_entry("b", function="ring_mla")], known, scope)[0]
    assert scope_of([(None, validators, {"cache_write"}), (None, validators, None)]) == {"runtime_guard/validators.py": None}


def test_several_targets_in_one_file_run_the_union_of_their_functions():
    checks, validators = ROOT / "runtime_guard" / "checks.py", ROOT / "runtime_guard" / "validators.py"
    scope = scope_of([(None, checks, {"host_ints"}), (None, checks, {"one_dtype"}), (None, validators, {"attention"})])
    assert scope == {"runtime_guard/checks.py": {"host_ints", "one_dtype"}, "runtime_guard/validators.py": {"attention"}}
    assert scope_of([(None, checks, {"host_ints"}), (None, checks, None)]) == {"runtime_guard/checks.py": None}
    assert scope_of([(None, checks, None), (None, checks, {"host_ints"})]) == {"runtime_guard/checks.py": None}
    # Each target's listed survivors stay in scope: one listed for the first target is not "not in" the list.
    known = [_entry("a", function="host_ints", file="runtime_guard/checks.py")]
    assert compare([_entry("a", function="host_ints", file="runtime_guard/checks.py")], known, scope) == []


@pytest.fixture(scope="module")
def survivors() -> list[dict]:
    entries = listed()
    assert entries, "tests/runtime_guard/validator_survivors.toml lists the survivors"
    return entries


def test_every_listed_survivor_says_what_kind_it_is_and_why(survivors):
    for entry in survivors:
        reason = entry["reason"]
        assert reason.startswith(KINDS), entry
        assert len(reason.split(":", 1)[1].split()) >= 8, f"a reason of its own: {entry}"


@pytest.mark.parametrize("file", sorted(SCOPE))
def test_every_listed_survivor_is_a_mutant_the_code_still_has(survivors, file):
    have = Counter((function, what) for function, _, what, _ in mutants(ast.parse((ROOT / file).read_text())))
    want = Counter((e["function"], e["mutation"]) for e in survivors if e["file"] == file)
    assert want - have == Counter(), f"{file}: listed mutations the code no longer has"
