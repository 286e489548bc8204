"""A norm applied to the attention output, sized with another width than the output's.

The attention output has the value's width (``value_dim``): the output projection takes it
(``o_proj = Linear(value_dim, hidden_size)``). A norm applied to the output just before that
projection (``self.o_proj(self.g_norm(o))``) must have the same width; one declared with the
model's width (``g_norm = RMSNorm(hidden_size)``) fails, or silently broadcasts, exactly on
the models whose value width differs from the hidden size.

Read on stdlib ``ast`` trees, so the rule and its screen ask one code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from linter.model.ast_reading import tail
from linter.model.ast_walk import walk
from linter.model.names import kv_side


@dataclass(frozen=True)
class NormFault:
    node: ast.expr      # the norm's size argument
    norm: str           # the norm's attribute
    size: str           # the size it is declared with
    projection: str     # the projection applied to its result
    width: str          # the projection's input width


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _linear(call: ast.expr) -> ast.expr | None:
    """The input width of ``nn.Linear(width, ...)`` (or a ``*Linear`` layer)."""
    if not isinstance(call, ast.Call) or not call.args:
        return None
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return call.args[0] if name.endswith("Linear") else None


def _value_width(name: str, pairs) -> bool:
    return kv_side(name, pairs) == "v" or "value" in name.lower().split("_")


def output_norm_widths(tree: ast.AST, pairs=()) -> list[NormFault]:
    found: list[NormFault] = []
    if not any(n.__class__ is ast.Call and len(n.args) == 1 and n.args[0].__class__ is ast.Call
               and "norm" in (_self_attr(n.args[0].func) or "").lower() and _self_attr(n.func) for n in walk(tree)):
        return found  # no layer applied to a norm's result
    for cls in walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        widths: dict[str, ast.expr] = {}
        norms: dict[str, ast.expr] = {}
        sources: dict[str, list[str]] = {}
        for node in walk(cls):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            attr = _self_attr(node.targets[0])
            if attr is None:
                continue
            sources.setdefault(attr, []).append(ast.unparse(node.value))
            width = _linear(node.value)
            if width is not None:
                widths[attr] = width
            elif "norm" in attr.lower().split("_") and isinstance(node.value, ast.Call) and node.value.args:
                norms[attr] = node.value.args[0]
        for node in walk(cls):
            if not (isinstance(node, ast.Call) and len(node.args) == 1 and isinstance(node.args[0], ast.Call)):
                continue
            projection, norm = _self_attr(node.func), _self_attr(node.args[0].func)
            if projection not in widths or norm not in norms:
                continue
            size, width = tail(norms[norm]), tail(widths[projection])
            if size is None or width is None or size == width:
                continue
            if not _value_width(width, pairs) or _value_width(size, pairs):
                continue
            # ``self.value_dim = self.hidden_size``: one width by construction.
            if any(s in (f"self.{size}", size) for s in sources.get(width, [])):
                continue
            found.append(NormFault(norms[norm], norm, size, projection, width))
    return sorted(found, key=lambda f: (f.node.lineno, f.node.col_offset))
