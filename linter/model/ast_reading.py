"""Small readings of stdlib ``ast`` nodes the twin model shares: where a tensor expression
starts, the integer an axis argument holds, a dotted name, the statement lists of a function."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from linter.model.ast_walk import walk


def root_word(node: ast.AST) -> str | None:
    """The identifier a tensor expression starts from: ``v`` of ``v.view(...)[0]``,
    ``v_cache`` of ``self.v_cache[i]``."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute):
            return node.attr
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def chain_root(node: ast.expr) -> ast.Name | None:
    """``k`` of ``k.view(...).transpose(1, 2)`` or ``k[:, :n]``: the name a method chain starts at."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            return node
        else:
            return None


def holds(node: ast.AST, inner: object) -> bool:
    return any(n is inner for n in walk(node))


def int_value(node: object) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def tail(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def bodies(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """The statement lists directly under ``node``."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", None) or ():
        yield handler.body
    for case in getattr(node, "cases", None) or ():
        yield case.body


def blocks(function: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list of the function, nested definitions' left out."""
    todo = [function.body]
    while todo:
        body = todo.pop()
        yield body
        for statement in body:
            if not isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
                todo.extend(bodies(statement))
