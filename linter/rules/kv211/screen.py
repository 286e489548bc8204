"""KV211's ``ast`` screen: can this unit's tree hold a finding of KV211? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations

import ast

from linter.model.shards import group_size_call, kv_head_count, shard_count
from linter.plan.screen_facts import walk
from linter.settings import Settings


def _tail(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Call):
        keys = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
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


def _kv211(facts, settings: Settings) -> bool:
    """A KV head count floor-divided by a shard count (the rule then asks what keeps it >= 1)."""
    for node in walk(facts.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            tail = _tail(node.left)
            if tail is not None and kv_head_count(tail) and _shards(node.right):
                return True
    return False


SCREEN = _kv211
