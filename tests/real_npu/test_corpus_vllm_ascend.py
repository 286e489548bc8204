"""vllm-ascend's torch_npu attention and KV-cache calls, as the code paths shape them, through the real package.

Shapes are those of a TP-split GQA model (32 query heads, 8 KV heads, head dim 128, block size
128) unless the path says otherwise (MLA: latent 512 + rope 64; 310P: float16, NZ caches).
Every case passes under raise; every seeded mutation is rejected by the named check.
"""

from __future__ import annotations

import pytest

from tests.real_npu.corpus import Case, Cpu, Mutation, build, guarded_op, mutation_cases, mutation_id, t
from tests.real_npu.harness import passes, rejected

VA = "vllm-ascend:vllm_ascend/"

# Encoder-only TND with EOD padding: 20 query tokens, 3 sequences ending at 9 (the rest is padding).
enc_q, enc_k, enc_v = t(20, 8, 128), t(20, 8, 128), t(20, 8, 128)
enc_lens = [2, 5, 9, 0]

# PrefillCacheHit / DecodeOnly: key_cache.view(num_block, block_size, -1) -> (blocks, 128, 8 * 128).
kc3, vc3 = t(64, 128, 1024), t(64, 128, 1024)
# _npu_paged_attention decode: (blocks, block_size, KV heads, D).
kc4, vc4 = t(64, 128, 8, 128), t(64, 128, 8, 128)
# 310P NZ caches: (blocks, KV heads * D / 16, block_size, 16), float16.
nz_k, nz_v = t(64, 64, 128, 16, dtype="float16"), t(64, 64, 128, 16, dtype="float16")
# attention_v1 _nz_5d_view: (blocks, KV heads, D / 32, block_size, 32).
nz5_k, nz5_v = t(64, 8, 4, 128, 32), t(64, 8, 4, 128, 32)
# MLA caches: latent (blocks, bs, 1, 512), rope (blocks, bs, 1, 64).
mla_c, mla_r = t(64, 128, 1, 512), t(64, 128, 1, 64)

CASES = (
    Case(
        VA + "attention/attention_v1.py:_forward_encoder_attention", "encoder TND with EOD padding", "npu.npu_fusion_attention",
        (), dict(query=enc_q, key=enc_k, value=enc_v, head_num=8, input_layout="TND", scale=0.088, actual_seq_qlen=enc_lens, actual_seq_kvlen=enc_lens),
        (
            Mutation("K truncated", {"key": t(19, 8, 128)}, "k_v_token_counts_match"),
            Mutation("V heads", {"value": t(20, 4, 128)}, "k_v_head_counts_match"),
            Mutation("length list past the tokens", {"actual_seq_qlen": [2, 5, 21, 0], "actual_seq_kvlen": [2, 5, 21, 0]}, "cumulative_lengths_valid"),
        ),
    ),
    Case(
        "torch_npu:npu_fusion_attention docstring example", "TND trailing EOD zeros", "npu.npu_fusion_attention",
        (t(20, 8, 128, dtype="float16"), t(20, 8, 128, dtype="float16"), t(20, 8, 128, dtype="float16"), 8, "TND"),
        dict(actual_seq_qlen=[2, 5, 9, 0, 0], actual_seq_kvlen=[2, 5, 9, 0, 0]),
        (Mutation("length lists decrease", {"actual_seq_kvlen": [2, 9, 5, 0, 0]}, "cumulative_lengths_valid"),),
    ),
    Case(
        VA + "device/device_op.py:npu_flash_attention", "float32 prefill TND", "npu.npu_fusion_attention",
        (), dict(query=t(12, 32, 128, dtype="float32"), key=t(12, 8, 128, dtype="float32"), value=t(12, 8, 128, dtype="float32"), actual_seq_qlen=[5, 12], actual_seq_kvlen=[5, 12], head_num=32, scale=0.088, input_layout="TND"),
        (
            Mutation("K truncated", {"key": t(11, 8, 128, dtype="float32")}, "k_v_token_counts_match"),
            Mutation("wrong length list", {"actual_seq_kvlen": [5, 11]}, "cumulative_lengths_valid"),
        ),
    ),
    Case(
        VA + "attention/attention_v1.py:_forward_fia_slidingwindow", "chunked prefill paged TND", "npu.npu_fused_infer_attention_score",
        (), dict(query=t(10, 32, 128), key=kc3, value=vc3, atten_mask=t(2048, 2048, dtype="int8"), block_table=t(2, 4, dtype="int32"), input_layout="TND", block_size=128,
                 actual_seq_lengths=[4, 10], actual_seq_lengths_kv=[300, 200], num_key_value_heads=8, num_heads=32, scale=0.088, pre_tokens=4096, next_tokens=0, sparse_mode=4),
        (
            Mutation("V from another pool", {"value": t(65, 128, 1024)}, "caches_match"),
            Mutation("query length list stale", {"actual_seq_lengths": [4, 9]}, "cumulative_lengths_valid"),
            Mutation("KV heads declared wrong", {"num_key_value_heads": 4}, "q_k_head_dims_match"),
            Mutation("KV length past the block table", {"actual_seq_lengths_kv": [300, 513]}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        VA + "attention/attention_v1.py:forward_fused_infer_attention (sinks)", "decode TND with a host cumsum", "npu.npu_fused_infer_attention_score_v2",
        (t(4, 32, 128), kc3, vc3), dict(num_query_heads=32, num_key_value_heads=8, input_layout="TND", pre_tokens=128, next_tokens=0, atten_mask=t(2048, 2048, dtype="int8"), sparse_mode=4,
                                       softmax_scale=0.088, block_table=t(4, 8, dtype="int32"), block_size=128, actual_seq_qlen=Cpu((1, 2, 3, 4)), actual_seq_kvlen=[17, 90, 1024, 3], learnable_sink=t(32, dtype="float32")),
        (
            Mutation("host query lengths stale", {"actual_seq_qlen": Cpu((1, 2, 3, 5))}, "cumulative_lengths_valid"),
            Mutation("K block size", {1: t(64, 64, 1024)}, "caches_match"),
        ),
    ),
    Case(
        VA + "attention/attention_v1.py:forward_paged_attention", "decode paged ATB", "atb._npu_paged_attention",
        (), dict(query=t(4, 32, 128), key_cache=kc4, value_cache=vc4, num_kv_heads=8, num_heads=32, scale_value=0.088, block_table=t(4, 8, dtype="int32"), context_lens=Cpu((100, 5, 900, 1024)), out=t(4, 32, 128)),
        (
            Mutation("V heads", {"value_cache": t(64, 128, 4, 128)}, "caches_match"),
            Mutation("context length past the block table", {"context_lens": Cpu((100, 5, 900, 1025))}, "per_sequence_lengths_fit"),
            Mutation("context lengths for another batch", {"context_lens": Cpu((100, 5, 900))}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        VA + "_310p/attention/attention_v1.py:forward_paged_attention", "310P decode with NZ caches", "atb._npu_paged_attention",
        (), dict(query=t(4, 8, 128, dtype="float16"), key_cache=nz_k, value_cache=nz_v, num_kv_heads=8, num_heads=8, scale_value=0.088, block_table=t(4, 8, dtype="int32"), context_lens=t(4, dtype="int32"), out=t(4, 8, 128, dtype="float16")),
        (
            Mutation("V heads", {"value_cache": t(64, 32, 128, 16, dtype="float16")}, "caches_match"),
            Mutation("device lengths for another batch", {"context_lens": t(5, dtype="int32")}, "length_tensor_shape"),
        ),
    ),
    Case(
        VA + "_310p/attention/attention_v1.py:forward_chunked_prefill (splitfuse)", "310P chunked prefill", "atb._npu_paged_attention_splitfuse",
        (), dict(query=t(12, 8, 128, dtype="float16"), key_cache=nz_k, value_cache=nz_v, mask=t(12, 2048, dtype="float16"), block_table=t(3, 8, dtype="int32"), seq_len=Cpu((4, 4, 4)),
                 context_lens=t(3, dtype="int32"), num_kv_heads=8, num_heads=8, scale_value=0.088, out=t(12, 8, 128, dtype="float16")),
        (
            Mutation("query lengths stale", {"seq_len": Cpu((4, 4, 5))}, "per_sequence_lengths_fit"),
            Mutation("V from another pool", {"value_cache": t(63, 64, 128, 16, dtype="float16")}, "caches_match"),
        ),
    ),
    Case(
        VA + "_310p/attention/attention_v1.py:forward_chunked_prefill (splitfuse_v2)", "310P chunked prefill, compressed mask", "atb._npu_paged_attention_splitfuse_v2",
        (), dict(query=t(12, 8, 128, dtype="float16"), key_cache=nz_k, value_cache=nz_v, mask=t(2048, 2048, dtype="float16"), block_table=t(3, 8, dtype="int32"), seq_len=Cpu((4, 4, 4)),
                 context_lens=t(3, dtype="int32"), num_kv_heads=8, num_heads=8, scale_value=0.088, mask_type=4, out=t(12, 8, 128, dtype="float16")),
        (Mutation("query lengths for another batch", {"seq_len": Cpu((8, 4))}, "per_sequence_lengths_fit"),),
    ),
    Case(
        VA + "_310p/attention/attention_v1.py:_flash_attention", "310P prefill", "atb._npu_flash_attention",
        (), dict(query=t(12, 8, 128, dtype="float16"), key=t(12, 8, 128, dtype="float16"), value=t(12, 8, 128, dtype="float16"), mask=t(12, 12, dtype="float16"), seq_len=Cpu((4, 8)),
                 scale_value=0.088, num_heads=8, num_kv_heads=8, out=t(12, 8, 128, dtype="float16")),
        (
            Mutation("K truncated", {"key": t(11, 8, 128, dtype="float16")}, "k_v_token_counts_match"),
            Mutation("wrong length list", {"seq_len": Cpu((4, 9))}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        VA + "_310p/attention/attention_v1.py:_flash_attention (v3)", "310P prefill, compressed mask", "atb._npu_flash_attention_v3",
        (), dict(query=t(12, 8, 128, dtype="float16"), key=t(12, 8, 128, dtype="float16"), value=t(12, 8, 128, dtype="float16"), mask=t(2048, 2048, dtype="float16"), seq_len=Cpu((4, 8)),
                 scale_value=0.088, num_heads=8, num_kv_heads=8, mask_type=4, out=t(12, 8, 128, dtype="float16")),
        (Mutation("V heads", {"value": t(12, 4, 128, dtype="float16")}, "k_v_head_counts_match"),),
    ),
    Case(
        VA + "_310p/ops/mm_encoder_attention.py:forward_oot", "310P vision encoder, padded head dim", "atb._npu_flash_attention_unpad",
        (), dict(query=t(2048, 16, 128, dtype="float16"), key=t(2048, 16, 128, dtype="float16"), value=t(2048, 16, 128, dtype="float16"), seq_len=Cpu((1024, 1024)),
                 scale_value=0.125, num_heads=16, num_kv_heads=16, out=t(2048, 16, 128, dtype="float16")),
        (Mutation("V heads", {"value": t(2048, 8, 128, dtype="float16")}, "k_v_head_counts_match"),),
    ),
    Case(
        VA + "_310p/ops/mm_encoder_attention.py:forward_oot (unpad_v2)", "310P vision encoder, approximate kernel", "atb._npu_flash_attention_unpad_v2",
        (), dict(query=t(2048, 16, 128, dtype="float16"), key=t(2048, 16, 128, dtype="float16"), value=t(2048, 16, 128, dtype="float16"), seq_len=Cpu((1024, 1024)),
                 scale_value=0.125, num_heads=16, num_kv_heads=16, out=t(2048, 16, 128, dtype="float16"), kernel_type=2),
        (Mutation("K truncated", {"key": t(2047, 16, 128, dtype="float16")}, "k_v_token_counts_match"),),
    ),
    Case(
        VA + "device/device_op.py:npu_flash_attention", "GQA prefill, host seq_lens", "atb._npu_flash_attention_unpad",
        (), dict(query=t(12, 32, 128), key=t(12, 8, 128), value=t(12, 8, 128), seq_len=Cpu((5, 7)), scale_value=0.088, num_heads=32, num_kv_heads=8, out=t(12, 32, 128)),
        (
            Mutation("V heads", {"value": t(12, 4, 128)}, "k_v_head_counts_match"),
            Mutation("wrong length list", {"seq_len": Cpu((5, 8))}, "per_sequence_lengths_fit"),
        ),
    ),
    Case(
        VA + "device/device_op.py:reshape_and_cache (310P)", "310P cache write, NZ caches", "atb._npu_reshape_and_cache",
        (), dict(key=t(12, 8, 128, dtype="float16"), value=t(12, 8, 128, dtype="float16"), key_cache=nz_k, value_cache=nz_v, slot_indices=t(12, dtype="int32")),
        (
            Mutation("V heads", {"value": t(12, 4, 128, dtype="float16")}, "k_v_head_counts_match"),
            Mutation("slots for other tokens", {"slot_indices": t(13, dtype="int32")}, "slot_count_matches"),
            Mutation("V cache from another pool", {"value_cache": t(65, 64, 128, 16, dtype="float16")}, "caches_match"),
        ),
    ),
    Case(
        VA + "device/device_op.py:BaseDeviceAdaptor.reshape_and_cache", "cache write, ND caches", "npu.npu_scatter_pa_kv_cache",
        (), dict(key=t(12, 8, 128), value=t(12, 8, 128), key_cache=kc4, value_cache=vc4, slot_mapping=t(12, dtype="int32"), cache_mode="Norm"),
        (
            Mutation("K truncated", {"key": t(11, 8, 128)}, "k_v_token_counts_match"),
            Mutation("cache heads unlike the tokens", {"key_cache": t(64, 128, 4, 128), "value_cache": t(64, 128, 4, 128)}, "head_count_matches"),
        ),
    ),
    Case(
        VA + "attention/attention_v1.py:do_kv_cache_update (NZ)", "cache write, 5-D NZ view, default cache_mode", "npu.npu_scatter_pa_kv_cache",
        (), dict(key=t(12, 8, 128), value=t(12, 8, 128), key_cache=nz5_k, value_cache=nz5_v, slot_mapping=t(12, dtype="int32")),
        (
            Mutation("V heads", {"value": t(12, 4, 128)}, "k_v_head_counts_match"),
            Mutation("V cache from another pool", {"value_cache": t(63, 8, 4, 128, 32)}, "caches_match"),
        ),
    ),
    Case(
        VA + "distributed/kv_transfer/kv_p2p/mooncake_connector.py:_nz_kv_cache", "KV transfer write, 4-D NZ, K/V head dims differ", "npu.npu_scatter_pa_kv_cache",
        (t(40, 8, 192), t(40, 8, 128), t(64, 96, 128, 16), t(64, 64, 128, 16), t(40, dtype="int32")), {},
        (
            Mutation("V from another pool", {3: t(65, 64, 128, 16)}, "caches_match"),
            Mutation("slots for other tokens", {4: t(39, dtype="int32")}, "slot_count_matches"),
        ),
    ),
    Case(
        "torch_npu:npu_scatter_pa_kv_cache docstring example", "scenario 1: 4-D NZ caches, k 32 / v 64", "npu.npu_scatter_pa_kv_cache",
        (t(16, 4, 32, dtype="float16"), t(16, 4, 64, dtype="float16"), t(2, 8, 32, 16, dtype="float16"), t(2, 16, 32, 16, dtype="float16"), t(16, dtype="int32")), {},
        (Mutation("V cache with another block size", {3: t(2, 16, 16, 16, dtype="float16")}, "caches_match"),),
    ),
    Case(
        VA + "distributed/kv_transfer/kv_p2p/mooncake_connector.py:_transfer_kv_cache", "KV transfer write, Norm", "npu.npu_scatter_pa_kv_cache",
        (), dict(key=t(40, 8, 128), value=t(40, 8, 128), key_cache=kc4, value_cache=vc4, slot_mapping=t(40, dtype="int32"), cache_mode="Norm"),
        (Mutation("V heads", {"value": t(40, 4, 128)}, "k_v_head_counts_match"),),
    ),
    Case(
        VA + "distributed/kv_transfer/kv_p2p/mooncake_connector.py:_transfer_kv_cache (gather)", "KV transfer read", "npu.npu_gather_pa_kv_cache",
        (kc4, vc4, t(2, 8, dtype="int32"), t(2, dtype="int32")), dict(seq_offset=t(2, dtype="int32"), key=t(400, 8, 128), value=t(400, 8, 128)),
        (
            Mutation("V cache from another pool", {1: t(65, 128, 8, 128)}, "caches_match"),
            Mutation("V buffer truncated", {"value": t(399, 8, 128)}, "k_v_token_counts_match"),
        ),
    ),
    Case(
        VA + "attention/mla_v1.py:exec_kv_decode", "MLA cache write, PA", "npu.npu_kv_rmsnorm_rope_cache",
        (t(4, 1, 1, 576), t(512), t(4, 1, 1, 64), t(4, 1, 1, 64), t(4, dtype="int64"), mla_r, mla_c), dict(epsilon=1e-6, cache_mode="PA"),
        (Mutation("latent cache from another pool", {6: t(63, 128, 1, 512)}, "caches_match"),),
    ),
    Case(
        VA + "attention/mla_v1.py:exec_kv_prefill", "MLA cache write, PA, outputs K", "npu.npu_kv_rmsnorm_rope_cache",
        (t(12, 1, 1, 576), t(512), t(12, 1, 1, 64), t(12, 1, 1, 64), t(12, dtype="int64"), mla_r, mla_c), dict(epsilon=1e-6, cache_mode="PA", is_output_kv=True),
        (Mutation("rope cache from another pool", {5: t(65, 128, 1, 64)}, "caches_match"),),
    ),
    Case(
        VA + "attention/mla_v1.py:_forward_prefill", "MLA prefill TND with rope split", "npu.npu_fused_infer_attention_score",
        (t(12, 16, 128), t(12, 16, 128), t(12, 16, 128)), dict(query_rope=t(12, 16, 64), key_rope=t(12, 16, 64), num_heads=16, num_key_value_heads=16, input_layout="TND", atten_mask=t(2048, 2048, dtype="int8"),
                                                        sparse_mode=3, scale=0.07, antiquant_mode=0, antiquant_scale=None, block_table=None, block_size=0, softmax_lse_flag=True,
                                                        actual_seq_lengths=[5, 12], actual_seq_lengths_kv=[5, 12]),
        (
            Mutation("K truncated", {1: t(11, 16, 128)}, "k_v_token_counts_match"),
            Mutation("wrong length list", {"actual_seq_lengths_kv": [5, 13]}, "cumulative_lengths_valid"),
        ),
    ),
    Case(
        VA + "device/device_op.py:mla_prolog_v2", "MLA prolog, PA_BSND caches", "npu.npu_mla_prolog_v2",
        (t(4, 7168), t(7168, 1536), t(1536, 16 * 192), t(16, 128, 512), t(7168, 576), t(1536), t(512), t(4, 64), t(4, 64), t(4, dtype="int64"), mla_c, mla_r), dict(cache_mode="PA_BSND"),
        (Mutation("rope cache from another pool", {11: t(65, 128, 1, 64)}, "caches_match"),),
    ),
    Case(
        VA + "attention/sfa_v1.py:mla_prolog_v3", "MLA prolog v3, PA_BSND caches", "npu.npu_mla_prolog_v3",
        (t(4, 7168), t(7168, 1536), t(1536, 16 * 192), t(16, 128, 512), t(7168, 576), t(1536), t(512), t(4, 64), t(4, 64), mla_c, mla_r), dict(cache_index=t(4, dtype="int64"), cache_mode="PA_BSND"),
        (Mutation("latent cache from another pool", {9: t(63, 128, 1, 512)}, "caches_match"),),
    ),
    Case(
        VA + "attention/attention_v1.py:forward_decode (C8)", "int8 KV decode with antiquant scales", "npu.npu_fused_infer_attention_score",
        (t(4, 32, 1, 128), t(64, 8, 128, 128, dtype="int8"), t(64, 8, 128, 128, dtype="int8")),
        dict(num_heads=32, num_key_value_heads=8, input_layout="BNSD", block_table=t(4, 8, dtype="int32"), block_size=128, actual_seq_lengths_kv=[17, 90, 1024, 3], scale=0.088,
             key_antiquant_scale=t(8, 128), value_antiquant_scale=t(8, 128), key_antiquant_mode=0, value_antiquant_mode=0),
        (
            Mutation("scales dropped", {"key_antiquant_scale": None, "value_antiquant_scale": None}, "one_dtype"),
            Mutation("V heads", {2: t(64, 4, 128, 128, dtype="int8")}, "caches_match"),
        ),
    ),
    Case(
        VA + "models/minimax_m3/minimax_m3.py:_scatter_index_cache (A5)", "one index cache, (T, 1, D) key", "npu.npu_scatter_pa_cache",
        (t(12, 1, 128), t(12, dtype="int32")), dict(key_cache=t(64, 128, 1, 128)),
        (Mutation("slots for other tokens", {1: t(11, dtype="int32")}, "slot_count_matches"),),
    ),
    Case(
        "torch_npu:npu_fused_infer_attention_score docstring (PA NZ)", "5-D NZ paged K/V, float16", "npu.npu_fused_infer_attention_score",
        (t(4, 1, 32, 128, dtype="float16"), t(64, 8, 8, 128, 16, dtype="float16"), t(64, 8, 8, 128, 16, dtype="float16")),
        dict(num_heads=32, num_key_value_heads=8, input_layout="BSND", block_table=t(4, 8, dtype="int32"), block_size=128, actual_seq_lengths_kv=[17, 90, 1024, 3]),
        (
            Mutation("block size", {"block_size": 64}, "block_size_matches"),
            Mutation("V heads", {2: t(64, 4, 8, 128, 16, dtype="float16")}, "caches_match"),
        ),
    ),
    Case(
        "torch_npu:npu_fused_infer_attention_score docstring (PA NZ int8)", "5-D NZ paged int8 K/V", "npu.npu_fused_infer_attention_score",
        (t(4, 1, 32, 128, dtype="float16"), t(64, 8, 4, 128, 32, dtype="int8"), t(64, 8, 4, 128, 32, dtype="int8")),
        dict(num_heads=32, num_key_value_heads=8, input_layout="BSND", block_table=t(4, 8, dtype="int32"), block_size=128, actual_seq_lengths_kv=[17, 90, 1024, 3], antiquant_scale=t(2, 8, 1, 128, dtype="float16")),
        (Mutation("query head dim", {0: t(4, 1, 32, 64, dtype="float16")}, "q_k_head_dims_match"),),
    ),
)


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
