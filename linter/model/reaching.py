"""Reaching definitions within one block: a value computed, then replaced by one built from its
key twin alone (``v = self.v_proj(x)`` ... ``v = k.clone()``)."""

from __future__ import annotations

import ast
from typing import NamedTuple

from linter.model.ast_reading import blocks, chain_root, root_word
from linter.model.names import key_counterpart, kv_side
from linter.plan.screen_facts import walk


class Rebuilt(NamedTuple):
    value: ast.expr   # the expression that rebuilds the value from its key
    defined: int      # the line the dropped value was computed on
    name: str         # the value's name
    key: str          # its key twin


def rebuilt_from_key(function: ast.AST, pairs) -> list[Rebuilt]:
    """``v = k.clone()`` after ``v = self.v_proj(x)``, in one block: the computed V is dropped."""
    found: list[Rebuilt] = []
    for body in blocks(function):
        defined: dict[str, int] = {}
        for statement in body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
                name = statement.targets[0].id
                key = key_source(statement.value, name, pairs)
                if key is not None and name in defined:
                    found.append(Rebuilt(statement.value, defined[name], name, key))
                if not (isinstance(statement.value, ast.Constant) and statement.value.value is None):
                    defined[name] = statement.lineno
                else:
                    defined.pop(name, None)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                continue
            else:
                # A block or a loop may rebind the name in ways this straight-line reading misses.
                for node in walk(statement):
                    if node.__class__ is ast.Name and isinstance(node.ctx, ast.Store):
                        defined.pop(node.id, None)
    return found


def rebuilds(statement: ast.stmt, pairs) -> bool:
    """Is ``statement`` a V name assigned from its K twin alone (``v = k.clone()``)?"""
    return (
        isinstance(statement, ast.Assign) and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and key_source(statement.value, statement.targets[0].id, pairs) is not None
    )


def key_source(value: ast.expr, name: str, pairs) -> str | None:
    """The K twin of V-side ``name`` when ``value`` is built from it alone: a call chain or cut
    rooted at the twin that never reads ``name``."""
    if kv_side(name, pairs) != "v":
        return None
    key = key_counterpart(name, pairs)
    if key is None or not isinstance(value, (ast.Call, ast.Subscript)):
        return None
    if root_word(value) != key or chain_root(value) is None:
        return None
    if any(n.__class__ is ast.Name and n.id == name for n in walk(value)):
        return None
    return key
