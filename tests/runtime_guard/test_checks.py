"""Each check on its own: one accepting and one rejecting case, and the words a user sees."""

from __future__ import annotations

import torch

from runtime_guard import checks as c
from tests.runtime_guard.conftest import npu


def test_arguments_are_tensors_accepts_tensors():
    assert c.arguments_are_tensors((("query", npu(2, 1, 4)),)) is None


def test_arguments_are_tensors_names_the_missing_and_the_wrong_ones():
    found = c.arguments_are_tensors((("query", None), ("key", c.MISSING)))
    assert found.check == "arguments_are_tensors"
    assert "query=NoneType" in found.requirement and "key missing" in found.requirement


def test_layout_is_text_accepts_a_layout_name():
    assert c.layout_is_text("BNSD_BSND") is None


def test_layout_is_text_rejects_anything_else():
    assert c.layout_is_text(3).check == "layout_is_text"


def test_rank_matches_layout_accepts_a_3d_tnd_tensor():
    assert c.rank_matches_layout("key", npu(4, 2, 8), "TND", 3) is None


def test_rank_matches_layout_rejects_a_4d_tensor_for_tnd():
    found = c.rank_matches_layout("key", npu(1, 4, 2, 8), "TND", 3)
    assert found.check == "rank_matches_layout" and "key (1, 4, 2, 8) must be 3-D for layout TND" in found.requirement


def test_one_device_of_type_accepts_one_npu_device():
    assert c.one_device_of_type((("q", npu(2, 2)), ("k", npu(2, 2))), "npu") is None


def test_one_device_of_type_rejects_two_npu_devices():
    found = c.one_device_of_type((("q", npu(2, 2)), ("k", npu(2, 2, index=1))), "npu")
    assert found.check == "one_device_of_type" and "k on npu:1" in found.requirement


def test_one_device_of_type_rejects_host_tensors_for_an_npu_kernel():
    assert c.one_device_of_type((("q", torch.zeros(2)), ("k", torch.zeros(2))), "npu").check == "one_device_of_type"


def test_one_device_of_type_without_a_type_accepts_any_single_device():
    assert c.one_device_of_type((("q", torch.zeros(2)), ("k", torch.zeros(2))), None) is None


def test_one_dtype_accepts_one_dtype():
    assert c.one_dtype((("q", npu(2)), ("k", npu(2)))) is None


def test_one_dtype_rejects_mixed_dtypes():
    found = c.one_dtype((("q", npu(2)), ("v", npu(2, dtype=torch.bfloat16))))
    assert found.check == "one_dtype" and "v torch.bfloat16" in found.requirement


def test_k_v_token_counts_match_accepts_equal_tokens():
    k, v = npu(6, 2, 8), npu(6, 2, 8)
    assert c.k_v_token_counts_match("key", k, (6,), "value", v, (6,)) is None


def test_k_v_token_counts_match_rejects_truncated_key_and_names_the_cause():
    k, v = npu(5, 2, 8), npu(6, 2, 8)
    found = c.k_v_token_counts_match("key", k, (5,), "value", v, (6,))
    assert found.check == "k_v_token_counts_match"
    assert "key (5, 2, 8) and value (6, 2, 8)" in found.requirement
    assert "K was sliced without V" in found.cause


def test_k_v_head_counts_match_accepts_equal_heads():
    assert c.k_v_head_counts_match("key", npu(6, 2, 8), 2, "value", npu(6, 2, 8), 2) is None


def test_k_v_head_counts_match_rejects_value_with_query_heads():
    assert c.k_v_head_counts_match("key", npu(6, 2, 8), 2, "value", npu(6, 8, 8), 8).check == "k_v_head_counts_match"


def test_q_k_head_dims_match_accepts_equal_dims():
    assert c.q_k_head_dims_match(npu(6, 4, 8), 8, "key", npu(6, 2, 8), 8) is None


def test_q_k_head_dims_match_rejects_different_dims():
    assert c.q_k_head_dims_match(npu(6, 4, 8), 8, "key", npu(6, 2, 16), 16).check == "q_k_head_dims_match"


def test_kv_heads_divide_q_heads_accepts_gqa():
    assert c.kv_heads_divide_q_heads(8, 2, npu(1, 8, 4), "key", npu(1, 2, 4)) is None


def test_kv_heads_divide_q_heads_rejects_non_divisible_and_zero():
    assert c.kv_heads_divide_q_heads(8, 3, npu(1, 8, 4), "key", npu(1, 3, 4)).check == "kv_heads_divide_q_heads"
    assert c.kv_heads_divide_q_heads(8, 0, npu(1, 8, 4), "key", npu(1, 0, 4)).check == "kv_heads_divide_q_heads"


def test_head_count_matches_accepts_the_query_head_axis():
    assert c.head_count_matches("head_num", 4, 4, "query", npu(6, 4, 8)) is None


def test_head_count_matches_rejects_a_config_head_count():
    found = c.head_count_matches("head_num", 32, 4, "query", npu(6, 4, 8))
    assert found.check == "head_count_matches" and "head_num=32" in found.requirement


def test_cumulative_lengths_valid_accepts_cumulative_ends():
    assert c.cumulative_lengths_valid("actual_seq_qlen", [2, 5, 9], 9, "query", npu(9, 1, 4)) is None


def test_cumulative_lengths_valid_accepts_empty_sequences_and_a_leading_zero():
    assert c.cumulative_lengths_valid("cu", [0, 2, 2, 9], 9, "query", npu(9, 1, 4)) is None


def test_cumulative_lengths_valid_accepts_trailing_eod_zeros():
    assert c.cumulative_lengths_valid("actual_seq_qlen", [2, 5, 9, 0, 0], 9, "query", npu(9, 1, 4)) is None


def test_cumulative_lengths_valid_rejects_a_wrong_end():
    found = c.cumulative_lengths_valid("actual_seq_kvlen", [2, 5, 9], 8, "key", npu(8, 1, 4))
    assert found.check == "cumulative_lengths_valid" and "end at 9" in found.requirement and "8" in found.requirement


def test_cumulative_lengths_valid_rejects_decreasing_ends():
    assert "decrease" in c.cumulative_lengths_valid("q", [2, 7, 5, 9], 9, "query", npu(9, 1, 4)).requirement


def test_cumulative_lengths_valid_rejects_a_negative_start():
    assert "start at -1" in c.cumulative_lengths_valid("q", [-1, 9], 9, "query", npu(9, 1, 4)).requirement


def test_cumulative_lengths_valid_rejects_all_zeros_for_nonempty_tokens():
    assert c.cumulative_lengths_valid("q", [0, 0], 9, "query", npu(9, 1, 4)).check == "cumulative_lengths_valid"


def test_same_batch_accepts_equal_counts_ignoring_eod_padding():
    assert c.same_batch("q", [2, 4, 0], "kv", [3, 6]) is None


def test_same_batch_rejects_different_counts():
    found = c.same_batch("actual_seq_qlen", [2, 4], "actual_seq_kvlen", [6])
    assert found.check == "same_batch" and "2 sequences" in found.requirement and "1 sequences" in found.requirement


def test_per_sequence_lengths_fit_accepts_lengths_within_capacity():
    assert c.per_sequence_lengths_fit("seq_len", [3, 0, 5], 5, 3, "the cache") is None


def test_per_sequence_lengths_fit_rejects_negative_too_long_and_wrong_count():
    assert "negative" in c.per_sequence_lengths_fit("seq_len", [3, -1], 5, 2, "the cache").requirement
    assert "6 > 5" in c.per_sequence_lengths_fit("seq_len", [3, 6], 5, 2, "the cache").requirement
    assert "3 entries for a batch of 2" in c.per_sequence_lengths_fit("seq_len", [1, 1, 1], 5, 2, "the cache").requirement


def test_host_ints_accepts_lists_and_tuples_of_ints():
    assert c.host_ints([1, 2]) == [1, 2] and c.host_ints((1,)) == (1,)


def test_host_ints_refuses_tensors_and_lists_holding_tensors():
    assert c.host_ints(npu(3)) is None
    assert c.host_ints([1, torch.tensor(2)]) is None


def test_length_tensor_shape_accepts_a_1d_integer_tensor():
    assert c.length_tensor_shape("seq_len", torch.zeros(3, dtype=torch.int32), (3,)) is None


def test_length_tensor_shape_rejects_float_2d_or_wrong_count():
    assert c.length_tensor_shape("seq_len", torch.zeros(3), None).check == "length_tensor_shape"
    assert c.length_tensor_shape("seq_len", torch.zeros(3, 1, dtype=torch.int32), None).check == "length_tensor_shape"
    assert c.length_tensor_shape("seq_len", torch.zeros(4, dtype=torch.int32), (3, 1)).check == "length_tensor_shape"


def test_slot_count_matches_accepts_one_slot_per_token():
    assert c.slot_count_matches("slot_mapping", torch.zeros(6, dtype=torch.int32), 6, npu(6, 2, 8)) is None


def test_slot_count_matches_rejects_a_slot_tensor_for_other_tokens():
    assert c.slot_count_matches("slot_mapping", torch.zeros(5, dtype=torch.int32), 6, npu(6, 2, 8)).check == "slot_count_matches"


def test_caches_match_accepts_equal_blocks_block_size_and_heads():
    assert c.caches_match(npu(10, 16, 2, 8), npu(10, 16, 2, 4), (0, 1, 2)) is None


def test_caches_match_rejects_a_value_cache_from_another_pool():
    assert c.caches_match(npu(10, 16, 2, 8), npu(12, 16, 2, 8), (0, 1, 2)).check == "caches_match"
