"""Garbage arguments: every op, every argument replaced by None (where the schema does not allow it),
lists, strings, numbers, dicts; required arguments left out; an unknown keyword added.

Warn mode must leave the call untouched: the outcome (the kernel's or torch's own error, or the
arguments the kernel saw) is exactly the unguarded one. Raise mode must stop a call whose argument
the guard reads is of the wrong type (or missing) with a KVConsistencyError that names the argument;
garbage the guard does not read, or well-typed values it accepts, must let the kernel say the very
same as without the guard. Neither mode may fail inside the guard.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch_npu

import runtime_guard
from runtime_guard import (
    KVConsistencyError,
    KVGuardInternalWarning,
    ops,
    patching,
)
from tests.runtime_guard.calls import AttentionCase
from tests.runtime_guard.hypothesis_profiles import count
from tests.runtime_guard.strategies import (
    AtbFlash,
    AtbPaged,
    CacheWrite,
    PagedAttention,
    same_value,
)

torch_npu.load_atb_now()

GARBAGE = (None, [1, 2], [None], "x", 1.5, 3, {"a": 1}, ("q",))

BASELINES = {
    "npu_fusion_attention TND": lambda: AttentionCase("npu_fusion_attention", "TND"),
    "npu_fusion_attention BSH": lambda: AttentionCase("npu_fusion_attention", "BSH"),
    "npu_fused_infer_attention_score TND": lambda: AttentionCase("npu_fused_infer_attention_score", "TND"),
    "npu_fused_infer_attention_score_v2 BNSD": lambda: AttentionCase("npu_fused_infer_attention_score_v2", "BNSD"),
    "npu_prompt_flash_attention BSND": lambda: AttentionCase("npu_prompt_flash_attention", "BSND"),
    "npu_incre_flash_attention BSH": lambda: AttentionCase("npu_incre_flash_attention", "BSH"),
    "npu_fused_infer_attention_score paged BNSD": lambda: PagedAttention("npu_fused_infer_attention_score", "BNSD", 2, 4, 2, 8, 8, 6, 4, 3, torch.float16),
    "npu_incre_flash_attention paged BSH": lambda: PagedAttention("npu_incre_flash_attention", "BSH", 2, 4, 2, 8, 8, 6, 4, 3, torch.float16),
    "_npu_flash_attention": lambda: AtbFlash(6, 4, 2, 8, 8, 2, torch.float16),
    "_npu_paged_attention": lambda: AtbPaged(2, 4, 2, 8, 8, 3, 4, 2, torch.float16),
    "_npu_reshape_and_cache": lambda: CacheWrite("_npu_reshape_and_cache", "atb", 5, 2, 8, 8, 6, 4, torch.float16),
    "npu_scatter_pa_kv_cache": lambda: CacheWrite("npu_scatter_pa_kv_cache", "npu", 5, 2, 8, 8, 6, 4, torch.float16),
}

LEFT_OUT = object()
LENGTH_ARGUMENTS = {"actual_seq_qlen", "actual_seq_kvlen", "actual_seq_lengths", "actual_seq_lengths_kv", "seq_len", "context_lens"}


def garbage_calls(case: Any) -> Iterator:
    """(names of the spoiled arguments, the garbage, args, kwargs): one argument spoiled, the
    positional ones from some point on left out, or an unknown keyword added."""
    args, kwargs = case.arguments()
    schema = patching.unwrap(getattr(torch_npu, case.op)).default._schema.arguments
    names = [a.name for a in schema]
    optional = {a.name for a in schema if a.type.kind() == "OptionalType"}  # None is a proper value there

    def junk_for(name: str) -> tuple:
        return tuple(junk for junk in GARBAGE if junk is not None or name not in optional)

    for i in range(len(args)):
        for junk in junk_for(names[i]):
            yield (names[i],), junk, (*args[:i], junk, *args[i + 1 :]), kwargs
        yield tuple(names[i : len(args)]), LEFT_OUT, args[:i], kwargs
    for key in kwargs:
        for junk in junk_for(key):
            yield (key,), junk, args, {**kwargs, key: junk}
    yield ("bogus_option",), 1, args, {**kwargs, "bogus_option": 1}


def names_one_of(message: str, arguments: tuple) -> bool:
    return any(f"{argument}=" in message or f"{argument} missing" in message or f"{argument} " in message for argument in arguments)


def guard_must_object(op: str, arguments: tuple, junk: Any) -> bool:
    """The guard reads one of these host arguments and the garbage is not even of its type."""
    read = set(ops.role_names(ops.ROWS_BY_NAME[op])) - {None, "query", "key", "value", "key_cache", "value_cache", "block_table"}
    spoiled = read.intersection(arguments)
    if not spoiled or junk is LEFT_OUT:
        return bool(spoiled)
    (argument,) = spoiled
    if argument == "input_layout":
        return type(junk) is not str
    if argument in LENGTH_ARGUMENTS or argument in ("slot_indices", "slot_mapping"):
        return not (type(junk) is list and all(type(n) is int for n in junk))
    return type(junk) is not int


def outcome(call: Any, args: tuple, kwargs: dict) -> tuple:
    start = len(torch_npu.calls)
    try:
        call(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        return ("raised", type(exc), str(exc))
    return ("returned", [(c.op, c.args, c.kwargs) for c in torch_npu.calls[start:]])


def same_outcome(left: tuple, right: tuple) -> bool:
    if left[0] != right[0]:
        return False
    return left == right if left[0] == "raised" else same_value(left[1], right[1])


@pytest.mark.parametrize("name", BASELINES)
def test_warn_mode_hands_garbage_to_the_kernel_untouched(fresh_reporter, name):
    case = BASELINES[name]()
    raw = patching.unwrap(getattr(torch_npu, case.op))
    with runtime_guard.guarded("warn"):
        for argument, _, args, kwargs in garbage_calls(case):
            unguarded = outcome(raw, args, kwargs)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                guarded = outcome(getattr(torch_npu, case.op), args, kwargs)
            assert same_outcome(guarded, unguarded), f"{name}: {argument}"
            assert not [w for w in caught if issubclass(w.category, KVGuardInternalWarning)], f"{name}: {argument}"
            count("garbage arguments, warn mode: outcome as without the guard", name)


@pytest.mark.parametrize("name", BASELINES)
def test_raise_mode_names_the_argument_or_leaves_the_kernel_error_as_it_was(fresh_reporter, name):
    case = BASELINES[name]()
    raw = patching.unwrap(getattr(torch_npu, case.op))
    with runtime_guard.guarded("raise"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for argument, junk, args, kwargs in garbage_calls(case):
            guarded = outcome(getattr(torch_npu, case.op), args, kwargs)
            assert not [w for w in caught if issubclass(w.category, KVGuardInternalWarning)], f"{name}: {argument}: the guard failed"
            if guard_must_object(case.op, argument, junk):
                assert guarded[0] == "raised" and guarded[1] is KVConsistencyError, f"{name}: {argument}={junk!r}: {guarded}"
            if guarded[0] == "raised" and guarded[1] is KVConsistencyError:
                assert names_one_of(guarded[2], argument), f"{name}: {argument}: {guarded[2]}"
                count("garbage arguments, raise mode: our error naming the argument", name)
            else:
                assert same_outcome(guarded, outcome(raw, args, kwargs)), f"{name}: {argument}"
                count("garbage arguments, raise mode: not judged, kernel outcome unchanged", name)
