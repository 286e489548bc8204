"""A file a module-wide rule's screen lets through (KV105, KV207, KV208, KV209) goes to libcst as
the top-level definitions holding the lines the screen names, every definition those name, and
the planned units of the other rules, each in place among the module's statements: the
findings are the whole file's."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from benchmarks.equivalence import default_settings
from linter import runner
from linter.plan import units
from linter.plan.code_only import code_only
from linter.plan.text_plan import own_unit, parse_plan
from linter.rules import rules_by_code
from linter.plan.segments import top_level_segments

# Definitions no module rule reads: they must not reach libcst.
UNRELATED = (
    "\n\ndef unrelated_helper(x, n):\n    return x.view(n, -1)\n\n\n"
    "class Unrelated(nn.Module):\n    def forward(self, x):\n        return x.transpose(1, 2)\n"
)


def _job():
    return runner.job_for(default_settings())


@pytest.mark.parametrize(
    ("code", "index"), [(c, i) for c in ("KV105", "KV207", "KV208", "KV209") for i in range(len(rules_by_code()[c].INVALID))]
)
def test_a_module_rules_finding_is_the_whole_files_from_its_definitions_alone(code: str, index: int) -> None:
    text = rules_by_code()[code].INVALID[index].code + UNRELATED
    job = _job()
    plan = parse_plan(text, job.rules, job.settings)
    seeds = units._module_seeds(ast.parse(text), job, units._text_screened(plan.module_rules, text, job, "m.py"), "m.py")
    assert code in seeds
    kept = units._definitions_holding(top_level_segments(code_only(text)), frozenset().union(*seeds.values()))
    unrelated = text.count("\n", 0, text.index("def unrelated_helper"))
    assert all(not (start <= unrelated < end) for start, end in kept)
    fast = runner._lint_text(text, "m.py", job)
    assert [f.code for f in fast] and fast == runner._lint_text(text, "m.py", replace(job, prefilter=False))


def test_a_definition_named_through_a_module_statement_is_kept() -> None:
    # ``Base = _Base`` at module level: the subclass names ``Base``, the statement names ``_Base``.
    text = (
        "class _Base(nn.Module):\n    def __init__(self):\n        self.k = 1\n\n\n"
        "Base = _Base\n\n\n"
        "def far_away():\n    return 2\n\n\n"
        "class Child(Base):\n    def __init__(self):\n        super().__init__()\n"
    )
    kept = units._definitions_holding(top_level_segments(code_only(text)), frozenset({13}))
    assert sorted(kept) == [(0, 5), (12, 16)]


def _unit_examples():
    return [(c, i) for c in sorted(rules_by_code()) if own_unit(c) for i in range(len(rules_by_code()[c].INVALID))]


def _planned_whole(example: str, nested_example: str, monkeypatch) -> tuple[str, list[str], list]:
    """``example``, the unrelated definitions, and ``nested_example`` again inside a
    module-level ``if`` (so the module's own statements meet a condition and the plan is the
    whole file): the text, what libcst was given, and the fast path's findings, checked
    equal to the slow path's."""
    nested = "if True:\n" + "".join(f"    {line}" if line.strip() else line for line in nested_example.splitlines(keepends=True))
    text = example + UNRELATED + "\n\n" + nested
    job = _job()
    assert parse_plan(text, job.rules, job.settings).whole
    slow = runner._lint_text(text, "m.py", replace(job, prefilter=False))
    parsed: list[str] = []
    lint = runner._parse_and_lint
    monkeypatch.setattr(runner, "_parse_and_lint", lambda t, *a, **k: parsed.append(t) or lint(t, *a, **k))
    fast = runner._lint_text(text, "m.py", job)
    assert fast == slow
    return text, parsed, fast


@pytest.mark.parametrize(("code", "index"), _unit_examples())
def test_a_file_planned_whole_goes_to_libcst_as_the_definitions_its_screens_pass(code: str, index: int, monkeypatch) -> None:
    # The unrelated definitions still stay out of libcst.
    example = rules_by_code()[code].INVALID[index].code
    _, parsed, fast = _planned_whole(example, example, monkeypatch)
    # Their headers stay (they are the module's); a function's body stays for a rule whose
    # unit is a class (the module and its functions are one unit then).
    bodies = ["return x.transpose(1, 2)"] + (["return x.view(n, -1)"] if own_unit(code) == "definition" else [])
    assert len(parsed) == 1 and "def unrelated_helper" in parsed[0]
    assert not any(body in parsed[0] for body in bodies)
    assert code in [f.code for f in fast]


@pytest.mark.parametrize("code", ["KV203", "KV204", "KV205", "KV301"])
def test_a_class_rule_live_in_a_class_alone_leaves_the_functions_of_a_file_planned_whole_cut(code: str, monkeypatch) -> None:
    # A class-unit rule's finding in a class, and a definition rule's in the module's own
    # statements: the module and its functions, the class rule's other unit, meet its screen
    # nowhere, so a function no screen passes keeps only its header.
    example = next(e.code for e in rules_by_code()[code].INVALID if e.code.startswith("class "))
    _, parsed, fast = _planned_whole(example, rules_by_code()["KV102"].INVALID[0].code, monkeypatch)
    assert len(parsed) == 1 and "def unrelated_helper" in parsed[0] and "return x.view(n, -1)" not in parsed[0]
    assert {code, "KV102"} <= {f.code for f in fast}
