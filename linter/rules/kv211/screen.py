"""KV211's ``ast`` screen: can this unit's tree hold a finding of KV211? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``). It asks the rule's
questions of CPython's tree: a KV head count floor-divided by a shard count and stored on
``self``, with no ``max``, conditional, comparison or branch on either count around it and no
check relating the two in the function. (Most such divisions in real code sit in
``max(1, ...)``; parsing their classes with libcst would cost more than the rest of the rule.)"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from linter.model.names import Role, name_role
from linter.model.shards import CHECKED_DIVISIONS, group_size_call, kv_head_count, shard_count
from linter.plan.screen_facts import _dotted, walk
from linter.settings import Settings

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_OWN_SCOPE_ENDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _string_key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _tail(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _string_key(node.slice)
    if isinstance(node, ast.Call):
        keys = [k for a in node.args if (k := _string_key(a)) is not None]
        if keys:
            return keys[0]
        return _tail(node.func)
    return None


def _shards(node: ast.expr) -> bool:
    tail = _tail(node)
    if tail is not None and shard_count(tail):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return group_size_call(node.func.attr, _tail(node.func.value), bool(node.args or node.keywords))
    return False


def _kv_heads(node: ast.expr) -> bool:
    tail = _tail(node)
    return tail is not None and kv_head_count(tail)


def _reads(node: ast.AST) -> tuple[bool, bool]:
    kv = shards = False
    for current in walk(node):
        if isinstance(current, ast.expr):
            kv = kv or _kv_heads(current)
            shards = shards or _shards(current)
            if kv and shards:
                break
    return kv, shards


def _callee_tail(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _relates(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)) or (
        isinstance(node, ast.Call) and _callee_tail(node) in CHECKED_DIVISIONS
    ):
        return all(_reads(node))
    return False


def _own_nodes(function: ast.AST) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(s, ()) for s in function.body]
    while stack:
        node, above = stack.pop()
        yield node, above
        inner = above + (node,)
        stack.extend((child, inner) for child in ast.iter_child_nodes(node) if not isinstance(child, _OWN_SCOPE_ENDS))


def _assignment(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target, node.value
    return None


def _kept_positive(above: tuple[ast.AST, ...]) -> bool:
    for node in above:
        if isinstance(node, ast.Call) and _callee_tail(node) == "max":
            return True
        if isinstance(node, (ast.IfExp, ast.Compare)):
            return True
        if isinstance(node, (ast.If, ast.While)) and any(_reads(node.test)):
            return True
    return False


def _parameters(function: ast.AST) -> set[str]:
    arguments = function.args
    found = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    found.update(a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None)
    return found


def _function_may_report(function: ast.AST) -> bool:
    divisions = []
    query_counts = set()
    rebound = set()
    for node, above in _own_nodes(function):
        if _relates(node):
            return False
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            rebound.add(node.id)
        assigned = _assignment(node)
        if assigned is not None:
            tail = _tail(assigned[1])
            if tail is not None and name_role(tail) is Role.Q_HEADS and _dotted(assigned[0]) is not None:
                query_counts.add(_dotted(assigned[0]))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and _kv_heads(node.left) and _shards(node.right):
            divisions.append((node, above))
    for division, above in divisions:
        statement = next((n for n in reversed(above) if isinstance(n, (ast.Assign, ast.AnnAssign))), None)
        assigned = _assignment(statement) if statement is not None else None
        target = _dotted(assigned[0]) if assigned is not None else None
        if target is None or not target.startswith("self."):
            continue
        if _kept_positive(above) or _dotted(division.left) in query_counts:
            continue
        if isinstance(division.left, ast.Name) and division.left.id in _parameters(function) - rebound:
            continue
        return True
    return False


def _divides_kv_heads(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv) and _kv_heads(n.left) and _shards(n.right)
        for n in walk(node)
    )


def _kv211(facts, settings: Settings) -> bool:
    # One walk finds the divisions; only the functions holding one are read in full.
    if not _divides_kv_heads(facts.tree):
        return False
    return any(
        _function_may_report(node) for node in walk(facts.tree)
        if isinstance(node, _FUNCTIONS) and _divides_kv_heads(node)
    )


SCREEN = _kv211
