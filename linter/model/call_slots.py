"""A record's head count field given the query's where its other constructions give K/V's.

Code that serves several model families often builds one record (a model or cache config) in
one builder per family: ``ModelConfig(kv_dim, layers, kv_heads)`` for Falcon, ``ModelConfig(...,
config.multi_query_group_num)`` for ChatGLM, and a default builder. The field's role is what
the other constructions put there: where at least two of them give it a KV head count, a
construction that gives it the query head count (a bare ``num_attention_heads``) sizes the K/V
caches the record describes with the query's heads on every grouped-query model that takes that
builder.

Only a class's constructions of itself (``ModelConfig(...)`` or ``cls(...)`` in its own
factory method, its nested builders included) are compared, and only head counts (a product
such as ``num_key_value_heads * head_dim`` is a width): a layer or a helper built once for Q and
once for K/V (``nn.Linear(hidden, num_heads)`` for a gate beside ``nn.Linear(hidden,
num_v_heads)``) takes each side's own count by design, and constructions in other functions are
no evidence about this one.

Read on stdlib ``ast`` trees, so the rule and its screen ask one code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from linter.model.ast_reading import dotted
from linter.model.ast_walk import walk
from linter.model.names import Role, name_role

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# At least this many constructions must give the field a KV head count.
_KV_WITNESSES = 2


@dataclass(frozen=True)
class SlotFault:
    node: ast.expr  # the query head count given
    callee: str
    slot: str  # "argument 3" or "`num_heads=`"
    witnesses: tuple[str, ...]  # the KV head counts the other constructions give


def _tail(node: ast.expr) -> str | None:
    name = dotted(node)
    return None if name is None else name.rsplit(".", 1)[-1]


def _role(node: ast.expr) -> Role | None:
    """KV heads for an expression that reads a KV head count (``kv_head``,
    ``config.multi_query_group_num``, ``heads // groups``); query heads for a bare query head
    count (``config.num_attention_heads``); None otherwise."""
    tail = _tail(node)
    if tail is not None:
        role = name_role(tail)
        return role if role in (Role.Q_HEADS, Role.KV_HEADS) else None
    # ``num_attention_heads // groups``: a query head count divided by the group ratio.
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Div)) and \
            name_role(_tail(node.left) or "") is Role.Q_HEADS:
        return Role.KV_HEADS
    return None


def _constructions(function: ast.AST, names: frozenset[str]) -> Iterator[ast.Call]:
    for node in walk(function):
        if isinstance(node, ast.Call) and _tail(node.func) in names and not any(isinstance(a, ast.Starred) for a in node.args):
            yield node


def _factories(tree: ast.AST) -> Iterator[tuple[ast.ClassDef, ast.AST]]:
    """Each class with each of its methods."""
    for node in walk(tree):
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, _FUNCTIONS):
                    yield node, child


def query_heads_in_kv_fields(tree: ast.AST) -> list[SlotFault]:
    found: list[SlotFault] = []
    for cls, method in _factories(tree):
        slots: dict[str, list[tuple[ast.expr, Role]]] = {}
        for call in _constructions(method, frozenset({cls.name, "cls"})):
            given = [(f"argument {i + 1}", a) for i, a in enumerate(call.args)]
            given += [(f"`{k.arg}=`", k.value) for k in call.keywords if k.arg is not None]
            for slot, value in given:
                role = _role(value)
                if role is not None:
                    slots.setdefault(slot, []).append((value, role))
        for slot, values in slots.items():
            witnesses = tuple(ast.unparse(v) for v, role in values if role is Role.KV_HEADS)
            if len(witnesses) < _KV_WITNESSES:
                continue
            found += [SlotFault(v, cls.name, slot, witnesses) for v, role in values if role is Role.Q_HEADS]
    return found
