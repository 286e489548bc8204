"""sglang 0.5.23's Ascend backend and NPU memory pool calls, as the code paths shape them, through the real package.

Shapes: a TP-split GQA model (16 query heads, 4 KV heads, head dim 128, page size 128) unless
the path says otherwise (MLA: latent 512 + rope 64). Lengths are what the backend builds:
NumPy cumsums, host int32 tensors, Python lists.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.real_npu.corpus import Case, Cpu, Mutation, Np, build, guarded_op, mutation_cases, mutation_id, t
from tests.real_npu.harness import passes, rejected

SG = "sglang:sglang/srt/hardware_backend/npu/"

k_pool, v_pool = t(96, 128, 4, 128), t(96, 128, 4, 128)
k_flat, v_flat = t(96, 128, 512), t(96, 128, 512)  # k_cache.view(-1, page_size, tp_k_head_num * head_dim)
mla_c, mla_r = t(96, 128, 1, 512), t(96, 128, 1, 64)
extend = Np((5, 12, 20))  # np.cumsum(extend_seq_lens_cpu)

CASES = (
    Case(
        SG + "memory_pool_npu.py:NPUMHATokenToKVPool.set_kv_buffer", "cache write, scatter Norm, v_head_dim differs", "npu.npu_scatter_pa_kv_cache",
        (t(20, 4, 192), t(20, 4, 128), t(96, 128, 4, 192), t(96, 128, 4, 128), t(20, dtype="int32")), dict(cache_mode="Norm"),
        (
            Mutation("K truncated", {0: t(19, 4, 192)}, "k_v_token_counts_match"),
            Mutation("V heads", {1: t(20, 2, 128)}, "k_v_head_counts_match"),
            Mutation("V pool with another page size", {3: t(96, 64, 4, 128)}, "caches_match"),
        ),
    ),
    Case(
        SG + "memory_pool_npu.py:NPUMHATokenToKVPool.set_kv_buffer (reshape_and_cache)", "cache write, ATB", "atb._npu_reshape_and_cache",
        (), dict(key=t(20, 4, 128), value=t(20, 4, 128), key_cache=k_pool, value_cache=v_pool, slot_indices=t(20, dtype="int32")),
        (
            Mutation("V heads", {"value": t(20, 2, 128)}, "k_v_head_counts_match"),
            Mutation("slots for other tokens", {"slot_indices": t(21, dtype="int32")}, "slot_count_matches"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_extend (_npu_flash_attention_qlens)", "extend with prefix, (T, N*D) query", "atb._npu_flash_attention_qlens",
        (), dict(query=t(20, 16 * 128), key_cache=k_pool, value_cache=v_pool, mask=t(2048, 2048), block_table=t(3, 8, dtype="int32"), seq_len=Cpu((5, 7, 8)),
                 context_lens=Cpu((105, 7, 900)), scale_value=0.088, num_heads=16, num_kv_heads=4, out=t(20, 16 * 128)),
        (
            Mutation("extend lengths stale", {"seq_len": Cpu((5, 7, 9))}, "per_sequence_lengths_fit"),
            Mutation("V pool from another layer size", {"value_cache": t(96, 128, 2, 128)}, "caches_match"),
            Mutation("context past the block table", {"context_lens": Cpu((105, 7, 1025))}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_decode (_npu_paged_attention)", "decode, host lengths", "atb._npu_paged_attention",
        (), dict(query=t(8, 16, 128), key_cache=k_pool, value_cache=v_pool, num_heads=16, num_kv_heads=4, scale_value=0.088, block_table=t(8, 8, dtype="int32"), context_lens=Cpu((9, 1, 1, 300, 1, 1, 1, 1)), out=t(8, 16, 128)),
        (
            Mutation("KV heads declared wrong", {"num_kv_heads": 2}, "head_count_matches"),
            Mutation("lengths for another batch", {"context_lens": Cpu((9, 1, 1, 300))}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_extend (FIA_v2 sinks)", "extend TND, NumPy cumsum and host kv lengths", "npu.npu_fused_infer_attention_score_v2",
        (), dict(query=t(20, 16, 128), key=k_flat, value=v_flat, pre_tokens=128, next_tokens=0, atten_mask=t(2048, 2048, dtype="int8"), block_table=t(3, 8, dtype="int32"), input_layout="TND", block_size=128,
                 num_query_heads=16, num_key_value_heads=4, actual_seq_qlen=extend, actual_seq_kvlen=Cpu((105, 7, 900)), softmax_scale=0.088, sparse_mode=4, learnable_sink=t(16, dtype="float32")),
        (
            Mutation("NumPy lengths stale", {"actual_seq_qlen": Np((5, 12, 21))}, "cumulative_lengths_valid"),
            Mutation("V from another pool", {"value": t(97, 128, 512)}, "caches_match"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_extend (MLA, no prefix)", "MLA extend TND, NumPy cumsum", "npu.npu_fused_infer_attention_score",
        (t(20, 16, 128), t(20, 16, 128), t(20, 16, 128)), dict(query_rope=t(20, 16, 64), key_rope=t(20, 16, 64), num_heads=16, input_layout="TND", atten_mask=t(2048, 2048, dtype="int8"),
                                                        sparse_mode=3, actual_seq_lengths=extend, actual_seq_lengths_kv=extend, scale=0.07, next_tokens=0),
        (
            Mutation("K truncated", {1: t(19, 16, 128)}, "k_v_token_counts_match"),
            Mutation("V heads", {2: t(20, 8, 128)}, "k_v_head_counts_match"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_extend (MLA, list of np.int64)", "MLA extend TND, NumPy integers in a list", "npu.npu_fused_infer_attention_score",
        (t(20, 16, 128), t(20, 16, 128), t(20, 16, 128)), dict(query_rope=t(20, 16, 64), key_rope=t(20, 16, 64), num_heads=16, input_layout="TND", sparse_mode=3,
                                                        actual_seq_lengths=[np.int64(5), np.int64(12), np.int64(20)], actual_seq_lengths_kv=[np.int64(5), np.int64(12), np.int64(20)], scale=0.07),
        (Mutation("wrong length list", {"actual_seq_lengths_kv": [np.int64(5), np.int64(12), np.int64(19)]}, "cumulative_lengths_valid"),),
    ),
    Case(
        SG + "attention/ascend_backend.py:_forward_extend_chunk (context parallel)", "chunked prefill over paged (blocks, page, H) caches", "npu.npu_fused_infer_attention_score",
        (), dict(query=t(12, 16, 128), key=k_flat, value=v_flat, block_table=t(2, 8, dtype="int32"), block_size=128, num_heads=16, num_key_value_heads=4, input_layout="TND",
                 atten_mask=t(2048, 2048, dtype="int8"), sparse_mode=3, next_tokens=0, scale=0.088, actual_seq_lengths=[4, 12], actual_seq_lengths_kv=[260, 8]),
        (
            Mutation("query length list stale", {"actual_seq_lengths": [4, 13]}, "cumulative_lengths_valid"),
            Mutation("K pool of another page size", {"key": t(96, 64, 512)}, "caches_match"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_decode (graph mode, FIA BSND)", "decode padded to the captured batch", "npu.npu_fused_infer_attention_score",
        (t(8, 1, 16, 128), k_flat, v_flat), dict(num_heads=16, num_key_value_heads=4, input_layout="BSND", block_table=t(8, 8, dtype="int32"), block_size=128, scale=0.088,
                                                 actual_seq_lengths_kv=[9, 1, 300, 42, 7, 1, 1, 1]),
        (
            Mutation("block table for another batch", {"block_table": t(5, 8, dtype="int32")}, "block_table_shape"),
            Mutation("lengths for the unpadded batch", {"actual_seq_lengths_kv": [9, 1, 300, 42, 7]}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_extend (speculative verify)", "target verify: 3 draft tokens per sequence, TND paged", "npu.npu_fused_infer_attention_score",
        (t(12, 16, 128), k_flat, v_flat), dict(num_heads=16, num_key_value_heads=4, input_layout="TND", block_table=t(4, 8, dtype="int32"), block_size=128, scale=0.088, sparse_mode=3,
                                               atten_mask=t(2048, 2048, dtype="int8"), actual_seq_lengths=[3, 6, 9, 12], actual_seq_lengths_kv=[103, 50, 7, 1000]),
        (Mutation("draft count unlike the query", {"actual_seq_lengths": [3, 6, 9, 11]}, "cumulative_lengths_valid"),),
    ),
    Case(
        SG + "modules/deepseek_v2_attention_mla_npu.py:forward_mla_prepare", "MLA cache write, PA_BNSD", "npu.npu_kv_rmsnorm_rope_cache",
        (t(20, 1, 1, 576), t(512), t(20, 1, 1, 64), t(20, 1, 1, 64), t(20, dtype="int64"), mla_r, mla_c),
        dict(k_rope_scale=None, c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, epsilon=1e-6, cache_mode="PA_BNSD", is_output_kv=True),
        (Mutation("latent cache from another pool", {6: t(95, 128, 1, 512)}, "caches_match"),),
    ),
    Case(
        SG + "attention/mla_preprocess.py:forward_mlaprolog", "MLA prolog v3, PA_BSND", "npu.npu_mla_prolog_v3",
        (), dict(token_x=t(8, 7168), weight_dq=t(7168, 1536), weight_uq_qr=t(1536, 16 * 192), weight_uk=t(16, 128, 512), weight_dkv_kr=t(7168, 576), rmsnorm_gamma_cq=t(1536), rmsnorm_gamma_ckv=t(512),
                 rope_sin=t(8, 64), rope_cos=t(8, 64), kv_cache=mla_c, kr_cache=mla_r, cache_index=t(8, dtype="int64"), cache_mode="PA_BSND"),
        (Mutation("rope cache from another pool", {"kr_cache": t(97, 128, 1, 64)}, "caches_match"),),
    ),
    Case(
        SG + "attention/ascend_backend.py:forward_sparse (fp8 KV)", "DSA sparse attention over a packed fp8 cache", "npu.npu_kv_quant_sparse_flash_attention",
        (), dict(query=t(8, 16, 576), key=t(96, 128, 1, 656, dtype="float8_e4m3fn"), value=None, sparse_indices=t(8, 1, 2048, dtype="int32"), scale_value=0.07, key_quant_mode=2, value_quant_mode=2,
                 key_dequant_scale=None, value_dequant_scale=None, actual_seq_lengths_query=t(8, dtype="int32"), actual_seq_lengths_kv=t(8, dtype="int32"), sparse_block_size=1,
                 layout_query="TND", layout_kv="PA_BSND", sparse_mode=3, attention_mode=2, quant_scale_repo_mode=1, tile_size=128, rope_head_dim=64),
        (Mutation("V with other heads", {"value": t(96, 128, 2, 656, dtype="float8_e4m3fn")}, "k_v_head_counts_match"),),
    ),
)

# key=packed, value=packed: one tensor at the call site.
_packed = CASES[-1].kwargs["key"]
CASES[-1].kwargs["value"] = _packed


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_call_site_passes(case):
    args, kwargs = build(case)
    passes(guarded_op(case.op), *args, **kwargs)


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("pair", mutation_cases(CASES), ids=mutation_id)
def test_seeded_mutation_is_rejected(pair):
    case, mutation = pair
    args, kwargs = build(case, mutation)
    rejected(guarded_op(case.op), mutation.check, *args, **kwargs)
