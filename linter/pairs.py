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
