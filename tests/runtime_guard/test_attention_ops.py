"""Every attention op in every layout: valid calls pass untouched, each kind of K/V drift is stopped."""

from __future__ import annotations

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError
from tests.runtime_guard.calls import (
    OP_LAYOUTS,
    AttentionCase,
    narrowed,
    token_axis,
    with_heads,
)
from tests.runtime_guard.conftest import npu

pytestmark = pytest.mark.usefixtures("guard")
op_layouts = pytest.mark.parametrize("op,layout", OP_LAYOUTS)


def rejected(case: AttentionCase) -> KVConsistencyError:
    with pytest.raises(KVConsistencyError) as info:
        case.call()
    return info.value


@op_layouts
def test_valid_call_reaches_the_op_with_the_same_arguments_and_returns_its_result(op, layout):
    case = AttentionCase(op, layout)
    result = case.call()
    call = torch_npu.calls[-1]
    assert call.op == f"{op}.default"
    assert call.args[0] is case.q and call.args[1] is case.k and call.args[2] is case.v
    first = result[0] if isinstance(result, tuple) else result
    assert first is (call.result[0] if isinstance(call.result, tuple) else call.result)


@op_layouts
def test_key_truncated_on_its_token_axis_is_rejected(op, layout):
    case = AttentionCase(op, layout)
    case.k = narrowed(case.k, token_axis(layout), case.k.shape[token_axis(layout)] - 1)
    error = rejected(case)
    assert error.check == "k_v_token_counts_match"
    assert f"layout {layout}" in str(error) and "K was sliced without V" in str(error)


@op_layouts
def test_value_with_other_heads_is_rejected(op, layout):
    case = AttentionCase(op, layout)
    if layout in ("BSH", "SBH"):
        # H = N * D hides V's heads when V's head dim may differ (MLA); what stays checkable is
        # that V's hidden size splits into K's 2 heads.
        case.v = npu(*case.v.shape[:2], 3 * 5)
    else:
        case.v = with_heads(case.v, layout, 3)
    assert rejected(case).check == "k_v_head_counts_match"


@op_layouts
def test_head_count_argument_must_match_the_query(op, layout):
    case = AttentionCase(op, layout)
    case.heads = 8 if layout not in ("BSH", "SBH") else 3
    assert rejected(case).check == "head_count_matches"


@op_layouts
def test_kv_heads_must_divide_query_heads(op, layout):
    case = AttentionCase(op, layout, heads=6, kv_heads=2)
    case.k, case.v = with_heads(case.k, layout, 4), with_heads(case.v, layout, 4)
    case.declare_kv_heads = False
    assert rejected(case).check == "kv_heads_divide_q_heads"


@op_layouts
def test_query_and_key_head_dims_must_match(op, layout):
    case = AttentionCase(op, layout)
    if layout in ("BSH", "SBH"):
        case.k = npu(*case.k.shape[:2], 2 * 8 + 3)
    else:
        case.k = npu(*case.k.shape[:-1], 16)
    assert rejected(case).check == "q_k_head_dims_match"


@op_layouts
def test_mla_value_head_dim_may_differ(op, layout):
    AttentionCase(op, layout, v_dim=4 if layout not in ("BSH", "SBH") else 8).call()


@op_layouts
def test_key_may_be_the_value_tensor(op, layout):
    case = AttentionCase(op, layout)
    case.v = case.k
    case.call()


@op_layouts
def test_one_dtype_is_required(op, layout):
    case = AttentionCase(op, layout)
    case.v = npu(*case.v.shape, dtype=torch.bfloat16)
    assert rejected(case).check == "one_dtype"


@op_layouts
def test_one_npu_device_is_required(op, layout):
    case = AttentionCase(op, layout)
    case.k = npu(*case.k.shape, index=1)
    assert rejected(case).check == "one_device_of_type"


@op_layouts
def test_rank_must_match_the_layout(op, layout):
    case = AttentionCase(op, layout)
    case.k = npu(*case.k.shape, 1)
    assert rejected(case).check == "rank_matches_layout"


@pytest.mark.parametrize("op,layout", [row for row in OP_LAYOUTS if row[0] != "npu_fusion_attention" and row[1] not in ("BSH", "SBH")])
def test_declared_kv_heads_must_match_the_key(op, layout):
    case = AttentionCase(op, layout, kv_heads=2)
    case.kv_heads = 1  # what the shapes say stays 2
    case.k, case.v = with_heads(case.k, layout, 2), with_heads(case.v, layout, 2)
    error = rejected(case)
    assert error.check == "head_count_matches" and "num_key_value_heads=1" in str(error)


@pytest.mark.parametrize("via", ["torch_npu", "torch.ops.npu"])
def test_both_namespaces_are_guarded(via):
    case = AttentionCase("npu_fusion_attention", "TND")
    case.k = narrowed(case.k, 0, 7)
    with pytest.raises(KVConsistencyError):
        case.call(via)


def test_both_namespaces_hold_one_wrapper():
    assert torch_npu.npu_fusion_attention is torch.ops.npu.npu_fusion_attention


def test_default_overload_is_guarded():
    case = AttentionCase("npu_fusion_attention", "TND")
    case.k = narrowed(case.k, 0, 7)
    args, kwargs = case.arguments()
    with pytest.raises(KVConsistencyError):
        torch.ops.npu.npu_fusion_attention.default(*args, **kwargs)


def test_out_overload_is_guarded_and_passes_valid_calls():
    case = AttentionCase("npu_fused_infer_attention_score", "BSND")
    args, kwargs = case.arguments()
    out, lse = npu(*case.q.shape), npu(1)
    result = torch_npu.npu_fused_infer_attention_score.out(*args, **kwargs, out=[out, lse])
    assert torch_npu.calls[-1].op == "npu_fused_infer_attention_score.out" and result[0] is torch_npu.calls[-1].result[0]
    case.k = narrowed(case.k, 1, 3)
    args, kwargs = case.arguments()
    with pytest.raises(KVConsistencyError) as info:
        torch.ops.npu.npu_fused_infer_attention_score.out(*args, **kwargs, out=[out, lse])
    assert "npu_fused_infer_attention_score.out" in str(info.value)
