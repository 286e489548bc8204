"""Under a TorchFunctionMode (``with torch.device(...)`` is one) each call is checked and counted once.

torch hands such a mode the op it finds by name, which is the guard's wrapper, and the mode calls
it again with the same arguments.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_npu
from torch.overrides import TorchFunctionMode

import runtime_guard
from runtime_guard import KVConsistencyWarning
from tests.runtime_guard.calls import AttentionCase, narrowed


class PassThrough(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def drifted() -> AttentionCase:
    case = AttentionCase("npu_prompt_flash_attention", "BSND")
    case.k = narrowed(case.k, 1, 3)
    return case


@pytest.mark.parametrize("context", [lambda: torch.device("npu:0"), PassThrough], ids=["torch.device", "a pass-through mode"])
def test_a_violation_under_a_function_mode_is_counted_once_and_the_kernel_runs_once(warn_guard, context):
    case = drifted()
    start = len(torch_npu.calls)
    with warnings.catch_warnings(record=True) as caught, context():
        warnings.simplefilter("always")
        case.call()
    assert [row[2] for row in runtime_guard.summary()] == [1]
    assert len([w for w in caught if issubclass(w.category, KVConsistencyWarning)]) == 1
    assert len(torch_npu.calls) == start + 1


def test_a_guarded_wrapper_still_checks_the_op_it_calls_under_a_function_mode(warn_guard):
    @runtime_guard.guard(layout="BSND", heads="heads", mode="warn")
    def attention(q, k, v, heads):
        return torch_npu.npu_prompt_flash_attention(q, narrowed(k, 1, 3), v, num_heads=heads, input_layout="BSND")

    case = AttentionCase("npu_prompt_flash_attention", "BSND")
    with warnings.catch_warnings(record=True), PassThrough():
        warnings.simplefilter("always")
        attention(case.q, case.k, case.v, case.heads)
    assert [(row[0], row[2]) for row in runtime_guard.summary()] == [("torch_npu.npu_prompt_flash_attention", 1)]
