"""Rules list their visitor methods once per class, exactly as libcst would find them."""

from __future__ import annotations

import libcst as cst
import pytest

from linter.rules import all_rules
from linter.rules.base import RuleContext
from linter.settings import Settings


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_visitor_methods_match_libcst_discovery(rule) -> None:
    visitor = rule(RuleContext("x.py", Settings(), lambda node: None))
    ours = visitor.get_visitors()
    assert ours == cst.BatchableCSTVisitor.get_visitors(visitor)
    assert ours, "a rule that visits nothing can never report"
