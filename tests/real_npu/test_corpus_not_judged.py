"""What the guard does not understand goes to the kernel unjudged, through the real package.

Each call is shaped like a real one but carries a mode, format or layout the guard has no rule
for: raise mode must not stop it, and the reporter notes why.
"""

from __future__ import annotations

import pytest

from tests.real_npu.harness import not_judged, npu_tensor, torch, torch_npu

pytestmark = pytest.mark.usefixtures("guard")


def test_scatter_with_a_cache_mode_the_guard_does_not_know():
    k = npu_tensor(12, 8, 128)
    cache = npu_tensor(64, 64, 128, 16)
    not_judged(torch_npu.npu_scatter_pa_kv_cache, "cache_mode='PA_BLK_NZ'", k, k, cache, cache, npu_tensor(12, dtype=torch.int32), cache_mode="PA_BLK_NZ")


def test_scatter_compressed_scenario_checks_k_against_v_and_leaves_the_rest():
    k = npu_tensor(2, 16, 4, 128)
    cache = npu_tensor(64, 128, 1, 128)
    slots = npu_tensor(2, 4, dtype=torch.int32)
    not_judged(torch_npu.npu_scatter_pa_kv_cache, "compressed", k, k, cache, cache, slots, compress_lens=slots, seq_lens=npu_tensor(2, dtype=torch.int32), cache_mode="Norm")


def test_int8_kv_for_npu_fusion_attention_is_left_to_the_kernel():
    q, k = npu_tensor(8, 4, 128), npu_tensor(8, 4, 128, dtype=torch.int8)
    not_judged(torch_npu.npu_fusion_attention, "int8", q, k, k, 4, "TND", actual_seq_qlen=[8], actual_seq_kvlen=[8])


def test_paged_kv_of_an_unknown_rank():
    q, cache = npu_tensor(4, 1, 32, 128), npu_tensor(2, 64, 8, 4, 128, 32)
    not_judged(torch_npu.npu_fused_infer_attention_score, "rank 6", q, cache, cache, num_heads=32, num_key_value_heads=8, input_layout="BSND", block_table=npu_tensor(4, 8, dtype=torch.int32), block_size=128)


def test_mla_prolog_with_an_unknown_cache_mode():
    caches = (npu_tensor(64, 128, 1, 512), npu_tensor(64, 128, 1, 64))
    weights = (npu_tensor(4, 7168), npu_tensor(7168, 1536), npu_tensor(1536, 3072), npu_tensor(16, 128, 512), npu_tensor(7168, 576), npu_tensor(1536), npu_tensor(512), npu_tensor(4, 64), npu_tensor(4, 64))
    not_judged(torch_npu.npu_mla_prolog_v3, "cache_mode='PA_FUTURE'", *weights, *caches, cache_index=npu_tensor(4, dtype=torch.int64), cache_mode="PA_FUTURE")
