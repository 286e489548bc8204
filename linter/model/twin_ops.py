"""What one side's operation differs in from its twin's: axes moved, a concatenation's dim, an
op or operand dropped, a token or head cut. The twin model (``linter.model.symmetry``) asks
these once two statements are twins but for one place."""

from __future__ import annotations

import ast

from linter.model.ast_reading import holds, int_value, root_word, tail
from linter.model.names import kv_side
from linter.model.ast_walk import walk

# Calls whose integer arguments name axes: a twin that moves other axes breaks the symmetry.
AXIS_CALLS = frozenset({
    "transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis", "cat", "concat",
    "concatenate", "stack", "flatten", "unflatten", "repeat_interleave", "roll",
})


TRANSPOSES = frozenset({"transpose", "swapaxes", "swapdims"})


CONCATS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack"})


# Methods the V side must repeat when its twin applies them: layout and GQA repeats. RoPE,
# norms and quantisers are other callables (K-only on purpose), never in this set; nor are
# casts: K is cast to float32 alone for its norm or rotary embedding.
MIRRORED_METHODS = frozenset({
    "transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis", "repeat_interleave",
    "repeat", "expand",
})


MOVES = TRANSPOSES | {"permute", "movedim", "moveaxis"}


def axis_list(call: ast.Call) -> list[int] | None:
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
        args = args[0].elts
    axes = [int_value(a) for a in args]
    return None if not axes or None in axes or call.keywords else axes


def axes_differ(k: ast.Call, v: ast.Call) -> bool:
    if tail(k.func) not in MOVES or tail(v.func) != tail(k.func):
        return False
    k_axes, v_axes = axis_list(k), axis_list(v)
    return k_axes is not None and v_axes is not None and k_axes != v_axes


def axis_difference(k, v, path: tuple[ast.AST, ...]) -> str | None:
    """The integer dim of a concatenation or flatten that differs from the twin's."""
    if int_value(k) is None or int_value(v) is None:
        return None
    call = next((p for p in reversed(path) if isinstance(p, ast.Call)), None)
    op = None if call is None else tail(call.func)
    if op not in AXIS_CALLS or op in MOVES:
        return None
    if not any(holds(arg, v) for arg in _axis_arguments(call, op)):
        return None
    return f"the value side's `{op}` works along dim {int_value(v)} where its key twin's uses dim {int_value(k)}"


def _axis_arguments(call: ast.Call, op: str) -> list[ast.expr]:
    """Where ``call``'s axes stand: ``roll``'s ``dims`` only (its ``shifts`` count elements)."""
    if op != "roll":
        return [*call.args[1:], *(kw.value for kw in call.keywords)]
    axes = [kw.value for kw in call.keywords if kw.arg == "dims"]
    # ``torch.roll(x, shifts, dims)`` or ``x.roll(shifts, dims)``.
    at = 2 if isinstance(call.func, ast.Attribute) and root_word(call.func.value) == "torch" else 1
    return axes + call.args[at:at + 1]


def transposed_for_scores(op: str, k_axes: list[int], v_axes: list[int]) -> bool:
    """K's op moves the last axis (``transpose(-2, -1)``, ``permute(0, 2, 3, 1)``) and V's does
    not: the layout ``Q @ K^T`` wants, not a broken twin."""
    if op in TRANSPOSES:
        if -1 in k_axes and -1 not in v_axes:
            return True
        if all(a >= 0 for a in (*k_axes, *v_axes)) and max(k_axes) > max(v_axes):
            return True
        return False
    if op == "permute" and len(k_axes) == len(v_axes) and k_axes:
        last = len(k_axes) - 1
        return k_axes[-1] not in (last, -1) and v_axes[-1] in (last, -1)
    return False


def moves_last_axis(op: str, call: ast.Call) -> bool:
    """K laid out for ``Q @ K^T``: its last axis moved (``transpose(-2, -1)``, ``transpose(2,
    3)`` of a 4-d tensor, ``permute(0, 2, 3, 1)``)."""
    axes = axis_list(call)
    if axes is None:
        return True  # axes not read: no claim
    if op == "permute" or len(axes) > 2:
        # ``x.transpose(0, 2, 1, 3)`` (MLX, NumPy) is a permutation of every axis.
        return axes[-1] not in (len(axes) - 1, -1)
    return -1 in axes or max(axes) >= 3


def dropped_operand(k: ast.AST, v: ast.AST) -> ast.AST | None:
    """What the V side would equal if it lacked the twin's layout op, repeat, cast or cut."""
    if isinstance(k, ast.Call):
        op = tail(k.func)
        if isinstance(v, ast.Call) and tail(v.func) == op:
            return None
        if isinstance(k.func, ast.Attribute) and op in MIRRORED_METHODS:
            return k.func.value
        if op is not None and "repeat" in op.lower() and op != "repeat" and k.args:
            return k.args[0]
    elif isinstance(k, ast.Subscript) and not isinstance(v, ast.Subscript):
        return k.value
    return None


def dropped(k, pairs) -> tuple[str, str] | None:
    """What the V statement lacks: a layout op, cast or repeat, or a token or head cut."""
    if isinstance(k, ast.Call):
        op = tail(k.func)
        if op in MOVES and moves_last_axis(op, k):
            return None  # K laid out for ``Q @ K^T``; V keeps its last axis last
        return "one-side-op", (f"the value side lacks the key twin's `.{op}(...)`" if isinstance(k.func, ast.Attribute)
                               else f"the value side lacks the key twin's `{op}(...)`")
    if isinstance(k, ast.Subscript) and cuts_tokens_or_heads(k.slice) and kv_side(root_word(k.value) or "", pairs) == "k":
        return "one-side-slice", "the value side is not cut where its key twin is"
    return None


def slice_difference(k, v, path: tuple[ast.AST, ...], pairs) -> str | None:
    """A bound of a V-side slice (or ``narrow`` length) that differs from the twin's."""
    for depth in range(len(path) - 1, -1, -1):
        node = path[depth]
        inner = path[depth + 1] if depth + 1 < len(path) else v
        if isinstance(node, ast.Subscript) and inner is node.slice:
            root = root_word(node.value)
            if root is None or kv_side(root, pairs) != "v":
                return None
            elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            element = next((e for e in elements if holds(e, v)), None)
            if not isinstance(element, ast.Slice):
                return None
            if last_axis(elements, element) or names_value_side(v, pairs):
                return None
            return "the value side's slice bound differs from its key twin's"
        if isinstance(node, ast.Call) and tail(node.func) == "narrow" and isinstance(node.func, ast.Attribute):
            root = root_word(node.func.value)
            if root is None or kv_side(root, pairs) != "v" or len(node.args) != 3 or not holds(node.args[2], v):
                return None
            if int_value(node.args[0]) == -1 or names_value_side(v, pairs):
                return None
            return "the value side's `narrow` length differs from its key twin's"
        if isinstance(node, (ast.Call, ast.stmt)):
            return None
    return None


def last_axis(elements: list[ast.expr], element: ast.expr) -> bool:
    """A cut of the last axis after an ellipsis (``v[..., :d]``): the head dim, which may
    differ between K and V (Dk != Dv)."""
    has_ellipsis = any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elements)
    return has_ellipsis and elements[-1] is element


def cuts_tokens_or_heads(index: ast.expr) -> bool:
    elements = index.elts if isinstance(index, ast.Tuple) else [index]
    for element in elements:
        if isinstance(element, ast.Slice) and (element.lower is not None or element.upper is not None):
            return not last_axis(elements, element)
    return False


def names_value_side(node: object, pairs) -> bool:
    """The V statement's differing part names a V size of its own (``v_head_dim``)."""
    if not isinstance(node, ast.AST):
        return False
    return any(kv_side(w, pairs) == "v" for w in map(tail, walk(node)) if w is not None)
