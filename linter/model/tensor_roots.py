"""Which name a tensor expression is about, for pairing K and V expressions by name.

``self.k_proj(x).view(...)`` is about ``k_proj``, ``key_cache[layer]`` about ``key_cache``,
``k.contiguous()`` about ``k``: a projection call names its layer, a shape-keeping method its
receiver, a subscript its container.
"""

from __future__ import annotations

import libcst as cst

from linter.model.names import SAME_TENSOR_METHODS


def tensor_root(expr: cst.BaseExpression) -> str | None:
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Attribute):
            return expr.attr.value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in SAME_TENSOR_METHODS:
                expr = func.value
            else:
                expr = func
        else:
            return None
