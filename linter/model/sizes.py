"""What a size or shape expression in libcst's tree says about attention heads: ``factors``
and ``heads_mismatch`` read libcst's nodes for ``heads``, which classifies and compares (the
``ast`` screens read the standard library's tree for it in ``ast_sizes``), and ``Aliases``
resolves a name to the one expression its scope assigned it.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from linter.model import heads
from linter.model.heads import Factor, HeadsMismatch, describe
from linter.model.pairs import normalized

__all__ = ["Aliases", "Factor", "HeadsMismatch", "Resolver", "describe", "factors", "heads_mismatch", "int_value"]

# Resolves ``x`` / ``self.x`` to the single expression it was assigned, or None.
Resolver = Callable[[cst.BaseExpression], "cst.BaseExpression | None"]


def _tail(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1].value, cst.SimpleString)
    ):
        # getattr(config, "num_key_value_heads", default) names what it reads.
        name = node.args[1].value.evaluated_value
        return name if isinstance(name, str) else None
    return None


def int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal such as ``3`` or ``-1``, else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.evaluated_value)
    return None


class _Reader:
    """libcst's nodes for ``heads.factors``."""

    int_value = staticmethod(int_value)
    tail = staticmethod(_tail)
    key = staticmethod(normalized)

    @staticmethod
    def operands(node: cst.BaseExpression) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
        if not isinstance(node, cst.BinaryOperation):
            return None
        op = node.operator
        kind = (
            "*" if isinstance(op, cst.Multiply) else "/" if isinstance(op, (cst.FloorDivide, cst.Divide))
            else "+" if isinstance(op, (cst.Add, cst.Subtract)) else "other"
        )
        return kind, node.left, node.right


_READER = _Reader()


def factors(expr: cst.BaseExpression, resolve: Resolver | None = None) -> list[Factor]:
    """The multiplicative factors of ``expr``, each classified."""
    return heads.factors(expr, _READER, resolve)


def heads_mismatch(
    left: cst.BaseExpression,
    right: cst.BaseExpression,
    *,
    resolve: Resolver | None = None,
    implicit_one: bool = False,
) -> HeadsMismatch | None:
    """Compare two sizes up to head-dim factors (``heads.compare``)."""
    if normalized(left) == normalized(right):
        return None
    return heads.compare(factors(left, resolve), factors(right, resolve), implicit_one)


class Aliases:
    """Single assignments of local names and ``self`` attributes, for resolving sizes.

    A name assigned more than once maps to None: which value applies depends on control flow.
    """

    def __init__(self, attrs: dict[str, cst.BaseExpression | None] | None = None) -> None:
        self.locals: dict[str, cst.BaseExpression | None] = {}
        self.attrs = attrs if attrs is not None else {}

    def record(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            table, key = self.locals, target.value
        elif (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            table, key = self.attrs, target.attr.value
        else:
            return
        table[key] = value if key not in table else None

    def resolve(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        if isinstance(node, cst.Name):
            return self.locals.get(node.value)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            return self.attrs.get(node.attr.value)
        return None
