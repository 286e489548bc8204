"""Attention code read from the syntax tree: called names, the K/V arguments of attention
calls and their tensor rank, and node source text.

Names alone are not evidence (``linter.model.names`` says which names pair up): a pair is only a pair
when both sides occur in one scope, and rules additionally demand attention context (an
attention call, an attention-named scope, or K/V projections) before they speak.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from linter.model.names import ATTENTION_CALLABLES


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``torch_npu.npu_fusion_attention`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted_name(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def callee_tail(call: cst.Call) -> str | None:
    """Last component of the called name: ``F.scaled_dot_product_attention`` -> its tail."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def is_attention_call(call: cst.Call, extra_callables: Iterable[str] = ()) -> bool:
    tail = callee_tail(call)
    if tail is None:
        return False
    full = dotted_name(call.func)
    extra = set(extra_callables)
    return tail in ATTENTION_CALLABLES or tail in extra or (full is not None and full in extra)


_MODULE = cst.Module(body=())


def source_of(node: cst.CSTNode) -> str:
    """Exact source text of an expression node."""
    return _MODULE.code_for_node(node)


def normalized(node: cst.CSTNode) -> str:
    """Source text with all whitespace removed: ``v[: n - 1]`` == ``v[:n-1]``."""
    return "".join(source_of(node).split())


# Attention-call argument layouts. Every callable in ATTENTION_CALLABLES takes query, key,
# value first; keyword spellings differ. The head dim is the last axis in every layout, so the
# rank is all a rule needs to tell a head-dim slice from a token/head slice.
_KEY_KEYWORDS = frozenset({"key", "k", "key_cache"})
_VALUE_KEYWORDS = frozenset({"value", "v", "value_cache"})
_LAYOUT_RANKS = {"BSH": 3, "SBH": 3, "TND": 3, "BSND": 4, "BNSD": 4}
_FIXED_RANKS = {
    "scaled_dot_product_attention": 4,
    "flash_attn_func": 4,
    "flash_attn_with_kvcache": 4,
    "memory_efficient_attention": 4,
    "flex_attention": 4,
    "flash_attn_varlen_func": 3,
    "multi_head_attention_forward": 3,
    "_npu_flash_attention": 3,
}
# Position of input_layout when passed positionally, and the kernel's default layout.
_LAYOUT_POSITION = {"npu_fusion_attention": 4}
_DEFAULT_LAYOUT = {
    "npu_fused_infer_attention_score": "BSH",
    "npu_fused_infer_attention_score_v2": "BSH",
    "npu_prompt_flash_attention": "BSH",
    "npu_incre_flash_attention": "BSH",
}


def attention_kv_args(
    call: cst.Call,
) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None, int | None]:
    """(key argument, value argument, tensor rank or None) of an attention call."""
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    key = positional[1] if len(positional) > 1 else None
    value = positional[2] if len(positional) > 2 else None
    for word, expr in keywords.items():
        if word in _KEY_KEYWORDS:
            key = expr
        elif word in _VALUE_KEYWORDS:
            value = expr
    return key, value, _attention_rank(callee_tail(call), positional, keywords)


def _attention_rank(
    tail: str | None, positional: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression]
) -> int | None:
    if tail in _FIXED_RANKS:
        return _FIXED_RANKS[tail]
    layout_node = keywords.get("input_layout")
    position = _LAYOUT_POSITION.get(tail or "")
    if layout_node is None and position is not None and len(positional) > position:
        layout_node = positional[position]
    if layout_node is None:
        return _LAYOUT_RANKS.get(_DEFAULT_LAYOUT.get(tail or "", ""))
    if isinstance(layout_node, cst.SimpleString) and isinstance(layout_node.evaluated_value, str):
        return _LAYOUT_RANKS.get(layout_node.evaluated_value.upper())
    return None
