"""The ops torch_npu exposes under torch_npu.atb.* (torch.ops.atb.*) with no vllm-ascend/sglang call site, judged from
their docstrings' shapes (torch_npu.atb.X.__doc__), through the real package."""

from __future__ import annotations

import pytest

from tests.real_npu.harness import not_judged, npu_tensor, passes, rejected, torch

pytestmark = pytest.mark.usefixtures("guard")


def ring_mla_args(value_tokens=512, value_heads=8):
    q_nope, q_rope = npu_tensor(512, 16, 128), npu_tensor(512, 16, 64)
    k_nope, k_rope, value = npu_tensor(512, 8, 128), npu_tensor(512, 8, 64), npu_tensor(value_tokens, value_heads, 128)
    return (q_nope, q_rope, k_nope, k_rope, value, npu_tensor(512, 512), npu_tensor(2, dtype=torch.int32), 16, 8)


def test_ring_mla_docstring_shapes_pass():
    passes(torch.ops.atb.npu_ring_mla, *ring_mla_args(), qk_scale=0.07, calc_type="calc_type_first_ring")


@pytest.mark.parametrize("value_tokens,value_heads,check", [(511, 8, "k_v_token_counts_match"), (512, 4, "k_v_head_counts_match")])
def test_ring_mla_value_unlike_k_nope_is_rejected(value_tokens, value_heads, check):
    rejected(torch.ops.atb.npu_ring_mla, check, *ring_mla_args(value_tokens, value_heads), qk_scale=0.07)


def mla_args(rope_blocks=1024):
    return (npu_tensor(8, 16, 512), npu_tensor(8, 16, 64), npu_tensor(1024, 128, 1, 512), npu_tensor(rope_blocks, 128, 1, 64), npu_tensor(8, 4, dtype=torch.int32), [100] * 8, 16, 0.07, 1)


def test_multi_head_latent_attention_caches():
    passes(torch.ops.atb.npu_multi_head_latent_attention, *mla_args(), cache_mode="krope_ctkv")
    rejected(torch.ops.atb.npu_multi_head_latent_attention, "caches_match", *mla_args(1023), cache_mode="krope_ctkv")
    not_judged(torch.ops.atb.npu_multi_head_latent_attention, "cache_mode='future'", *mla_args(), cache_mode="future")


def test_self_attention_prefix_encoder_caches():
    q, table = npu_tensor(256, 16, 128), npu_tensor(2, 4, dtype=torch.int32)
    k = npu_tensor(64, 128, 16, 128)
    passes(torch.ops.atb.npu_self_attention_prefix_encoder, q, k, npu_tensor(64, 128, 16, 128), table, [128, 128], [256, 256], 16, 0.088, 16)
    rejected(torch.ops.atb.npu_self_attention_prefix_encoder, "caches_match", q, k, npu_tensor(64, 64, 16, 128), table, [128, 128], [256, 256], 16, 0.088, 16)
