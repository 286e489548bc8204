"""What counts as a token/head reshape of a K or V tensor, and on which axis it acts.

A reshape is a subscript (slice, integer/boolean tensor index) or a call such as ``narrow``,
``chunk``, ``split``, ``index_select``, ``repeat_interleave`` or ``expand``. Every attention
layout kvlint knows keeps the head dim last, so an operation on the last axis is a head-dim
operation (RoPE split, MLA nope/rope) and never evidence of K/V drift. When the axis cannot be
placed (axis 2 of a tensor of unknown rank, a ``dim`` held in a variable) the answer is
``AMBIGUOUS`` and rules stay silent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from linter.model.names import AXISLESS_RESHAPES, RESHAPE_CALLS, RESHAPE_DIM_ARGS, SEE_THROUGH, SHAPE_KEEPING
from linter.model.pairs import dotted_name, normalized

TOKEN_HEAD = "token/head"
HEAD_DIM = "head-dim"
AMBIGUOUS = "ambiguous"

# Ops whose result is a sequence of pieces (``k.chunk(n)[i]``).
PIECEWISE = frozenset({"chunk", "split", "tensor_split", "unbind"})

# Bounds that name a feature size (``k[:, :rope_dim]``) are head-dim slices of a 2-D tensor.
_DIM_WORDS = re.compile(r"dim|rope|nope|head_size|lora|rank|hidden|feature", re.IGNORECASE)


@dataclass(frozen=True)
class Reshape:
    node: cst.BaseExpression  # the whole operation, e.g. ``k[a:b]`` or ``k.chunk(n)``
    base: str  # dotted name of the tensor operated on
    kind: str  # "slice", "index", or the method name
    # (axis, bound text, not_last): axis counts from 0, or from -1 after an Ellipsis; None
    # when unknown. ``not_last`` says later subscript elements prove it is not the last axis.
    axes: tuple[tuple[int | None, str, bool], ...]

    def roles(self, rank: int | None = None) -> list[str]:
        if self.kind in AXISLESS_RESHAPES:
            return [TOKEN_HEAD]
        return [axis_role(axis, bound, not_last, rank) for axis, bound, not_last in self.axes]

    def role(self, rank: int | None = None) -> str:
        """TOKEN_HEAD if any axis certainly is one, else AMBIGUOUS if any is unplaceable."""
        roles = self.roles(rank)
        if TOKEN_HEAD in roles:
            return TOKEN_HEAD
        return AMBIGUOUS if AMBIGUOUS in roles else HEAD_DIM

    def bounds_text(self) -> str:
        if isinstance(self.node, cst.Subscript):
            return normalized(self.node)[len(normalized(self.node.value)):]
        return normalized(self.node)


def axis_role(axis: int | None, bound: str, not_last: bool, rank: int | None) -> str:
    if axis is None:
        return AMBIGUOUS
    if axis < 0:
        return HEAD_DIM if axis == -1 else TOKEN_HEAD
    if rank is not None:
        return HEAD_DIM if axis == rank - 1 else TOKEN_HEAD
    if not_last or axis == 0:
        return TOKEN_HEAD
    if axis == 1 and not _DIM_WORDS.search(bound):
        return TOKEN_HEAD
    return AMBIGUOUS


def strip_shape_keeping(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``k[:t].contiguous().transpose(1, 2)`` -> ``k[:t]``."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in SHAPE_KEEPING
    ):
        expr = expr.func.value
    return expr


def see_through(expr: cst.BaseExpression) -> tuple[str | None, str]:
    """(base, steps) for a chain of axis-moving steps on a named tensor: ``k.transpose(1, 2)``
    gives (``k``, ``.transpose(1,2)``); (None, "") for anything else."""
    inner = expr
    while (
        isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)
        and inner.func.attr.value in SEE_THROUGH
    ):
        inner = inner.func.value
    base = dotted_name(inner) if inner is not expr else None
    if base is None:
        return None, ""
    return base, normalized(expr)[len(normalized(inner)):]


def reshape_of(expr: cst.BaseExpression) -> Reshape | None:
    """The token/head-capable operation ``expr`` performs on a named tensor, if any."""
    if isinstance(expr, cst.Subscript):
        return _subscript_reshape(expr)
    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Attribute, cst.Name)):
        return _call_reshape(expr)
    return None


def _subscript_reshape(node: cst.Subscript) -> Reshape | None:
    base = dotted_name(node.value)
    if base is None:
        base, _ = see_through(node.value)
    if base is None:
        return None
    elements = node.slice
    ellipsis_at = next(
        (i for i, el in enumerate(elements)
         if isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.Ellipsis)),
        None,
    )
    axes: list[tuple[int | None, str, bool]] = []
    kind = "slice"
    # Axis-consuming positions: None (newaxis) adds an axis, Ellipsis absorbs any number.
    consuming = [
        i for i, el in enumerate(elements)
        if not _is_newaxis(el) and i != ellipsis_at
    ]
    for position, i in enumerate(consuming):
        el = elements[i].slice
        if isinstance(el, cst.Slice):
            if el.lower is None and el.upper is None and el.step is None:
                continue
        elif _is_int_literal(el.value) or _names_layer(el.value):
            # ``kv[0]``/``kv[:, 1]`` unpack a stacked cache; ``cache[layer]`` picks a layer.
            continue
        else:
            kind = "index"
        if ellipsis_at is not None and i > ellipsis_at:
            axis = position - len(consuming)
        else:
            axis = position
        not_last = position < len(consuming) - 1
        axes.append((axis, normalized(elements[i]), not_last))
    if not axes:
        return None
    return Reshape(node, base, kind, tuple(axes))


def _call_reshape(call: cst.Call) -> Reshape | None:
    func = call.func
    tail = func.attr.value if isinstance(func, cst.Attribute) else func.value
    if tail not in RESHAPE_CALLS:
        return None
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    method_base = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
    if method_base is not None and method_base not in {"torch", "torch.Tensor", "Tensor"}:
        base, shift = method_base, 0
    elif positional and dotted_name(positional[0]) is not None:
        base, shift = dotted_name(positional[0]), 1
    else:
        return None
    if tail in AXISLESS_RESHAPES:
        return Reshape(call, base, tail, ())
    position, default = RESHAPE_DIM_ARGS[tail]
    dim_node = next(
        (arg.value for arg in call.args if arg.keyword and arg.keyword.value == "dim"), None
    )
    if dim_node is None and len(positional) > position + shift:
        dim_node = positional[position + shift]
    axis = default if dim_node is None else _int_value(dim_node)
    # The sizes/bounds alone, so that ``dim=`` itself never reads as a feature-size word.
    bounds = ",".join(
        normalized(arg.value) for arg in call.args[shift:]
        if arg.value is not dim_node
    )
    return Reshape(call, base, tail, ((axis, bounds, False),))


def _is_newaxis(element: cst.SubscriptElement) -> bool:
    return (
        isinstance(element.slice, cst.Index)
        and isinstance(element.slice.value, cst.Name)
        and element.slice.value.value == "None"
    )


def _is_int_literal(node: cst.BaseExpression) -> bool:
    return _int_value(node) is not None


def _int_value(node: cst.BaseExpression) -> int | None:
    # evaluated_value understands 0x10, 0o7 and 1_000 alike.
    if isinstance(node, cst.Integer):
        return node.evaluated_value
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -node.expression.evaluated_value
    return None


def _names_layer(node: cst.BaseExpression) -> bool:
    name = dotted_name(node)
    return name is not None and "layer" in name.lower()
