"""``einsum`` calls read as matrix products: which operands, which axes each carries, which
are summed away.

Hand-written attention is often spelled with ``einsum`` instead of ``@``:
``torch.einsum("bhqd,bhkd->bhqk", q, k)`` for the scores, ``torch.einsum("bhqk,bhkd->bhqd",
probs, v)`` for the weighted sum. The equation, not the operand order, says which is which:
the scores sum over an axis the query and key share (the head dim) and keep an axis only the
key has (its tokens); the weighted sum sums over an axis the weights and value share (the key
tokens) and keeps an axis only the value has (its head dim). Rotary tables (``"i,j->ij"``) sum
over nothing; a linear-attention state update (``"hvk,hk->hv"``) keeps no axis of its own
operand.

Both spellings are read: torch's (equation first, operands after, or in one list) and
einops' (operands first, axis names separated by spaces last). An equation that is not a
string literal, or groups axes (``"(h d)"``), is not read.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

_ELLIPSIS = "..."


@dataclass(frozen=True)
class Einsum:
    node: cst.Call
    operands: tuple[cst.BaseExpression, ...]
    inputs: tuple[frozenset[str], ...]  # the axis names of each operand, ``...`` left out
    output: frozenset[str]
    # Each operand's number of axes, None where ``...`` stands for some.
    ranks: tuple[int | None, ...] = ()


def einsum_of(call: cst.Call) -> Einsum | None:
    """``call`` read as an ``einsum`` of two or more operands, or None."""
    args = [arg for arg in call.args if arg.keyword is None]
    if not args or any(arg.star for arg in args):
        return None
    first, last = _string(args[0].value), _string(args[-1].value)
    if first is not None:
        operands = [arg.value for arg in args[1:]]
        if len(operands) == 1 and isinstance(operands[0], (cst.Tuple, cst.List)):
            elements = operands[0].elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            operands = [e.value for e in elements]
        parsed = _torch_equation(first, len(operands))
    elif last is not None:
        operands = [arg.value for arg in args[:-1]]
        parsed = _einops_equation(last, len(operands))
    else:
        return None
    if parsed is None:
        return None
    inputs, output, ranks = parsed
    return Einsum(call, tuple(operands), inputs, output, ranks)


def is_scores(einsum: Einsum, key: int) -> bool:
    """Is this ``query x key`` with operand ``key`` the key: an axis of both summed away, and an
    axis of the key alone (its tokens) kept?"""
    if len(einsum.operands) != 2:
        return False
    query, keys = einsum.inputs[1 - key], einsum.inputs[key]
    return bool((query & keys) - einsum.output) and bool((keys - query) & einsum.output)


def is_weighted_sum(einsum: Einsum, value: int) -> bool:
    """Is this ``weights x value`` with operand ``value`` the value: an axis of both (the key
    tokens) summed away, and an axis of the value alone (its head dim) kept?"""
    if len(einsum.operands) != 2:
        return False
    weights, values = einsum.inputs[1 - value], einsum.inputs[value]
    return bool((weights & values) - einsum.output) and bool((values - weights) & einsum.output)


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


_Parsed = tuple[tuple[frozenset[str], ...], frozenset[str], tuple[int | None, ...]]


def _torch_equation(equation: str, count: int) -> _Parsed | None:
    equation = equation.replace(" ", "")
    left, arrow, right = equation.partition("->")
    written = left.split(",")
    terms = [term.replace(_ELLIPSIS, "") for term in written]
    if len(terms) != count or not all(term.isalpha() or term == "" for term in terms):
        return None
    inputs = tuple(frozenset(term) for term in terms)
    ranks = tuple(None if _ELLIPSIS in w else len(t) for w, t in zip(written, terms))
    if arrow:
        right = right.replace(_ELLIPSIS, "")
        if not (right.isalpha() or right == ""):
            return None
        return inputs, frozenset(right), ranks
    # Implicit output: the axes that occur once.
    letters = "".join(terms)
    return inputs, frozenset(c for c in letters if letters.count(c) == 1), ranks


def _einops_equation(equation: str, count: int) -> _Parsed | None:
    left, arrow, right = equation.partition("->")
    if not arrow or "(" in equation:
        return None
    terms = left.split(",")
    if len(terms) != count:
        return None
    inputs = tuple(_axes(term) for term in terms)
    output = _axes(right)
    if any(axes is None for axes in (*inputs, output)):
        return None
    ranks = tuple(None if _ELLIPSIS in term else len(term.split()) for term in terms)
    return inputs, output, ranks


def _axes(term: str) -> frozenset[str] | None:
    names = [name for name in term.split() if name != _ELLIPSIS]
    if not all(name.isidentifier() for name in names):
        return None
    return frozenset(names)
