"""Differential, property-based: valid calls pass the guard unchanged; one mutation is always caught.

Every generated valid call is run twice, through the original op and through the guard (raise
mode): the double must see the same arguments both times and the guard must hand back the very
objects the original returned. Then exactly one thing about the call is broken and the guard must
reject it, naming the check, before the kernel runs.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch_npu
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_guard import KVConsistencyError, patching
from tests.runtime_guard.hypothesis_profiles import PROFILE, count
from tests.runtime_guard.strategies import (
    MUTATION_KINDS,
    VIAS,
    equal_results,
    raw_target,
    same_value,
    target,
    valid_cases,
)

torch_npu.load_atb_now()  # the ATB ops as torch_npu has them after its first ATB call

PER_KIND = settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 3))


def check_valid_call_passes_unchanged(case: Any, via: str) -> None:
    guarded = target(case.op, case.namespace, via)
    assert isinstance(guarded, patching.GuardedOp)
    args, kwargs = case.arguments()
    start = len(torch_npu.calls)
    unguarded_result = raw_target(case.op, via)(*args, **kwargs)
    result = guarded(*args, **kwargs)
    assert len(torch_npu.calls) == start + 2, "each call reaches the kernel exactly once"
    unguarded, through_guard = torch_npu.calls[start:]
    assert through_guard.op == unguarded.op
    assert same_value(through_guard.args, unguarded.args) and same_value(through_guard.kwargs, unguarded.kwargs)
    assert same_value(result, through_guard.result), "the guard returns the original's own result objects"
    assert equal_results(result, unguarded_result)


def check_mutation_is_rejected(case: Any, kind: str, via: str, data: st.DataObject) -> None:
    apply, expected_check = case.mutations()[kind]
    apply(data.draw)
    args, kwargs = case.arguments()
    start = len(torch_npu.calls)
    with pytest.raises(KVConsistencyError) as info:
        target(case.op, case.namespace, via)(*args, **kwargs)
    assert info.value.check == expected_check, f"{kind}: {case!r}"
    assert len(torch_npu.calls) == start, "a rejected call never reaches the kernel"


FAMILY_KINDS = [pytest.param(family, kind, id=f"{family}-{kind}") for family, kinds in MUTATION_KINDS.items() for kind in kinds]


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("family,kind", FAMILY_KINDS)
def test_valid_call_passes_unchanged_and_one_mutation_is_rejected(family, kind):
    @PER_KIND
    @given(case=valid_cases(family, kind), via=st.sampled_from(VIAS), data=st.data())
    def valid_then_mutated(case, via, data):
        check_valid_call_passes_unchanged(case, via)
        count("differential: valid calls passed unchanged", f"{case.op}" + (f" {case.layout}" if hasattr(case, "layout") else ""))
        check_mutation_is_rejected(case, kind, via, data)
        count("differential: one mutation, rejected", f"{family} {kind}")

    valid_then_mutated()
