"""runtime_guard.guard(...) on a user's own varlen attention function."""

from __future__ import annotations

import pytest
import torch

import runtime_guard
from runtime_guard import KVConsistencyError

received = []


@runtime_guard.guard(seq_lens_q="cu_seqlens_q", seq_lens_kv="cu_seqlens_k", heads="num_heads", mode="raise")
def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, num_heads, softmax_scale=None):
    """flash-attn style: cu_seqlens start with 0."""
    received.append((q, k, v, cu_seqlens_q, cu_seqlens_k))
    return q.new_zeros(q.shape)


@runtime_guard.guard(layout="layout", query="query", key="key", value="value")
def follows_the_installed_guard(query, key, value, layout):
    return "ran"


def tensors(tokens=9, k_tokens=None, heads=4, kv_heads=2, dim=8):
    return torch.randn(tokens, heads, dim), torch.randn(k_tokens or tokens, kv_heads, dim), torch.randn(tokens, kv_heads, dim)


def test_valid_call_runs_the_function_with_the_same_arguments_and_returns_its_result():
    q, k, v = tensors()
    cu = [0, 4, 9]
    out = varlen_attention(q, k, v, cu, cu, 4)
    assert received[-1][0] is q and received[-1][3] is cu and out.shape == q.shape


def test_truncated_key_is_stopped_before_the_function_runs():
    q, k, v = tensors(k_tokens=8)
    calls = len(received)
    with pytest.raises(KVConsistencyError) as info:
        varlen_attention(q, k, v, [0, 4, 9], [0, 4, 8], 4)
    assert info.value.op == "varlen_attention" and "(layout TND)" in str(info.value)
    assert len(received) == calls


def test_cu_seqlens_ending_at_the_wrong_total_are_stopped():
    q, k, v = tensors()
    with pytest.raises(KVConsistencyError, match="cu_seqlens|actual_seq"):
        varlen_attention(q, k, v, [0, 4, 8], [0, 4, 9], 4)


def test_cu_seqlens_as_a_tensor_are_checked_by_shape_only():
    q, k, v = tensors()
    on_meta = torch.empty(3, dtype=torch.int32, device="meta")  # any read of its values would fail
    varlen_attention(q, k, v, on_meta, on_meta, 4)
    with pytest.raises(KVConsistencyError, match="1-D integer tensor"):
        varlen_attention(q, k, v, torch.empty(3, device="meta"), on_meta, 4)


def test_without_a_mode_the_decorator_follows_the_installed_guard(fresh_reporter):
    q, k, v = tensors(k_tokens=8)
    assert follows_the_installed_guard(q, k, v, "TND") == "ran"
    with runtime_guard.guarded("raise"), pytest.raises(KVConsistencyError):
        follows_the_installed_guard(q, k, v, "TND")


def test_naming_a_parameter_the_function_lacks_is_an_error_at_decoration():
    with pytest.raises(TypeError, match="has no parameter"):
        runtime_guard.guard(query="query")(lambda q, k, v: None)
