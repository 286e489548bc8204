"""The K/V vocabulary of identifiers: which names pair up, what reads as attention, which
calls reshape, what a size name counts. Text only: the pre-filter uses it without libcst.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum
from functools import lru_cache

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
# Multi-head latent attention (DeepSeek ``MLA``, ``forward_mla``) names no "attention".
LATENT_ATTENTION = re.compile(r"MLA|(?:^|_)mla(?:_|$)")
# Names of storage: with a latent-attention name, a latent K/V pool (KV101 reads only its kernels).
STORAGE = re.compile(r"pool|cache|buffer", re.IGNORECASE)


# Parts of names (any case, inside any identifier) that make code attention code for KV107:
# ``key`` and ``value`` without any of them are a mapping's entries.
TWIN_ATTENTION_WORDS = (
    "attn", "attention", "softmax", "sdpa", "flash", "head", "query", "rotary", "rope", "cache",
    "proj", "scale", "mla", "kv",
)


def is_attention_word(name: str) -> bool:
    """Scope and class names such as ``LlamaAttention`` or ``forward_attn`` mark attention code."""
    return bool(_ATTENTION_WORD.search(name))


# Every pre-filter condition asks for the counterparts of the same few thousand names of a tree
# (on sglang, 370,000 questions about 55,000 names), and splitting a name costs more than a
# look-up.
@lru_cache(maxsize=1 << 16)
def _to_value(name: str) -> str | None:
    return _swap(name, _K_TO_V)


@lru_cache(maxsize=1 << 16)
def _to_key(name: str) -> str | None:
    return _swap(name, _V_TO_K)


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
    return _to_value(name)


def key_counterpart(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """The K-side name paired with V-side ``name``, or None."""
    for k_name, v_name in extra_pairs:
        if name == v_name:
            return k_name
    return _to_key(name)


def kv_side(name: str, extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """'k' or 'v' when ``name`` is one side of a potential pair, else None."""
    if value_counterpart(name, extra_pairs) is not None:
        return "k"
    if key_counterpart(name, extra_pairs) is not None:
        return "v"
    return None


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


# Name parts that make a K/V-side name a quantisation scale (``k_scale``, ``_v_descale``).
_SCALE_PARTS = frozenset({"scale", "scales", "descale", "amax"})


def is_scale_name(name: str) -> bool:
    """``k_scale``, ``self._v_scale``, ``key_descale``: a (dotted) name of a quantisation scale."""
    return any(part in _SCALE_PARTS for part in name.rsplit(".", 1)[-1].lower().split("_"))


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



def is_kv_projection(attr: str) -> bool:
    """``k_proj``/``v_proj``, ``wk``/``wv``, ``to_k``/``to_v``: K/V projections mark attention code."""
    return attr in {"wk", "wv", "to_k", "to_v"} or (
        kv_side(attr) is not None and ("proj" in attr or attr.endswith(("linear", "dense")))
    )


# method -> (positional index of ``dim`` in method form, default dim); the function form
# (``torch.narrow(k, ...)``) has the tensor first, so its dim sits one position later.
RESHAPE_DIM_ARGS = {
    "narrow": (0, None),
    "chunk": (1, 0),
    "split": (1, 0),
    "tensor_split": (1, 0),
    "unbind": (0, 0),
    "index_select": (0, None),
    "repeat_interleave": (1, 0),
}
# Ops whose axis is not an argument: expand/repeat only ever grow size-1 token/head axes.
AXISLESS_RESHAPES = frozenset({"expand", "repeat"})
RESHAPE_CALLS = frozenset(RESHAPE_DIM_ARGS) | AXISLESS_RESHAPES
# Calls that keep every axis length (or only move axes): they neither cause nor cure drift.
SHAPE_KEEPING = frozenset({
    "contiguous", "transpose", "permute", "view", "reshape", "to", "float", "half", "bfloat16",
    "type", "type_as", "clone", "detach", "flatten", "unflatten", "unsqueeze", "squeeze",
    "view_as", "reshape_as", "cuda", "cpu", "npu", "movedim", "swapaxes", "mul", "div", "t",
})

# Methods whose result is the same tensor for pairing purposes.
SAME_TENSOR_METHODS = frozenset({
    "contiguous", "transpose", "permute", "float", "half", "bfloat16", "to", "clone", "detach",
    "type_as", "squeeze", "unsqueeze", "flatten", "view", "reshape",
})

# Steps a subscript may follow and still be read as a cut of the tensor underneath
# (``k.transpose(1, 2)[:, :, :n]``, ``reshapes.see_through``): they move or convert axes but
# keep every axis and never merge or split one, so the subscript's axes are still the token,
# head and head-dim axes.
SEE_THROUGH = frozenset({
    "contiguous", "transpose", "permute", "movedim", "swapaxes", "to", "float", "half",
    "bfloat16", "type_as", "clone", "detach",
})


# Calls whose arguments are only displayed or checked, never computed with (``scopes`` reads
# what stands in them as quiet, and so does KV102's ast screen).
QUIET_CALLS = frozenset({
    "print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log",
    "warn_once", "info_once", "assert_close", "_check", "_check_with", "format", "repr", "str",
})
# Attributes that read a tensor's metadata, never its elements: ``k_buffer[0].device``,
# ``k_buffers[0].shape[-1]``, ``k_cache[0].element_size()`` pick one layer only to ask what every
# layer shares, so the subscript under them is no cache access.
METADATA_ATTRIBUTES = frozenset({
    "device", "dtype", "shape", "ndim", "is_cuda", "layout", "itemsize", "nbytes", "size", "dim",
    "numel", "element_size", "stride", "data_ptr", "is_contiguous", "get_device", "storage_offset",
    "is_floating_point", "untyped_storage", "nelement",
})

# KV103's vocabulary, shared by the rule, the text pre-filter and the ast screen so that the
# three cannot drift apart. Name parts that make a K/V name a cache or pool:
CACHE_PARTS = frozenset({
    "cache", "caches", "pool", "pools", "buf", "buffer", "buffers", "pages", "past", "mem", "memory",
})
# Gather/scatter calls that read or write a cache at an index.
INDEXED_CALLS = frozenset({
    "index_copy_", "index_copy", "index_put_", "index_put", "index_add_", "index_fill_",
    "index_select", "scatter_", "scatter", "scatter_add_", "masked_scatter_",
    "npu_scatter_nd_update_", "npu_scatter_nd_update", "scatter_update_", "scatter_update",
})
# Where the written data sits in an update call, counted among the positional arguments left once
# the cache itself is set aside (``k_cache.index_copy_(dim, index, source)`` and
# ``npu_scatter_nd_update_(k_cache, indices, updates)`` alike). The data is K on one side and V on
# the other and may legitimately differ (``.view(..., head_dim)`` vs ``.view(..., v_head_dim)``);
# only the cache's own subscripts and the remaining (index) arguments must agree.
INDEXED_DATA_POSITION = {
    "index_copy_": 2, "index_copy": 2, "index_add_": 2, "scatter_": 2, "scatter": 2, "scatter_add_": 2,
    "index_put_": 1, "index_put": 1, "masked_scatter_": 1, "npu_scatter_nd_update_": 1,
    "npu_scatter_nd_update": 1, "scatter_update_": 1, "scatter_update": 1,
}
# Keywords of an indexed call that name no index: the data written (``source=``), ``out=``
# (where a gather writes: the K and V slots of one stacked destination differ by design), and
# switches of behaviour.
INDEXED_IGNORED_KEYWORDS = frozenset({
    "source", "src", "values", "updates", "out", "accumulate", "reduce", "include_self", "non_blocking",
})
# Indexed calls that exist as free functions (``from torch_npu import npu_scatter_nd_update_``).
# A bare ``scatter(...)``/``index_copy(...)`` is a local helper with its own signature: the
# tensor methods are only ever called on a tensor or through ``torch.``/``torch_npu.``.
INDEXED_FREE_FUNCTIONS = frozenset({"npu_scatter_nd_update_", "npu_scatter_nd_update", "scatter_update_", "scatter_update"})


class Role(Enum):
    HEAD_DIM = "head dim"
    Q_HEADS = "query head count"
    KV_HEADS = "KV head count"
    Q_WIDTH = "query width"
    KV_WIDTH = "KV width"
    UNKNOWN = "unknown"


# Checked in this order: widths first because ``all_head_size`` contains ``head_size``.
_KV_WIDTH = re.compile(
    r"^(inner_kv_dim|kv_(dim|size|hidden_size|hidden_dim|proj_size|width|out_dim|out_features|inner_dim))$"
)
_Q_WIDTH = re.compile(
    r"^(hidden_size|hidden_dim|embed_dim|embedding_dim|emb_dim|d_model|n_embd|n_embed|dim|model_dim"
    r"|all_head_size|inner_dim|q_size|q_dim|query_dim|width|n_state|hidden|attention_dim)$"
)
_HEAD_DIM = re.compile(
    r"head_dim|head_size|head_[a-z]{1,3}_(dim|size)|headdim|dim_head|dim_per_head|size_per_head|d_head|head_channels"
    r"|kv_channels|rope|nope|rotary|^d_?[kv]$|(size|hidden|dim|channels)_per_(attention_)?head"
)
_HEADS = re.compile(r"(^|_)(n|num|total_num|num_local|num_attention|local_num)?_?heads?(_|$)|^n_?heads?|heads?_")
# Megatron's num_query_groups and ChatGLM's multi_query_group_num count KV heads;
# HF's num_key_value_groups is the repeat factor num_heads // num_kv_heads, not a count.
_KV_GROUPS = re.compile(r"query_groups?|multi_query_group")
# Linear-attention layers count K and V heads separately (num_k_heads, num_v_heads): both KV-side.
_KV_TOKEN = re.compile(r"(^|_)(kv|k|v|key|keys|value|values|key_value|kvh)(_|$)|key_value|^n?kv")
_K_ONLY = frozenset({"k", "key", "keys"})
_V_ONLY = frozenset({"v", "value", "values"})


@lru_cache(maxsize=1 << 16)  # the same names of a tree are asked about file after file
def name_role(name: str) -> Role:
    """Classify an identifier (the last component of a dotted name)."""
    low = name.lower()
    if _KV_WIDTH.match(low):
        return Role.KV_WIDTH
    if _Q_WIDTH.match(low):
        return Role.Q_WIDTH
    if _HEAD_DIM.search(low):
        return Role.HEAD_DIM
    if _KV_GROUPS.search(low):
        return Role.KV_HEADS
    if "group" in low or "per_kv" in low or "rep" in low.split("_"):
        return Role.UNKNOWN
    if _HEADS.search(low) and low != "head":
        return Role.KV_HEADS if _KV_TOKEN.search(low) else Role.Q_HEADS
    return Role.UNKNOWN


_QUERY_PARTS = frozenset({"q", "query", "queries", "xq", "qs"})


def is_query_name(name: str | None) -> bool:
    """``q``, ``query_states``, ``q_prefill``: a name only a query tensor carries."""
    return name is not None and bool(_QUERY_PARTS & set(name.lower().split("_")))


def head_count_side(name: str) -> str | None:
    """"k" or "v" for a head count of one side only (``num_k_heads``, ``num_v_heads``), else None.

    Shared counts (``num_kv_heads``, ``num_key_value_heads``) name both sides. A side's own count
    exists where K and V heads differ by design: linear attention (Gated DeltaNet, Kimi Delta
    Attention) has ``[.., H, K]`` keys beside ``[.., HV, V]`` values.
    """
    parts = set(name.lower().split("_"))
    k, v = bool(parts & _K_ONLY), bool(parts & _V_ONLY)
    if k == v:
        return None
    return "k" if k else "v"


def is_kv_head_count_name(name: str) -> bool:
    # Cheap pre-test first: this runs on every identifier of a class.
    return ("head" in name or "group" in name) and name_role(name) is Role.KV_HEADS
