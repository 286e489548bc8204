"""KV205's ``ast`` screen: can this unit's tree hold a finding of KV205? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.names import (
    Role,
    kv_side,
    name_role,
)
from linter.settings import Settings
from linter.plan.screen_facts import _builds_linear, _names_in, _projection_call, _self_attr, _SHAPE_METHODS, _tail, Facts


_KV_ROLES = (Role.KV_HEADS, Role.KV_WIDTH)


def _kv205(facts: Facts, settings: Settings) -> bool:
    """A view or reshape naming a query head count, of a K/V ``*Linear`` projection's output
    (``self.k_proj(x)`` itself, or a name bound to it, through names: ``flows.projected``)
    whose assignment names a KV head count or width."""
    extra = settings.extra_pairs
    views = [call for call in facts.calls if _kv205_query_view(call)]
    if not views:
        return False
    declared = {
        attr
        for targets, value in facts.assignments
        for target in targets
        if (attr := _self_attr(target)) is not None and kv_side(attr, extra) is not None
        and _builds_linear(value) and any(name_role(n) in _KV_ROLES for n in _names_in(value))
    }
    if not declared:
        return False
    # Every value a plain name is bound to anywhere in the unit (``model.functions`` keeps the
    # last simple binding before the view, in the view's own function): a literal tuple's
    # elements too, as ``k, v = self.k_proj(x), self.v_proj(x)`` pairs them.
    bound: dict[str, list[ast.expr]] = {}
    for targets, value in facts.assignments:
        values = (value, *value.elts) if isinstance(value, (ast.Tuple, ast.List)) else (value,)
        for target in targets:
            if type(target) is ast.Name:
                bound.setdefault(target.id, []).extend(values)
    for call in views:
        todo, seen = [call.func.value], set()
        while todo:
            receiver = todo.pop()
            if type(receiver) is ast.Name:
                if receiver.id not in seen:
                    seen.add(receiver.id)
                    todo.extend(bound.get(receiver.id, ()))
            elif (found := _projection_call(receiver, extra)) is not None and found[0] in declared:
                return True
    return False


def _kv205_query_view(call: ast.Call) -> bool:
    """A view or reshape of a name or a call with an element of its shape that is one query
    head count alone (``sizes.factors`` of it is that one name)."""
    func = call.func
    if type(func) is not ast.Attribute or func.attr not in _SHAPE_METHODS or type(func.value) not in (ast.Name, ast.Call):
        return False
    # ``_shape_elements``: libcst's arguments less ``*x`` and ``**x``.
    values = [a for a in call.args if type(a) is not ast.Starred] + [kw.value for kw in call.keywords if kw.arg is not None]
    if len(values) == 1 and isinstance(values[0], (ast.Tuple, ast.List)):
        values = [e for e in values[0].elts if type(e) is not ast.Starred]
    for e in values:
        if type(e) is ast.Call and type(e.func) is ast.Name and e.func.id == "getattr":
            return True  # ``getattr(config, "num_attention_heads")`` names what it reads
        tail = _tail(e)
        if tail is not None and name_role(tail) is Role.Q_HEADS:
            return True
    return False

SCREEN = _kv205
