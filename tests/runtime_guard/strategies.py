"""Hypothesis strategies: valid calls of every guarded op, and the one-change mutations that break them.

A case knows its op, how to lay out its arguments, and which mutations apply to it; each mutation
changes exactly one thing and names the check that must catch it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch_npu
from hypothesis import strategies as st

from runtime_guard import patching
from tests.runtime_guard.calls import (
    OP_LAYOUTS,
    AttentionCase,
    narrowed,
    shape_for,
    token_axis,
)
from tests.runtime_guard.conftest import ends, npu

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VIAS = ("torch_npu", "torch.ops", "default")  # the name a call goes through, and the .default overload
HIDDEN = ("BSH", "SBH")
HEAD_AXIS = {"TND": 1, "NTD": 0, "BSND": 2, "BNSD": 1}
BATCH_AXIS = {"BSND": 0, "BNSD": 0, "BSH": 0, "SBH": 1}

Mutation = tuple  # (apply(draw) -> None, name of the check that must reject the result)


def target(op: str, namespace: str, via: str) -> Any:
    """What user code calls: torch_npu.X, torch.ops.<ns>.X, or torch_npu.X.default."""
    packet = getattr(getattr(torch.ops, namespace), op) if via == "torch.ops" else getattr(torch_npu, op)
    return packet.default if via == "default" else packet


def raw_target(op: str, via: str) -> Any:
    """The original the guard wraps, reached the same way (packet or .default)."""
    packet = patching.unwrap(getattr(torch_npu, op))
    return packet.default if via == "default" else packet


def same_value(seen: Any, expected: Any) -> bool:
    """Tensors by identity, everything else (lists the dispatcher rebuilt, scalars) by equality."""
    if isinstance(expected, torch.Tensor):
        return seen is expected
    if isinstance(expected, (list, tuple)):
        return isinstance(seen, (list, tuple)) and len(seen) == len(expected) and all(map(same_value, seen, expected))
    if isinstance(expected, dict):
        return seen.keys() == expected.keys() and all(same_value(seen[k], expected[k]) for k in expected)
    return seen == expected


def equal_results(left: Any, right: Any) -> bool:
    if isinstance(left, torch.Tensor):
        return torch.equal(torch_npu.host(left), torch_npu.host(right))
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(map(equal_results, left, right))
    return left == right


def other_dtype(draw: Callable, dtype: torch.dtype) -> torch.dtype:
    return draw(st.sampled_from([d for d in DTYPES if d is not dtype]))


def elsewhere(draw: Callable, tensor: torch.Tensor) -> torch.Tensor:
    """The same tensor on another card, or left on the host."""
    if draw(st.booleans()):
        return torch_npu.npu(torch_npu.host(tensor), 1)
    return torch_npu.host(tensor)


class Case:
    """A valid call; ``tensor_names`` are the attributes that hold its K/V-side tensors."""

    family = ""
    op = ""
    namespace = "npu"
    tensor_names: tuple = ()

    def arguments(self) -> tuple:
        raise NotImplementedError

    def mutations(self) -> dict:
        raise NotImplementedError

    def common_mutations(self) -> dict:
        def dtype(draw: Callable) -> None:
            name = draw(st.sampled_from(self.tensor_names))
            tensor = getattr(self, name)
            setattr(self, name, npu(*tensor.shape, dtype=other_dtype(draw, tensor.dtype)))

        def device(draw: Callable) -> None:
            name = draw(st.sampled_from(self.tensor_names))
            setattr(self, name, elsewhere(draw, getattr(self, name)))

        return {"change a dtype": (dtype, "one_dtype"), "move a tensor to another device": (device, "one_device_of_type")}

    def __repr__(self) -> str:
        args, kwargs = self.arguments()
        shown = lambda x: tuple(x.shape) if isinstance(x, torch.Tensor) else x
        return f"{self.op}({', '.join(map(str, map(shown, args)))}, {', '.join(f'{k}={shown(v)}' for k, v in kwargs.items())})"


class Attention(Case):
    """npu_fusion_attention, npu_fused_infer_attention_score(_v2), prompt and incre flash attention."""

    family = "attention"

    def __init__(self, op: str, layout: str, heads: int, kv_heads: int, dim: int, v_dim: int, dtype: torch.dtype, q_geom: tuple, kv_geom: tuple) -> None:
        self.op, self.layout, self.heads, self.kv_heads, self.dim, self.v_dim, self.dtype = op, layout, heads, kv_heads, dim, v_dim, dtype
        self.q_geom, self.kv_geom = q_geom, kv_geom  # (batch, seq) as shape_for takes them; packed: (1, tokens)
        self.q = npu(*shape_for(layout, *q_geom, heads, dim), dtype=dtype)
        self.k = npu(*shape_for(layout, *kv_geom, kv_heads, dim), dtype=dtype)
        self.v = npu(*shape_for(layout, *kv_geom, kv_heads, v_dim), dtype=dtype)
        self.q_lens: list | None = None
        self.kv_lens: list | None = None
        self.declare_kv_heads = True
        self.tensor_names = ("q", "k", "v")

    @property
    def packed(self) -> bool:
        return self.layout in ("TND", "NTD")

    def arguments(self) -> tuple:
        return AttentionCase.arguments(self)  # the op-specific argument names live there

    def kv_tensor(self, heads: int, dim: int) -> torch.Tensor:
        return npu(*shape_for(self.layout, *self.kv_geom, heads, dim), dtype=self.dtype)

    def mutations(self) -> dict:
        m = self.common_mutations()
        layout, axis = self.layout, token_axis(self.layout)
        if self.k.shape[axis] >= 1:
            m["truncate K tokens"] = (lambda draw: setattr(self, "k", narrowed(self.k, axis, self.k.shape[axis] - 1)), "k_v_token_counts_match")
        if layout not in HIDDEN:
            m["change V heads"] = (lambda draw: setattr(self, "v", self.kv_tensor(self.kv_heads + draw(st.integers(1, 2)), self.v_dim)), "k_v_head_counts_match")
        elif self.kv_heads >= 2:  # H = N * D: V's hidden size no longer splits into K's heads
            m["change V heads"] = (lambda draw: setattr(self, "v", npu(*self.v.shape[:2], self.kv_heads * self.v_dim + 1, dtype=self.dtype)), "k_v_head_counts_match")
        wrong_heads = self.heads + 1 if layout not in HIDDEN else self.heads * self.dim + 1
        m["wrong head_num"] = (lambda draw: setattr(self, "heads", wrong_heads), "head_count_matches")

        def non_divisible(draw: Callable) -> None:
            self.kv_heads = self.heads + draw(st.integers(1, 2))
            self.k, self.v = self.kv_tensor(self.kv_heads, self.dim), self.kv_tensor(self.kv_heads, self.v_dim)

        m["non-divisible GQA"] = (non_divisible, "kv_heads_divide_q_heads")
        if self.op != "npu_fusion_attention" and self.declare_kv_heads:
            m["wrong num_key_value_heads"] = (lambda draw: setattr(self, "kv_heads", self.kv_heads + 1), "head_count_matches")
        m["wrong rank"] = (lambda draw: setattr(self, "k", npu(*self.k.shape, 1, dtype=self.dtype)), "rank_matches_layout")
        m.update(self.packed_length_mutations() if self.packed else self.per_sequence_mutations())
        return m

    def packed_length_mutations(self) -> dict:
        m = {}

        def side(draw: Callable) -> str:
            return draw(st.sampled_from(("q_lens", "kv_lens")))

        def decrease(draw: Callable) -> None:
            name = side(draw)
            lens, body = list(getattr(self, name)), _body(getattr(self, name))
            if len(body) < 2:
                name = "kv_lens" if name == "q_lens" else "q_lens"
                lens, body = list(getattr(self, name)), _body(getattr(self, name))
            i = draw(st.integers(0, len(body) - 2))
            lens[i] = body[i + 1] + 1
            setattr(self, name, lens)

        if len(_body(self.q_lens)) >= 2 or len(_body(self.kv_lens)) >= 2:
            m["make lengths decrease"] = (decrease, "cumulative_lengths_valid")

        def wrong_total(draw: Callable) -> None:
            name = side(draw)
            lens = list(getattr(self, name))
            last = len(_body(lens)) - 1
            # Trailing EOD zeros let the last end fall short of the tokens (tail padding): only past them is wrong.
            padded = last < len(lens) - 1
            lens[last] += draw(st.sampled_from((-1, 1))) if lens[last] > max([0, *lens[:last]]) and not padded else 1
            setattr(self, name, lens)

        m["end lengths at the wrong total"] = (wrong_total, "cumulative_lengths_valid")

        def batches(draw: Callable) -> None:
            name = side(draw)
            lens = list(getattr(self, name))
            i = draw(st.integers(0, len(_body(lens)) - 1))
            lens.insert(i, lens[i])  # one more (empty) sequence on this side only
            setattr(self, name, lens)

        m["different batch counts"] = (batches, "same_batch")
        return m

    def per_sequence_mutations(self) -> dict:
        m = {}
        batch, capacity = self.kv_geom[0], self.kv_geom[1]
        if batch >= 2:
            axis = BATCH_AXIS[self.layout]

            def fewer_kv_batches(draw: Callable) -> None:
                same = self.v is self.k
                self.k = narrowed(self.k, axis, batch - 1)
                self.v = self.k if same else narrowed(self.v, axis, batch - 1)

            m["different batch counts"] = (fewer_kv_batches, "q_kv_batches_match")
        m["K/V lengths for another batch"] = (lambda draw: setattr(self, "kv_lens", [capacity] * (batch + 1)), "per_sequence_lengths_fit")
        m["K/V length beyond the cache"] = (lambda draw: setattr(self, "kv_lens", [capacity + 1] * batch), "per_sequence_lengths_fit")
        m["negative K/V length"] = (lambda draw: setattr(self, "kv_lens", [-1] * batch), "per_sequence_lengths_fit")
        return m


def _body(lens: list) -> list:
    """Cumulative ends without the trailing EOD zeros."""
    end = len(lens)
    while end and lens[end - 1] == 0:
        end -= 1
    return lens[:end]


def _sequence_lengths(draw: Callable, batch: int) -> list:
    """Per-sequence token counts, empty sequences allowed, at least one token in all."""
    return draw(st.lists(st.integers(0, 5), min_size=batch, max_size=batch).filter(any))


PACKED_KINDS = ("make lengths decrease", "end lengths at the wrong total")
PER_SEQUENCE_KINDS = ("K/V lengths for another batch", "K/V length beyond the cache", "negative K/V length")


@st.composite
def attention_cases(draw: Callable, kind: str | None = None) -> Attention:
    """Valid calls; with ``kind``, only the layouts that mutation applies to."""
    op_layouts = OP_LAYOUTS
    if kind in PACKED_KINDS:
        op_layouts = [(op, layout) for op, layout in OP_LAYOUTS if layout in ("TND", "NTD")]
    elif kind in PER_SEQUENCE_KINDS:
        op_layouts = [(op, layout) for op, layout in OP_LAYOUTS if layout not in ("TND", "NTD")]
    op, layout = draw(st.sampled_from(op_layouts))
    kv_heads, groups = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dim = draw(st.sampled_from((2, 4, 8)))
    v_dim = draw(st.sampled_from((dim, dim, 2, 6)))  # MLA: V's head dim may differ from K's
    dtype = draw(st.sampled_from(DTYPES))
    batch = draw(st.integers(1, 4))
    if layout in ("TND", "NTD"):
        q_seqs, kv_seqs = _sequence_lengths(draw, batch), _sequence_lengths(draw, batch)
        case = Attention(op, layout, kv_heads * groups, kv_heads, dim, v_dim, dtype, (1, sum(q_seqs)), (1, sum(kv_seqs)))
        case.q_lens = ends(*q_seqs) + [0] * draw(st.integers(0, 2))  # trailing zeros: EOD padding
        case.kv_lens = ends(*kv_seqs) + [0] * draw(st.integers(0, 2))
    else:
        q_seq, kv_seq = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        case = Attention(op, layout, kv_heads * groups, kv_heads, dim, v_dim, dtype, (batch, q_seq), (batch, kv_seq))
        per_sequence = lambda seq: st.none() | st.lists(st.integers(0, seq), min_size=batch, max_size=batch)
        case.q_lens, case.kv_lens = draw(per_sequence(q_seq)), draw(per_sequence(kv_seq))
    if v_dim == dim and draw(st.booleans()):
        case.v = case.k  # K is V
    case.declare_kv_heads = draw(st.booleans())
    return case


PAGED_KV_LENGTHS = {"npu_fused_infer_attention_score": "actual_seq_lengths_kv", "npu_incre_flash_attention": "actual_seq_lengths"}


class PagedAttention(Case):
    """npu_fused_infer_attention_score / npu_incre_flash_attention with a block_table: K/V are caches,
    (blocks, block_size, H) for BSH queries or (blocks, KV heads, block_size, D) for BNSD/BSND ones."""

    family = "paged_attention"
    tensor_names = ("q", "k", "v")

    def __init__(self, op: str, layout: str, batch: int, heads: int, kv_heads: int, dim: int, v_dim: int, blocks: int, block_size: int, columns: int, dtype: torch.dtype) -> None:
        self.op, self.layout, self.batch, self.heads, self.kv_heads, self.dim, self.v_dim, self.dtype = op, layout, batch, heads, kv_heads, dim, v_dim, dtype
        self.blocks, self.block_size, self.columns = blocks, block_size, columns
        self.q = npu(*shape_for(layout, batch, 1, heads, dim), dtype=dtype)
        self.k, self.v = self.cache(blocks, block_size, kv_heads, dim), self.cache(blocks, block_size, kv_heads, v_dim)
        self.block_table = npu(batch, columns, dtype=torch.int32)
        self.kv_lens: list | None = None
        self.declared_block_size = block_size
        self.declare_kv_heads = True

    @property
    def hidden(self) -> bool:
        return self.layout in HIDDEN

    def cache(self, blocks: int, block_size: int, kv_heads: int, dim: int) -> torch.Tensor:
        shape = (blocks, block_size, kv_heads * dim) if self.hidden else (blocks, kv_heads, block_size, dim)
        return npu(*shape, dtype=self.dtype)

    def arguments(self) -> tuple:
        kwargs = {
            "num_heads": self.heads, "input_layout": self.layout, "num_key_value_heads": self.kv_heads if self.declare_kv_heads else 0,
            "block_table": self.block_table, "block_size": self.declared_block_size, PAGED_KV_LENGTHS[self.op]: self.kv_lens,
        }
        return (self.q, self.k, self.v), kwargs

    def mutations(self) -> dict:
        m = self.common_mutations()
        capacity = self.columns * self.block_size
        m.update({
            "truncate K tokens": (lambda draw: setattr(self, "k", self.cache(self.blocks, self.block_size + 1, self.kv_heads, self.dim)), "caches_match"),
            "caches from two pools": (lambda draw: setattr(self, "v", self.cache(self.blocks + 1, self.block_size, self.kv_heads, self.v_dim)), "caches_match"),
            "block table for another batch": (lambda draw: setattr(self, "block_table", npu(self.batch + 1, self.columns, dtype=torch.int32)), "block_table_shape"),
            "K/V length beyond the cache": (lambda draw: setattr(self, "kv_lens", [capacity + 1] * self.batch), "per_sequence_lengths_fit"),
            "wrong rank": (lambda draw: setattr(self, "q", npu(*self.q.shape, 1, dtype=self.dtype)), "rank_matches_layout"),
        })
        if self.declared_block_size:
            m["wrong block_size"] = (lambda draw: setattr(self, "declared_block_size", self.block_size + 1), "block_size_matches")
        if not self.hidden:  # heads are visible on 4-D caches only

            def non_divisible(draw: Callable) -> None:
                self.kv_heads = self.heads + draw(st.integers(1, 2))
                self.k, self.v = self.cache(self.blocks, self.block_size, self.kv_heads, self.dim), self.cache(self.blocks, self.block_size, self.kv_heads, self.v_dim)

            m["change V heads"] = (lambda draw: setattr(self, "v", self.cache(self.blocks, self.block_size, self.kv_heads + 1, self.v_dim)), "caches_match")
            m["wrong head_num"] = (lambda draw: setattr(self, "heads", self.heads + 1), "head_count_matches")
            m["non-divisible GQA"] = (non_divisible, "kv_heads_divide_q_heads")
            if self.declare_kv_heads:
                m["wrong num_key_value_heads"] = (lambda draw: setattr(self, "kv_heads", self.kv_heads + 1), "head_count_matches")
        return m


@st.composite
def paged_attention_cases(draw: Callable, kind: str | None = None) -> PagedAttention:
    layouts = ("BNSD", "BSND") if kind in ("change V heads", "wrong head_num", "non-divisible GQA", "wrong num_key_value_heads") else ("BSH", "BNSD", "BSND")
    op = draw(st.sampled_from(sorted(PAGED_KV_LENGTHS)))
    kv_heads, groups, dim = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.sampled_from((2, 4, 8)))
    batch, block_size, columns = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    case = PagedAttention(
        op, draw(st.sampled_from(layouts)), batch, kv_heads * groups, kv_heads, dim, draw(st.sampled_from((dim, 2, 6))),
        draw(st.integers(1, 6)), block_size, columns, draw(st.sampled_from(DTYPES)),
    )
    case.kv_lens = draw(st.none() | st.lists(st.integers(0, columns * block_size), min_size=batch, max_size=batch))
    case.declared_block_size = draw(st.sampled_from((block_size, 0)))
    # num_key_value_heads=0 means "as many as the query" (FIA doc): a (blocks, block_size, H) cache
    # with fewer KV heads must declare them, or its H reads as query heads of a smaller dim.
    case.declare_kv_heads = draw(st.booleans()) or (case.hidden and groups != 1)
    if case.v_dim == dim and draw(st.booleans()):
        case.v = case.k
    return case


class AtbFlash(Case):
    """_npu_flash_attention: packed (T, N, D) tokens, per-sequence seq_len as a device tensor."""

    family, op, namespace = "atb_flash", "_npu_flash_attention", "atb"
    tensor_names = ("q", "k", "v")

    def __init__(self, tokens: int, heads: int, kv_heads: int, dim: int, v_dim: int, batch: int, dtype: torch.dtype) -> None:
        self.heads, self.kv_heads, self.dim, self.v_dim, self.dtype, self.batch = heads, kv_heads, dim, v_dim, dtype, batch
        self.q = npu(tokens, heads, dim, dtype=dtype)
        self.k = npu(tokens, kv_heads, dim, dtype=dtype)
        self.v = npu(tokens, kv_heads, v_dim, dtype=dtype)
        self.seq_len = npu(batch, dtype=torch.int32)
        self.mask, self.out = npu(1, dtype=dtype), npu(tokens, heads, v_dim, dtype=dtype)

    def arguments(self) -> tuple:
        return (self.q, self.k, self.v, self.mask, self.seq_len, 0.5, self.heads, self.kv_heads, self.out), {}

    def mutations(self) -> dict:
        m = self.common_mutations()
        tokens = self.k.shape[0]

        def non_divisible(draw: Callable) -> None:
            self.kv_heads = self.heads + draw(st.integers(1, 2))
            self.k, self.v = npu(tokens, self.kv_heads, self.dim, dtype=self.dtype), npu(tokens, self.kv_heads, self.v_dim, dtype=self.dtype)

        m.update({
            "truncate K tokens": (lambda draw: setattr(self, "k", narrowed(self.k, 0, tokens - 1)), "k_v_token_counts_match"),
            "change V heads": (lambda draw: setattr(self, "v", npu(tokens, self.kv_heads + 1, self.v_dim, dtype=self.dtype)), "k_v_head_counts_match"),
            "wrong head_num": (lambda draw: setattr(self, "heads", self.heads + 1), "head_count_matches"),
            "wrong num_kv_heads": (lambda draw: setattr(self, "kv_heads", self.kv_heads + 1), "head_count_matches"),
            "non-divisible GQA": (non_divisible, "kv_heads_divide_q_heads"),
            "seq_len not a 1-D integer tensor": (lambda draw: setattr(self, "seq_len", draw(st.sampled_from((npu(self.batch, 1, dtype=torch.int32), npu(self.batch, dtype=torch.float32))))), "length_tensor_shape"),
        })
        return m


@st.composite
def atb_flash_cases(draw: Callable) -> AtbFlash:
    kv_heads, groups, dim = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.sampled_from((2, 4, 8)))
    case = AtbFlash(draw(st.integers(1, 8)), kv_heads * groups, kv_heads, dim, draw(st.sampled_from((dim, 2, 6))), draw(st.integers(1, 4)), draw(st.sampled_from(DTYPES)))
    if case.v_dim == dim and draw(st.booleans()):
        case.v = case.k
    return case


class AtbPaged(Case):
    """_npu_paged_attention: decode queries (B, N, D) against (blocks, block_size, KV heads, D) caches."""

    family, op, namespace = "atb_paged", "_npu_paged_attention", "atb"
    tensor_names = ("q", "key_cache", "value_cache")

    def __init__(self, batch: int, heads: int, kv_heads: int, dim: int, v_dim: int, blocks: int, block_size: int, columns: int, dtype: torch.dtype) -> None:
        self.batch, self.heads, self.kv_heads, self.dim, self.v_dim, self.dtype = batch, heads, kv_heads, dim, v_dim, dtype
        self.blocks, self.block_size = blocks, block_size
        self.q = npu(batch, heads, dim, dtype=dtype)
        self.key_cache = npu(blocks, block_size, kv_heads, dim, dtype=dtype)
        self.value_cache = npu(blocks, block_size, kv_heads, v_dim, dtype=dtype)
        self.block_table = npu(batch, columns, dtype=torch.int32)
        self.context_lens = npu(batch, dtype=torch.int32)
        self.out = npu(batch, heads, v_dim, dtype=dtype)

    def arguments(self) -> tuple:
        return (self.q, self.key_cache, self.value_cache, self.kv_heads, self.heads, 0.5, self.block_table, self.context_lens, self.out), {}

    def cache(self, blocks: int, block_size: int, kv_heads: int, dim: int) -> torch.Tensor:
        return npu(blocks, block_size, kv_heads, dim, dtype=self.dtype)

    def mutations(self) -> dict:
        m = self.common_mutations()

        def non_divisible(draw: Callable) -> None:
            self.kv_heads = self.heads + draw(st.integers(1, 2))
            self.key_cache = self.cache(self.blocks, self.block_size, self.kv_heads, self.dim)
            self.value_cache = self.cache(self.blocks, self.block_size, self.kv_heads, self.v_dim)

        m.update({
            "truncate K tokens": (lambda draw: setattr(self, "key_cache", self.cache(self.blocks, self.block_size + 1, self.kv_heads, self.dim)), "caches_match"),
            "change V heads": (lambda draw: setattr(self, "value_cache", self.cache(self.blocks, self.block_size, self.kv_heads + 1, self.v_dim)), "caches_match"),
            "caches from two pools": (lambda draw: setattr(self, "value_cache", self.cache(self.blocks + 1, self.block_size, self.kv_heads, self.v_dim)), "caches_match"),
            "wrong head_num": (lambda draw: setattr(self, "heads", self.heads + 1), "head_count_matches"),
            "wrong num_kv_heads": (lambda draw: setattr(self, "kv_heads", self.kv_heads + 1), "head_count_matches"),
            "non-divisible GQA": (non_divisible, "kv_heads_divide_q_heads"),
            "block table for another batch": (lambda draw: setattr(self, "block_table", npu(self.batch + 1, 2, dtype=torch.int32)), "block_table_shape"),
            "context_lens for another batch": (lambda draw: setattr(self, "context_lens", npu(self.batch + 1, dtype=torch.int32)), "length_tensor_shape"),
        })
        return m


@st.composite
def atb_paged_cases(draw: Callable) -> AtbPaged:
    kv_heads, groups, dim = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.sampled_from((2, 4, 8)))
    return AtbPaged(
        draw(st.integers(1, 4)), kv_heads * groups, kv_heads, dim, draw(st.sampled_from((dim, 2, 6))),
        draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.sampled_from(DTYPES)),
    )


class CacheWrite(Case):
    """_npu_reshape_and_cache / npu_scatter_pa_kv_cache: (T, N, D) tokens into block caches at slots."""

    family = "cache_write"
    tensor_names = ("k", "v", "key_cache", "value_cache")

    def __init__(self, op: str, namespace: str, tokens: int, kv_heads: int, dim: int, v_dim: int, blocks: int, block_size: int, dtype: torch.dtype) -> None:
        self.op, self.namespace, self.kv_heads, self.dim, self.v_dim, self.dtype = op, namespace, kv_heads, dim, v_dim, dtype
        self.blocks, self.block_size = blocks, block_size
        self.k = npu(tokens, kv_heads, dim, dtype=dtype)
        self.v = npu(tokens, kv_heads, v_dim, dtype=dtype)
        self.key_cache = npu(blocks, block_size, kv_heads, dim, dtype=dtype)
        self.value_cache = npu(blocks, block_size, kv_heads, v_dim, dtype=dtype)
        self.slots = npu(tokens, dtype=torch.int32)

    def arguments(self) -> tuple:
        return (self.k, self.v, self.key_cache, self.value_cache, self.slots), {}

    def mutations(self) -> dict:
        m = self.common_mutations()
        tokens = self.k.shape[0]

        def other_heads(draw: Callable) -> None:
            heads = self.kv_heads + 1
            self.k, self.v = npu(tokens, heads, self.dim, dtype=self.dtype), npu(tokens, heads, self.v_dim, dtype=self.dtype)

        m.update({
            "truncate K tokens": (lambda draw: setattr(self, "k", narrowed(self.k, 0, tokens - 1)), "k_v_token_counts_match"),
            "change V heads": (lambda draw: setattr(self, "v", npu(tokens, self.kv_heads + 1, self.v_dim, dtype=self.dtype)), "k_v_head_counts_match"),
            "wrong slot count": (lambda draw: setattr(self, "slots", npu(tokens + draw(st.sampled_from((-1, 1))), dtype=torch.int32)), "slot_count_matches"),
            "caches from two pools": (lambda draw: setattr(self, "value_cache", npu(self.blocks + 1, self.block_size, self.kv_heads, self.v_dim, dtype=self.dtype)), "caches_match"),
            "K/V heads unlike the cache": (other_heads, "head_count_matches"),
            "head dim unlike the cache": (lambda draw: setattr(self, "k", npu(tokens, self.kv_heads, self.dim + 1, dtype=self.dtype)), "q_k_head_dims_match"),
        })
        return m


@st.composite
def cache_write_cases(draw: Callable) -> CacheWrite:
    op, namespace = draw(st.sampled_from((("_npu_reshape_and_cache", "atb"), ("npu_scatter_pa_kv_cache", "npu"))))
    dim = draw(st.sampled_from((2, 4, 8)))
    case = CacheWrite(op, namespace, draw(st.integers(1, 8)), draw(st.integers(1, 4)), dim, draw(st.sampled_from((dim, 2, 6))), draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.sampled_from(DTYPES)))
    if case.v_dim == dim and draw(st.booleans()):
        case.v, case.value_cache = case.k, case.key_cache
    return case


STRATEGIES = {"attention": attention_cases, "paged_attention": paged_attention_cases, "atb_flash": atb_flash_cases, "atb_paged": atb_paged_cases, "cache_write": cache_write_cases}
MUTATION_KINDS = {
    "attention": (
        "change a dtype", "move a tensor to another device", "truncate K tokens", "change V heads", "wrong head_num",
        "non-divisible GQA", "wrong num_key_value_heads", "wrong rank", "different batch counts", *PACKED_KINDS, *PER_SEQUENCE_KINDS,
    ),
    "paged_attention": (
        "change a dtype", "move a tensor to another device", "truncate K tokens", "caches from two pools", "block table for another batch",
        "K/V length beyond the cache", "wrong rank", "wrong block_size", "change V heads", "wrong head_num", "non-divisible GQA",
        "wrong num_key_value_heads",
    ),
    "atb_flash": (
        "change a dtype", "move a tensor to another device", "truncate K tokens", "change V heads", "wrong head_num",
        "wrong num_kv_heads", "non-divisible GQA", "seq_len not a 1-D integer tensor",
    ),
    "atb_paged": (
        "change a dtype", "move a tensor to another device", "truncate K tokens", "change V heads", "caches from two pools",
        "wrong head_num", "wrong num_kv_heads", "non-divisible GQA", "block table for another batch", "context_lens for another batch",
    ),
    "cache_write": (
        "change a dtype", "move a tensor to another device", "truncate K tokens", "change V heads", "wrong slot count",
        "caches from two pools", "K/V heads unlike the cache", "head dim unlike the cache",
    ),
}


def valid_cases(family: str, kind: str | None = None) -> st.SearchStrategy:
    """Valid calls of one op family; with ``kind``, only those that mutation applies to."""
    strategy = STRATEGIES[family](kind) if family in ("attention", "paged_attention") else STRATEGIES[family]()
    return strategy if kind is None else strategy.filter(lambda case: kind in case.mutations())
