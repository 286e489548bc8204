"""KV301's ``ast`` screen: can this unit's tree hold a finding of KV301? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.names import (
    is_kv_tensor_name,
    kv_side,
    value_counterpart,
)
from linter.settings import Settings
from linter.plan.screen_facts import _DEFINITIONS, _flat, _push_children, _self_attr, Facts, walk


def _kv301(facts: Facts, settings: Settings) -> bool:
    """A ``self.`` K/V pair both assigned, and one of them rebuilt from itself: first anywhere
    in the unit, then class by class as the rule reads each (``_kv301_class``)."""
    extra = settings.extra_pairs
    assigned = {a for targets, _ in facts.assignments for t in targets if (a := _self_attr(t)) is not None}
    paired = set()
    for attr in assigned:
        twin = value_counterpart(attr, extra) if is_kv_tensor_name(attr, extra) else None
        if twin in assigned:
            paired.update((attr, twin))
    if not paired:
        return False
    for targets, value in facts.assignments:
        for target in targets:
            attr = _self_attr(target.value if isinstance(target, ast.Subscript) else target)
            if attr in paired and any(_self_attr(n) == attr for n in walk(value)):
                # The rule asks it of one class at a time, of each method with its own pairs.
                return any(_kv301_class(node, extra) for node in walk(facts.tree) if type(node) is ast.ClassDef)
    return False


def _kv301_class(node: ast.ClassDef, extra) -> bool:
    """Does a method of this class rebuild one side of a pair from itself (``self.k =
    f(self.k)``, ``self.k[...] = f(self.k)``) and never read the other side's name? The
    rule's ``owned_pairs`` (both sides set in one method, by method name) and ``_check``
    (``model.mentions`` of the twin, then its assignments and stores); each method is asked,
    where the rule asks the last of those sharing a name."""
    methods = [(m.name, _kv301_body(m)) for m in node.body if type(m) is ast.FunctionDef or type(m) is ast.AsyncFunctionDef]
    set_in: dict[str, set[str]] = {}
    for name, nodes in methods:
        set_in.setdefault(name, set()).update(
            attr for n in nodes if type(n) is ast.Assign or (type(n) is ast.AnnAssign and n.value is not None)
            for t in _flat(n.targets if type(n) is ast.Assign else [n.target]) if (attr := _self_attr(t)) is not None
        )
    twins: dict[str, set[str]] = {}
    for set_here in set_in.values():
        for attr in set_here:
            twin = value_counterpart(attr, extra)
            if kv_side(attr, extra) == "k" and is_kv_tensor_name(attr, extra) and twin in set_here:
                twins.setdefault(attr, set()).add(twin)
                twins.setdefault(twin, set()).add(attr)
    if not twins:
        return False
    for _, nodes in methods:
        # What ``mentions`` counts, or less: names and attribute names read (a target's own
        # name is not; ``self.k += x`` and ``del`` reads are left out, which only keeps more).
        read = {n.id if type(n) is ast.Name else n.attr for n in nodes if type(n) in (ast.Name, ast.Attribute) and type(n.ctx) is ast.Load}
        for n in nodes:
            if type(n) is not ast.Assign and (type(n) is not ast.AnnAssign or n.value is None):
                continue
            for target in _flat(n.targets if type(n) is ast.Assign else [n.target]):
                attr = _self_attr(target.value if type(target) is ast.Subscript else target)
                if attr in twins and not twins[attr] <= read and any(_self_attr(v) == attr for v in walk(n.value)):
                    return True
    return False


def _kv301_body(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``method``'s body that its ``function_model`` walks: nested definitions
    are left out, and so is an annotated assignment's annotation, which the model never reads."""
    nodes: list[ast.AST] = []
    stack: list = list(reversed(method.body))
    while stack:
        current = stack.pop()
        if current is None or isinstance(current, _DEFINITIONS):
            continue
        nodes.append(current)
        kind = current.__class__
        if kind is ast.AnnAssign:
            stack.extend((current.target, current.value))
        else:
            _push_children(current, kind, stack)
    return nodes

SCREEN = _kv301
