"""A fast walk over stdlib ``ast`` trees, shared by the model and the ``ast`` screens.

It lives in the model, below the plan, so that the twin model can use it without importing the
plan (whose text conditions import the rules, and so the twin model again).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

# Per node class, its fields that hold nodes: (name, whether a list). Read from the class's ASDL
# signature (``Name(identifier id, expr_context ctx)``): identifiers, strings, constants and
# ints are never nodes, and ``ctx`` no screen asks about; so the walks test no value's type.
_CHILDREN: dict[type, tuple[tuple[str, bool], ...]] = {}
_PRIMITIVES = frozenset({"identifier", "string", "constant", "int"})
_SIGNATURE = re.compile(r"(\w+)([*?]?) (\w+)")


def _children(kind: type) -> tuple[tuple[str, bool], ...]:
    found = _CHILDREN.get(kind)
    if found is None:
        signature = (kind.__doc__ or "").split("\n", 1)[0]
        typed = {name: (type_, mark) for type_, mark, name in _SIGNATURE.findall(signature)}
        if set(typed) != set(kind._fields):
            raise TypeError(f"cannot read the fields of ast.{kind.__name__} from {signature!r}")
        found = _CHILDREN[kind] = tuple(
            (name, typed[name][1] == "*") for name in kind._fields
            if name != "ctx" and typed[name][0] not in _PRIMITIVES
        )
    return found


def _push_children(node: ast.AST, kind: type, stack: list) -> None:
    """Put ``node``'s child nodes (of class ``kind``) on ``stack``, as ``walk`` does."""
    for name, many in _CHILDREN.get(kind) or _children(kind):
        value = getattr(node, name, None)
        if many:
            stack.extend(value or ())
        elif value is not None:
            stack.append(value)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself included), each after its parent, as ``ast.walk``
    gives them less the ``Load``/``Store`` contexts no screen asks about: about five times
    faster than ``ast.walk``, whose per-node generators were the screens' largest cost."""
    todo = [node]
    pop, append, extend = todo.pop, todo.append, todo.extend
    children = _CHILDREN
    while todo:
        current = pop()
        if current is None:
            continue  # ``kw_defaults`` and ``Dict.keys`` hold None for a missing node
        yield current
        kind = current.__class__
        for name, many in children.get(kind) or _children(kind):
            value = getattr(current, name, None)
            if many:
                extend(value or ())
            elif value is not None:
                append(value)
