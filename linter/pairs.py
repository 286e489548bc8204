"""The domain model: which names form a K/V pair and what counts as attention code.

Names alone are not evidence: a pair is only a pair when both sides occur in one scope, and
rules additionally demand attention context (an attention call, an attention-named scope, or
K/V projections) before they speak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

# Token swaps inside an identifier split on "_" (case kept): k_cache <-> v_cache, cache_k <->
# cache_v, key_states <-> value_states, wk <-> wv, to_k <-> to_v.
_K_TO_V = {
    "k": "v", "K": "V", "key": "value", "Key": "Value", "KEY": "VALUE",
    "keys": "values", "Keys": "Values", "wk": "wv", "Wk": "Wv", "xk": "xv", "XK": "XV",
}
_V_TO_K = {v: k for k, v in _K_TO_V.items()}
# The "_"-separated parts that make a name K-side, for text-level pre-filtering.
K_SIDE_TOKENS = frozenset(_K_TO_V)

# Last dotted component of callables that take (query, key, value, ...) in that order.
ATTENTION_CALLABLES = frozenset({
    "npu_fusion_attention",
    "npu_fused_infer_attention_score",
    "npu_fused_infer_attention_score_v2",
    "npu_prompt_flash_attention",
    "npu_incre_flash_attention",
    "_npu_flash_attention",
    "_npu_paged_attention",
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "memory_efficient_attention",
    "flex_attention",
})

_ATTENTION_WORD = re.compile(r"attn|attention", re.IGNORECASE)


def _swap(name: str, table: dict[str, str]) -> str | None:
    parts = name.split("_")
    hits = [i for i, part in enumerate(parts) if part in table]
    if len(hits) != 1:
        # No K/V token, or an ambiguous name such as "k_v": not a pair we can reason about.
        return None
    i = hits[0]
    parts[i] = table[parts[i]]
    return "_".join(parts)


def value_counterpart(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """The V-side name paired with K-side ``name`` (``k_chunk`` -> ``v_chunk``), or None."""
    for k_name, v_name in extra_pairs:
        if name == k_name:
            return v_name
    return _swap(name, _K_TO_V)


def key_counterpart(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """The K-side name paired with V-side ``name``, or None."""
    for k_name, v_name in extra_pairs:
        if name == v_name:
            return k_name
    return _swap(name, _V_TO_K)


def kv_side(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """'k' or 'v' when ``name`` is one side of a potential pair, else None."""
    if value_counterpart(name, extra_pairs) is not None:
        return "k"
    if key_counterpart(name, extra_pairs) is not None:
        return "v"
    return None


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


def is_attention_word(name: str) -> bool:
    """Scope and class names such as ``LlamaAttention`` or ``forward_attn`` mark attention code."""
    return bool(_ATTENTION_WORD.search(name))


_MODULE = cst.Module(body=())


def source_of(node: cst.CSTNode) -> str:
    """Exact source text of an expression node."""
    return _MODULE.code_for_node(node)


def normalized(node: cst.CSTNode) -> str:
    """Source text with all whitespace removed: ``v[: n - 1]`` == ``v[:n-1]``."""
    return "".join(source_of(node).split())


def swap_kv_text(text: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str:
    """Rewrite every K-side identifier in ``text`` to its V side (``k[:n]`` -> ``v[:n]``)."""

    def repl(match: re.Match[str]) -> str:
        word = match.group(0)
        return value_counterpart(word, extra_pairs) or word

    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", repl, text)


# Name parts that mark a K/V-side name as bookkeeping rather than a tensor of keys or values:
# ``key_padding_mask``, ``k_len``, ``v_idx``, ``key_size``, ``k_scale``.
_NON_TENSOR_PARTS = frozenset({
    "mask", "len", "lens", "length", "lengths", "size", "sizes", "shape", "dim", "dims",
    "idx", "ids", "index", "indices", "pos", "name", "names", "dtype", "device", "scale",
    "scales", "stride", "strides", "offset", "offsets", "fn", "func", "type", "str",
})


def is_kv_tensor_name(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> bool:
    """True when ``name`` (or the last component of a dotted name) can be a K or V tensor."""
    tail = name.rsplit(".", 1)[-1]
    if kv_side(tail, extra_pairs) is None:
        return False
    return not any(part.lower() in _NON_TENSOR_PARTS for part in tail.split("_"))


def counterpart_of_dotted(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """``self.k_cache`` -> ``self.v_cache``: the V-side partner of a (dotted) K-side name."""
    head, _, tail = name.rpartition(".")
    partner = value_counterpart(tail, extra_pairs)
    if partner is None:
        return None
    return f"{head}.{partner}" if head else partner


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


def is_kv_projection(attr: str) -> bool:
    """``k_proj``/``v_proj``, ``wk``/``wv``, ``to_k``/``to_v``: K/V projections mark attention code."""
    return attr in {"wk", "wv", "to_k", "to_v"} or (
        kv_side(attr) is not None and ("proj" in attr or attr.endswith(("linear", "dense")))
    )
