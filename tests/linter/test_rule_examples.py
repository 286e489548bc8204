"""Every rule is run against its own VALID and INVALID examples (the Fixit 2 model)."""

from __future__ import annotations

import libcst as cst
import pytest

from linter.engine import lint_source
from linter.rules import all_rules


def _cases(kind: str):
    for rule in all_rules():
        for i, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind.lower()}-{i}")


def test_every_rule_documents_and_exemplifies_itself():
    rules = all_rules()
    assert [r.code for r in rules] == sorted({r.code for r in rules})
    for rule in rules:
        for attr in ("name", "summary", "what", "why", "bad", "good", "fix_text"):
            assert getattr(rule, attr).strip(), f"{rule.code} lacks {attr}"
        assert rule.VALID and rule.INVALID, f"{rule.code} needs VALID and INVALID examples"


@pytest.mark.parametrize(("rule", "example"), list(_cases("VALID")))
def test_valid_example_is_silent(rule, example):
    assert [f for f in lint_source(example.code, codes=[rule.code])] == []


@pytest.mark.parametrize(("rule", "example"), list(_cases("INVALID")))
def test_invalid_example_is_reported(rule, example):
    findings = lint_source(example.code, codes=[rule.code])
    assert findings, f"{rule.code} missed:\n{example.code}"
    assert {f.code for f in findings} == {rule.code}
    if example.line is not None:
        assert example.line in {f.span.row for f in findings}
    for finding in findings:
        assert finding.suggestion
        if finding.fix is not None:
            # A fix never produces code that fails to parse.
            from linter.fixes import apply_fixes

            fixed = apply_fixes(example.code, [finding])
            cst.parse_module(fixed)
    if example.expected_fix is not None:
        from linter.fixes import apply_fixes

        assert apply_fixes(example.code, findings) == example.expected_fix
