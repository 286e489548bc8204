"""The harness itself: the real package is loaded and guarded, and both verdicts can fail."""

from __future__ import annotations

import pytest

from runtime_guard import patching
from tests.real_npu.harness import kernel_calls, npu_tensor, passes, rejected, torch, torch_npu


def tnd(tokens: int, heads: int = 4, dim: int = 64):
    return npu_tensor(tokens, heads, dim)


def test_the_real_package_is_loaded_and_guarded(guard):
    assert "site-packages" in torch_npu.__file__
    assert torch.ops.npu.npu_fusion_attention is torch_npu.npu_fusion_attention
    assert isinstance(torch_npu.npu_fusion_attention, patching.GuardedOp)
    assert "npu_fusion_attention" in torch.ops.npu.npu_fusion_attention.default._schema.name


def test_npu_tensors_report_npu_and_views_stay_npu_tensors():
    t = npu_tensor(8, 4, 64, dtype=torch.bfloat16)
    assert t.device.type == "npu" and t.dtype is torch.bfloat16
    part = t[:5]
    assert part.shape == (5, 4, 64) and part.device.type == "npu"


def test_a_valid_call_reaches_the_kernel_unchanged(guard):
    q, k, v = tnd(9), tnd(9), tnd(9)
    call = passes(torch_npu.npu_fusion_attention, q, k, v, 4, "TND", actual_seq_qlen=[4, 9], actual_seq_kvlen=[4, 9])
    assert call.op == "npu::npu_fusion_attention" and call.args[0] is q
    assert len(kernel_calls()) == 2  # the unguarded reference call and the guarded one


def test_a_truncated_key_is_rejected_before_the_kernel(guard):
    q, v = tnd(9), tnd(9)
    rejected(torch_npu.npu_fusion_attention, "k_v_token_counts_match", q, q[:8], v, 4, "TND", actual_seq_qlen=[4, 9], actual_seq_kvlen=[4, 9])
    assert kernel_calls() == []


def test_passes_fails_when_the_guard_rejects(guard):
    q, v = tnd(9), tnd(9)
    with pytest.raises(Exception, match="k_v_token_counts_match"):
        passes(torch_npu.npu_fusion_attention, q, q[:8], v, 4, "TND", actual_seq_qlen=[4, 9], actual_seq_kvlen=[4, 9])


def test_rejected_fails_when_the_call_passes(guard):
    q = tnd(9)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        rejected(torch_npu.npu_fusion_attention, "k_v_token_counts_match", q, q, q, 4, "TND", actual_seq_qlen=[4, 9], actual_seq_kvlen=[4, 9])
