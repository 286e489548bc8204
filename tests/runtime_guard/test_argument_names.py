"""Every message names the argument of the op actually called, as its schema spells it, says what
must hold, and (for a wrong type) how to pass it; raise mode stops wrong-typed host arguments."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch_npu

import runtime_guard
from runtime_guard import KVConsistencyError, KVConsistencyWarning
from tests.runtime_guard.calls import AttentionCase
from tests.runtime_guard.conftest import npu
from tests.runtime_guard.strategies import (
    AtbFlash,
    AtbPaged,
    CacheWrite,
    PagedAttention,
)

torch_npu.load_atb_now()

HEAD_ARGUMENT = {
    "npu_fusion_attention": "head_num",
    "npu_fused_infer_attention_score": "num_heads",
    "npu_fused_infer_attention_score_v2": "num_query_heads",
    "npu_prompt_flash_attention": "num_heads",
    "npu_incre_flash_attention": "num_heads",
}
GENERIC_WORDS = ("head count", "query-side lengths", "key-side lengths")


def violation(case, **changes) -> KVConsistencyError:
    args, kwargs = case.arguments()
    kwargs.update(changes)
    with pytest.raises(KVConsistencyError) as info:
        getattr(torch_npu, case.op)(*args, **kwargs)
    return info.value


def requirement(error: KVConsistencyError) -> str:
    return str(error).splitlines()[1].strip()


def head_keyword(op: str) -> dict:
    return {} if op == "npu_fusion_attention" else {HEAD_ARGUMENT[op]: 3}


@pytest.mark.parametrize("op", HEAD_ARGUMENT)
def test_a_wrong_head_count_is_named_by_the_ops_own_argument(guard, op):
    case = AttentionCase(op, "BSND")
    if op == "npu_fusion_attention":
        case.heads = 3
    error = violation(case, **head_keyword(op))
    assert error.check == "head_count_matches"
    assert requirement(error).startswith(f"{HEAD_ARGUMENT[op]}=3 must equal the head axis of query ")
    assert not any(word in requirement(error) for word in GENERIC_WORDS)


@pytest.mark.parametrize("op", [op for op in HEAD_ARGUMENT if op != "npu_fusion_attention"])
def test_a_wrong_kv_head_count_is_named_num_key_value_heads(guard, op):
    error = violation(AttentionCase(op, "BSND"), num_key_value_heads=1)
    assert requirement(error).startswith("num_key_value_heads=1 must equal the head axis of key ")


@pytest.mark.parametrize(
    "op,q_arg,kv_arg",
    [
        ("npu_fusion_attention", "actual_seq_qlen", "actual_seq_kvlen"),
        ("npu_fused_infer_attention_score", "actual_seq_lengths", "actual_seq_lengths_kv"),
        ("npu_fused_infer_attention_score_v2", "actual_seq_qlen", "actual_seq_kvlen"),
    ],
)
def test_packed_lengths_are_named_by_the_ops_own_arguments(guard, op, q_arg, kv_arg):
    q_error = violation(AttentionCase(op, "TND"), **{q_arg: [4, 7]})
    kv_error = violation(AttentionCase(op, "TND"), **{kv_arg: [5, 4]})
    assert requirement(q_error).startswith(f"{q_arg} [4, 7] end at 7; they must be cumulative")
    assert requirement(kv_error).startswith(f"{kv_arg} [5, 4] decrease; they must be cumulative")
    assert not any(word in requirement(q_error) + requirement(kv_error) for word in GENERIC_WORDS)


def test_two_batch_sizes_are_named_by_both_arguments(guard):
    error = violation(AttentionCase("npu_fusion_attention", "TND"), actual_seq_qlen=[8], actual_seq_kvlen=[4, 8])
    assert requirement(error) == "actual_seq_qlen (1 sequences) and actual_seq_kvlen (2 sequences) must describe the same batch"


@pytest.mark.parametrize(
    "op,argument",
    [
        ("npu_prompt_flash_attention", "actual_seq_lengths"),
        ("npu_prompt_flash_attention", "actual_seq_lengths_kv"),
        ("npu_fused_infer_attention_score_v2", "actual_seq_qlen"),
        ("npu_fused_infer_attention_score_v2", "actual_seq_kvlen"),
        ("npu_incre_flash_attention", "actual_seq_lengths"),
    ],
)
def test_per_sequence_lengths_are_named_by_the_ops_own_argument(guard, op, argument):
    error = violation(AttentionCase(op, "BSND"), **{argument: [4, 99]})
    assert error.check == "per_sequence_lengths_fit"
    assert requirement(error).startswith(f"{argument} [4, 99] has 99 > 4; each length must be >= 0 and fit ")


@pytest.mark.parametrize("op,argument", [("npu_incre_flash_attention", "actual_seq_lengths"), ("npu_fused_infer_attention_score", "actual_seq_lengths_kv")])
def test_paged_kv_lengths_are_named_by_the_ops_own_argument(guard, op, argument):
    case = PagedAttention(op, "BNSD", 2, 4, 2, 8, 8, 6, 4, 3, torch.float16)
    error = violation(case, **{argument: [1, 99]})
    assert requirement(error).startswith(f"{argument} [1, 99] has 99 > 12; each length must be >= 0 and fit block_table rows x block size")


def test_paged_caches_are_named_key_and_value_as_the_op_calls_them(guard):
    case = PagedAttention("npu_fused_infer_attention_score", "BNSD", 2, 4, 2, 8, 8, 6, 4, 3, torch.float16)
    case.v = case.cache(5, 4, 2, 8)
    error = violation(case)
    assert error.check == "caches_match" and requirement(error).startswith("key (6, 2, 4, 8) and value (5, 2, 4, 8) must agree")


def test_atb_flash_attention_names_seq_len_num_heads_and_num_kv_heads(guard):
    case = AtbFlash(6, 4, 2, 8, 8, 2, torch.float16)
    args = list(case.arguments()[0])
    args[4] = [3, 4]
    with pytest.raises(KVConsistencyError, match=r"seq_len must sum to the token count of query \(6, 4, 8\)"):
        torch_npu._npu_flash_attention(*args)
    for index, name in ((6, "num_heads"), (7, "num_kv_heads")):
        spoiled = list(case.arguments()[0])
        spoiled[index] = 3
        with pytest.raises(KVConsistencyError) as info:
            torch_npu._npu_flash_attention(*spoiled)
        assert requirement(info.value).startswith(f"{name}=3 must equal the head axis of ")


def test_atb_paged_attention_names_context_lens_and_key_cache(guard):
    case = AtbPaged(2, 4, 2, 8, 8, 3, 4, 2, torch.float16)
    args = list(case.arguments()[0])
    args[7] = [1, 99]
    with pytest.raises(KVConsistencyError) as info:
        torch_npu._npu_paged_attention(*args)
    assert requirement(info.value).startswith("context_lens [1, 99] has 99 > 8")
    args = list(case.arguments()[0])
    args[3] = 1
    with pytest.raises(KVConsistencyError) as info:
        torch_npu._npu_paged_attention(*args)
    assert requirement(info.value).startswith("num_kv_heads=1 must equal the head axis of key_cache (3, 4, 2, 8)")


@pytest.mark.parametrize("op,namespace,slot_argument", [("_npu_reshape_and_cache", "atb", "slot_indices"), ("npu_scatter_pa_kv_cache", "npu", "slot_mapping")])
def test_cache_writes_name_their_slot_argument(guard, op, namespace, slot_argument):
    case = CacheWrite(op, namespace, 5, 2, 8, 8, 6, 4, torch.float16)
    case.slots = npu(4, dtype=torch.int32)
    error = violation(case)
    assert requirement(error).startswith(f"{slot_argument} (4,) must hold one slot per token of key (5, 2, 8)")


@pytest.mark.parametrize(
    "op,argument,value,shown",
    [
        ("npu_fusion_attention", "head_num", None, "None (NoneType)"),
        ("npu_fusion_attention", "head_num", 4.0, "4.0 (float)"),
        ("npu_fused_infer_attention_score_v2", "num_query_heads", "4", "'4' (str)"),
        ("npu_prompt_flash_attention", "num_key_value_heads", None, "None (NoneType)"),
        ("npu_incre_flash_attention", "num_heads", 4.0, "4.0 (float)"),
    ],
)
def test_raise_mode_stops_a_head_count_that_is_not_an_int(guard, op, argument, value, shown):
    case = AttentionCase(op, "BNSD")
    args, kwargs = case.arguments()
    if argument == "head_num":
        args = (*args[:3], value, *args[4:])
    else:
        kwargs[argument] = value
    with pytest.raises(KVConsistencyError) as info:
        getattr(torch_npu, op)(*args, **kwargs)
    assert info.value.check == "argument_types"
    assert requirement(info.value).startswith(f"{argument} is {shown}; it must be an int: ")
    assert f"(pass {argument}=<int>)" in str(info.value)


@pytest.mark.parametrize(
    "argument,value,shown",
    [
        ("actual_seq_qlen", [4, "8"], "[4, '8'] (list), whose entry '8' (str) is not an int"),
        ("actual_seq_qlen", [4, 8.0], "[4, 8.0] (list), whose entry 8.0 (float) is not an int"),
        ("actual_seq_kvlen", [None, 8], "[None, 8] (list), whose entry None (NoneType) is not an int"),
        ("actual_seq_kvlen", "x", "'x' (str)"),
    ],
)
def test_raise_mode_stops_lengths_that_are_not_ints(guard, argument, value, shown):
    error = violation(AttentionCase("npu_fusion_attention", "TND"), **{argument: value})
    assert error.check == "argument_types"
    assert requirement(error) == f"{argument} is {shown}; it must be a list of ints or a 1-D integer tensor, or None (pass {argument}=[...] with one int per entry)"


def test_raise_mode_stops_atb_lengths_left_as_none(guard):
    flash = list(AtbFlash(6, 4, 2, 8, 8, 2, torch.float16).arguments()[0])
    flash[4] = None
    paged = list(AtbPaged(2, 4, 2, 8, 8, 3, 4, 2, torch.float16).arguments()[0])
    paged[7] = None
    for op, args, name in ((torch_npu._npu_flash_attention, flash, "seq_len"), (torch_npu._npu_paged_attention, paged, "context_lens")):
        with pytest.raises(KVConsistencyError) as info:
            op(*args)
        assert requirement(info.value) == f"{name} is None (NoneType); it must be a list of ints or a 1-D integer tensor (pass {name}=[...] with one int per entry)"


def test_warn_mode_warns_once_about_a_wrong_type_and_the_kernels_own_error_surfaces(warn_guard):
    case = AttentionCase("npu_fusion_attention", "TND")
    args, kwargs = case.arguments()
    kwargs["actual_seq_qlen"] = [4, "8"]
    raw = runtime_guard.patching.unwrap(torch_npu.npu_fusion_attention)
    with pytest.raises(Exception) as unguarded:
        raw(*args, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            with pytest.raises(type(unguarded.value)) as guarded:
                torch_npu.npu_fusion_attention(*args, **kwargs)
            assert str(guarded.value) == str(unguarded.value)
    ours = [w for w in caught if w.category is KVConsistencyWarning]
    assert len(ours) == 1 and "actual_seq_qlen is [4, '8'] (list)" in str(ours[0].message)


def test_guard_decorated_functions_are_worded_with_their_own_parameter_names(fresh_reporter):
    @runtime_guard.guard(query="xq", key="xk", value="xv", heads="n_heads", seq_lens_q="cu_q", seq_lens_kv="cu_k", mode="raise")
    def attention(xq, xk, xv, n_heads, cu_q, cu_k):
        return xq

    q, kv = torch.randn(8, 4, 8), torch.randn(8, 2, 8)
    with pytest.raises(KVConsistencyError) as info:
        attention(q, kv, kv, 3, [8], [8])
    assert requirement(info.value).startswith("n_heads=3 must equal the head axis of xq (8, 4, 8)")
    with pytest.raises(KVConsistencyError) as info:
        attention(q, kv[:7], kv[:7], 4, [8], [8])
    assert requirement(info.value).startswith("cu_k [8] end at 8; they must be cumulative") and "xk (7, 2, 8)" in str(info.value)


def test_jsonl_record_carries_the_ops_argument_name(tmp_path, monkeypatch):
    log = tmp_path / "guard.jsonl"
    monkeypatch.setattr(runtime_guard.patching.STATE, "reporter", runtime_guard.reporting.Reporter(str(log)))
    args, kwargs = AttentionCase("npu_fused_infer_attention_score_v2", "BNSD").arguments()
    kwargs["num_query_heads"] = None
    with runtime_guard.guarded("raise"), pytest.raises(KVConsistencyError):
        torch_npu.npu_fused_infer_attention_score_v2(*args, **kwargs)
    record = json.loads(log.read_text().splitlines()[0])
    assert record["check"] == "argument_types" and record["requirement"].startswith("num_query_heads is None (NoneType)")
