"""Three call shapes the guard once judged wrongly, through the real torch-npu 2.13.0.

- An unused placeholder: npu_mla_prolog_v3 with ckvkr_repo_mode=1 keeps the rope part inside
  kv_cache, and the caller passes an empty kr_cache because the op still takes one (vllm-ascend's
  SFA C8 decode path). A placeholder is not a second cache to compare.
- Keywords of another overload: torch_npu.atb.npu_paged_cache_load(..., key=k, value=v) resolves to
  .out, whose key/value the .default schema lacks (vllm-ascend's mooncake connectors call it so).
- Meta tensors (shape inference, tracing): their shapes are judged, their device never is.
"""

from __future__ import annotations

import pytest

from runtime_guard import patching
from tests.real_npu.harness import not_judged, npu_tensor, passes, rejected, torch, torch_npu

pytestmark = pytest.mark.usefixtures("guard")

BF16 = torch.bfloat16

# --- npu_mla_prolog_v3, SFA C8 decode: 4 tokens, hidden 7168, 32 local heads, latent 512 + rope 64.
# With ckvkr_repo_mode=1 and quant_scale_repo_mode=1 one int8 cache row holds the latent part, its
# per-tile scales (512 / 128 tiles x 4 bytes) and the rope part (64 x 2 bytes): 656 columns.
C8_ROW = 512 + (512 // 128) * 4 + 64 * 2


def prolog_args(kv_cache: object, kr_cache: object) -> tuple:
    return (
        npu_tensor(4, 7168, dtype=BF16),  # token_x
        npu_tensor(7168, 1536, dtype=BF16),  # weight_dq
        npu_tensor(1536, 32 * (128 + 64), dtype=BF16),  # weight_uq_qr
        npu_tensor(32, 128, 512, dtype=BF16),  # weight_uk
        npu_tensor(7168, 512 + 64, dtype=BF16),  # weight_dkv_kr
        npu_tensor(1536, dtype=BF16),  # rmsnorm_gamma_cq
        npu_tensor(512, dtype=BF16),  # rmsnorm_gamma_ckv
        npu_tensor(4, 64, dtype=BF16),  # rope_sin
        npu_tensor(4, 64, dtype=BF16),  # rope_cos
        kv_cache,
        kr_cache,
    )


def c8_kwargs(**changes: object) -> dict:
    kwargs = {"cache_index": npu_tensor(4, 1, dtype=torch.int64), "cache_mode": "PA_BSND", "kv_cache_quant_mode": 3, "ckvkr_repo_mode": 1, "quant_scale_repo_mode": 1, "query_norm_flag": True}
    kwargs.update(changes)
    return kwargs


def test_mla_prolog_v3_with_rope_stored_in_kv_cache_passes_an_empty_kr_cache_placeholder():
    passes(torch_npu.npu_mla_prolog_v3, *prolog_args(npu_tensor(64, 128, 1, C8_ROW, dtype=torch.int8), npu_tensor(0, dtype=BF16)), **c8_kwargs())


def test_mla_prolog_v3_with_separate_caches_still_compares_them():
    kv_cache, kr_cache = npu_tensor(64, 128, 1, 512, dtype=BF16), npu_tensor(64, 128, 1, 64, dtype=BF16)
    passes(torch_npu.npu_mla_prolog_v3, *prolog_args(kv_cache, kr_cache), **c8_kwargs(ckvkr_repo_mode=0, kv_cache_quant_mode=0, quant_scale_repo_mode=0))
    # The empty placeholder where the mode needs a real rope cache is a missing cache.
    rejected(torch_npu.npu_mla_prolog_v3, "caches_match", *prolog_args(kv_cache, npu_tensor(0, dtype=BF16)), **c8_kwargs(ckvkr_repo_mode=0, kv_cache_quant_mode=0, quant_scale_repo_mode=0))
    rejected(torch_npu.npu_mla_prolog_v3, "caches_match", *prolog_args(kv_cache, npu_tensor(63, 128, 1, 64, dtype=BF16)), **c8_kwargs(ckvkr_repo_mode=0, kv_cache_quant_mode=0, quant_scale_repo_mode=0))


def test_mla_prolog_v3_combined_cache_off_the_npu_is_still_rejected():
    rejected(torch_npu.npu_mla_prolog_v3, "one_device_of_type", *prolog_args(torch.empty(64, 128, 1, C8_ROW, dtype=torch.int8), npu_tensor(0, dtype=BF16)), **c8_kwargs())


def test_mla_prolog_v3_with_a_storage_mode_the_docstring_does_not_list_is_not_judged():
    not_judged(torch_npu.npu_mla_prolog_v3, "ckvkr_repo_mode=2", *prolog_args(npu_tensor(64, 128, 1, C8_ROW, dtype=torch.int8), npu_tensor(0, dtype=BF16)), **c8_kwargs(ckvkr_repo_mode=2))


# --- npu_paged_cache_load, mooncake connector: K/V caches (blocks, 128, 8 KV heads, 128), outputs by keyword.


def cache_load_args() -> tuple:
    caches = npu_tensor(64, 128, 8, 128), npu_tensor(64, 128, 8, 128)
    return (*caches, npu_tensor(2, 8, dtype=torch.int32), npu_tensor(2, dtype=torch.int32))


@pytest.fixture
def atb_loaded():
    torch_npu._npu_paged_attention  # noqa: B018 - resolves the lazy ATB functions into torch.ops.atb.X
    if not isinstance(torch_npu.atb.npu_paged_cache_load, patching.GuardedOp):
        torch_npu.atb.npu_paged_cache_load(*cache_load_args())
    assert isinstance(torch_npu.atb.npu_paged_cache_load, patching.GuardedOp)


@pytest.mark.usefixtures("atb_loaded")
@pytest.mark.parametrize("op", ["packet", "out"])
def test_paged_cache_load_with_keyword_outputs_judges_them_through_the_packet_as_through_out(op):
    target = torch_npu.atb.npu_paged_cache_load if op == "packet" else torch_npu.atb.npu_paged_cache_load.out
    seq_starts = npu_tensor(2, dtype=torch.int32)
    call = passes(target, *cache_load_args(), seq_starts=seq_starts, key=npu_tensor(1024, 8, 128), value=npu_tensor(1024, 8, 128))
    assert call.overload == "out"
    rejected(target, "k_v_token_counts_match", *cache_load_args(), seq_starts=seq_starts, key=npu_tensor(1024, 8, 128), value=npu_tensor(1000, 8, 128))


@pytest.mark.usefixtures("atb_loaded")
def test_paged_cache_load_without_outputs_still_passes_as_default():
    assert passes(torch_npu.atb.npu_paged_cache_load, *cache_load_args()).overload == "default"


# --- FIA / FIA_v2 on meta tensors: a BSND prefill, 2 sequences of 16 tokens, 32 query heads, 8 KV heads.


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.float16, device="meta")


FIA = {"fia": ("npu_fused_infer_attention_score", "num_heads"), "fia_v2": ("npu_fused_infer_attention_score_v2", "num_query_heads")}


def meta_call(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple:
    op_name, heads = FIA[name]
    return getattr(torch_npu, op_name), (q, k, v), {heads: 32, "num_key_value_heads": 8, "input_layout": "BSND"}


@pytest.mark.parametrize("name", sorted(FIA))
def test_meta_tensors_are_judged_by_shape_and_reach_the_meta_kernel_as_unguarded(name):
    op, args, kwargs = meta_call(name, meta(2, 16, 32, 128), meta(2, 16, 8, 128), meta(2, 16, 8, 128))
    assert isinstance(op, patching.GuardedOp)
    expected = patching.unwrap(op)(*args, **kwargs)
    before = patching.reporter().not_judged_rows()
    got = op(*args, **kwargs)
    assert [(t.shape, t.dtype, t.device.type) for t in got] == [(t.shape, t.dtype, t.device.type) for t in expected]
    assert patching.reporter().not_judged_rows() == before, "a meta call must be judged, not waved through"


@pytest.mark.parametrize("name", sorted(FIA))
@pytest.mark.parametrize(
    "k,v,check",
    [
        ((2, 16, 8, 128), (2, 15, 8, 128), "k_v_token_counts_match"),  # V sliced without K
        ((2, 16, 8, 128), (2, 16, 4, 128), "k_v_head_counts_match"),  # V with other heads
        ((2, 16, 8, 64), (2, 16, 8, 64), "q_k_head_dims_match"),  # K projected to another head size
    ],
)
def test_meta_tensors_with_inconsistent_shapes_are_rejected_by_the_shape_check(name, k, v, check):
    op, args, kwargs = meta_call(name, meta(2, 16, 32, 128), meta(*k), meta(*v))
    rejected(op, check, *args, **kwargs)

