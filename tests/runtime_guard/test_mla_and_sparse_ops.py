"""The MLA and sparse ops, through the torch_npu double: the main suite covers them even where the
real-package tier (tests/real_npu/test_atb_docstring_ops.py, test_corpus_sglang.py) cannot run."""

from __future__ import annotations

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError

pytestmark = pytest.mark.usefixtures("guard")


def t(*shape: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch_npu.npu(torch.zeros(shape, dtype=dtype))


def check_of(op, *args, **kwargs) -> str:
    with pytest.raises(KVConsistencyError) as info:
        op(*args, **kwargs)
    return info.value.check


def ring_mla(value=None, k_rope=None):
    args = (t(6, 4, 128), t(6, 4, 64), t(6, 4, 128), t(6, 4, 64) if k_rope is None else k_rope, t(6, 4, 128) if value is None else value, t(512, 512), torch.tensor([6], dtype=torch.int32), 4, 4)
    return torch_npu.atb.npu_ring_mla, args


def test_ring_mla_valid_and_mutated():
    op, args = ring_mla()
    op(*args)
    assert check_of(op, *ring_mla(value=t(5, 4, 128))[1]) == "k_v_token_counts_match"
    assert check_of(op, *ring_mla(value=t(6, 2, 128))[1]) == "k_v_head_counts_match"
    assert check_of(op, *ring_mla(k_rope=t(5, 4, 64))[1]) == "k_v_token_counts_match"


def latent(ctkv=None, k_rope=None, lens=None, **kwargs):
    args = (t(4, 8, 512), t(4, 8, 64), t(16, 32, 1, 512) if ctkv is None else ctkv, t(16, 32, 1, 64) if k_rope is None else k_rope, t(4, 4, dtype=torch.int32), [10, 20, 128, 1] if lens is None else lens, 8, 1.0, 1)
    return torch_npu.atb.npu_multi_head_latent_attention, args, kwargs


def test_multi_head_latent_attention_valid_and_mutated():
    op, args, kwargs = latent()
    op(*args, **kwargs)
    op, args, _ = latent(t(16, 16, 32, 32, dtype=torch.int8), t(16, 4, 32, 16))
    op(*args, cache_mode="int8_nzcache")
    assert check_of(op, *latent(k_rope=t(15, 32, 1, 64))[1]) == "caches_match"  # rope cache of another pool
    assert check_of(op, *latent(k_rope=t(16, 16, 1, 64))[1]) == "caches_match"  # another block size
    assert check_of(op, *latent(lens=[10, 20, 128])[1]) == "per_sequence_lengths_fit"  # another batch
    assert check_of(op, *latent(lens=[10, 20, 4 * 32 + 1, 1])[1]) == "per_sequence_lengths_fit"  # past the row's blocks


def test_self_attention_prefix_encoder_valid_and_mutated():
    op = torch_npu.atb.npu_self_attention_prefix_encoder

    def args(value):
        return (t(64, 4, 32), t(8, 16, 4, 32), value, t(2, 4, dtype=torch.int32), [32, 32], [32, 48], 4, 0.1, 4)

    op(*args(t(8, 16, 4, 32)))
    assert check_of(op, *args(t(7, 16, 4, 32))) == "caches_match"
    assert check_of(op, *args(t(8, 16, 2, 32))) == "caches_match"
    assert check_of(op, *args(t(8, 16, 128))) == "rank_matches_layout"


def test_sparse_flash_attention_checks_key_value_and_key_rope():
    op = torch_npu.npu_sparse_flash_attention
    kv, rope = t(16, 32, 1, 512), t(16, 32, 1, 64)

    def call(key=kv, value=kv, key_rope=rope, layout_kv="PA_BSND"):
        op(t(4, 8, 512), key, value, t(4, 1, 64, dtype=torch.int32), 0.1, query_rope=t(4, 8, 64), key_rope=key_rope,
           block_table=t(4, 4, dtype=torch.int32), layout_query="TND", layout_kv=layout_kv, sparse_mode=3, attention_mode=2)

    call()
    call(value=None)  # the schema's value is optional
    assert check_of(call, key_rope=t(15, 32, 1, 64)) == "caches_match"
    assert check_of(call, value=t(16, 32, 2, 512)) == "k_v_head_counts_match"
    packed, packed_rope = t(40, 1, 512), t(40, 1, 64)
    call(packed, packed, packed_rope, "TND")
    assert check_of(call, packed, packed, t(39, 1, 64), "TND") == "k_v_token_counts_match"


def test_paged_attention_mla_checks_the_one_latent_cache():
    torch_npu.load_atb_now()  # torch.ops.atb.* exist once ATB is loaded, as in torch_npu
    op = torch.ops.atb._npu_paged_attention_mla

    def call(key_cache=None, num_kv_heads=1, block_table=None, context_lens=None):
        op(query=t(4, 8, 576), key_cache=t(16, 32, 1, 576) if key_cache is None else key_cache, num_kv_heads=num_kv_heads, num_heads=8, scale_value=0.1,
           block_table=t(4, 4, dtype=torch.int32) if block_table is None else block_table,
           context_lens=torch.tensor([10, 20, 128, 1], dtype=torch.int32) if context_lens is None else context_lens, mla_vheadsize=512, out=t(4, 8, 512))

    call()
    assert check_of(call, key_cache=t(16, 32, 1, 512)) == "q_k_head_dims_match"
    assert check_of(call, num_kv_heads=2) == "head_count_matches"
    assert check_of(call, block_table=t(3, 4, dtype=torch.int32)) == "block_table_shape"
    assert check_of(call, context_lens=torch.tensor([10, 20, 129, 1], dtype=torch.int32)) == "per_sequence_lengths_fit"
