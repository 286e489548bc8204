"""Per-op-family validators: compose the checks in the order a reader would verify a call.

Each validator takes the op's bound arguments in the order its ops row declares and returns the
first Violation found, or None.
"""

from __future__ import annotations

from typing import Any

from runtime_guard import checks as c
from runtime_guard.checks import ABSENT
from runtime_guard.layouts import input_layout

DEVICE_TYPE = "npu"

# What attention() calls its roles unless told the op's own argument names (the guard re-runs a
# failing call's validation with them, so naming costs nothing on a passing call).
ATTENTION_NAMES = ("input_layout", "query", "key", "value", "num_heads", "num_key_value_heads", "actual_seq_lengths", "actual_seq_lengths_kv", "block_table", "block_size", None, "antiquant_scale")


def attention(layout_arg: Any, q: Any, k: Any, v: Any, heads: Any, kv_heads: Any, q_lens: Any, kv_lens: Any, block_table: Any, block_size: Any, device_type: str | None = DEVICE_TYPE, kv_scale: Any = ABSENT, names: tuple = ATTENTION_NAMES) -> c.Violation | c.NotJudged | None:
    """npu_fusion_attention, npu_fused_infer_attention_score(_v2), prompt/incre flash attention, guard().

    This runs on every call, so each rule is first tested inline and its check function (which
    words the violation) is called only when the inline test fails.
    """
    known = c.TENSOR_TYPES
    if (type(q) not in known or type(k) not in known or type(v) not in known) and (found := c.arguments_are_tensors(((names[1], q), (names[2], k), (names[3], v)))):
        return found
    device = q.device
    if ((device_type is not None and device.type != device_type) or k.device != device or v.device != device) and (found := c.one_device_of_type(((names[1], q), (names[2], k), (names[3], v)), device_type)):
        return found
    dtype = q.dtype
    if (k.dtype is not dtype or v.dtype is not dtype) and (found := _attention_dtypes(q, k, v, kv_scale, names)):
        return found
    if type(layout_arg) is not str:
        if found := c.layout_is_text(layout_arg):
            return found
        layout_arg = str.__str__(layout_arg)  # a str subclass (an enum.StrEnum member) is its text
    layout = input_layout(layout_arg)
    if layout is None:
        return None  # the kernel rejects layouts it does not know with its own message
    if block_table is not None:
        return _paged_attention(layout, q, k, v, heads, kv_heads, q_lens, kv_lens, block_table, block_size, names)
    q_shape, k_shape, v_shape = q.shape, k.shape, v.shape
    rank = layout.rank
    if len(q_shape) != rank or len(k_shape) != rank or len(v_shape) != rank:
        return next(found for name, tensor in ((names[1], q), (names[2], k), (names[3], v)) if (found := c.rank_matches_layout(name, tensor, layout.name, rank)))
    tokens = layout.tokens
    q_tokens, k_tokens, v_tokens = tokens(q_shape), tokens(k_shape), tokens(v_shape)
    if k_tokens != v_tokens:
        return c.k_v_token_counts_match(names[2], k, k_tokens, names[3], v, v_tokens)
    h = layout.head_axis
    if h is None:
        if found := _hidden_heads(layout.name, q, k, v, heads, names):
            return found
        q_dim = q_shape[2] // heads
        q_heads, k_heads, v_heads, k_dim = heads, k_shape[2] // q_dim, k_shape[2] // q_dim, q_dim
    else:
        q_heads, k_heads, v_heads = q_shape[h], k_shape[h], v_shape[h]
        q_dim, k_dim = q_shape[layout.dim_axis], k_shape[layout.dim_axis]
    if k_heads != v_heads:
        return c.k_v_head_counts_match(names[2], k, k_heads, names[3], v, v_heads)
    if q_dim != k_dim:
        return c.q_k_head_dims_match(q, q_dim, names[2], k, k_dim, names[1])
    if (type(heads) is not int or heads != q_heads) and heads is not ABSENT and (found := c.head_count_matches(names[4], heads, q_heads, names[1], q)):
        return found
    if k_heads <= 0 or q_heads % k_heads:
        return c.kv_heads_divide_q_heads(q_heads, k_heads, q, names[2], k, names[1])
    if (type(kv_heads) is not int or (kv_heads and kv_heads != k_heads)) and kv_heads is not ABSENT and (found := _declared_kv_heads(names[5], kv_heads, k_heads, names[2], k)):
        return found
    if layout.packed:
        return _packed_lengths(q, k, q_tokens[0], k_tokens[0], q_lens, kv_lens, names)
    if q_tokens[0] != k_tokens[0]:
        return c.axis_matches("q_kv_batches_match", lambda: f"{c.describe(names[1], q)} and {c.describe(names[2], k)} must have the same batch", q_tokens[0], k_tokens[0], ((names[1], q), (names[2], k)), c.LENGTHS_STALE)
    if found := _per_sequence(names[6], q_lens, q_tokens[1], q_tokens[0], names[1], "'s sequence axis"):
        return found
    return _per_sequence(names[7], kv_lens, k_tokens[1], k_tokens[0], names[2], "'s sequence axis")


def _is_float(dtype: Any) -> bool:
    """float16, bfloat16, float32, float64: dtypes no attention kernel dequantises."""
    return dtype.is_floating_point and dtype.itemsize >= 2


def _attention_dtypes(q: Any, k: Any, v: Any, kv_scale: Any, names: tuple) -> c.Violation | c.NotJudged | None:
    """Q, K and V share one dtype, except quantised K/V that the op dequantises.

    FIA/IFA take int8 K/V with a float16/bfloat16 query when antiquant scales are given (torch_npu's
    npu_fused_infer_attention_score doc, antiquant_scale/key_antiquant_scale; FIA_v2's
    dequant_scale_key/value; vllm-ascend's int8 KV-cache decode). Two float dtypes that differ are
    always one side cast without the other; any other mix (fp8, int4 packed in int32, an op without
    quantisation arguments) is the kernel's to judge.
    """
    qkv = ((names[1], q), (names[2], k), (names[3], v))
    if _is_float(q.dtype) and _is_float(k.dtype) and _is_float(v.dtype):
        return c.one_dtype(qkv)
    if k.dtype != v.dtype:
        if _is_float(k.dtype) or _is_float(v.dtype):
            return c.one_dtype(qkv[1:])
        return c.NotJudged(f"K/V dtypes {k.dtype} and {v.dtype}")
    if str(k.dtype) == "torch.int8" and _is_float(q.dtype) and kv_scale is not ABSENT:
        if kv_scale is not None:
            return None  # dequantised K/V: the shapes are still checked
        return c.Violation(
            "one_dtype",
            f"{c.describe(names[2], k)} and {c.describe(names[3], v)} are int8 but {c.describe(names[1], q)} is {q.dtype}: int8 K/V need antiquant scales ({names[11] if len(names) > 11 else ATTENTION_NAMES[11]}=...), or K/V of the query's dtype",
            "a quantised KV cache passed without its scales (or the cache dtype changed without the attention call)",
            qkv,
        )
    return c.NotJudged(f"query {q.dtype} with K/V {k.dtype}")


def _declared_kv_heads(arg: str, declared: Any, actual: int, tensor_name: str, tensor: Any) -> c.Violation | None:
    """0 declares nothing (the kernel takes K's head axis); anything else must be that int."""
    if c.is_int(declared) and declared == 0:
        return None
    return c.head_count_matches(arg, declared, actual, tensor_name, tensor)


def _hidden_heads(layout: str, q: Any, k: Any, v: Any, heads: Any, names: tuple) -> c.Violation | None:
    """BSH/SBH fold heads into H = N * D: Q's head count must split it, and K/V must split by Q's head dim."""
    named = ((names[1], q),)
    if type(heads) is not int:
        if heads is ABSENT:
            return c.Violation("head_count_matches", f"layout {layout} needs an integer head count to split {c.describe(names[1], q)}, got none", "a missing head count", named)
        if not c.is_int(heads):
            return c.int_argument(names[4], heads, f"layout {layout} splits the hidden size of {c.describe(names[1], q)} by it")
        heads = int(heads)  # a NumPy integer: the dispatcher takes it as the int it holds
    q_hidden, k_hidden, v_hidden = q.shape[2], k.shape[2], v.shape[2]
    if heads <= 0 or q_hidden % heads:
        return c.divides("head_count_matches", f"{names[4]} must split the hidden size of {c.describe(names[1], q)}", q_hidden, heads, named, "a head count from the model config that does not match this tensor")
    q_dim = q_hidden // heads
    if k_hidden % q_dim:
        return c.divides("q_k_head_dims_match", f"Q's head dim must split the hidden size of {c.describe(names[2], k)}", k_hidden, q_dim, ((names[1], q), (names[2], k)), "Q and K projected to different head sizes")
    kv_heads = k_hidden // q_dim
    if v_hidden % kv_heads:
        return c.divides("k_v_head_counts_match", f"K's {kv_heads} heads must split the hidden size of {c.describe(names[3], v)}", v_hidden, kv_heads, ((names[2], k), (names[3], v)), c.HEAD_CONFIG)
    return None


def _packed_lengths(q: Any, k: Any, q_total: int, k_total: int, q_lens: Any, kv_lens: Any, names: tuple) -> c.Violation | None:
    q_arg, kv_arg = names[6], names[7]
    q_host = c.host_ints(q_lens)
    kv_host = q_host if kv_lens is q_lens else c.host_ints(kv_lens)
    if q_host is not None and (found := c.cumulative_lengths_valid(q_arg, q_host, q_total, names[1], q)):
        return found
    if kv_host is not None and (kv_host is not q_host or k_total != q_total) and (found := c.cumulative_lengths_valid(kv_arg, kv_host, k_total, names[2], k)):
        return found
    if q_host is not None and kv_host is not None:
        return None if kv_host is q_host else c.same_batch(q_arg, q_host, kv_arg, kv_host)
    for name, lengths, host in ((q_arg, q_lens, q_host), (kv_arg, kv_lens, kv_host)):
        if host is not None or lengths is None:
            continue
        if not c.is_tensor_like(lengths):
            return c.lengths_argument(name, lengths, optional=True)
        if found := c.length_tensor_shape(name, lengths, None):
            return found
    return None


def _per_sequence(arg: str, lengths: Any, capacity: int, batch: int | None, owner: str, where: str, optional: bool = True) -> c.Violation | None:
    if lengths is None:
        return None if optional else c.lengths_argument(arg, lengths, optional)
    host = c.host_ints(lengths)
    if host is not None:
        return c.per_sequence_lengths_fit(arg, host, capacity, batch, where, owner)
    if c.is_tensor_like(lengths):
        return c.length_tensor_shape(arg, lengths, None if batch is None else (batch, 1))
    return c.lengths_argument(arg, lengths, optional)


# Paged K/V forms npu_fused_infer_attention_score documents, by rank: which axes hold the block
# size and the KV heads, and which axes both caches must share.
#   3: (blocks, block_size, H)                      H = KV heads x D
#   4: (blocks, KV_N, block_size, D)
#   5: (blocks, KV_N, D/x, block_size, x)           NZ: x = 16 (float16/bfloat16) or 32 (int8)
# Both caches share blocks, block size and KV heads; V's head dim may differ from K's (MLA).
PAGED_FORMS = {3: (1, None, (0, 1)), 4: (2, 1, (0, 1, 2)), 5: (3, 1, (0, 1, 3))}


def _paged_attention(layout: Any, q: Any, k: Any, v: Any, heads: Any, kv_heads: Any, q_lens: Any, kv_lens: Any, block_table: Any, block_size: Any, names: tuple) -> c.Violation | c.NotJudged | None:
    """Paged K/V caches indexed by block_table, in any of PAGED_FORMS."""
    if found := c.arguments_are_tensors(((names[8], block_table),)):
        return found
    if found := c.rank_matches_layout(names[1], q, layout.name, layout.rank):
        return found
    k_shape = k.shape
    form = PAGED_FORMS.get(len(k_shape))
    if form is None:
        return c.NotJudged(f"paged {names[2]} of rank {len(k_shape)}")
    block_axis, head_axis, same_axes = form
    if found := c.caches_match(k, v, same_axes, names[2], names[3]):
        return found
    if type(block_size) is not int and (found := c.int_argument(names[9], block_size, f"the block axis of {c.describe(names[2], k)} ({k_shape[block_axis]}), or 0")):
        return found
    if block_size and (found := c.axis_matches("block_size_matches", lambda: f"{names[9]} must equal the block axis of {c.describe(names[2], k)}", block_size, k_shape[block_axis], ((names[2], k),), "a block size from a different cache configuration")):
        return found
    q_batch = q.shape[layout.token_axes[0]] if not layout.packed else None
    if len(block_table.shape) != 2 or (q_batch is not None and block_table.shape[0] != q_batch):
        return c.Violation("block_table_shape", f"{c.describe(names[8], block_table)} must be 2-D with one row per sequence of {c.describe(names[1], q)}", "a block table built for a different batch", ((names[8], block_table), (names[1], q)))
    if type(heads) is not int and heads is not ABSENT and (found := c.int_argument(names[4], heads, f"the number of query heads of {c.describe(names[1], q)}")):
        return found
    if type(kv_heads) is not int and kv_heads is not ABSENT and (found := c.int_argument(names[5], kv_heads, f"the KV heads of {c.describe(names[2], k)}, or 0")):
        return found
    if found := _paged_heads(layout, q, k, heads, kv_heads, head_axis, names):
        return found
    if layout.packed:
        q_tokens = q.shape[layout.token_axes[0]]
        q_host = c.host_ints(q_lens)
        if q_host is not None:
            if found := c.cumulative_lengths_valid(names[6], q_host, q_tokens, names[1], q):
                return found
        elif q_lens is not None:
            if not c.is_tensor_like(q_lens):
                return c.lengths_argument(names[6], q_lens, optional=True)
            if found := c.length_tensor_shape(names[6], q_lens, None):
                return found
    elif found := _per_sequence(names[6], q_lens, q.shape[layout.token_axes[1]], q_batch, names[1], "'s sequence axis"):
        return found
    capacity = block_table.shape[1] * k_shape[block_axis]
    return _per_sequence(names[7], kv_lens, capacity, block_table.shape[0], names[8], " rows x block size")


def _paged_heads(layout: Any, q: Any, k: Any, heads: Any, kv_heads: Any, head_axis: int | None, names: tuple) -> c.Violation | None:
    """Q's head count and dim against the cache's KV heads and dim, where both can be read."""
    k_shape = k.shape
    if layout.head_axis is not None:
        q_heads, q_dim = q.shape[layout.head_axis], q.shape[layout.dim_axis]
        if heads is not ABSENT and (found := c.head_count_matches(names[4], heads, q_heads, names[1], q)):
            return found
    elif type(heads) is int and heads > 0 and q.shape[2] % heads == 0:
        q_heads, q_dim = heads, q.shape[2] // heads
    elif found := _hidden_heads(layout.name, q, q, q, heads, names):
        return found
    else:
        q_heads = int(heads)  # a NumPy integer (any other head count was rejected above)
        q_dim = q.shape[2] // q_heads
    if head_axis is not None:
        k_heads, k_dim = k_shape[head_axis], k_shape[-1] * (k_shape[2] if len(k_shape) == 5 else 1)
    else:
        # (blocks, block_size, H): H holds num_key_value_heads heads (0: as many as the query).
        declared = kv_heads if type(kv_heads) is int else int(kv_heads) if c.is_int(kv_heads) else 0
        declared = declared if declared > 0 else q_heads
        hidden = k_shape[2]
        if hidden % declared:
            return c.divides("head_count_matches", f"{names[5]} must split the hidden axis of {c.describe(names[2], k)}", hidden, declared, ((names[2], k),), c.HEAD_CONFIG)
        k_heads, k_dim = declared, hidden // declared
    if found := c.q_k_head_dims_match(q, q_dim, names[2], k, k_dim, names[1]):
        return found
    if found := c.kv_heads_divide_q_heads(q_heads, k_heads, q, names[2], k, names[1]):
        return found
    if head_axis is not None and kv_heads is not ABSENT and (found := _declared_kv_heads(names[5], kv_heads, k_heads, names[2], k)):
        return found
    return None


def atb_flash_attention(q: Any, k: Any, v: Any, seq_len: Any, heads: Any, kv_heads: Any) -> c.Violation | None:
    """_npu_flash_attention: packed (T, N, D) or (T, H) tokens with per-sequence seq_len."""
    qkv = (("query", q), ("key", k), ("value", v))
    if found := c.arguments_are_tensors(qkv) or c.one_device_of_type(qkv, DEVICE_TYPE) or c.one_dtype(qkv):
        return found
    rank = len(q.shape)
    for name, tensor in qkv:
        if found := c.rank_matches_layout(name, tensor, "(T, N, D) or (T, H)", rank if rank in (2, 3) else 3):
            return found
    if found := c.k_v_token_counts_match("key", k, (k.shape[0],), "value", v, (v.shape[0],)):
        return found
    if rank == 3:
        if found := c.k_v_head_counts_match("key", k, k.shape[1], "value", v, v.shape[1]):
            return found
        if found := c.q_k_head_dims_match(q, q.shape[2], "key", k, k.shape[2]):
            return found
        if found := c.head_count_matches("num_heads", heads, q.shape[1], "query", q) or c.head_count_matches("num_kv_heads", kv_heads, k.shape[1], "key", k):
            return found
    if (type(heads) is not int or type(kv_heads) is not int) and (found := c.int_argument("num_heads", heads, "the number of query heads") or c.int_argument("num_kv_heads", kv_heads, "the number of K/V heads")):
        return found
    if found := c.kv_heads_divide_q_heads(heads, kv_heads, q, "key", k):
        return found
    if found := c.axis_matches("k_v_token_counts_match", lambda: f"{c.describe('query', q)} and {c.describe('key', k)} must hold the same packed tokens", q.shape[0], k.shape[0], (("query", q), ("key", k)), c.KV_SLICED):
        return found
    host = c.host_ints(seq_len)
    if host is not None:
        if found := c.per_sequence_lengths_fit("seq_len", host, q.shape[0], None, "the packed token count"):
            return found
        return c.axis_matches("per_sequence_lengths_fit", lambda: f"seq_len must sum to the token count of {c.describe('query', q)}", sum(host), q.shape[0], (("query", q),), c.LENGTHS_STALE)
    if c.is_tensor_like(seq_len):
        return c.length_tensor_shape("seq_len", seq_len, None)
    return c.lengths_argument("seq_len", seq_len, optional=False)


def atb_paged_attention(q: Any, key_cache: Any, value_cache: Any, heads: Any, kv_heads: Any, block_table: Any, context_lens: Any, seq_len: Any = ABSENT, dequantised: bool = False) -> c.Violation | c.NotJudged | None:
    """_npu_paged_attention (decode: one query token per row of block_table), _npu_paged_attention_quant,
    and, with ``seq_len`` (each sequence's query tokens), _npu_paged_attention_splitfuse(_v2) and
    _npu_flash_attention_qlens (chunked prefill: packed query tokens).

    Query (T, N, D), or (T, N*D) split by num_heads (sglang's qlens call). Caches
    (blocks, block_size, KV heads, D), or the NZ form (blocks, KV heads*D/16, block_size, 16) of
    Ascend 310P (vllm-ascend _310p attention). Length tensors on the host are read; on the device
    only their shape is checked.
    """
    named = (("query", q), ("key_cache", key_cache), ("value_cache", value_cache))
    if found := c.arguments_are_tensors(named + (("block_table", block_table),)) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    if found := c.one_dtype(named[1:] if dequantised else named):
        return found
    if len(q.shape) == 2:
        if not c.is_int(heads):
            return c.int_argument("num_heads", heads, f"it splits the hidden axis of {c.describe('query', q)}")
        if found := c.divides("head_count_matches", f"num_heads must split the hidden axis of {c.describe('query', q)}", q.shape[1], heads, (("query", q),), "a head count from the model config that does not match this tensor"):
            return found
        q_heads, q_dim = heads, q.shape[1] // heads
    elif found := c.rank_matches_layout("query", q, "(B, N, D)", 3):
        return found
    else:
        q_heads, q_dim = q.shape[1], q.shape[2]
        if found := c.head_count_matches("num_heads", heads, q_heads, "query", q):
            return found
    k_shape = key_cache.shape
    if len(k_shape) != 4:
        return c.NotJudged(f"{len(k_shape)}-D key_cache")
    if found := c.caches_match(key_cache, value_cache, (0, 1, 2)):
        return found
    if type(kv_heads) is int and k_shape[3] == 16 and k_shape[1] * 16 == kv_heads * q_dim and not (k_shape[2] == kv_heads and k_shape[3] == q_dim):
        block_axis, k_heads = 2, kv_heads  # NZ: heads and dim folded into axis 1
    else:
        block_axis, k_heads = 1, k_shape[2]
        if found := c.q_k_head_dims_match(q, q_dim, "key_cache", key_cache, k_shape[3]):
            return found
        if found := c.head_count_matches("num_kv_heads", kv_heads, k_heads, "key_cache", key_cache):
            return found
    if found := c.kv_heads_divide_q_heads(q_heads, k_heads, q, "key_cache", key_cache):
        return found
    if len(block_table.shape) != 2 or (seq_len is ABSENT and block_table.shape[0] != q.shape[0]):
        return c.Violation("block_table_shape", f"{c.describe('block_table', block_table)} must be 2-D with one row per query of {c.describe('query', q)}", "a block table built for a different batch", (("block_table", block_table), ("query", q)))
    batch = block_table.shape[0]
    if seq_len is not ABSENT:
        host = c.host_ints(seq_len)
        if host is not None:
            if found := c.per_sequence_lengths_fit("seq_len", host, q.shape[0], batch, "the query tokens", c.describe("query", q) + "'s "):
                return found
            if found := c.axis_matches("per_sequence_lengths_fit", lambda: f"seq_len must sum to the token count of {c.describe('query', q)}", sum(host), q.shape[0], (("query", q),), c.LENGTHS_STALE):
                return found
        elif found := _per_sequence("seq_len", seq_len, q.shape[0], batch, "query", "'s tokens", optional=False):
            return found
    return _per_sequence("context_lens", context_lens, block_table.shape[1] * k_shape[block_axis], batch, "block_table", " rows x block size", optional=False)


def atb_paged_quant(q: Any, key_cache: Any, value_cache: Any, heads: Any, kv_heads: Any, block_table: Any, context_lens: Any) -> c.Violation | c.NotJudged | None:
    """_npu_paged_attention_quant: int8 caches dequantised by k_descale/v_descale; the query's dtype is its own."""
    return atb_paged_attention(q, key_cache, value_cache, heads, kv_heads, block_table, context_lens, ABSENT, True)


def atb_chunked_paged(q: Any, key_cache: Any, value_cache: Any, heads: Any, kv_heads: Any, block_table: Any, context_lens: Any, seq_len: Any) -> c.Violation | c.NotJudged | None:
    """_npu_paged_attention_splitfuse(_v2), _npu_flash_attention_qlens: packed query tokens of each sequence."""
    return atb_paged_attention(q, key_cache, value_cache, heads, kv_heads, block_table, context_lens, seq_len)


def gather_cache(key_cache: Any, value_cache: Any, block_table: Any, lengths: Any, key: Any, value: Any) -> c.Violation | c.NotJudged | None:
    """npu_gather_pa_kv_cache / ATB npu_paged_cache_load: read the tokens of block_table's blocks from both
    caches into key/value (vllm-ascend's mooncake connectors, MLA chunked prefill).

    The caches share blocks and block size; the outputs (when passed) share their token count.
    Cache formats differ per op and mode (ND, NZ): past the block axis the kernel judges.
    """
    caches = (("key_cache", key_cache), ("value_cache", value_cache))
    if found := c.arguments_are_tensors(caches + (("block_table", block_table),)) or c.one_device_of_type(caches, DEVICE_TYPE):
        return found
    if found := c.axis_matches("caches_match", lambda: f"{c.describe('key_cache', key_cache)} and {c.describe('value_cache', value_cache)} must have the same blocks", key_cache.shape[0], value_cache.shape[0], caches, c.CACHE_POOLS):
        return found
    if key is not None and value is not None and c.is_tensor_like(key) and c.is_tensor_like(value):
        if found := c.k_v_token_counts_match("key", key, (key.shape[0],), "value", value, (value.shape[0],)):
            return found
    if len(block_table.shape) != 2:
        return c.Violation("block_table_shape", f"{c.describe('block_table', block_table)} must be 2-D (one row of blocks per sequence)", "a block table built for a different batch", (("block_table", block_table),))
    return None


def paired_caches(first: Any, second: Any, first_name: str, second_name: str) -> c.Violation | None:
    """Two caches one op writes at the same slots (MLA's latent and rope caches): the same blocks
    (or batch) on axis 0 and, both 4-D, the same block size (cache length) and KV heads on axes 1
    and 2; only the last axis, the head dim, differs. npu_kv_rmsnorm_rope_cache's doc gives
    k_cache [block_num, block_size, N, Dk] and ckv_cache [block_num, block_size, N, Dv] in every PA
    mode ([Bkv, N, Scache, Dk/Dv] in Norm); npu_mla_prolog_v2/_v3's docstrings kv_cache
    (BlockNum, BlockSize, Nkv, Hckv) and kr_cache (BlockNum, BlockSize, Nkv, Dr)."""
    named = ((first_name, first), (second_name, second))
    if found := c.arguments_are_tensors(named) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    first_shape, second_shape = first.shape, second.shape
    if len(first_shape) == 4 and len(second_shape) == 4:
        return c.caches_match(first, second, (0, 1, 2), first_name, second_name)
    return c.axis_matches("caches_match", lambda: f"{c.describe(first_name, first)} and {c.describe(second_name, second)} must have the same blocks", first_shape[0], second_shape[0], named, c.CACHE_POOLS)


def rope_cache_write(k_cache: Any, ckv_cache: Any, cache_mode: Any) -> c.Violation | c.NotJudged | None:
    """npu_kv_rmsnorm_rope_cache(_v2): k_cache (rope part) and ckv_cache (latent part) share their blocks."""
    if cache_mode not in ("Norm", "PA", "PA_BNSD", "PA_NZ", "PA_BLK_BNSD", "PA_BLK_NZ"):
        return c.NotJudged(f"cache_mode={cache_mode!r} is not a cache format the guard knows")
    return paired_caches(k_cache, ckv_cache, "k_cache", "ckv_cache")


def mla_prolog(kv_cache: Any, kr_cache: Any, cache_mode: Any, repo_mode: Any = None) -> c.Violation | c.NotJudged | None:
    """npu_mla_prolog_v2/_v3: kv_cache and kr_cache written at the same cache_index slots share their blocks.

    With ckvkr_repo_mode=1 (v3 only; its docstring: kv_cache and kr_cache stored together) the rope
    part lives in kv_cache and kr_cache is an unused placeholder (vllm-ascend's SFA C8 path passes
    an empty one): there is no second cache to compare, so the call passes.
    """
    if cache_mode not in ("PA_BSND", "PA_NZ"):  # the values its docstring lists
        return c.NotJudged(f"cache_mode={cache_mode!r} is not a cache format the guard knows")
    if repo_mode == 1 and type(repo_mode) is int:
        named = (("kv_cache", kv_cache),)
        return c.arguments_are_tensors(named) or c.one_device_of_type(named, DEVICE_TYPE)
    if repo_mode not in (None, 0):
        return c.NotJudged(f"ckvkr_repo_mode={repo_mode!r} is not a storage mode the guard knows")
    return paired_caches(kv_cache, kr_cache, "kv_cache", "kr_cache")


def sparse_kv_attention(q: Any, k: Any, v: Any, layout_kv: Any) -> c.Violation | c.NotJudged | None:
    """npu_kv_quant_sparse_flash_attention: K and V of one KV layout agree on every axis but the head dim."""
    named = (("query", q), ("key", k), ("value", v))
    if found := c.arguments_are_tensors(named) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    if layout_kv not in ("BSND", "TND", "PA_BSND"):
        return c.NotJudged(f"layout_kv={layout_kv!r} is not a layout the guard knows")
    if len(k.shape) != len(v.shape):
        return c.rank_matches_layout("value", v, str(layout_kv), len(k.shape))
    lead = tuple(k.shape[:-1])
    if lead != tuple(v.shape[:-1]):
        if lead[:-1] != tuple(v.shape[:-2]):
            return c.k_v_token_counts_match("key", k, lead[:-1], "value", v, tuple(v.shape[:-2]))
        return c.k_v_head_counts_match("key", k, lead[-1], "value", v, v.shape[-2])
    return None


def single_cache_write(key: Any, key_cache: Any, slots: Any) -> c.Violation | c.NotJudged | None:
    """npu_scatter_pa_cache / _npu_reshape_and_cache_siso: one cache; (T, ...) tokens need one slot each."""
    named = (("key", key), ("key_cache", key_cache))
    if found := c.arguments_are_tensors(named + (("slot_mapping", slots),)) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    if len(slots.shape) != 1:
        return c.NotJudged(f"{len(slots.shape)}-D slot_mapping (the compressed-cache scenario)")
    return c.slot_count_matches("slot_mapping", slots, key.shape[0], key)


# npu_scatter_pa_kv_cache's cache_mode values (its doc): None/'Norm' take ND caches only,
# 'PA_NZ' (the schema default) NZ ones; _npu_reshape_and_cache has no mode (ND, or NZ on 310P).
CACHE_MODES = (ABSENT, None, "Norm", "PA_NZ")


def cache_write(k: Any, v: Any, key_cache: Any, value_cache: Any, slots: Any, slot_name: str, cache_mode: Any = ABSENT) -> c.Violation | c.NotJudged | None:
    """_npu_reshape_and_cache / npu_scatter_pa_kv_cache: write (T, N, D) tokens into block caches at slots.

    Cache forms (npu_scatter_pa_kv_cache doc, scenarios 1-2; vllm-ascend's NZ write path and 310P caches):
      ND  (blocks, block_size, N, D)
      NZ  (blocks, N*D/x, block_size, x)       4-D, x = 16 or 32
      NZ  (blocks, N, D/x, block_size, x)      5-D view (vllm-ascend attention_v1 _nz_5d_view)
    K and V caches may differ in head dim (k_head_size != v_head_size is allowed), never in blocks,
    block size or heads.
    """
    named = (("key", k), ("value", v), ("key_cache", key_cache), ("value_cache", value_cache))
    if found := c.arguments_are_tensors(named + ((slot_name, slots),)) or c.one_device_of_type(named, DEVICE_TYPE) or c.one_dtype(named):
        return found
    if cache_mode not in CACHE_MODES:
        return c.NotJudged(f"cache_mode={cache_mode!r} is not a cache format the guard knows")
    if len(k.shape) == 4 and len(v.shape) == 4:
        # Scenario 3 (compressed per-head writes): K and V agree on batch, seq and heads; the rest is the kernel's.
        if found := c.k_v_token_counts_match("key", k, tuple(k.shape[:2]), "value", v, tuple(v.shape[:2])) or c.k_v_head_counts_match("key", k, k.shape[2], "value", v, v.shape[2]):
            return found
        return c.NotJudged("4-D key/value (the compressed-cache scenario)")
    if found := c.rank_matches_layout("key", k, "(T, N, D)", 3) or c.rank_matches_layout("value", v, "(T, N, D)", 3):
        return found
    if found := c.k_v_token_counts_match("key", k, (k.shape[0],), "value", v, (v.shape[0],)) or c.k_v_head_counts_match("key", k, k.shape[1], "value", v, v.shape[1]):
        return found
    if found := c.axis_matches("caches_match", lambda: f"{c.describe('key_cache', key_cache)} and {c.describe('value_cache', value_cache)} must have the same blocks", key_cache.shape[0], value_cache.shape[0], (("key_cache", key_cache), ("value_cache", value_cache)), c.CACHE_POOLS):
        return found
    rank = len(key_cache.shape)
    if rank != len(value_cache.shape):
        return c.caches_match(key_cache, value_cache, (0,))
    nd_only = cache_mode is None or cache_mode == "Norm"
    if rank == 4:
        if not nd_only and _nz_fits(k, key_cache) and _nz_fits(v, value_cache):
            found = c.caches_match(key_cache, value_cache, (0, 2, 3))
        else:
            found = _nd_cache_fits(k, v, key_cache, value_cache)
        if found:
            return found
    elif rank == 5:
        if nd_only:
            return c.NotJudged(f"5-D caches with cache_mode={cache_mode!r}")
        if found := c.caches_match(key_cache, value_cache, (0, 1, 3)) or c.head_count_matches("KV heads of key", k.shape[1], key_cache.shape[1], "key_cache", key_cache):
            return found
        for name, tensor, cache_name, cache in (("key", k, "key_cache", key_cache), ("value", v, "value_cache", value_cache)):
            if found := c.axis_matches("q_k_head_dims_match", lambda name=name, tensor=tensor, cache_name=cache_name, cache=cache: f"head dim of {c.describe(name, tensor)} must equal D/x * x of {c.describe(cache_name, cache)}", tensor.shape[2], cache.shape[2] * cache.shape[4], ((name, tensor), (cache_name, cache)), "a cache allocated for another model"):
                return found
    else:
        return c.NotJudged(f"{rank}-D caches")
    return c.slot_count_matches(slot_name, slots, k.shape[0], k)


def _nz_fits(tokens: Any, cache: Any) -> bool:
    """(blocks, N*D/x, block_size, x) holds tokens (T, N, D)."""
    shape = cache.shape
    return shape[1] * shape[3] == tokens.shape[1] * tokens.shape[2] and shape[3] in (16, 32)


def _nd_cache_fits(k: Any, v: Any, key_cache: Any, value_cache: Any) -> c.Violation | None:
    """(blocks, block_size, N, D) caches: same blocks, block size and heads; heads and head dims those of the tokens."""
    if found := c.caches_match(key_cache, value_cache, (0, 1, 2)):
        return found
    if found := c.head_count_matches("KV heads of key", k.shape[1], key_cache.shape[2], "key_cache", key_cache):
        return found
    if found := c.axis_matches("q_k_head_dims_match", lambda: f"head dim of {c.describe('key', k)} must equal that of {c.describe('key_cache', key_cache)}", k.shape[2], key_cache.shape[3], (("key", k), ("key_cache", key_cache)), "a cache allocated for another model"):
        return found
    return c.axis_matches("q_k_head_dims_match", lambda: f"head dim of {c.describe('value', v)} must equal that of {c.describe('value_cache', value_cache)}", v.shape[2], value_cache.shape[3], (("value", v), ("value_cache", value_cache)), "a cache allocated for another model")


def ring_mla(k_nope: Any, k_rope: Any, value: Any) -> c.Violation | c.NotJudged | None:
    """torch_npu.atb.npu_ring_mla: k_nope, k_rope and value are (kvNTokens, kvHeadNum, D) (its docstring):
    the same tokens and heads in all three."""
    named = (("k_nope", k_nope), ("k_rope", k_rope), ("value", value))
    if found := c.arguments_are_tensors(named) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    if len(k_nope.shape) != 3 or len(k_rope.shape) != 3 or len(value.shape) != 3:
        return c.NotJudged("K/V that are not (tokens, heads, D)")
    for name, tensor in named[1:]:
        if found := c.k_v_token_counts_match("k_nope", k_nope, (k_nope.shape[0],), name, tensor, (tensor.shape[0],)) or c.k_v_head_counts_match("k_nope", k_nope, k_nope.shape[1], name, tensor, tensor.shape[1]):
            return found
    return None


def latent_caches(ctkv: Any, k_rope: Any, cache_mode: Any, block_table: Any, context_lens: Any) -> c.Violation | c.NotJudged | None:
    """torch_npu.atb.npu_multi_head_latent_attention: the latent (ctkv) and rope (k_rope) caches are read
    through one block table, so they share blocks, block size and KV heads. Forms (its docstring):
      'krope_ctkv' (the default)  ctkv (blocks, block_size, kv_heads, 512), k_rope (blocks, block_size, kv_heads, 64)
      'int8_nzcache' (NZ)         ctkv (blocks, kv_heads*512/32, block_size, 32), k_rope (blocks, kv_heads*64/16, block_size, 16)
    context_lens (a host int list) has one entry per block_tables row, each within the row's blocks."""
    if cache_mode not in (None, "krope_ctkv", "int8_nzcache"):
        return c.NotJudged(f"cache_mode={cache_mode!r} is not a cache format the guard knows")
    named = (("ctkv", ctkv), ("k_rope", k_rope))
    if found := c.arguments_are_tensors(named + (("block_tables", block_table),)) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    if len(ctkv.shape) != 4 or len(k_rope.shape) != 4:
        return c.NotJudged(f"{len(ctkv.shape)}-D ctkv and {len(k_rope.shape)}-D k_rope (the docstring's caches are 4-D)")
    nz = cache_mode == "int8_nzcache"
    block_axis = 2 if nz else 1
    if found := c.caches_match(ctkv, k_rope, (0, 2) if nz else (0, 1, 2), "ctkv", "k_rope"):
        return found
    if len(block_table.shape) != 2:
        return c.Violation("block_table_shape", f"{c.describe('block_tables', block_table)} must be 2-D (one row of blocks per sequence)", "a block table built for a different batch", (("block_tables", block_table),))
    return _per_sequence("context_lens", context_lens, block_table.shape[1] * ctkv.shape[block_axis], block_table.shape[0], "block_tables", " rows x block size", optional=False)


def prefix_encoder(key: Any, value: Any, block_table: Any, kv_seqlen: Any) -> c.Violation | c.NotJudged | None:
    """torch_npu.atb.npu_self_attention_prefix_encoder: key and value caches, (numBlocks, blockSize, H) or
    (numBlocks, blockSize, N, D) (its docstring), read through one block table: same blocks and block size
    (and heads, 4-D); kv_seqlen (a host int list) has one entry per block_tables row, within the row's blocks.
    Its num-heads arguments are not compared with the caches: the docstring's own example passes
    kv_headnum=4 with 28-head caches."""
    named = (("key", key), ("value", value))
    if found := c.arguments_are_tensors(named + (("block_tables", block_table),)) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    rank = len(key.shape)
    if rank not in (3, 4):
        return c.NotJudged(f"{rank}-D key cache")
    if found := c.rank_matches_layout("value", value, "(blocks, block_size, N, D), as key is" if rank == 4 else "(blocks, block_size, H), as key is", rank):
        return found
    if found := c.caches_match(key, value, (0, 1, 2) if rank == 4 else (0, 1), "key", "value"):
        return found
    if len(block_table.shape) != 2:
        return c.Violation("block_table_shape", f"{c.describe('block_tables', block_table)} must be 2-D (one row of blocks per sequence)", "a block table built for a different batch", (("block_tables", block_table),))
    return _per_sequence("kv_seqlen", kv_seqlen, block_table.shape[1] * key.shape[1], block_table.shape[0], "block_tables", " rows x block size", optional=False)


def sparse_attention(q: Any, k: Any, v: Any, layout_kv: Any, key_rope: Any) -> c.Violation | c.NotJudged | None:
    """npu_sparse_flash_attention (sglang's DSA paths: ascend_backend do_cp_balance_attn / forward_sparse,
    sparsity_driven_kv_offload): K and V of one KV layout agree on every axis but the head dim (sglang
    passes the latent K as V too; V is optional in the schema), and key_rope, the rope part of the same
    tokens, agrees with K on every axis but the head dim (the same blocks and block size in PA_BSND)."""
    if found := sparse_kv_attention(q, k, k if v is None else v, layout_kv):
        return found
    if key_rope is None:
        return None
    named = (("key", k), ("key_rope", key_rope))
    if found := c.arguments_are_tensors(named) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    if len(key_rope.shape) != len(k.shape):
        return c.rank_matches_layout("key_rope", key_rope, str(layout_kv), len(k.shape))
    lead, rope_lead = tuple(k.shape[:-1]), tuple(key_rope.shape[:-1])
    if lead == rope_lead:
        return None
    if layout_kv == "PA_BSND":
        return c.caches_match(k, key_rope, tuple(range(len(lead))), "key", "key_rope")
    if lead[:-1] != rope_lead[:-1]:
        return c.k_v_token_counts_match("key", k, lead[:-1], "key_rope", key_rope, rope_lead[:-1])
    return c.k_v_head_counts_match("key", k, lead[-1], "key_rope", key_rope, rope_lead[-1])


def atb_paged_mla(q: Any, key_cache: Any, heads: Any, kv_heads: Any, block_table: Any, context_lens: Any) -> c.Violation | c.NotJudged | None:
    """_npu_paged_attention_mla (sglang ascend_backend forward_decode's MLA path outside graph mode): one
    cache (blocks, block_size, KV heads, kv_lora_rank + rope dim) holds K, and V is its first
    mla_vheadsize columns. Checked as _npu_paged_attention with that cache on both sides: the query's
    heads and head dim against it, num_heads/num_kv_heads, block_table rows, context_lens."""
    return atb_paged_attention(q, key_cache, key_cache, heads, kv_heads, block_table, context_lens)


# Index-key layouts of the lightning indexers (their schemas' layout_query/layout_key): the rank each takes.
INDEXER_RANKS = {"BSND": 4, "TND": 3, "PA_BSND": 4}


def lightning_indexer(q: Any, k: Any, layout_query: Any, layout_key: Any, block_table: Any) -> c.Violation | c.NotJudged | None:
    """npu_lightning_indexer(_quant) (DSA's top-k token selection, vllm-ascend's SFA/DSA paths): the
    query, (B, S, N, D) or (T, N, D), scores index keys (B, S, N_k, D), (T, N_k, D) or, paged,
    (blocks, block_size, N_k, D) read through block_table. Both sides share the head dim, the key's
    heads divide the query's, and a paged key needs a 2-D block table."""
    named = (("query", q), ("key", k))
    if found := c.arguments_are_tensors(named) or c.one_device_of_type(named, DEVICE_TYPE):
        return found
    q_rank, k_rank = INDEXER_RANKS.get(layout_query), INDEXER_RANKS.get(layout_key)
    if q_rank is None or k_rank is None or layout_query == "PA_BSND":
        return c.NotJudged(f"layout_query={layout_query!r} with layout_key={layout_key!r} is not a layout pair the guard knows")
    if found := c.rank_matches_layout("query", q, str(layout_query), q_rank) or c.rank_matches_layout("key", k, str(layout_key), k_rank):
        return found
    if found := c.q_k_head_dims_match(q, q.shape[-1], "key", k, k.shape[-1]) or c.kv_heads_divide_q_heads(q.shape[-2], k.shape[-2], q, "key", k):
        return found
    if layout_key == "PA_BSND" and (not c.is_tensor_like(block_table) or len(block_table.shape) != 2):
        return c.Violation("block_table_shape", f"layout_key='PA_BSND' reads {c.describe('key', k)} through block_table, which must be a 2-D tensor (one row of blocks per sequence); got {c.describe('block_table', block_table)}", "a paged key passed without its block table, or a table built for a different batch", (("key", k),))
    return None
