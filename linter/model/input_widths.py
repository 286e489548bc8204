"""A K/V head dim taken from the width of the tensor the query is projected from.

Cross-attention projects Q from one input and K/V from another (``query = to_q(hidden)``,
``key = to_k(context)``). A head dim computed from the query input's last axis (``inner =
hidden.shape[-1]; head_dim = inner // heads``) and used in a K or V view is the query input's
width, not K's projected one: it holds only where both inputs and both projections share one
width.

Read on stdlib ``ast`` trees, so the rule and its screen ask one code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from linter.model.ast_walk import walk
from linter.model.names import is_query_name, kv_side

_VIEWS = frozenset({"view", "reshape"})


@dataclass(frozen=True)
class WidthFault:
    node: ast.Assign   # the assignment of the query input's width
    width: str         # its name
    source: str        # the tensor Q is projected from
    kv_source: str     # the tensor K/V are projected from
    view_line: int     # a K/V view that uses it


def last_axis_of(node: ast.expr) -> str | None:
    """``x`` of ``x.shape[-1]`` or ``x.size(-1)``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        index, base = node.slice, node.value.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and len(node.args) == 1:
        index, base = node.args[0], node.func.value
    else:
        return None
    minus_one = isinstance(index, ast.UnaryOp) and \
        isinstance(index.op, ast.USub) and isinstance(index.operand, ast.Constant) and index.operand.value == 1
    return base.id if minus_one and isinstance(base, ast.Name) else None


def _projected_from(value: ast.expr, pairs) -> str | None:
    """``x`` of ``attn.to_k(x)`` (one positional argument, a name of no side): the input of a
    projection. ``attn.norm_q(query)`` steps a projected tensor, and is no projection."""
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords and isinstance(value.args[0], ast.Name):
        name = value.args[0].id
        if not is_query_name(name) and kv_side(name, pairs) is None:
            return name
    return None


def _functions(tree: ast.AST) -> Iterator[ast.AST]:
    for node in walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def query_input_widths(tree: ast.AST, pairs=()) -> list[WidthFault]:
    found: list[WidthFault] = []
    # Lines that bind a name to a width read off a tensor (``inner = x.shape[-1]``): only the
    # functions that hold one are read further.
    lines = [n.lineno for n in walk(tree) if n.__class__ is ast.Assign and len(n.targets) == 1
             and n.targets[0].__class__ is ast.Name and last_axis_of(n.value) is not None]
    if not lines:
        return found
    for function in _functions(tree):
        if not any(function.lineno <= line <= function.end_lineno for line in lines):
            continue
        assigns = [n for n in walk(function) if isinstance(n, ast.Assign) and len(n.targets) == 1
                   and isinstance(n.targets[0], ast.Name)]
        q_sources = {src for a in assigns if is_query_name(a.targets[0].id) and (src := _projected_from(a.value, pairs))}
        kv_sources = {src for a in assigns if kv_side(a.targets[0].id, pairs) in ("k", "v")
                      and not is_query_name(a.targets[0].id) and (src := _projected_from(a.value, pairs))}
        if not q_sources or not kv_sources or kv_sources & q_sources:
            continue
        widths = {a.targets[0].id: (a, src) for a in assigns if (src := last_axis_of(a.value)) in q_sources}
        if not widths:
            continue
        # Names made from the width (``head_dim = inner_dim // heads``).
        derived = {name: name for name in widths}
        for a in sorted(assigns, key=lambda a: a.lineno):
            used = {n.id for n in walk(a.value) if isinstance(n, ast.Name)}
            origin = next((derived[u] for u in sorted(used) if u in derived), None)
            if origin is not None and a.targets[0].id not in derived:
                derived[a.targets[0].id] = origin
        for call in walk(function):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _VIEWS):
                continue
            receiver = call.func.value
            if not isinstance(receiver, ast.Name) or kv_side(receiver.id, pairs) not in ("k", "v") \
                    or is_query_name(receiver.id):
                continue
            used = {n.id for arg in call.args for n in walk(arg) if isinstance(n, ast.Name)}
            origin = next((derived[u] for u in sorted(used) if u in derived), None)
            if origin is None:
                continue
            assign, source = widths[origin]
            found.append(WidthFault(assign, origin, source, sorted(kv_sources)[0], call.lineno))
            break
    return found
