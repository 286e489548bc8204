"""``heads`` on the standard library's tree: the ``ast`` screens classify and compare sizes with
the code the rules use on libcst's (``sizes``), so a screen that asks "do these sizes name
different head counts?" answers as its rule would.

A factor that is neither an integer nor a name is keyed by its ``ast.dump``: two expressions
whose whitespace-free source is equal dump equal, so this side never keeps apart what libcst's
side matches (it may match more, brackets and quotes aside, which only lets more through).
"""

from __future__ import annotations

import ast

from linter.model import heads
from linter.model.heads import Factor, HeadsMismatch


def int_value(node: ast.expr | None) -> int | None:
    """``3`` or ``-1`` written as a literal (what ``sizes.int_value`` reads), else None."""
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub:
        operand = node.operand
        return -operand.value if type(operand) is ast.Constant and type(operand.value) is int else None
    if type(node) is ast.Constant and type(node.value) is int:
        return node.value
    return None


def _tail(node: ast.expr) -> str | None:
    kind = type(node)
    if kind is ast.Name:
        return node.id
    if kind is ast.Attribute:
        return node.attr
    if kind is ast.Call and type(node.func) is ast.Name and node.func.id == "getattr":
        # getattr(config, "num_key_value_heads", default): libcst's second argument is the
        # second written, keyword or not.
        written = sorted((*node.args, *node.keywords), key=lambda a: (a.lineno, a.col_offset))
        second = written[1] if len(written) >= 2 else None
        second = second.value if type(second) is ast.keyword else second
        if type(second) is ast.Constant and type(second.value) is str:
            return second.value
    return None


_OPERATORS = {ast.Mult: "*", ast.FloorDiv: "/", ast.Div: "/", ast.Add: "+", ast.Sub: "+"}


class _Reader:
    """The standard library's nodes for ``heads.factors``."""

    int_value = staticmethod(int_value)
    tail = staticmethod(_tail)
    key = staticmethod(ast.dump)

    @staticmethod
    def operands(node: ast.expr) -> tuple[str, ast.expr, ast.expr] | None:
        if type(node) is not ast.BinOp:
            return None
        return _OPERATORS.get(type(node.op), "other"), node.left, node.right


_READER = _Reader()


class Aliases:
    """``sizes.Aliases`` on this tree: single assignments of local names and ``self``
    attributes; a name assigned more than once resolves to nothing."""

    def __init__(self) -> None:
        self.locals: dict[str, ast.expr | None] = {}
        self.attrs: dict[str, ast.expr | None] = {}

    def record(self, target: ast.expr, value: ast.expr) -> None:
        if type(target) is ast.Name:
            table, key = self.locals, target.id
        elif type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
            table, key = self.attrs, target.attr
        else:
            return
        table[key] = value if key not in table else None

    def resolve(self, node: ast.expr) -> ast.expr | None:
        if type(node) is ast.Name:
            return self.locals.get(node.id)
        if type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self":
            return self.attrs.get(node.attr)
        return None


def factors(expr: ast.expr, resolve: heads.Resolver | None = None) -> list[Factor]:
    """The multiplicative factors of ``expr``, each classified as ``sizes.factors`` does."""
    return heads.factors(expr, _READER, resolve)


def heads_mismatch(
    left: ast.expr, right: ast.expr, *, resolve: heads.Resolver | None = None, implicit_one: bool = False
) -> HeadsMismatch | None:
    """``sizes.heads_mismatch`` on this tree."""
    if ast.dump(left) == ast.dump(right):
        return None
    return heads.compare(factors(left, resolve), factors(right, resolve), implicit_one)
