"""One valid call per guarded op, in the shape of a real call site, and a single mutation per check.

``CASES`` maps every guarded op of runtime_guard/ops.py, torch_npu's (``ROWS``) and other
packages' (``PACKAGE_ROWS``), by (namespace, name) to its cases; test_every_op.py fails when an
op has none, calls each valid call through the guard (it must pass and reach the op) and each
mutation (it must be rejected with the check named). Each case names the call site whose shapes
it follows (vllm-ascend, sglang, or the op's torch_npu docstring where no caller exists); the
calls are written anew for the test double, with small block counts.

A valid call must be judged and pass, or, where ``Case.unjudged`` says so, go to the kernel
unjudged with that reason noted (never through a failure of the guard). A mutation changes
arguments by name; the runner finds a positional argument's name from the
op's schema, so a mutation reads the same however the call passes it. Tensors are built when a
test runs (``Case.build``), never at import.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
import torch_npu

BF16, F16, F32, I8, I32, I64 = torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int32, torch.int64


def t(*shape: int, dtype: torch.dtype = BF16, index: int = 0) -> torch.Tensor:
    """An npu tensor of zeros (the guard reads shapes, never values)."""
    return torch_npu.npu(torch.zeros(shape, dtype=dtype), index)


def host(*values: int) -> torch.Tensor:
    """A host int32 length tensor, as the ATB ops take seq_len/context_lens (sglang's *_cpu_int)."""
    return torch.tensor(values, dtype=I32)


class Mutation(NamedTuple):
    what: str  # the bug it stands for
    change: Callable[[], dict]  # argument name -> new value
    check: str  # the check that must reject it
    says: str = ""  # words the message must hold: the op's own argument name, or what the user must pass


class Case(NamedTuple):
    site: str
    build: Callable[[], tuple]  # () -> (args, kwargs)
    mutations: tuple
    overload: str = ""  # call this overload of the op instead of the packet
    # The valid call's verdict: "" = judged and passed; otherwise words of the reason the guard lets
    # it through unjudged (a layout, cache form or mode it does not know: the kernel judges those).
    unjudged: str = ""


NOT_PASSED = object()  # a mutation's value that drops the keyword argument from the call


def m(what: str, check: str, says: str = "", **change: Callable[[], Any]) -> Mutation:
    """A mutation whose new values are built when it runs."""
    return Mutation(what, lambda: {name: make() for name, make in change.items()}, check, says)


VA = "vllm-ascend "
SG = "sglang "

# Shared sizes: 8 query heads, 2 KV heads (GQA), head dim 128; paged caches of 8 blocks of 128.
H, KVH, D, BLOCKS, BS = 8, 2, 128, 8, 128


class _Layout(enum.StrEnum):
    """A layout held in an enum, as configuration code may hold it."""

    TND = "TND"


def _common_attention(q_shape: tuple, kv_shape: tuple, layout_arg: str, heads_arg: str) -> tuple:
    """The checks every contiguous attention call has, whatever its layout (shapes: Q and K/V)."""
    wrong_rank = kv_shape + (1,)
    return (
        m("value missing", "arguments_are_tensors", value=lambda: None),
        m("query missing", "arguments_are_tensors", query=lambda: None),
        m("key missing", "arguments_are_tensors", key=lambda: None),
        m("key left on another card", "one_device_of_type", key=lambda: t(*kv_shape, index=1)),
        m("value left on another card", "one_device_of_type", value=lambda: t(*kv_shape, index=1)),
        m("value cast to float32 alone", "one_dtype", value=lambda: t(*kv_shape, dtype=F32)),
        m("key cast to float32 alone", "one_dtype", key=lambda: t(*kv_shape, dtype=F32)),
        m("query cast to float32 alone", "one_dtype", query=lambda: t(*q_shape, dtype=F32)),
        m("key quantised to int8 alone", "one_dtype", key=lambda: t(*kv_shape, dtype=I8)),
        m("query, key and value left on the host", "one_device_of_type", query=lambda: torch.zeros(q_shape, dtype=BF16), key=lambda: torch.zeros(kv_shape, dtype=BF16), value=lambda: torch.zeros(kv_shape, dtype=BF16)),
        m("layout passed as None", "layout_is_text", **{layout_arg: lambda: None}),
        m("key not reshaped to the layout", "rank_matches_layout", key=lambda: t(*wrong_rank)),
        m("head count from the unsplit config", "head_count_matches", **{heads_arg: lambda: 2 * H}),
        m("head count as a string", "argument_types", says=f"{heads_arg} is '8' (str)", **{heads_arg: lambda: "8"}),
        m("head count as a float", "argument_types", **{heads_arg: lambda: 8.0}),
    )


def _tnd(q_lens: str, kv_lens: str, layout_arg: str, heads_arg: str) -> tuple:
    """Mutations of a TND call over 12 packed tokens in two sequences (ends [5, 12])."""
    return _common_attention((12, H, D), (12, KVH, D), layout_arg, heads_arg) + (
        m("value trimmed without key", "k_v_token_counts_match", value=lambda: t(11, KVH, D)),
        # The dispatcher takes a str subclass for a str argument: the call is judged all the same.
        m("layout as an enum.StrEnum member, value trimmed without key", "k_v_token_counts_match",
          **{layout_arg: lambda: _Layout.TND}, value=lambda: t(11, KVH, D)),
        m("value projected with the query heads", "k_v_head_counts_match", value=lambda: t(12, H, D)),
        m("rope part left on the query only", "q_k_head_dims_match", key=lambda: t(12, KVH, 64)),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", key=lambda: t(12, 3, D), value=lambda: t(12, 3, D)),
        m("K/V lengths built before a trim", "cumulative_lengths_valid", **{kv_lens: lambda: [5, 11]}),
        m("query lengths of another batch", "same_batch", **{q_lens: lambda: [12]}),
        m("query ends left all zero", "cumulative_lengths_valid", says="are all zero", **{q_lens: lambda: [0, 0]}),
    )


def _bsnd(q_lens: str | None, kv_lens: str, layout_arg: str, heads_arg: str, kv_heads_arg: str | None) -> tuple:
    """Mutations of a BSND call: batch 2, 6 query and 6 K/V positions."""
    found = _common_attention((2, 6, H, D), (2, 6, KVH, D), layout_arg, heads_arg) + (
        m("value sliced on the sequence axis", "k_v_token_counts_match", value=lambda: t(2, 5, KVH, D)),
        m("value projected with the query heads", "k_v_head_counts_match", value=lambda: t(2, 6, H, D)),
        m("rope part left on the query only", "q_k_head_dims_match", key=lambda: t(2, 6, KVH, 64)),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", key=lambda: t(2, 6, 3, D), value=lambda: t(2, 6, 3, D)),
        m("K/V of another batch", "q_kv_batches_match", key=lambda: t(3, 6, KVH, D), value=lambda: t(3, 6, KVH, D)),
        m("K/V lengths past the sequence axis", "per_sequence_lengths_fit", **{kv_lens: lambda: [6, 7]}),
    )
    if kv_heads_arg:
        found += (m("KV heads before the TP split", "head_count_matches", **{kv_heads_arg: lambda: 4}),
                  m("KV heads as a float", "argument_types", **{kv_heads_arg: lambda: 2.0}))
    return found


def _paged_tnd(q_lens: str, kv_lens: str, heads_arg: str, scales_arg: str) -> tuple:
    """Mutations of a paged TND call: 12 query tokens in 2 sequences over (blocks, block_size, KVH*D) caches."""
    cache = (BLOCKS, BS, KVH * D)
    return (
        m("value cache missing", "arguments_are_tensors", value=lambda: None),
        m("key cache on another card", "one_device_of_type", key=lambda: t(*cache, index=1)),
        m("int8 caches without their antiquant scales", "one_dtype", says=f"{scales_arg}", key=lambda: t(*cache, dtype=I8), value=lambda: t(*cache, dtype=I8), **{scales_arg: lambda: None}),
        m("layout passed as None", "layout_is_text", input_layout=lambda: None),
        m("query not packed to TND", "rank_matches_layout", query=lambda: t(2, 6, H, D)),
        m("value cache from another pool", "caches_match", value=lambda: t(BLOCKS - 1, BS, KVH * D)),
        m("value cache of another block size", "caches_match", value=lambda: t(BLOCKS, BS // 2, KVH * D)),
        m("block size of another cache config", "block_size_matches", says="block_size must equal the block axis of key", block_size=lambda: 64),
        m("block size as a float", "argument_types", block_size=lambda: 128.0),
        m("num_key_value_heads as a float", "argument_types", num_key_value_heads=lambda: 2.0),
        m("block table flattened", "block_table_shape", block_table=lambda: t(16, dtype=I32)),
        m("query head count wrong", "head_count_matches", **{heads_arg: lambda: 16}),
        m("KV heads that do not split the cache's hidden axis", "head_count_matches", num_key_value_heads=lambda: 3),
        m("cache of another head dim", "q_k_head_dims_match", key=lambda: t(BLOCKS, BS, KVH * 64), value=lambda: t(BLOCKS, BS, KVH * 64)),
        m("cache split into heads that do not divide the query's", "kv_heads_divide_q_heads", num_key_value_heads=lambda: 3, key=lambda: t(BLOCKS, BS, 3 * D), value=lambda: t(BLOCKS, BS, 3 * D)),
        m("query lengths ending short of the tokens", "cumulative_lengths_valid", **{q_lens: lambda: [5, 11]}),
        m("context length past the row's blocks", "per_sequence_lengths_fit", **{kv_lens: lambda: [105, 2 * BS + 1]}),
    )


def _fia(site: str, layout: str) -> Case:
    if layout == "TND":
        def build() -> tuple:  # vllm-ascend attention_v1 _get_fia_params: caches viewed (blocks, block_size, H)
            return (t(12, H, D), t(BLOCKS, BS, KVH * D), t(BLOCKS, BS, KVH * D)), {
                "num_heads": H, "num_key_value_heads": KVH, "input_layout": "TND", "block_table": t(2, 2, dtype=I32), "block_size": BS, "scale": 0.088,
                "sparse_mode": 3, "atten_mask": t(2048, 2048, dtype=I8), "actual_seq_lengths": [5, 12], "actual_seq_lengths_kv": [105, 200]}
        return Case(site, build, _paged_tnd("actual_seq_lengths", "actual_seq_lengths_kv", "num_heads", "antiquant_scale"))

    def build() -> tuple:  # sglang forward_extend over contiguous K/V (BSND)
        return (t(2, 6, H, D), t(2, 6, KVH, D), t(2, 6, KVH, D)), {
            "num_heads": H, "num_key_value_heads": KVH, "input_layout": "BSND", "scale": 0.088, "actual_seq_lengths": [6, 4], "actual_seq_lengths_kv": [6, 4]}
    return Case(site, build, _bsnd("actual_seq_lengths", "actual_seq_lengths_kv", "input_layout", "num_heads", "num_key_value_heads"))


def _fia_paged_heads() -> Case:
    cache = (BLOCKS, KVH, BS, D)

    def build() -> tuple:  # decode over (blocks, KV_N, block_size, D) caches, one BSND query token per sequence
        return (t(2, 1, H, D), t(*cache), t(*cache)), {
            "num_heads": H, "num_key_value_heads": KVH, "input_layout": "BSND", "block_table": t(2, 2, dtype=I32), "block_size": BS, "scale": 0.088,
            "actual_seq_lengths": [1, 1], "actual_seq_lengths_kv": [105, 200]}
    return Case(VA + "FIA decode over (blocks, KV_N, block_size, D) caches", build, (
        m("block table passed as a list", "arguments_are_tensors", block_table=lambda: [[0, 1], [2, 3]]),
        m("num_heads as a string", "argument_types", says="the number of query heads", num_heads=lambda: "8"),
        m("num_key_value_heads as a float", "argument_types", num_key_value_heads=lambda: 2.0),
        m("KV heads before the TP split", "head_count_matches", num_key_value_heads=lambda: 4),
        m("value cache of another block size", "caches_match", value=lambda: t(BLOCKS, KVH, 64, D)),
        m("two query tokens claimed for one", "per_sequence_lengths_fit", actual_seq_lengths=lambda: [1, 2]),
        m("block table of another batch", "block_table_shape", block_table=lambda: t(3, 2, dtype=I32)),
    ))


def _fia_c8() -> Case:
    cache = (BLOCKS, KVH, BS, D)

    def build() -> tuple:  # C8 decode: int8 (blocks, KV_N, block_size, D) caches, antiquant scales, KV heads left to the cache (0)
        return (t(2, 1, H * D), t(*cache, dtype=I8), t(*cache, dtype=I8)), {
            "num_heads": H, "num_key_value_heads": 0, "input_layout": "BSH", "block_table": t(2, 2, dtype=I32), "block_size": BS, "scale": 0.088,
            "antiquant_scale": t(2, KVH * D), "antiquant_mode": 0, "actual_seq_lengths_kv": [105, 200]}
    return Case(VA + "C8 (int8 KV cache) decode through FIA", build, (
        m("antiquant scales dropped", "one_dtype", antiquant_scale=lambda: None),
        m("value cache left in bfloat16", "one_dtype", value=lambda: t(*cache)),
    ))


def _fia_paged_nz() -> Case:
    cache = (BLOCKS, KVH, D // 16, BS, 16)

    def build() -> tuple:  # the FIA docstring's NZ form (blocks, KV_N, D/16, block_size, 16), BSH decode query
        return (t(2, 1, H * D), t(*cache), t(*cache)), {
            "num_heads": H, "num_key_value_heads": KVH, "input_layout": "BSH", "block_table": t(2, 2, dtype=I32), "block_size": BS, "scale": 0.088, "actual_seq_lengths_kv": [105, 200]}
    return Case("torch_npu npu_fused_infer_attention_score docstring, NZ paged caches", build, (
        m("caches of another head dim", "q_k_head_dims_match", key=lambda: t(BLOCKS, KVH, 64 // 16, BS, 16), value=lambda: t(BLOCKS, KVH, 64 // 16, BS, 16)),
        m("value cache of another block size", "caches_match", value=lambda: t(BLOCKS, KVH, D // 16, 64, 16)),
        m("block size of another cache config", "block_size_matches", block_size=lambda: 64),
        m("cache split into heads that do not divide the query's", "kv_heads_divide_q_heads", num_key_value_heads=lambda: 3, key=lambda: t(BLOCKS, 3, D // 16, BS, 16), value=lambda: t(BLOCKS, 3, D // 16, BS, 16)),
    ))


def _fia_nsd() -> Case:
    def build() -> tuple:  # FIA's NSD layout (torch_npu meta registration's LAYOUT_MAP): one sequence, no batch axis
        return (t(H, 6, D), t(KVH, 6, D), t(KVH, 6, D)), {"num_heads": H, "num_key_value_heads": KVH, "input_layout": "NSD", "scale": 0.088}
    return Case("torch_npu npu_fused_infer_attention_score, NSD layout (the guard reads devices and dtypes only)", build, (
        m("value left on another card", "one_device_of_type", value=lambda: t(KVH, 6, D, index=1)),
        m("value cast alone", "one_dtype", value=lambda: t(KVH, 6, D, dtype=F32)),
    ))


def _fia_numpy_heads(paged: bool) -> Case:
    """Head counts as NumPy integers (a config read through NumPy): the dispatcher takes any integer
    for an ``int`` argument, so the guard must too, in BSH where it splits the hidden axis by them."""
    if paged:
        cache = (BLOCKS, BS, KVH * D)

        def build() -> tuple:  # BSH decode over (blocks, block_size, H) caches, as _incre_flash's call
            return (t(2, 1, H * D), t(*cache), t(*cache)), {
                "num_heads": np.int64(H), "num_key_value_heads": np.int64(KVH), "input_layout": "BSH", "block_table": t(2, 2, dtype=I32), "block_size": BS,
                "scale": 0.088, "actual_seq_lengths_kv": [105, 200]}
        return Case("torch_npu npu_fused_infer_attention_score paged BSH, NumPy head counts", build, (
            m("num_heads that does not split the query", "head_count_matches", num_heads=lambda: np.int64(3)),
            m("num_key_value_heads that does not split the cache", "head_count_matches", num_key_value_heads=lambda: np.int64(3)),
            m("caches of another head dim", "q_k_head_dims_match", key=lambda: t(BLOCKS, BS, KVH * 64), value=lambda: t(BLOCKS, BS, KVH * 64)),
        ))

    def build() -> tuple:  # BSH prefill over contiguous K/V, as _prompt_flash's call
        return (t(2, 6, H * D), t(2, 6, KVH * D), t(2, 6, KVH * D)), {
            "num_heads": np.int64(H), "num_key_value_heads": np.int64(KVH), "input_layout": "BSH", "scale": 0.088, "actual_seq_lengths": [6, 4], "actual_seq_lengths_kv": [6, 4]}
    return Case("torch_npu npu_fused_infer_attention_score BSH, NumPy head counts", build, (
        m("num_heads that does not split the query", "head_count_matches", num_heads=lambda: np.int64(3)),
        m("declared KV heads wrong", "head_count_matches", num_key_value_heads=lambda: np.int64(4)),
    ))


def _fia_numpy_ends(empty: bool) -> Case:
    """sglang ascend_backend's MLA extend: FIA over contiguous TND K/V (nope parts, rope parts by
    keyword), both sides' ends one ``np.cumsum(extend_seq_lens_cpu)`` array. With no extend tokens
    the tensors are sliced to 0 tokens and np.cumsum([]) is an empty float64 array, which the
    dispatcher takes for an int[]."""
    tokens = 0 if empty else 12

    def build() -> tuple:
        ends = np.cumsum([]) if empty else np.cumsum([5, 7])
        return (t(tokens, H, D), t(tokens, H, D), t(tokens, H, D)), {
            "query_rope": t(tokens, H, 64), "key_rope": t(tokens, H, 64), "num_heads": H, "input_layout": "TND", "atten_mask": t(2048, 2048, dtype=I8), "sparse_mode": 3,
            "actual_seq_lengths": ends, "actual_seq_lengths_kv": ends, "scale": 0.088, "next_tokens": 0}
    if empty:
        return Case(SG + "ascend_backend MLA extend with no extend tokens: tensors sliced to 0, np.cumsum([]) ends", build, (
            m("K/V left unsliced while the ends are empty", "cumulative_lengths_valid", says="are all zero", key=lambda: t(12, H, D), value=lambda: t(12, H, D)),
        ))
    return Case(SG + "ascend_backend MLA extend (FIA TND), one np.cumsum array of ends for both sides", build, (
        m("ends of another batch's extend lengths", "cumulative_lengths_valid", says="end at 11",
          actual_seq_lengths=lambda: np.cumsum([5, 6]), actual_seq_lengths_kv=lambda: np.cumsum([5, 6])),
        m("ends summed from float lengths", "argument_types", actual_seq_lengths=lambda: np.cumsum([5.0, 7.0]), actual_seq_lengths_kv=lambda: np.cumsum([5.0, 7.0])),
        m("value sliced to fewer tokens than key", "k_v_token_counts_match", value=lambda: t(11, H, D)),
    ))


def _fia_unknown_paged_form() -> Case:
    def build() -> tuple:  # a paged key of a rank the FIA docstring lists no form for: the kernel judges it
        return (t(2, 1, H, D), t(BLOCKS, 1, KVH, BS, D // 16, 16), t(BLOCKS, 1, KVH, BS, D // 16, 16)), {
            "num_heads": H, "num_key_value_heads": KVH, "input_layout": "BSND", "block_table": t(2, 2, dtype=I32), "block_size": BS, "actual_seq_lengths_kv": [105, 200]}
    return Case("torch_npu npu_fused_infer_attention_score, a 6-D paged key no documented form has", build, (
        m("block table passed as a list", "arguments_are_tensors", block_table=lambda: [[0, 1], [2, 3]]),
    ), unjudged="paged key of rank 6")


def _fia_v2_device_lengths(paged: bool) -> Case:
    """SymInt[] lengths given as 1-D int32 device tensors (the dispatcher takes them; sglang's NPU
    backend builds its DSA lengths as ``.to(device=q.device, dtype=torch.int32)``): only their shape
    is checked, never their values (reading them would sync the device)."""
    if paged:
        def build() -> tuple:  # vllm-ascend FIA v2 over paged caches, query lengths on the device
            return (t(12, H, D), t(BLOCKS, BS, KVH * D), t(BLOCKS, BS, KVH * D)), {
                "num_query_heads": H, "num_key_value_heads": KVH, "input_layout": "TND", "block_table": t(2, 2, dtype=I32), "block_size": BS,
                "softmax_scale": 0.088, "sparse_mode": 3, "actual_seq_qlen": t(2, dtype=I32), "actual_seq_kvlen": [105, 200]}
        return Case(VA + "FIA v2 over paged caches (TND), query lengths as a device tensor", build, (
            m("query lengths as a 2-D device tensor", "length_tensor_shape", actual_seq_qlen=lambda: t(2, 1, dtype=I32)),
            m("query lengths as a string", "argument_types", says=", or None", actual_seq_qlen=lambda: "5,12"),
            m("context length past the row's blocks", "per_sequence_lengths_fit", actual_seq_kvlen=lambda: [105, 2 * BS + 1]),
        ))

    def build() -> tuple:  # FIA v2 prefill over contiguous K/V: query lengths on the device, K/V ends on the host
        return (t(12, H, D), t(12, KVH, D), t(12, KVH, D)), {
            "num_query_heads": H, "num_key_value_heads": KVH, "input_layout": "TND", "softmax_scale": 0.088, "sparse_mode": 3, "actual_seq_qlen": t(2, dtype=I32), "actual_seq_kvlen": [5, 12]}
    return Case(VA + "FIA v2 prefill over contiguous K/V (TND), query lengths as a device tensor", build, (
        m("K/V lengths as a 2-D device tensor", "length_tensor_shape", actual_seq_kvlen=lambda: t(2, 1, dtype=I32)),
        m("query lengths as a string", "argument_types", actual_seq_qlen=lambda: "5,12"),
    ))


def _fia_v2(site: str, paged: bool) -> Case:
    if paged:
        def build() -> tuple:  # vllm-ascend mla/attention v2 path: TND query over paged caches
            return (t(12, H, D), t(BLOCKS, BS, KVH * D), t(BLOCKS, BS, KVH * D)), {
                "num_query_heads": H, "num_key_value_heads": KVH, "input_layout": "TND", "block_table": t(2, 2, dtype=I32), "block_size": BS,
                "softmax_scale": 0.088, "sparse_mode": 3, "actual_seq_qlen": [5, 12], "actual_seq_kvlen": [105, 200]}
        return Case(site, build, _paged_tnd("actual_seq_qlen", "actual_seq_kvlen", "num_query_heads", "dequant_scale_key"))

    def build() -> tuple:
        return (t(12, H, D), t(12, KVH, D), t(12, KVH, D)), {
            "num_query_heads": H, "num_key_value_heads": KVH, "input_layout": "TND", "softmax_scale": 0.088, "sparse_mode": 3, "actual_seq_qlen": [5, 12], "actual_seq_kvlen": [5, 12]}
    return Case(site, build, _tnd("actual_seq_qlen", "actual_seq_kvlen", "input_layout", "num_query_heads"))


def _fusion_attention() -> tuple:
    def build() -> tuple:  # vllm-ascend _forward_encoder_attention / sglang prefill: TND, lengths by keyword
        return (t(12, H, D), t(12, KVH, D), t(12, KVH, D), H, "TND"), {"scale": 0.088, "sparse_mode": 0, "actual_seq_qlen": [5, 12], "actual_seq_kvlen": [5, 12]}
    def one_list() -> tuple:  # encoder self-attention: one cu_seqlens list object passed for both sides
        ends = [5, 12]
        return (t(12, H, D), t(12, KVH, D), t(12, KVH, D), H, "TND"), {"scale": 0.088, "actual_seq_qlen": ends, "actual_seq_kvlen": ends}
    return (
        Case(VA + "attention_v1._forward_encoder_attention (TND)", build, _tnd("actual_seq_qlen", "actual_seq_kvlen", "input_layout", "head_num")),
        Case(VA + "encoder self-attention, one cu_seqlens list for Q and K/V", one_list, (
            m("K/V trimmed while one list still describes both", "cumulative_lengths_valid", key=lambda: t(11, KVH, D), value=lambda: t(11, KVH, D)),
            m("query trimmed while one list still describes both", "cumulative_lengths_valid", query=lambda: t(11, H, D)),
        )),
    )


def _fusion_attention_host_forms() -> tuple:
    """Ends in the other host forms the dispatcher takes for int[]: a tuple, and a list of NumPy
    integers (list() of an np.cumsum array keeps its np.int64 items)."""
    def as_tuple() -> tuple:  # three sequences (3 + 4 + 5 tokens), ends kept as a tuple
        return (t(12, H, D), t(12, KVH, D), t(12, KVH, D), H, "TND"), {"scale": 0.088, "actual_seq_qlen": (3, 7, 12), "actual_seq_kvlen": (3, 7, 12)}

    def numpy_items() -> tuple:
        return (t(12, H, D), t(12, KVH, D), t(12, KVH, D), H, "TND"), {"scale": 0.088, "actual_seq_qlen": list(np.cumsum([5, 7])), "actual_seq_kvlen": list(np.cumsum([5, 7]))}
    return (
        Case("torch_npu npu_fusion_attention schema (int[]? actual_seq_qlen): ends as a tuple", as_tuple, (
            m("ends permuted with a batch reorder (cu_seqlens[perm]) instead of recomputed", "cumulative_lengths_valid", says="decrease",
              actual_seq_qlen=lambda: (7, 3, 12), actual_seq_kvlen=lambda: (7, 3, 12)),
            m("ends summed from lengths holding a -1 pad entry ([-1, 8, 5])", "cumulative_lengths_valid", says="start at -1",
              actual_seq_qlen=lambda: (-1, 7, 12), actual_seq_kvlen=lambda: (-1, 7, 12)),
        )),
        Case(SG + "np.cumsum ends passed through list(): np.int64 items", numpy_items, (
            m("K/V ends of a trimmed batch", "cumulative_lengths_valid", says="end at 11", actual_seq_kvlen=lambda: list(np.cumsum([5, 6]))),
        )),
    )


def _fusion_attention_meta() -> Case:
    """Meta tensors, as torch_npu's meta kernel for the op (op_plugin/meta/_meta_registrations.py)
    sees them in shape inference: no device to judge, the shapes still judged."""
    def meta(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=BF16, device="meta")

    def build() -> tuple:
        return (meta(12, H, D), meta(12, KVH, D), meta(12, KVH, D), H, "TND"), {"scale": 0.088, "actual_seq_qlen": [5, 12], "actual_seq_kvlen": [5, 12]}
    return Case("torch_npu npu_fusion_attention over meta tensors (its meta kernel)", build, (
        m("value trimmed without key", "k_v_token_counts_match", value=lambda: meta(11, KVH, D)),
        m("K/V lengths built before a trim", "cumulative_lengths_valid", actual_seq_kvlen=lambda: [5, 11]),
    ))


def _prompt_flash() -> Case:
    def build() -> tuple:  # BSH prefill: hidden = heads x head dim
        return (t(2, 6, H * D), t(2, 6, KVH * D), t(2, 6, KVH * D)), {
            "num_heads": H, "num_key_value_heads": KVH, "input_layout": "BSH", "scale_value": 0.088, "actual_seq_lengths": [6, 4], "actual_seq_lengths_kv": [6, 4]}
    return Case(VA + "older prefill path, npu_prompt_flash_attention BSH", build, (
        m("value missing", "arguments_are_tensors", value=lambda: None),
        m("key on another card", "one_device_of_type", key=lambda: t(2, 6, KVH * D, index=1)),
        m("value cast alone", "one_dtype", value=lambda: t(2, 6, KVH * D, dtype=F16)),
        m("layout as None", "layout_is_text", input_layout=lambda: None),
        m("key left 4-D", "rank_matches_layout", key=lambda: t(2, 6, KVH, D)),
        m("value sliced on the sequence axis", "k_v_token_counts_match", value=lambda: t(2, 5, KVH * D)),
        m("key projected with three heads, value with two", "k_v_head_counts_match", key=lambda: t(2, 6, 3 * D)),
        m("key of another head dim", "q_k_head_dims_match", key=lambda: t(2, 6, 100)),
        m("num_heads that does not split the query", "head_count_matches", num_heads=lambda: 3),
        m("num_heads as a float", "argument_types", num_heads=lambda: 8.0),
        m("num_heads as a string", "argument_types", num_heads=lambda: "8"),
        m("num_heads passed as a tensor", "argument_types", says="num_heads is a tensor (1,)", num_heads=lambda: t(1, dtype=I32)),
        m("declared KV heads wrong", "head_count_matches", num_key_value_heads=lambda: 4),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", key=lambda: t(2, 6, 3 * D), value=lambda: t(2, 6, 3 * D), num_key_value_heads=lambda: 3),
        m("K/V of another batch", "q_kv_batches_match", key=lambda: t(3, 6, KVH * D), value=lambda: t(3, 6, KVH * D)),
        m("query lengths of another batch", "per_sequence_lengths_fit", actual_seq_lengths=lambda: [6, 4, 2]),
    ))


def _incre_flash() -> Case:
    def build() -> tuple:  # decode over paged BSH caches (one query token per sequence)
        return (t(2, 1, H * D), t(BLOCKS, BS, KVH * D), t(BLOCKS, BS, KVH * D)), {
            "num_heads": H, "num_key_value_heads": KVH, "input_layout": "BSH", "block_table": t(2, 2, dtype=I32), "block_size": BS, "scale_value": 0.088, "actual_seq_lengths": [105, 200]}
    cache = (BLOCKS, BS, KVH * D)
    return Case(VA + "older decode path, npu_incre_flash_attention paged BSH", build, (
        m("value cache missing", "arguments_are_tensors", value=lambda: None),
        m("key cache on another card", "one_device_of_type", key=lambda: t(*cache, index=1)),
        m("int8 caches without antiquant_scale", "one_dtype", key=lambda: t(*cache, dtype=I8), value=lambda: t(*cache, dtype=I8)),
        m("layout as None", "layout_is_text", input_layout=lambda: None),
        m("query left 4-D", "rank_matches_layout", query=lambda: t(2, 1, H, D)),
        m("value cache from another pool", "caches_match", value=lambda: t(BLOCKS - 1, BS, KVH * D)),
        m("block size of another config", "block_size_matches", block_size=lambda: 64),
        m("block size as a string", "argument_types", block_size=lambda: "128"),
        m("block table of another batch", "block_table_shape", block_table=lambda: t(3, 2, dtype=I32)),
        m("num_heads that does not split the query", "head_count_matches", num_heads=lambda: 3),
        m("num_heads left at 0", "head_count_matches", num_heads=lambda: 0),
        m("cache of another head dim", "q_k_head_dims_match", key=lambda: t(BLOCKS, BS, KVH * 64), value=lambda: t(BLOCKS, BS, KVH * 64)),
        m("cache split into heads that do not divide the query's", "kv_heads_divide_q_heads", num_key_value_heads=lambda: 3, key=lambda: t(BLOCKS, BS, 3 * D), value=lambda: t(BLOCKS, BS, 3 * D)),
        m("context length past the row's blocks", "per_sequence_lengths_fit", actual_seq_lengths=lambda: [105, 2 * BS + 1]),
    ))


def _atb_flash(site: str, mask: bool, **extra: int) -> Case:
    def build() -> tuple:  # vllm-ascend 310P _flash_attention: packed (T, N, D), host seq_len
        if mask:
            extra["mask"] = t(12, 12, dtype=F16)
        return (), dict(query=t(12, H, D, dtype=F16), key=t(12, KVH, D, dtype=F16), value=t(12, KVH, D, dtype=F16),
                        seq_len=host(5, 7), scale_value=0.088, num_heads=H, num_kv_heads=KVH, out=t(12, H, D, dtype=F16), **extra)
    return Case(site, build, (
        m("value missing", "arguments_are_tensors", value=lambda: None),
        m("key on another card", "one_device_of_type", key=lambda: t(12, KVH, D, dtype=F16, index=1)),
        m("value cast alone", "one_dtype", value=lambda: t(12, KVH, D, dtype=BF16)),
        m("key flattened to (T, H)", "rank_matches_layout", key=lambda: t(12, KVH * D, dtype=F16)),
        m("value trimmed without key", "k_v_token_counts_match", value=lambda: t(11, KVH, D, dtype=F16)),
        m("query and K/V of other token counts", "k_v_token_counts_match", key=lambda: t(10, KVH, D, dtype=F16), value=lambda: t(10, KVH, D, dtype=F16)),
        m("value projected with the query heads", "k_v_head_counts_match", value=lambda: t(12, H, D, dtype=F16)),
        m("rope part left on the query only", "q_k_head_dims_match", key=lambda: t(12, KVH, 64, dtype=F16)),
        m("num_heads before the TP split", "head_count_matches", num_heads=lambda: 16),
        m("num_kv_heads as a float", "argument_types", num_kv_heads=lambda: 2.0),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", key=lambda: t(12, 3, D, dtype=F16), value=lambda: t(12, 3, D, dtype=F16), num_kv_heads=lambda: 3),
        m("seq_len of a trimmed batch", "per_sequence_lengths_fit", seq_len=lambda: host(5, 6)),
        m("seq_len differenced from unsorted ends (sums to T)", "per_sequence_lengths_fit", seq_len=lambda: host(13, -1)),
        m("seq_len as a 2-D device tensor", "length_tensor_shape", seq_len=lambda: t(2, 1, dtype=I32)),
        m("seq_len summed from a float mask (mask.sum(-1) stays float)", "length_tensor_shape", says="torch.float32", seq_len=lambda: torch.tensor([5.0, 7.0])),
        m("seq_len passed as the batch's bool mask (seq_lens > 0)", "length_tensor_shape", says="torch.bool", seq_len=lambda: torch.tensor([True, True])),
        m("seq_len as a string", "argument_types", seq_len=lambda: "5,7"),
    ))


def _atb_flash_hidden() -> Case:
    def build() -> tuple:  # (T, H) tokens: heads folded into the hidden axis
        return (), {"query": t(12, H * D, dtype=F16), "key": t(12, KVH * D, dtype=F16), "value": t(12, KVH * D, dtype=F16), "mask": t(12, 12, dtype=F16),
                    "seq_len": host(5, 7), "scale_value": 0.088, "num_heads": H, "num_kv_heads": KVH, "out": t(12, H * D, dtype=F16)}
    return Case("torch_npu _npu_flash_attention over (T, H) tokens", build, (
        m("num_heads as a string", "argument_types", num_heads=lambda: "8"),
        m("num_kv_heads as a float", "argument_types", num_kv_heads=lambda: 2.0),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", num_kv_heads=lambda: 3),
        m("value trimmed without key", "k_v_token_counts_match", value=lambda: t(11, KVH * D, dtype=F16)),
    ))


def _paged_decode_mutations(dtype: torch.dtype, cache_dtype: torch.dtype) -> tuple:
    cache = (BLOCKS, BS, KVH, D)
    return (
        m("block table missing", "arguments_are_tensors", block_table=lambda: None),
        m("value cache on another card", "one_device_of_type", value_cache=lambda: t(*cache, dtype=cache_dtype, index=1)),
        m("value cache of another dtype", "one_dtype", value_cache=lambda: t(*cache, dtype=F32)),
        m("query left 4-D", "rank_matches_layout", query=lambda: t(4, 1, H, D, dtype=dtype)),
        m("value cache from another pool", "caches_match", value_cache=lambda: t(BLOCKS - 1, BS, KVH, D, dtype=cache_dtype)),
        m("value cache of another block size", "caches_match", value_cache=lambda: t(BLOCKS, 64, KVH, D, dtype=cache_dtype)),
        m("query of another head dim", "q_k_head_dims_match", query=lambda: t(4, H, 64, dtype=dtype)),
        m("num_heads before the TP split", "head_count_matches", num_heads=lambda: 16),
        m("num_kv_heads before the TP split", "head_count_matches", num_kv_heads=lambda: 4),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", key_cache=lambda: t(BLOCKS, BS, 3, D, dtype=cache_dtype), value_cache=lambda: t(BLOCKS, BS, 3, D, dtype=cache_dtype), num_kv_heads=lambda: 3),
        m("block table of another batch", "block_table_shape", block_table=lambda: t(3, 4, dtype=I32)),
        m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: host(100, 50, 7, 4 * BS + 1)),
        m("context length of a padding request filled with -1 (as slot mappings are padded)", "per_sequence_lengths_fit", says="negative entry -1", context_lens=lambda: host(100, 50, -1, 4 * BS)),
        m("context lengths as a 2-D device tensor", "length_tensor_shape", context_lens=lambda: t(4, 1, dtype=I32)),
        m("context lengths on the device, built for another batch", "length_tensor_shape", context_lens=lambda: t(3, dtype=I32)),
        m("context lengths as a float list", "argument_types", says="whose entry 1.5 (float) is not an int", context_lens=lambda: [1.5, 2.0, 3.0, 4.0]),
    )


def _keyword_decode_mutations() -> tuple:
    """Arguments left out of an all-keyword call: the message names what is missing."""
    return (
        m("value cache not passed", "arguments_are_tensors", says="value_cache missing", value_cache=lambda: NOT_PASSED),
        m("context lengths not passed", "argument_types", says="context_lens is missing; it must be a list of ints or a 1-D integer tensor (pass", context_lens=lambda: NOT_PASSED),
    )


def _paged_decode() -> Case:
    def build() -> tuple:  # vllm-ascend attention_v1 _forward_decode_only: (B, N, D) query, ND caches
        return (), {"query": t(4, H, D, dtype=F16), "key_cache": t(BLOCKS, BS, KVH, D, dtype=F16), "value_cache": t(BLOCKS, BS, KVH, D, dtype=F16),
                        "num_kv_heads": KVH, "num_heads": H, "scale_value": 0.088, "block_table": t(4, 4, dtype=I32), "context_lens": host(100, 50, 7, 4 * BS), "out": t(4, H, D, dtype=F16)}
    return Case(VA + "attention_v1._forward_decode_only", build, _paged_decode_mutations(F16, F16) + _keyword_decode_mutations())


def _paged_decode_nz() -> Case:
    cache = (BLOCKS, KVH * D // 16, BS, 16)

    def build() -> tuple:  # vllm-ascend _310p attention_v1 decode: NZ caches (blocks, KV heads*D/16, block_size, 16)
        return (), {"query": t(4, H, D, dtype=F16), "key_cache": t(*cache, dtype=F16), "value_cache": t(*cache, dtype=F16), "num_kv_heads": KVH, "num_heads": H,
                    "scale_value": 0.088, "block_table": t(4, 4, dtype=I32), "context_lens": host(100, 50, 7, 4 * BS), "out": t(4, H, D, dtype=F16)}
    return Case(VA + "_310p attention_v1 decode over NZ caches", build, (
        m("value cache of another block size", "caches_match", value_cache=lambda: t(BLOCKS, KVH * D // 16, 64, 16, dtype=F16)),
        m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: host(100, 50, 7, 4 * BS + 1)),
        m("num_kv_heads that does not fold into the cache's axis 1", "q_k_head_dims_match", num_kv_heads=lambda: 4),
    ))


def _paged_decode_nz_ambiguous(kv_heads: int, head_dim: int, block_size: int) -> Case:
    """NZ caches whose axes also fit the ND reading in part: block size equal to num_kv_heads (the
    block size 64 vllm-ascend's 310P runner picks for head dim 256, beside 64 KV heads), or head dim
    16 (x) with axis 1 (KV heads x 16 / 16) equal to num_kv_heads. Both are NZ (axis 1 folds the
    heads and dims), so the block axis is 2."""
    cache = (2, kv_heads * head_dim // 16, block_size, 16)

    def build() -> tuple:  # vllm-ascend _310p attention_v1 decode: NZ caches (blocks, KV heads*D/16, block_size, 16)
        return (), {"query": t(4, kv_heads, head_dim, dtype=F16), "key_cache": t(*cache, dtype=F16), "value_cache": t(*cache, dtype=F16), "num_kv_heads": kv_heads,
                    "num_heads": kv_heads, "scale_value": 0.088, "block_table": t(4, 2, dtype=I32), "context_lens": host(100, 50, 7, 2 * block_size), "out": t(4, kv_heads, head_dim, dtype=F16)}
    return Case(VA + f"_310p attention_v1 decode over NZ caches, {kv_heads} KV heads of dim {head_dim}, block size {block_size}", build, (
        m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: host(100, 50, 7, 2 * block_size + 1)),
    ))


def _paged_decode_3d() -> Case:
    cache = (BLOCKS, BS, KVH * D)

    def build() -> tuple:  # (blocks, block_size, H) caches, a form the ATB op's callers never pass: the kernel judges it
        return (), {"query": t(4, H, D, dtype=F16), "key_cache": t(*cache, dtype=F16), "value_cache": t(*cache, dtype=F16), "num_kv_heads": KVH, "num_heads": H,
                    "scale_value": 0.088, "block_table": t(4, 4, dtype=I32), "context_lens": host(100, 50, 7, 4 * BS), "out": t(4, H, D, dtype=F16)}
    return Case("torch_npu _npu_paged_attention over 3-D caches (not judged past devices, dtypes and the query)", build, (
        m("value cache of another dtype", "one_dtype", value_cache=lambda: t(*cache, dtype=F32)),
    ), unjudged="3-D key_cache")


def _paged_quant() -> Case:
    def build() -> tuple:  # int8 caches dequantised by k_descale/v_descale, bf16 query (the op's schema)
        return (t(4, H, D), t(BLOCKS, BS, KVH, D, dtype=I8), t(BLOCKS, BS, KVH, D, dtype=I8), KVH, H, 0.088, t(4, 4, dtype=I32), host(100, 50, 7, 4 * BS),
                1, 1, t(KVH * D, dtype=F32), t(KVH * D, dtype=F32), t(4, H, D)), {}
    return Case("torch_npu schema _npu_paged_attention_quant (int8 caches, descales)", build, _paged_decode_mutations(BF16, I8))


def _chunked(site: str, op_query_2d: bool = False) -> Case:
    q_shape = (12, H * D) if op_query_2d else (12, H, D)

    def build() -> tuple:  # packed query tokens of 2 sequences (5 + 7) over ND caches
        return (), {"query": t(*q_shape, dtype=F16), "key_cache": t(BLOCKS, BS, KVH, D, dtype=F16), "value_cache": t(BLOCKS, BS, KVH, D, dtype=F16),
                        "mask": t(12, 12, dtype=F16), "block_table": t(2, 4, dtype=I32), "seq_len": host(5, 7), "context_lens": host(105, 207),
                        "scale_value": 0.088, "num_heads": H, "num_kv_heads": KVH, "out": t(*q_shape, dtype=F16)}
    cache = (BLOCKS, BS, KVH, D)
    mutations = (
        m("block table missing", "arguments_are_tensors", block_table=lambda: None),
        m("key cache on another card", "one_device_of_type", key_cache=lambda: t(*cache, dtype=F16, index=1)),
        m("value cache of another dtype", "one_dtype", value_cache=lambda: t(*cache, dtype=BF16)),
        m("value cache from another pool", "caches_match", value_cache=lambda: t(BLOCKS + 1, BS, KVH, D, dtype=F16)),
        m("num_kv_heads before the TP split", "head_count_matches", num_kv_heads=lambda: 4),
        m("three KV heads for eight query heads", "kv_heads_divide_q_heads", key_cache=lambda: t(BLOCKS, BS, 3, D, dtype=F16), value_cache=lambda: t(BLOCKS, BS, 3, D, dtype=F16), num_kv_heads=lambda: 3),
        m("block table flattened", "block_table_shape", block_table=lambda: t(8, dtype=I32)),
        m("seq_len not summing to the query tokens", "per_sequence_lengths_fit", seq_len=lambda: host(5, 6)),
        m("seq_len differenced from unsorted ends (sums to T)", "per_sequence_lengths_fit", seq_len=lambda: host(13, -1)),
        m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: host(105, 4 * BS + 1)),
        m("seq_len as a 2-D device tensor", "length_tensor_shape", seq_len=lambda: t(2, 1, dtype=I32)),
        m("context_lens missing", "argument_types", context_lens=lambda: None),
    )
    if op_query_2d:
        mutations += (
            m("num_heads that does not split the query's hidden axis", "head_count_matches", num_heads=lambda: 3),
            m("num_heads as a string", "argument_types", num_heads=lambda: "8"),
            m("query left (B, S, N, D)", "rank_matches_layout", query=lambda: t(2, 6, H, D, dtype=F16)),
            m("query of another head dim", "q_k_head_dims_match", query=lambda: t(12, H * 64, dtype=F16)),
        )
    else:
        mutations += (
            m("query left 4-D", "rank_matches_layout", query=lambda: t(2, 6, H, D, dtype=F16)),
            m("query of another head dim", "q_k_head_dims_match", query=lambda: t(12, H, 64, dtype=F16)),
            m("num_heads before the TP split", "head_count_matches", num_heads=lambda: 16),
        )
    return Case(site, build, mutations)


def _cache_write_mutations(slot_arg: str, nd: bool) -> tuple:
    """Mutations shared by the two-cache writes; ``nd``: the caches are (blocks, block_size, N, D)."""
    cache = (BLOCKS, BS, KVH, D) if nd else (BLOCKS, KVH, D // 16, BS, 16)
    found = (
        m("slots missing", "arguments_are_tensors", **{slot_arg: lambda: None}),
        m("value cache on another card", "one_device_of_type", value_cache=lambda: t(*cache, index=1)),
        m("value cast alone", "one_dtype", value=lambda: t(12, KVH, D, dtype=F32)),
        m("key left 2-D", "rank_matches_layout", key=lambda: t(12, KVH * D)),
        m("value trimmed without key", "k_v_token_counts_match", value=lambda: t(11, KVH, D)),
        m("value of another head count", "k_v_head_counts_match", value=lambda: t(12, 4, D)),
        m("value cache from another pool", "caches_match", value_cache=lambda: t(BLOCKS - 1, *cache[1:])),
        m("slots of another batch", "slot_count_matches", **{slot_arg: lambda: t(11, dtype=I32)}),
        m("slots unsqueezed to (T, 1): one row per token, not one slot", "slot_count_matches", **{slot_arg: lambda: t(12, 1, dtype=I32)}),
    )
    if nd:
        found += (
            m("value cache of another block size", "caches_match", value_cache=lambda: t(BLOCKS, 64, KVH, D)),
            m("caches with the query's heads", "head_count_matches", key_cache=lambda: t(BLOCKS, BS, H, D), value_cache=lambda: t(BLOCKS, BS, H, D)),
            m("caches of another head dim", "q_k_head_dims_match", key_cache=lambda: t(BLOCKS, BS, KVH, 64), value_cache=lambda: t(BLOCKS, BS, KVH, 64)),
            m("key cache of another head dim beside a right value cache", "q_k_head_dims_match", says="head dim of key", key_cache=lambda: t(BLOCKS, BS, KVH, 64)),
            m("value cache of another head dim beside a right key cache", "q_k_head_dims_match", says="head dim of value", value_cache=lambda: t(BLOCKS, BS, KVH, 64)),
            m("key cache viewed (blocks, block_size, N*D) beside a 4-D value cache", "caches_match", key_cache=lambda: t(BLOCKS, BS, KVH * D)),
        )
    else:
        found += (
            m("value cache of another block size", "caches_match", value_cache=lambda: t(BLOCKS, KVH, D // 16, 64, 16)),
            m("caches with the query's heads", "head_count_matches", key_cache=lambda: t(BLOCKS, H, D // 16, BS, 16), value_cache=lambda: t(BLOCKS, H, D // 16, BS, 16)),
            m("value cache of another head dim", "q_k_head_dims_match", value_cache=lambda: t(BLOCKS, KVH, 64 // 16, BS, 16)),
        )
    return found


def _reshape_and_cache() -> Case:
    def build() -> tuple:  # vllm-ascend device_op.reshape_and_cache: all by keyword, ND caches
        return (), {"key": t(12, KVH, D), "value": t(12, KVH, D), "key_cache": t(BLOCKS, BS, KVH, D), "value_cache": t(BLOCKS, BS, KVH, D), "slot_indices": t(12, dtype=I32)}
    return Case(VA + "device_op.reshape_and_cache", build, _cache_write_mutations("slot_indices", nd=True))


def _scatter_pa_kv_cache() -> tuple:
    def nz() -> tuple:  # vllm-ascend attention_v1 NZ write: 5-D views, cache_mode left at PA_NZ
        cache = (BLOCKS, KVH, D // 16, BS, 16)
        return (), {"key": t(12, KVH, D), "value": t(12, KVH, D), "key_cache": t(*cache), "value_cache": t(*cache), "slot_mapping": t(12, dtype=I32)}

    def norm() -> tuple:  # sglang memory_pool_npu set_kv_buffer: ND views, cache_mode="Norm", positional
        return (t(12, KVH, D), t(12, KVH, D), t(BLOCKS, BS, KVH, D), t(BLOCKS, BS, KVH, D), t(12, dtype=I32)), {"cache_mode": "Norm"}
    def nz_4d() -> tuple:  # the docstring's example (scenario 1): K and V head dims differ, cache_mode left at PA_NZ, positional
        return (t(16, 4, 32, dtype=F16), t(16, 4, 64, dtype=F16), t(2, 4 * 32 // 16, 32, 16, dtype=F16), t(2, 4 * 64 // 16, 32, 16, dtype=F16), t(16, dtype=I32)), {}

    def compressed() -> tuple:  # scenario 3: (batch, seq, heads, D) K/V, one slot per batch and head, compress_lens/seq_lens
        return (t(2, 6, KVH, D), t(2, 6, KVH, D), t(BLOCKS, BS, 1, D), t(BLOCKS, BS, 1, D), t(2, KVH, dtype=I32)), {
            "compress_lens": t(2, KVH, dtype=I32), "compress_seq_offsets": t(2 * KVH, dtype=I32), "seq_lens": t(2, dtype=I32)}

    def mode(cache_mode: str, nd: bool) -> Callable[[], tuple]:
        cache = (BLOCKS, BS, KVH, D) if nd else (BLOCKS, KVH, D // 16, BS, 16)
        return lambda: ((), {"key": t(12, KVH, D), "value": t(12, KVH, D), "key_cache": t(*cache), "value_cache": t(*cache), "slot_mapping": t(12, dtype=I32), "cache_mode": cache_mode})
    return (
        Case(VA + "attention_v1 NZ write path (_nz_5d_view)", nz, _cache_write_mutations("slot_mapping", nd=False)),
        Case(SG + "memory_pool_npu.set_kv_buffer (scatter_pa, Norm)", norm, _cache_write_mutations("slot_mapping", nd=True)),
        Case("torch_npu npu_scatter_pa_kv_cache docstring example: 4-D NZ caches (blocks, N*D/16, block_size, 16), as vllm-ascend mooncake_connector._nz_kv_cache writes them", nz_4d, (
            m("value cache of another block size", "caches_match", value_cache=lambda: t(2, 4 * 64 // 16, 16, 16, dtype=F16)),
            m("value trimmed without key", "k_v_token_counts_match", value=lambda: t(15, 4, 64, dtype=F16)),
            m("slots of another batch", "slot_count_matches", slot_mapping=lambda: t(15, dtype=I32)),
        )),
        Case("torch_npu npu_scatter_pa_kv_cache docstring, scenario 3 (compressed per-head writes: batch, seq and heads compared, the rest the kernel's)", compressed, (
            m("value of another sequence length", "k_v_token_counts_match", value=lambda: t(2, 5, KVH, D)),
            m("value with more heads", "k_v_head_counts_match", value=lambda: t(2, 6, 4, D)),
        ), unjudged="4-D key/value"),
        Case("torch_npu npu_scatter_pa_kv_cache with a cache_mode its docstring does not list ('PA', npu_kv_rmsnorm_rope_cache's): the kernel judges it", mode("PA", nd=True), (), unjudged="cache_mode='PA'"),
        Case("torch_npu npu_scatter_pa_kv_cache: 5-D NZ views with cache_mode='Norm' (ND only, its docstring): the kernel judges it", mode("Norm", nd=False), (), unjudged="5-D caches with cache_mode='Norm'"),
    )


def _gather() -> Case:
    def build() -> tuple:  # vllm-ascend mooncake_connector _transfer_kv_cache (gather into buffers)
        return (t(BLOCKS, BS, KVH, D), t(BLOCKS, BS, KVH, D), t(2, 4, dtype=I32), t(2, dtype=I32)), {
            "seq_offset": t(2, dtype=I32), "key": t(400, KVH, D), "value": t(400, KVH, D)}
    return Case(VA + "mooncake_connector._transfer_kv_cache (gather)", build, (
        m("block tables missing", "arguments_are_tensors", block_tables=lambda: None),
        m("value cache on another card", "one_device_of_type", value_cache=lambda: t(BLOCKS, BS, KVH, D, index=1)),
        m("value cache from another pool", "caches_match", value_cache=lambda: t(BLOCKS + 1, BS, KVH, D)),
        m("value buffer truncated", "k_v_token_counts_match", value=lambda: t(399, KVH, D)),
        m("block tables flattened", "block_table_shape", block_tables=lambda: t(8, dtype=I32)),
    ))


def _paged_cache_load() -> Case:
    def build() -> tuple:  # vllm-ascend mooncake_connector: caches, table, lengths, seq_starts, key/value buffers
        return (t(BLOCKS, BS, KVH, D), t(BLOCKS, BS, KVH, D), t(2, 4, dtype=I32), t(2, dtype=I32)), {
            "seq_starts": t(2, dtype=I32), "key": t(400, KVH, D), "value": t(400, KVH, D)}
    return Case(VA + "mooncake_connector (paged_cache_load into buffers)", build, (
        m("block table missing", "arguments_are_tensors", block_table=lambda: None),
        m("value cache on another card", "one_device_of_type", value_cache=lambda: t(BLOCKS, BS, KVH, D, index=1)),
        m("value cache from another pool", "caches_match", value_cache=lambda: t(BLOCKS + 1, BS, KVH, D)),
        m("value buffer truncated", "k_v_token_counts_match", value=lambda: t(399, KVH, D)),
        m("block table flattened", "block_table_shape", block_table=lambda: t(8, dtype=I32)),
    ), overload="out")  # the packet called with key=/value= is read by the .default schema, which lacks them


def _mla_cache_mutations(first: str, second: str, shapes: tuple) -> tuple:
    (fb, fs, fn, fd), (_, _, _, sd) = shapes
    return (
        m(f"{second} missing", "arguments_are_tensors", **{second: lambda: None}),
        m(f"{second} on another card", "one_device_of_type", **{second: lambda: t(fb, fs, fn, sd, index=1)}),
        m(f"{second} from another pool", "caches_match", **{second: lambda: t(fb - 1, fs, fn, sd)}),
        m(f"{second} of another block size", "caches_match", **{second: lambda: t(fb, fs // 2, fn, sd)}),
        m(f"{first} with more KV heads", "caches_match", **{first: lambda: t(fb, fs, fn + 1, fd)}),
    )


def _rope_cache(site: str, v2: bool) -> Case:
    shapes = ((BLOCKS, BS, 1, 64), (BLOCKS, BS, 1, 512))

    def build() -> tuple:  # vllm-ascend mla_v1.exec_kv_decode: kv (B, 1, 1, 576), caches (blocks, block_size, 1, 64 / 512)
        return (t(4, 1, 1, 576), t(512), t(4, 1, 1, 64), t(4, 1, 1, 64), t(4, dtype=I64), t(*shapes[0]), t(*shapes[1])), {"epsilon": 1e-6, "cache_mode": "PA_BNSD" if v2 else "PA"}
    return Case(site, build, _mla_cache_mutations("k_cache", "ckv_cache", shapes))


def _rope_cache_unknown_mode() -> Case:
    def build() -> tuple:  # a cache_mode the docstring does not list (PA_BSND is the prolog's): the kernel judges it
        return (t(4, 1, 1, 576), t(512), t(4, 1, 1, 64), t(4, 1, 1, 64), t(4, dtype=I64), t(BLOCKS, BS, 1, 64), t(BLOCKS, BS // 2, 1, 512)), {"epsilon": 1e-6, "cache_mode": "PA_BSND"}
    return Case("torch_npu npu_kv_rmsnorm_rope_cache with a cache_mode its docstring does not list", build, (), unjudged="cache_mode='PA_BSND'")


def _mla_prolog(site: str, v3: bool) -> Case:
    shapes = ((BLOCKS, BS, 1, 512), (BLOCKS, BS, 1, 64))

    def build() -> tuple:  # DeepSeek MLA prolog, PA_BSND caches (BlockNum, BlockSize, Nkv, Hckv / Dr)
        weights = (t(8, 1024), t(1024, 256), t(256, 4 * 192), t(4, 128, 512), t(1024, 576), t(256), t(512), t(8, 64), t(8, 64))
        if v3:
            return (), dict(zip(("token_x", "weight_dq", "weight_uq_qr", "weight_uk", "weight_dkv_kr", "rmsnorm_gamma_cq", "rmsnorm_gamma_ckv", "rope_sin", "rope_cos"), weights),
                            kv_cache=t(*shapes[0]), kr_cache=t(*shapes[1]), cache_index=t(8, dtype=I64), cache_mode="PA_BSND")
        return (*weights, t(8, dtype=I64), t(*shapes[0]), t(*shapes[1])), {"cache_mode": "PA_BSND"}
    return Case(site, build, _mla_cache_mutations("kv_cache", "kr_cache", shapes))


def _mla_prolog_v3_variant(kind: str) -> Case:
    """v3 with ckvkr_repo_mode=1 (rope stored in kv_cache; kr_cache an empty placeholder), or a mode
    or cache_mode its docstring does not list (left to the kernel)."""
    def build() -> tuple:
        weights = (t(8, 1024), t(1024, 256), t(256, 4 * 192), t(4, 128, 512), t(1024, 576), t(256), t(512), t(8, 64), t(8, 64))
        named = dict(zip(("token_x", "weight_dq", "weight_uq_qr", "weight_uk", "weight_dkv_kr", "rmsnorm_gamma_cq", "rmsnorm_gamma_ckv", "rope_sin", "rope_cos"), weights))
        if kind == "packed":  # vllm-ascend device_op SFA C8 prolog (sfa_v1's kr_cache dummy), sglang mla_preprocess
            return (), dict(named, kv_cache=t(BLOCKS, BS, 1, 656, dtype=I8), kr_cache=t(0), cache_index=t(8, dtype=I64), cache_mode="PA_BSND", ckvkr_repo_mode=1)
        mode = {"repo_mode": ("PA_BSND", 2), "cache_mode": ("PA_BLK_BSND", 0)}[kind]
        return (), dict(named, kv_cache=t(BLOCKS, BS, 1, 512), kr_cache=t(BLOCKS, BS, 1, 64), cache_index=t(8, dtype=I64), cache_mode=mode[0], ckvkr_repo_mode=mode[1])
    if kind == "packed":
        return Case(VA + "device_op SFA C8 mla_prolog_v3 (ckvkr_repo_mode=1, empty kr_cache)", build, (
            m("kv_cache missing", "arguments_are_tensors", kv_cache=lambda: None),
            m("kv_cache left on the host", "one_device_of_type", kv_cache=lambda: torch.zeros(BLOCKS, BS, 1, 656, dtype=I8)),
        ))
    unjudged = "ckvkr_repo_mode=2" if kind == "repo_mode" else "cache_mode='PA_BLK_BSND'"
    return Case(f"torch_npu npu_mla_prolog_v3 with a {kind} its docstring does not list (the kernel judges it)", build, (), unjudged=unjudged)


def _kv_quant_sparse() -> Case:
    packed = (BLOCKS, BS, 1, 656)

    def build() -> tuple:  # sglang forward_sparse (fp8 KV): one packed cache passed as key and value
        cache = t(*packed, dtype=I8)
        return (), {"query": t(4, 16, 576), "key": cache, "value": cache, "sparse_indices": t(4, 1, 64, dtype=I32), "scale_value": 0.07, "key_quant_mode": 2, "value_quant_mode": 2,
                        "block_table": t(4, 2, dtype=I32), "sparse_block_size": 1, "layout_query": "TND", "layout_kv": "PA_BSND"}
    return Case(SG + "ascend_backend.forward_sparse (fp8 KV)", build, (
        m("value missing", "arguments_are_tensors", value=lambda: None),
        m("value on another card", "one_device_of_type", value=lambda: t(*packed, dtype=I8, index=1)),
        m("value flattened", "rank_matches_layout", value=lambda: t(BLOCKS, BS, 656, dtype=I8)),
        m("value cache from another pool", "k_v_token_counts_match", value=lambda: t(BLOCKS - 1, BS, 1, 656, dtype=I8)),
        m("value cache with more heads", "k_v_head_counts_match", value=lambda: t(BLOCKS, BS, 2, 656, dtype=I8)),
    ))


def _kv_quant_sparse_unknown_layout() -> Case:
    packed = (2, 64, 1, 656)

    def build() -> tuple:  # layout_kv BNSD, which its docstring does not list (TND, BSND, PA_BSND): the kernel judges it
        cache = t(*packed, dtype=I8)
        return (), {"query": t(2, 1, 16, 576), "key": cache, "value": cache, "sparse_indices": t(2, 1, 1, 64, dtype=I32), "scale_value": 0.07, "key_quant_mode": 2, "value_quant_mode": 2,
                    "sparse_block_size": 1, "layout_query": "BSND", "layout_kv": "BNSD"}
    return Case("torch_npu npu_kv_quant_sparse_flash_attention with a layout_kv its docstring does not list", build, (
        m("value missing", "arguments_are_tensors", value=lambda: None),
    ), unjudged="layout_kv='BNSD'")


def _sparse() -> tuple:
    def paged() -> tuple:  # sglang forward_sparse: latent cache as key and value, rope cache as key_rope
        latent = t(BLOCKS, BS, 1, 512)
        return (), {"query": t(4, 16, 512), "key": latent, "value": latent, "query_rope": t(4, 16, 64), "key_rope": t(BLOCKS, BS, 1, 64), "sparse_indices": t(4, 1, 64, dtype=I32),
                        "scale_value": 0.07, "block_table": t(4, 2, dtype=I32), "sparse_block_size": 1, "layout_query": "TND", "layout_kv": "PA_BSND"}

    def gathered() -> tuple:  # sglang sparsity_driven_kv_offload: gathered tokens, BSND
        latent = t(2, 64, 1, 512)
        return (), {"query": t(2, 1, 16, 512), "key": latent, "value": latent, "query_rope": t(2, 1, 16, 64), "key_rope": t(2, 64, 1, 64), "sparse_indices": t(2, 1, 1, 64, dtype=I32),
                        "scale_value": 0.07, "layout_query": "BSND", "layout_kv": "BSND"}

    def without(*names: str) -> tuple:  # the gathered call with optional tensors passed as None
        args, kwargs = gathered()
        return args, {**kwargs, **dict.fromkeys(names)}
    return (
        Case(SG + "ascend_backend.forward_sparse (PA_BSND)", paged, (
            m("key missing", "arguments_are_tensors", key=lambda: None),
            m("rope cache on another card", "one_device_of_type", key_rope=lambda: t(BLOCKS, BS, 1, 64, index=1)),
            m("rope cache flattened", "rank_matches_layout", key_rope=lambda: t(BLOCKS, BS, 64)),
            m("rope cache from another pool", "caches_match", key_rope=lambda: t(BLOCKS - 1, BS, 1, 64)),
            m("rope cache of another block size", "caches_match", key_rope=lambda: t(BLOCKS, BS // 2, 1, 64)),
        )),
        Case(SG + "sparsity_driven_kv_offload attention (BSND)", gathered, (
            m("value of another rank", "rank_matches_layout", value=lambda: t(2, 64, 512)),
            m("value gathered for fewer tokens", "k_v_token_counts_match", value=lambda: t(2, 63, 1, 512)),
            m("value with more heads", "k_v_head_counts_match", value=lambda: t(2, 64, 2, 512)),
            m("rope part gathered for fewer tokens", "k_v_token_counts_match", key_rope=lambda: t(2, 63, 1, 64)),
            m("rope part with more heads", "k_v_head_counts_match", key_rope=lambda: t(2, 64, 2, 64)),
        )),
        Case("torch_npu npu_sparse_flash_attention schema: value=None (Tensor? value; V read from the latent key), BSND", lambda: without("value"), (
            m("rope part gathered for fewer tokens", "k_v_token_counts_match", key_rope=lambda: t(2, 63, 1, 64)),
        )),
        Case("torch_npu npu_sparse_flash_attention docstring: query_rope/key_rope None (optional: no rope part), BSND", lambda: without("query_rope", "key_rope"), (
            m("value gathered for fewer tokens", "k_v_token_counts_match", value=lambda: t(2, 63, 1, 512)),
        )),
    )


def _single_cache(site: str, slot_arg: str, build: Callable[[], tuple]) -> Case:
    return Case(site, build, (
        m("key cache missing", "arguments_are_tensors", key_cache=lambda: None),
        m("key cache on another card", "one_device_of_type", key_cache=lambda: t(BLOCKS, BS, 1, 128, index=1)),
        m("slots of another batch", "slot_count_matches", **{slot_arg: lambda: t(11, dtype=I32)}),
    ))


def _paged_mla() -> Case:
    cache = (BLOCKS, BS, 1, 576)

    def build() -> tuple:  # sglang forward_decode MLA outside graph mode: one latent+rope cache, host lengths
        return (), {"query": t(4, 16, 576), "key_cache": t(*cache), "num_kv_heads": 1, "num_heads": 16, "scale_value": 0.07, "block_table": t(4, 4, dtype=I32),
                        "context_lens": host(100, 50, 7, 4 * BS), "mla_vheadsize": 512, "out": t(4, 16, 512)}
    return Case(SG + "ascend_backend.forward_decode (MLA, _npu_paged_attention_mla)", build, (
        m("block table missing", "arguments_are_tensors", block_table=lambda: None),
        m("cache on another card", "one_device_of_type", key_cache=lambda: t(*cache, index=1)),
        m("query left 4-D", "rank_matches_layout", query=lambda: t(4, 1, 16, 576)),
        m("query without its rope part", "q_k_head_dims_match", query=lambda: t(4, 16, 512)),
        m("num_heads before the TP split", "head_count_matches", num_heads=lambda: 32),
        m("num_kv_heads as a float", "argument_types", num_kv_heads=lambda: 1.0),
        m("cache with heads that do not divide the query's", "kv_heads_divide_q_heads", key_cache=lambda: t(BLOCKS, BS, 3, 576), num_kv_heads=lambda: 3),
        m("block table of another batch", "block_table_shape", block_table=lambda: t(3, 4, dtype=I32)),
        m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: host(100, 50, 7, 4 * BS + 1)),
        m("context lengths as a 2-D device tensor", "length_tensor_shape", context_lens=lambda: t(4, 1, dtype=I32)),
    ))


def _ring_mla() -> Case:
    def build() -> tuple:  # torch_npu.atb.npu_ring_mla docstring shapes: (tokens, heads, 128 / 64 / 128)
        return (t(6, 4, 128), t(6, 4, 64), t(6, 4, 128), t(6, 4, 64), t(6, 4, 128), t(512, 512), host(6), 4, 4), {}
    return Case("torch_npu.atb.npu_ring_mla docstring", build, (
        m("value missing", "arguments_are_tensors", value=lambda: None),
        m("value on another card", "one_device_of_type", value=lambda: t(6, 4, 128, index=1)),
        m("value of a trimmed chunk", "k_v_token_counts_match", value=lambda: t(5, 4, 128)),
        m("rope part of a trimmed chunk", "k_v_token_counts_match", k_rope=lambda: t(5, 4, 64)),
        m("value with fewer heads", "k_v_head_counts_match", value=lambda: t(6, 2, 128)),
    ))


def _ring_mla_bsnd() -> Case:
    def build() -> tuple:  # (batch, seq, heads, D) tensors with input_layout='type_bsnd' (the docstring's shapes are 3-D)
        return (t(2, 3, 4, 128), t(2, 3, 4, 64), t(2, 3, 4, 128), t(2, 3, 4, 64), t(2, 3, 4, 128), t(512, 512), host(3, 3), 4, 4), {"input_layout": "type_bsnd"}
    return Case("torch_npu.atb.npu_ring_mla over 4-D K/V (not the docstring's (tokens, heads, D)): the kernel judges it", build, (), unjudged="K/V that are not (tokens, heads, D)")


def _latent() -> Case:
    def build() -> tuple:  # torch_npu.atb.npu_multi_head_latent_attention docstring, krope_ctkv caches
        return (t(4, 8, 512), t(4, 8, 64), t(16, 32, 1, 512), t(16, 32, 1, 64), t(4, 4, dtype=I32), [10, 20, 128, 1], 8, 1.0, 1), {}
    return Case("torch_npu.atb.npu_multi_head_latent_attention docstring", build, (
        m("rope cache missing", "arguments_are_tensors", k_rope=lambda: None),
        m("rope cache on another card", "one_device_of_type", k_rope=lambda: t(16, 32, 1, 64, index=1)),
        m("rope cache from another pool", "caches_match", k_rope=lambda: t(15, 32, 1, 64)),
        m("rope cache of another block size", "caches_match", k_rope=lambda: t(16, 16, 1, 64)),
        m("block table flattened", "block_table_shape", block_tables=lambda: t(16, dtype=I32)),
        m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: [10, 20, 4 * 32 + 1, 1]),
        m("context lengths missing", "argument_types", context_lens=lambda: None),
    ))


def _latent_variant(kind: str) -> Case:
    """The docstring's 'int8_nzcache' form (int8 ctkv (blocks, kv_heads*512/32, block_size, 32), k_rope
    (blocks, kv_heads*64/16, block_size, 16): the block size on axis 2), or a call the kernel judges: a
    cache_mode the docstring does not list (ATB's 'nzcache'), or 3-D caches."""
    def build() -> tuple:
        tables, lens = t(4, 4, dtype=I32), [10, 20, 128, 1]
        if kind == "int8_nzcache":
            return (t(4, 8, 512, dtype=I8), t(4, 8, 64, dtype=F16), t(16, 512 // 32, 32, 32, dtype=I8), t(16, 64 // 16, 32, 16, dtype=F16), tables, lens, 8, 1.0, 1), {
                "cache_mode": "int8_nzcache", "qk_descale": t(8, dtype=F32), "pv_descale": t(8, dtype=F32)}
        if kind == "nzcache":
            return (t(4, 8, 512, dtype=F16), t(4, 8, 64, dtype=F16), t(16, 512 // 16, 32, 16, dtype=F16), t(16, 64 // 16, 32, 16, dtype=F16), tables, lens, 8, 1.0, 1), {"cache_mode": "nzcache"}
        return (t(4, 8, 512), t(4, 8, 64), t(16, 32, 512), t(16, 32, 64), tables, lens, 8, 1.0, 1), {}  # kv_heads (1) squeezed out
    if kind == "int8_nzcache":
        return Case("torch_npu.atb.npu_multi_head_latent_attention docstring, cache_mode='int8_nzcache'", build, (
            m("rope cache of another block size", "caches_match", k_rope=lambda: t(16, 64 // 16, 16, 16, dtype=F16)),
            m("context length past the row's blocks", "per_sequence_lengths_fit", context_lens=lambda: [10, 20, 4 * 32 + 1, 1]),
        ))
    unjudged = "cache_mode='nzcache'" if kind == "nzcache" else "3-D ctkv and 3-D k_rope"
    return Case(f"torch_npu.atb.npu_multi_head_latent_attention with {unjudged} (not the docstring's forms): the kernel judges it", build, (), unjudged=unjudged)


def _prefix_encoder() -> Case:
    def build() -> tuple:  # torch_npu.atb.npu_self_attention_prefix_encoder docstring: (blocks, block_size, N, D) caches
        return (t(64, 4, 32), t(8, 16, 4, 32), t(8, 16, 4, 32), t(2, 4, dtype=I32), [32, 32], [32, 48], 4, 0.1, 4), {}
    return Case("torch_npu.atb.npu_self_attention_prefix_encoder docstring", build, (
        m("value cache missing", "arguments_are_tensors", value=lambda: None),
        m("value cache on another card", "one_device_of_type", value=lambda: t(8, 16, 4, 32, index=1)),
        m("value cache flattened to (blocks, block_size, H)", "rank_matches_layout", says="(blocks, block_size, N, D), as key is", value=lambda: t(8, 16, 128)),
        m("value cache from another pool", "caches_match", value=lambda: t(7, 16, 4, 32)),
        m("value cache of another block size", "caches_match", value=lambda: t(8, 8, 4, 32)),
        m("value cache with fewer KV heads", "caches_match", value=lambda: t(8, 16, 2, 32)),
        m("block table flattened", "block_table_shape", block_tables=lambda: t(8, dtype=I32)),
        m("K/V length past the row's blocks", "per_sequence_lengths_fit", kv_seqlen=lambda: [32, 4 * 16 + 1]),
    ))


def _prefix_encoder_hidden() -> Case:
    def build() -> tuple:  # the same docstring's other cache form, (numBlocks, blockSize, H)
        return (t(64, 4, 32), t(8, 16, 128), t(8, 16, 128), t(2, 4, dtype=I32), [32, 32], [32, 48], 4, 0.1, 4), {}
    return Case("torch_npu.atb.npu_self_attention_prefix_encoder docstring, (blocks, block_size, H) caches", build, (
        m("value cache left 4-D", "rank_matches_layout", says="(blocks, block_size, H), as key is", value=lambda: t(8, 16, 4, 32)),
        m("value cache of another block size", "caches_match", value=lambda: t(8, 8, 128)),
        m("K/V length past the row's blocks", "per_sequence_lengths_fit", kv_seqlen=lambda: [32, 4 * 16 + 1]),
    ))


def _prefix_encoder_unknown_form() -> Case:
    def build() -> tuple:  # 5-D caches (an NZ view such as other ops take), a form its docstring does not list: the kernel judges it
        return (t(64, 4, 32), t(8, 4, 2, 16, 16), t(8, 4, 2, 16, 16), t(2, 4, dtype=I32), [32, 32], [32, 48], 4, 0.1, 4), {}
    return Case("torch_npu.atb.npu_self_attention_prefix_encoder with 5-D caches its docstring does not list", build, (
        m("value cache missing", "arguments_are_tensors", value=lambda: None),
    ), unjudged="5-D key cache")


# The K/V ops other packages register (ops.PACKAGE_ROWS). vllm-ascend's torch.ops._C_ascend.* as its
# device_op (execute_sparse_flash_attention_process, execute_kv_quant_sparse_flash_attention, the
# indexer step) calls them: keywords only, TND query, paged PA_BSND caches. custom_ops'
# torch.ops.custom.* take the same tensors, with sparse_block_size (and the antiquant op's quant
# modes) positional, as their schemas require.
LATENT, ROPE, PACKED = (BLOCKS, BS, 1, 512), (BLOCKS, BS, 1, 64), (BLOCKS, BS, 1, 656)
IDX_HEADS, IDX_D = 64, 128


def _package_call(namespace: str, tensors: dict, positional: tuple, kwargs: dict) -> tuple:
    """_C_ascend: everything by keyword; custom: the schema's leading arguments by position."""
    if namespace == "_C_ascend":
        return (), {**tensors, **kwargs}
    return (*tensors.values(), *positional), kwargs


def _package_sparse(namespace: str) -> Case:
    def build() -> tuple:  # the latent cache passed as key and value, its rope part as key_rope
        cache = t(*LATENT)
        tensors = {"query": t(4, 16, 512), "key": cache, "value": cache, "sparse_indices": t(4, 1, 64, dtype=I32), "scale_value": 0.07}
        lengths = {"block_table": t(4, 2, dtype=I32), "actual_seq_lengths_query": t(4, dtype=I32), "actual_seq_lengths_kv": t(4, dtype=I32)}
        paged = {**lengths, "query_rope": t(4, 16, 64), "key_rope": t(*ROPE), "layout_query": "TND", "layout_kv": "PA_BSND", "sparse_mode": 3}
        if namespace == "_C_ascend":
            return _package_call(namespace, tensors, (), {**paged, "sparse_block_size": 1, "attention_mode": 2})
        return _package_call(namespace, tensors, (1,), paged)
    site = VA + "device_op.execute_sparse_flash_attention_process" if namespace == "_C_ascend" else "custom_ops schema custom::npu_sparse_flash_attention (vllm-ascend's call shapes)"
    return Case(site, build, (
        m("key missing", "arguments_are_tensors", key=lambda: None),
        m("value cache on another card", "one_device_of_type", value=lambda: t(*LATENT, index=1)),
        m("value cache flattened", "rank_matches_layout", value=lambda: t(BLOCKS, BS, 512)),
        m("value cache from another pool", "k_v_token_counts_match", value=lambda: t(BLOCKS - 1, BS, 1, 512)),
        m("value cache with more heads", "k_v_head_counts_match", value=lambda: t(BLOCKS, BS, 2, 512)),
        m("rope cache from another pool", "caches_match", key_rope=lambda: t(BLOCKS - 1, *ROPE[1:])),
        m("rope cache of another block size", "caches_match", key_rope=lambda: t(BLOCKS, BS // 2, 1, 64)),
    ))


def _package_kv_quant_sparse(namespace: str) -> Case:
    def build() -> tuple:  # C8: one packed int8 cache (latent and rope) passed as key and value
        cache = t(*PACKED, dtype=I8)
        tensors = {"query": t(4, 16, 576), "key": cache, "value": cache, "sparse_indices": t(4, 1, 64, dtype=I32), "scale_value": 0.07}
        paged = {"block_table": t(4, 2, dtype=I32), "actual_seq_lengths_query": t(4, dtype=I32), "actual_seq_lengths_kv": t(4, dtype=I32), "layout_query": "TND", "layout_kv": "PA_BSND"}
        if namespace == "_C_ascend":
            return _package_call(namespace, tensors, (), {**paged, "sparse_block_size": 1, "key_quant_mode": 2, "value_quant_mode": 2, "quant_scale_repo_mode": 1, "rope_head_dim": 64})
        return _package_call(namespace, tensors, (1, 2, 2), {**paged, "quant_scale_repo_mode": 1, "rope_head_dim": 64})
    site = VA + "device_op.execute_kv_quant_sparse_flash_attention" if namespace == "_C_ascend" else "custom_ops schema custom::npu_sparse_flash_attention_antiquant (vllm-ascend's call shapes)"
    return Case(site, build, (
        m("value missing", "arguments_are_tensors", value=lambda: None),
        m("value on another card", "one_device_of_type", value=lambda: t(*PACKED, dtype=I8, index=1)),
        m("value flattened", "rank_matches_layout", value=lambda: t(BLOCKS, BS, 656, dtype=I8)),
        m("value cache from another pool", "k_v_token_counts_match", value=lambda: t(BLOCKS - 1, BS, 1, 656, dtype=I8)),
        m("value cache with more heads", "k_v_head_counts_match", value=lambda: t(BLOCKS, BS, 2, 656, dtype=I8)),
    ))


def _package_indexer(namespace: str, quant: bool) -> Case:
    dtype = I8 if quant else BF16
    index_cache = (BLOCKS, BS, 1, IDX_D)

    def build() -> tuple:  # index query (T, N, D) scored against the paged index-key cache
        tensors = {"query": t(4, IDX_HEADS, IDX_D, dtype=dtype), "key": t(*index_cache, dtype=dtype), "weights": t(4, IDX_HEADS, dtype=F16 if quant else BF16)}
        if quant:
            tensors.update(query_dequant_scale=t(4, IDX_HEADS, dtype=F16), key_dequant_scale=t(BLOCKS, BS, 1, dtype=F16))
        paged = {"actual_seq_lengths_query": t(4, dtype=I32), "actual_seq_lengths_key": t(4, dtype=I32), "block_table": t(4, 2, dtype=I32), "layout_query": "TND", "layout_key": "PA_BSND", "sparse_count": 2048, "sparse_mode": 3}
        return _package_call(namespace, tensors, (), paged)
    op = "npu_lightning_indexer_quant" if quant else "npu_lightning_indexer"
    site = VA + f"device_op indexer step ({op})" if namespace == "_C_ascend" else f"custom_ops schema custom::{op} (vllm-ascend's call shapes)"
    return Case(site, build, (
        m("index key missing", "arguments_are_tensors", key=lambda: None),
        m("index key cache on another card", "one_device_of_type", key=lambda: t(*index_cache, dtype=dtype, index=1)),
        m("index key cache flattened", "rank_matches_layout", key=lambda: t(BLOCKS, BS, IDX_D, dtype=dtype)),
        m("index key of another head dim", "q_k_head_dims_match", key=lambda: t(BLOCKS, BS, 1, IDX_D // 2, dtype=dtype)),
        m("index key heads that do not divide the query's", "kv_heads_divide_q_heads", key=lambda: t(BLOCKS, BS, 3, IDX_D, dtype=dtype)),
        m("paged index key without its block table", "block_table_shape", block_table=lambda: None),
        m("block table flattened", "block_table_shape", block_table=lambda: t(8, dtype=I32)),
    ))


def _package_indexer_unknown_layout(namespace: str) -> Case:
    def build() -> tuple:  # layout_key BNSD, which the op does not list (PA_BSND, BSND, TND): the kernel judges it
        tensors = {"query": t(2, 1, IDX_HEADS, IDX_D), "key": t(2, 1, 64, IDX_D), "weights": t(2, 1, IDX_HEADS)}
        return _package_call(namespace, tensors, (), {"layout_query": "BSND", "layout_key": "BNSD", "sparse_count": 2048, "sparse_mode": 3})
    return Case(f"{namespace} npu_lightning_indexer with a layout_key torch_npu's docstring of the op does not list", build, (
        m("index key missing", "arguments_are_tensors", key=lambda: None),
    ), unjudged="layout_key='BNSD'")


def _siso() -> tuple:
    return (t(12, 1, 128), t(BLOCKS, BS, 1, 128), t(12, dtype=I32)), {}


def _scatter_pa_cache() -> tuple:
    return (t(12, 1, 128), t(12, dtype=I32)), {"key_cache": t(BLOCKS, BS, 1, 128)}


def _scatter_pa_cache_compressed() -> Case:
    def build() -> tuple:  # (batch, seq, heads, D) key, a (batch, heads) slot_mapping with compress_lens/seq_lens
        return (t(2, 6, KVH, 128), t(2, KVH, dtype=I32)), {"key_cache": t(BLOCKS, BS, 1, 128), "compress_lens": t(2, KVH, dtype=I32),
                                                         "compress_seq_offsets": t(2 * KVH, dtype=I32), "seq_lens": t(2, dtype=I32)}
    return Case("torch_npu schema npu_scatter_pa_cache.value, compressed scenario (shapes of npu_scatter_pa_kv_cache's scenario 3): the kernel judges it",
                build, (), unjudged="2-D slot_mapping")


CASES: dict = {
    ("npu", "npu_fusion_attention"): _fusion_attention() + _fusion_attention_host_forms() + (_fusion_attention_meta(),),
    ("npu", "npu_fused_infer_attention_score"): (_fia(VA + "attention_v1._get_fia_params (paged TND)", "TND"), _fia(SG + "ascend_backend.forward_extend (BSND)", "BSND"), _fia_paged_heads(), _fia_paged_nz(), _fia_c8(), _fia_nsd(), _fia_unknown_paged_form(),
                                                 _fia_numpy_heads(paged=False), _fia_numpy_heads(paged=True), _fia_numpy_ends(empty=False), _fia_numpy_ends(empty=True)),
    ("npu", "npu_fused_infer_attention_score_v2"): (_fia_v2(VA + "FIA v2 over paged caches (TND)", paged=True), _fia_v2(VA + "FIA v2 prefill over contiguous K/V (TND)", paged=False),
                                                    _fia_v2_device_lengths(paged=True), _fia_v2_device_lengths(paged=False)),
    ("npu", "npu_prompt_flash_attention"): (_prompt_flash(),),
    ("npu", "npu_incre_flash_attention"): (_incre_flash(),),
    ("atb", "_npu_flash_attention"): (_atb_flash(VA + "_310p attention_v1._flash_attention", mask=True), _atb_flash_hidden()),
    ("atb", "_npu_flash_attention_unpad"): (_atb_flash("torch_npu schema _npu_flash_attention_unpad (encoder path)", mask=False),),
    ("atb", "_npu_flash_attention_unpad_v2"): (_atb_flash("torch_npu schema _npu_flash_attention_unpad_v2", mask=False, kernel_type=0),),
    ("atb", "_npu_flash_attention_v3"): (_atb_flash(VA + "_310p attention_v1 compressed-mask path (_npu_flash_attention_v3)", mask=True, mask_type=3),),
    ("atb", "_npu_paged_attention"): (_paged_decode(), _paged_decode_nz(), _paged_decode_nz_ambiguous(64, 256, 64), _paged_decode_nz_ambiguous(4, 16, 128), _paged_decode_3d()),
    ("atb", "_npu_paged_attention_quant"): (_paged_quant(),),
    ("atb", "_npu_paged_attention_splitfuse"): (_chunked(VA + "_310p attention_v1 chunked prefill (splitfuse)"),),
    ("atb", "_npu_paged_attention_splitfuse_v2"): (_chunked("torch_npu schema _npu_paged_attention_splitfuse_v2"),),
    ("atb", "_npu_flash_attention_qlens"): (_chunked(SG + "ascend_backend.forward_extend (_npu_flash_attention_qlens, q.reshape(-1, N*D))", op_query_2d=True),),
    ("atb", "_npu_reshape_and_cache"): (_reshape_and_cache(),),
    ("npu", "npu_scatter_pa_kv_cache"): _scatter_pa_kv_cache(),
    ("npu", "npu_gather_pa_kv_cache"): (_gather(),),
    ("atb", "npu_paged_cache_load"): (_paged_cache_load(),),
    ("npu", "npu_kv_rmsnorm_rope_cache"): (_rope_cache(VA + "mla_v1.exec_kv_decode (PA)", v2=False), _rope_cache_unknown_mode()),
    ("npu", "npu_kv_rmsnorm_rope_cache_v2"): (_rope_cache(SG + "deepseek_v2_attention_mla_npu.forward_mla_prepare (PA_BNSD), v2 op", v2=True),),
    ("npu", "npu_mla_prolog_v2"): (_mla_prolog(VA + "device_op.mla_prolog_v2 (PA_BSND)", v3=False),),
    ("npu", "npu_mla_prolog_v3"): (_mla_prolog(SG + "mla_preprocess.forward_mlaprolog (PA_BSND)", v3=True), _mla_prolog_v3_variant("packed"),
                                   _mla_prolog_v3_variant("repo_mode"), _mla_prolog_v3_variant("cache_mode")),
    ("npu", "npu_kv_quant_sparse_flash_attention"): (_kv_quant_sparse(), _kv_quant_sparse_unknown_layout()),
    ("npu", "npu_scatter_pa_cache"): (_single_cache(VA + "minimax indexer cache write (npu_scatter_pa_cache)", "slot_mapping", _scatter_pa_cache), _scatter_pa_cache_compressed()),
    ("atb", "_npu_reshape_and_cache_siso"): (_single_cache("torch_npu schema _npu_reshape_and_cache_siso (one cache)", "slot_indices", _siso),),
    ("npu", "npu_sparse_flash_attention"): _sparse(),
    ("atb", "_npu_paged_attention_mla"): (_paged_mla(),),
    ("atb", "npu_ring_mla"): (_ring_mla(), _ring_mla_bsnd()),
    ("atb", "npu_multi_head_latent_attention"): (_latent(), _latent_variant("int8_nzcache"), _latent_variant("nzcache"), _latent_variant("3-D")),
    ("atb", "npu_self_attention_prefix_encoder"): (_prefix_encoder(), _prefix_encoder_hidden(), _prefix_encoder_unknown_form()),
    ("_C_ascend", "npu_sparse_flash_attention"): (_package_sparse("_C_ascend"),),
    ("_C_ascend", "npu_kv_quant_sparse_flash_attention"): (_package_kv_quant_sparse("_C_ascend"),),
    ("_C_ascend", "npu_lightning_indexer"): (_package_indexer("_C_ascend", quant=False), _package_indexer_unknown_layout("_C_ascend")),
    ("_C_ascend", "npu_lightning_indexer_quant"): (_package_indexer("_C_ascend", quant=True),),
    ("custom", "npu_sparse_flash_attention"): (_package_sparse("custom"),),
    ("custom", "npu_sparse_flash_attention_antiquant"): (_package_kv_quant_sparse("custom"),),
    ("custom", "npu_lightning_indexer"): (_package_indexer("custom", quant=False),),
    ("custom", "npu_lightning_indexer_quant"): (_package_indexer("custom", quant=True),),
}
