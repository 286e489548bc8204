"""torch_npu.atb's MLA ops, judged from their real docstrings, through the real package.

npu_ring_mla, npu_multi_head_latent_attention and npu_self_attention_prefix_encoder have no
caller in vllm-ascend or sglang today, so their cases come from the shapes their torch_npu
2.13.0 docstrings give (the "参考样例" examples, scaled where noted): each valid call reaches the
kernel unchanged, and a single mutation of it is stopped naming the right check.
"""

from __future__ import annotations

import pytest

from runtime_guard import patching
from tests.real_npu.harness import not_judged, npu_tensor, passes, rejected, torch, torch_npu

pytestmark = pytest.mark.usefixtures("guard")

BF16 = torch.bfloat16


# --- npu_ring_mla: q/k nope (tokens, heads, 128), rope (tokens, heads, 64), value (tokens, heads, 128)


def ring_mla_args(kv_tokens: int = 200, value: object = None, k_rope: object = None) -> tuple:
    q_nope, q_rope = npu_tensor(200, 64, 128, dtype=BF16), npu_tensor(200, 64, 64, dtype=BF16)
    k_nope = npu_tensor(kv_tokens, 64, 128, dtype=BF16)
    k_rope = k_rope if k_rope is not None else npu_tensor(kv_tokens, 64, 64, dtype=BF16)
    value = value if value is not None else npu_tensor(kv_tokens, 64, 128, dtype=BF16)
    mask, seqlen = npu_tensor(512, 512, dtype=BF16), torch.tensor([100, 100], dtype=torch.int32)
    return (q_nope, q_rope, k_nope, k_rope, value, mask, seqlen, 64, 64)


RING_KWARGS = {"qk_scale": 128**-0.5, "kernel_type": "kernel_type_high_precision", "mask_type": "mask_type_triu", "input_layout": "type_bsnd", "calc_type": "calc_type_first_ring"}


@pytest.fixture(autouse=True)
def atb_loaded():
    """torch_npu.atb.X starts as a lazy function that loads ATB and puts torch.ops.atb.X in its place
    on the first call of any of them; that first call goes through the guard as well."""
    if not isinstance(torch_npu.atb.npu_ring_mla, patching.GuardedOp):
        torch_npu.atb.npu_ring_mla(*ring_mla_args(), **RING_KWARGS)
    assert isinstance(torch_npu.atb.npu_ring_mla, patching.GuardedOp)


def test_ring_mla_docstring_call_passes_by_both_names():
    passes(torch_npu.atb.npu_ring_mla, *ring_mla_args(), **RING_KWARGS)
    passes(torch.ops.atb.npu_ring_mla, *ring_mla_args(), **RING_KWARGS)


def test_ring_mla_out_overload_is_checked_too():
    out, lse = npu_tensor(200, 64, 128, dtype=BF16), npu_tensor(64, 200, dtype=torch.float32)
    passes(torch.ops.atb.npu_ring_mla.out, *ring_mla_args(), **RING_KWARGS, output=out, softmax_lse=lse)
    rejected(torch.ops.atb.npu_ring_mla.out, "k_v_token_counts_match", *ring_mla_args(value=npu_tensor(199, 64, 128, dtype=BF16)), **RING_KWARGS, output=out, softmax_lse=lse)


@pytest.mark.parametrize(
    "mutation,check",
    [
        ({"value": npu_tensor(199, 64, 128, dtype=BF16)}, "k_v_token_counts_match"),  # V sliced without K
        ({"value": npu_tensor(200, 32, 128, dtype=BF16)}, "k_v_head_counts_match"),  # V viewed with other heads
        ({"k_rope": npu_tensor(150, 64, 64, dtype=BF16)}, "k_v_token_counts_match"),  # rope part from another chunk
    ],
    ids=["v-truncated", "v-heads", "k-rope-chunk"],
)
def test_ring_mla_single_mutations_are_stopped(mutation, check):
    rejected(torch_npu.atb.npu_ring_mla, check, *ring_mla_args(**mutation), **RING_KWARGS)


# --- npu_multi_head_latent_attention: ctkv and k_rope caches read through one block table


def latent_args(ctkv: object = None, k_rope: object = None, block_tables: object = None, context_lens: object = None) -> tuple:
    q_nope, q_rope = npu_tensor(32, 32, 512), npu_tensor(32, 32, 64)
    ctkv = ctkv if ctkv is not None else npu_tensor(64, 128, 1, 512)
    k_rope = k_rope if k_rope is not None else npu_tensor(64, 128, 1, 64)
    block_tables = block_tables if block_tables is not None else npu_tensor(32, 16, dtype=torch.int32)
    return (q_nope, q_rope, ctkv, k_rope, block_tables, [10] * 32 if context_lens is None else context_lens, 32, 1.0, 1)


def test_latent_attention_docstring_call_passes():
    passes(torch_npu.atb.npu_multi_head_latent_attention, *latent_args())


def test_latent_attention_lse_overload_passes_and_is_checked():
    lse = torch.ops.atb.npu_multi_head_latent_attention.lse
    passes(lse, *latent_args(), True)
    rejected(lse, "caches_match", *latent_args(k_rope=npu_tensor(63, 128, 1, 64)), True)


def test_latent_attention_int8_nz_caches_pass():
    ctkv, k_rope = npu_tensor(64, 512 // 32, 128, 32, dtype=torch.int8), npu_tensor(64, 64 // 16, 128, 16)
    passes(torch_npu.atb.npu_multi_head_latent_attention, *latent_args(ctkv, k_rope), cache_mode="int8_nzcache", qk_descale=npu_tensor(32, dtype=torch.float32), pv_descale=npu_tensor(32, dtype=torch.float32))


def test_latent_attention_int8_nz_caches_of_two_block_sizes_are_stopped():
    ctkv, k_rope = npu_tensor(64, 512 // 32, 128, 32, dtype=torch.int8), npu_tensor(64, 64 // 16, 64, 16)
    rejected(torch_npu.atb.npu_multi_head_latent_attention, "caches_match", *latent_args(ctkv, k_rope), cache_mode="int8_nzcache")


@pytest.mark.parametrize(
    "mutation,check",
    [
        ({"k_rope": npu_tensor(63, 128, 1, 64)}, "caches_match"),  # rope cache from another pool
        ({"k_rope": npu_tensor(64, 64, 1, 64)}, "caches_match"),  # another block size
        ({"ctkv": npu_tensor(64, 128, 2, 512)}, "caches_match"),  # latent cache with other KV heads
        ({"context_lens": [10] * 31}, "per_sequence_lengths_fit"),  # lengths of another batch
        ({"context_lens": [10] * 31 + [16 * 128 + 1]}, "per_sequence_lengths_fit"),  # past the row's blocks
        ({"block_tables": npu_tensor(32 * 16, dtype=torch.int32)}, "block_table_shape"),
    ],
    ids=["rope-blocks", "rope-block-size", "ctkv-heads", "lens-batch", "lens-overflow", "flat-table"],
)
def test_latent_attention_single_mutations_are_stopped(mutation, check):
    rejected(torch_npu.atb.npu_multi_head_latent_attention, check, *latent_args(**mutation))


def test_latent_attention_unknown_cache_mode_is_not_judged():
    not_judged(torch_npu.atb.npu_multi_head_latent_attention, "cache_mode='nz_krope'", *latent_args(), cache_mode="nz_krope")


# --- npu_self_attention_prefix_encoder: K/V caches (blocks, block_size, N, D) or (blocks, block_size, H)


def prefix_args(key: object = None, value: object = None, kv_seqlen: object = None) -> tuple:
    # The docstring's example, 4 sequences over 64 blocks of 128 (its kv_headnum=4 with 28-head caches
    # is kept: the guard does not compare the head-count arguments, see validators.prefix_encoder).
    query = npu_tensor(4 * 128, 28, 128)
    key = key if key is not None else npu_tensor(64, 128, 28, 128)
    value = value if value is not None else npu_tensor(64, 128, 28, 128)
    return (query, key, value, npu_tensor(4, 64, dtype=torch.int32), [32] * 4, [32] * 4 if kv_seqlen is None else kv_seqlen, 28, 0.0883, 4)


def test_prefix_encoder_docstring_call_passes_in_both_cache_forms():
    passes(torch_npu.atb.npu_self_attention_prefix_encoder, *prefix_args())
    passes(torch_npu.atb.npu_self_attention_prefix_encoder, *prefix_args(npu_tensor(64, 128, 28 * 128), npu_tensor(64, 128, 28 * 128)))


@pytest.mark.parametrize(
    "mutation,check",
    [
        ({"value": npu_tensor(63, 128, 28, 128)}, "caches_match"),  # V cache from another pool
        ({"value": npu_tensor(64, 128, 4, 128)}, "caches_match"),  # V with other heads
        ({"value": npu_tensor(64, 128, 28 * 128)}, "rank_matches_layout"),  # K 4-D, V 3-D
        ({"kv_seqlen": [32] * 3}, "per_sequence_lengths_fit"),  # lengths of another batch
    ],
    ids=["v-blocks", "v-heads", "v-rank", "lens-batch"],
)
def test_prefix_encoder_single_mutations_are_stopped(mutation, check):
    rejected(torch_npu.atb.npu_self_attention_prefix_encoder, check, *prefix_args(**mutation))


@pytest.mark.parametrize("name", ["npu_ring_mla", "npu_multi_head_latent_attention", "npu_self_attention_prefix_encoder", "npu_paged_cache_load"])
def test_docstrings_torch_npu_attaches_when_loading_atb_land_on_the_op_as_unguarded(name):
    """torch_npu documents ATB ops as it loads them, through the guard's wrapper by then: the raw op
    keeps the docstring (as it would unguarded) and the wrapper shows the same."""
    wrapper = getattr(torch_npu.atb, name)
    raw = patching.unwrap(wrapper)
    assert raw.__doc__ and f"torch_npu.atb.{name}" in raw.__doc__
    assert wrapper.__doc__ == raw.__doc__
