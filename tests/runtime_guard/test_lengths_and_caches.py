"""Sequence lengths (cumulative and per-sequence), paged attention, ATB ops and cache writes."""

from __future__ import annotations

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError
from tests.runtime_guard.calls import AttentionCase, narrowed
from tests.runtime_guard.conftest import npu

pytestmark = pytest.mark.usefixtures("guard")


def check_of(call) -> str:
    with pytest.raises(KVConsistencyError) as info:
        call()
    return info.value.check


def tnd(**changes) -> AttentionCase:
    case = AttentionCase("npu_fusion_attention", "TND", batch=3, seq=4)
    for name, value in changes.items():
        setattr(case, name, value)
    return case


def test_tnd_reference_output_is_unchanged_by_the_guard():
    case = tnd()
    guarded = case.call()[0]
    expected = torch_npu.reference_packed_attention(case.q, case.k, case.v, case.q_lens, case.kv_lens, 0.5)
    assert torch.equal(torch_npu.host(guarded), expected)


def test_tnd_trailing_eod_zeros_are_accepted():
    tnd(q_lens=[4, 8, 12, 0, 0], kv_lens=[4, 8, 12, 0, 0]).call()


def test_tnd_lengths_that_decrease_are_rejected():
    assert check_of(tnd(q_lens=[4, 3, 12]).call) == "cumulative_lengths_valid"


def test_tnd_lengths_ending_short_of_the_tokens_are_rejected():
    assert check_of(tnd(kv_lens=[4, 8, 11]).call) == "cumulative_lengths_valid"


def test_tnd_lengths_must_describe_the_same_batch():
    assert check_of(tnd(kv_lens=[8, 12]).call) == "same_batch"


def test_bsnd_per_sequence_lengths_must_fit_the_sequence_axis():
    case = AttentionCase("npu_prompt_flash_attention", "BSND", batch=2, seq=4)
    case.call()
    case.kv_lens = [4, 5]
    assert check_of(case.call) == "per_sequence_lengths_fit"


def test_bsnd_per_sequence_lengths_must_not_be_negative():
    case = AttentionCase("npu_prompt_flash_attention", "BSND")
    case.q_lens = [4, -1]
    assert check_of(case.call) == "per_sequence_lengths_fit"


def test_bsnd_query_and_key_batches_must_match():
    case = AttentionCase("npu_prompt_flash_attention", "BSND")
    case.k, case.v = narrowed(case.k, 0, 1), narrowed(case.v, 0, 1)
    assert check_of(case.call) == "q_kv_batches_match"


def paged_call(op="npu_fused_infer_attention_score", blocks=6, block_size=4, kv_heads=2, heads=4, dim=8, batch=2, table_cols=3, **changes):
    q = changes.get("q", npu(batch, 1, heads * dim))
    k = changes.get("k", npu(blocks, block_size, kv_heads * dim))
    v = changes.get("v", npu(blocks, block_size, kv_heads * dim))
    table = changes.get("block_table", npu(batch, table_cols, dtype=torch.int32))
    lens = changes.get("kv_lens", [5, 12])
    lens_arg = "actual_seq_lengths_kv" if op == "npu_fused_infer_attention_score" else "actual_seq_lengths"
    kwargs = {"num_heads": heads, "input_layout": "BSH", "num_key_value_heads": kv_heads, "block_table": table, "block_size": changes.get("declared_block_size", block_size), lens_arg: lens}
    return lambda: getattr(torch_npu, op)(q, k, v, **kwargs)


@pytest.mark.parametrize("op", ["npu_fused_infer_attention_score", "npu_incre_flash_attention"])
def test_paged_valid_call_passes(op):
    paged_call(op)()


def test_paged_caches_must_share_blocks():
    assert check_of(paged_call(v=npu(5, 4, 16))) == "caches_match"


def test_paged_block_size_must_match_the_cache():
    assert check_of(paged_call(declared_block_size=8)) == "block_size_matches"


def test_paged_block_table_needs_one_row_per_sequence():
    assert check_of(paged_call(block_table=npu(3, 3, dtype=torch.int32))) == "block_table_shape"


def test_paged_kv_lengths_must_fit_the_blocks_of_a_row():
    assert check_of(paged_call(kv_lens=[5, 13])) == "per_sequence_lengths_fit"


def test_paged_bnsd_cache_heads_must_match_declared_kv_heads():
    q = npu(2, 4, 1, 8)
    cache = npu(6, 2, 4, 8)
    table = npu(2, 3, dtype=torch.int32)
    call = lambda kv: torch_npu.npu_fused_infer_attention_score(q, cache, cache, num_heads=4, input_layout="BNSD", num_key_value_heads=kv, block_table=table, block_size=4)
    call(2)
    assert check_of(lambda: call(1)) == "head_count_matches"


def flash(q=None, k=None, v=None, seq_len=None, heads=4, kv_heads=2):
    q = npu(10, 4, 8) if q is None else q
    k = npu(10, 2, 8) if k is None else k
    v = npu(10, 2, 8) if v is None else v
    seq_len = npu(2, dtype=torch.int32) if seq_len is None else seq_len
    return lambda: torch_npu._npu_flash_attention(q, k, v, npu(1), seq_len, 0.3, heads, kv_heads, npu(10, 4, 8))


def test_atb_flash_attention_valid_call_passes():
    flash()()
    assert torch_npu.calls[-1].op == "_npu_flash_attention.default"


def test_atb_flash_attention_rejects_truncated_key():
    assert check_of(flash(k=npu(9, 2, 8))) == "k_v_token_counts_match"


def test_atb_flash_attention_rejects_wrong_num_kv_heads():
    assert check_of(flash(kv_heads=1)) == "head_count_matches"


def test_atb_flash_attention_seq_len_tensor_is_checked_by_shape_and_dtype_only():
    assert check_of(flash(seq_len=npu(2, 1, dtype=torch.int32))) == "length_tensor_shape"
    assert check_of(flash(seq_len=npu(2))) == "length_tensor_shape"


def paged(q=None, key_cache=None, value_cache=None, heads=4, kv_heads=2, block_table=None, context_lens=None):
    q = npu(3, 4, 8) if q is None else q
    key_cache = npu(6, 4, 2, 8) if key_cache is None else key_cache
    value_cache = npu(6, 4, 2, 8) if value_cache is None else value_cache
    block_table = npu(3, 2, dtype=torch.int32) if block_table is None else block_table
    context_lens = npu(3, dtype=torch.int32) if context_lens is None else context_lens
    return lambda: torch_npu._npu_paged_attention(q, key_cache, value_cache, kv_heads, heads, 0.3, block_table, context_lens, npu(3, 4, 8))


def test_atb_paged_attention_valid_call_passes():
    paged()()


def test_atb_paged_attention_rejects_value_cache_with_other_heads():
    assert check_of(paged(value_cache=npu(6, 4, 4, 8))) == "caches_match"


def test_atb_paged_attention_rejects_wrong_num_heads():
    assert check_of(paged(heads=8)) == "head_count_matches"


def test_atb_paged_attention_rejects_context_lens_for_another_batch():
    assert check_of(paged(context_lens=npu(4, dtype=torch.int32))) == "length_tensor_shape"


def test_atb_paged_attention_rejects_a_block_table_for_another_batch():
    assert check_of(paged(block_table=npu(2, 2, dtype=torch.int32))) == "block_table_shape"


def cache_write(op, key=None, value=None, key_cache=None, value_cache=None, slots=None):
    key = npu(5, 2, 8) if key is None else key
    value = npu(5, 2, 8) if value is None else value
    key_cache = npu(6, 4, 2, 8) if key_cache is None else key_cache
    value_cache = npu(6, 4, 2, 8) if value_cache is None else value_cache
    slots = npu(5, dtype=torch.int32) if slots is None else slots
    return lambda: getattr(torch_npu, op)(key, value, key_cache, value_cache, slots)


cache_ops = pytest.mark.parametrize("op", ["_npu_reshape_and_cache", "npu_scatter_pa_kv_cache"])


@cache_ops
def test_cache_write_valid_call_passes(op):
    cache_write(op)()
    assert torch_npu.calls[-1].op == f"{op}.default"


@cache_ops
def test_cache_write_rejects_value_for_other_tokens(op):
    assert check_of(cache_write(op, value=npu(4, 2, 8))) == "k_v_token_counts_match"


@cache_ops
def test_cache_write_rejects_value_with_other_heads(op):
    assert check_of(cache_write(op, value=npu(5, 1, 8))) == "k_v_head_counts_match"


@cache_ops
def test_cache_write_rejects_caches_from_two_pools(op):
    assert check_of(cache_write(op, value_cache=npu(7, 4, 2, 8))) == "caches_match"


@cache_ops
def test_cache_write_rejects_a_slot_tensor_for_other_tokens(op):
    assert check_of(cache_write(op, slots=npu(4, dtype=torch.int32))) == "slot_count_matches"


@cache_ops
def test_cache_write_rejects_key_heads_unlike_the_cache(op):
    assert check_of(cache_write(op, key=npu(5, 1, 8), value=npu(5, 1, 8))) == "head_count_matches"


@cache_ops
def test_cache_write_rejects_a_head_dim_unlike_the_cache(op):
    assert check_of(cache_write(op, key=npu(5, 2, 16))) == "q_k_head_dims_match"
