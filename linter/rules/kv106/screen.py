"""KV106's ``ast`` screen: can this unit's tree hold a finding of KV106? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.names import (
    is_scale_name,
    key_counterpart,
    kv_side,
)
from linter.settings import Settings
from linter.plan.screen_facts import _dotted, Facts


def _kv106(facts: Facts, settings: Settings) -> bool:
    """A V-side scale assigned from its K twin: as a branch of ``a if .. else b`` or ``a or b``,
    or alone (the rule then also needs an enclosing test of the value scale)."""
    extra = settings.extra_pairs
    for targets, value in facts.assignments:
        for target in targets:
            name = _dotted(target)
            if name is None or not is_scale_name(name):
                continue
            head, _, tail = name.rpartition(".")
            twin = key_counterpart(tail, extra) if kv_side(tail, extra) == "v" else None
            if twin is None:
                continue
            key = f"{head}.{twin}" if head else twin
            if isinstance(value, ast.IfExp):
                branches = (value.body, value.orelse)
            elif isinstance(value, ast.BoolOp):
                branches = value.values
            else:
                branches = (value,)
            if any(_dotted(b) == key for b in branches):
                return True
    return False

SCREEN = _kv106
