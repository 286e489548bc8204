"""Every guarded op, through the torch_npu double: a valid call passes, each single mutation is
rejected with its check named, and the docs' per-op "Checks:" lines name exactly the checks held
here (tests/runtime_guard/op_cases.py holds the calls)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError, ops
from tests.runtime_guard.op_cases import CASES

RUNTIME_GUARD_MD = Path(__file__).parents[2] / "docs" / "runtime_guard.md"

pytestmark = pytest.mark.usefixtures("guard")

VALID = [pytest.param(op, case, id=f"{op}-{index}") for op, cases in CASES.items() for index, case in enumerate(cases)]
MUTATED = [
    pytest.param(op, case, mutation, id=f"{op}-{index}-{mutation.check}-{mutation.what}")
    for op, cases in CASES.items()
    for index, case in enumerate(cases)
    for mutation in case.mutations
]


def guarded_op(name: str, overload: str):
    torch_npu.load_atb_now()  # as a first ATB call would; the guard wraps what torch_npu assigns
    op = getattr(getattr(torch.ops, ops.ROWS_BY_NAME[name].namespace), name)
    return getattr(op, overload) if overload else op


def mutated(op, args: tuple, kwargs: dict, change: dict) -> tuple:
    """``change`` applied by argument name: a positional argument is found by its schema position."""
    positions = [name for name, _, _ in ops.schema_params(op)]
    args, kwargs = list(args), dict(kwargs)
    for name, value in change.items():
        index = positions.index(name)
        if index < len(args):
            args[index] = value
        else:
            kwargs[name] = value
    return tuple(args), kwargs


def test_every_op_in_ops_py_has_a_case_with_mutations():
    assert set(CASES) == set(ops.ROWS_BY_NAME), f"ops without cases: {set(ops.ROWS_BY_NAME) - set(CASES)}; cases of no op: {set(CASES) - set(ops.ROWS_BY_NAME)}"
    assert all(cases and all(case.mutations for case in cases) for cases in CASES.values())


@pytest.mark.parametrize(("op_name", "case"), VALID)
def test_valid_call_passes_and_reaches_the_op(op_name, case):
    op = guarded_op(op_name, case.overload)
    args, kwargs = case.build()
    torch_npu.calls.clear()
    op(*args, **kwargs)
    assert torch_npu.calls and torch_npu.calls[-1].op.partition(".")[0] == op_name, "the valid call must reach the op"


@pytest.mark.parametrize(("op_name", "case", "mutation"), MUTATED)
def test_single_mutation_is_rejected_with_its_check(op_name, case, mutation):
    op = guarded_op(op_name, case.overload)
    args, kwargs = mutated(op, *case.build(), mutation.change())
    torch_npu.calls.clear()
    with pytest.raises(KVConsistencyError) as info:
        op(*args, **kwargs)
    assert info.value.check == mutation.check, f"{mutation.what}: rejected by {info.value.check}, not {mutation.check}"
    assert not torch_npu.calls, "a rejected call must not reach the op"


def documented_checks() -> dict:
    """op -> the checks its per-op section's "Checks:" line names, from docs/runtime_guard.md."""
    text = RUNTIME_GUARD_MD.read_text()
    section = text[text.index("## Per op") : text.index("## Your own attention wrappers")]
    found: dict = {}
    for paragraph in section.split("\n\n"):
        heading = re.match(r"\*\*(.+?)\*\*", paragraph)
        if not heading:
            continue
        shared = re.search(r"^Checks: (.+?)\.$", paragraph, re.MULTILINE)
        own = dict(re.findall(r"^Checks of `(\w+)`: (.+?)\.$", paragraph, re.MULTILINE))
        for name in re.findall(r"`([^`]+)`", heading.group(1)):
            if name in ops.ROWS_BY_NAME:  # any guarded op's name, whatever its namespace calls it
                listed = own.get(name) or (shared and shared.group(1))
                assert listed, f"the section on {heading.group(1)} has no 'Checks:' line for {name}"
                found[name] = set(re.findall(r"`([a-z_]+)`", listed))
    return found


def test_the_docs_name_for_each_op_exactly_the_checks_its_mutations_hold():
    documented = documented_checks()
    assert set(documented) == set(ops.ROWS_BY_NAME)
    for op_name, cases in CASES.items():
        tested = {mutation.check for case in cases for mutation in case.mutations}
        assert documented[op_name] == tested, f"{op_name}: documented but not tested {documented[op_name] - tested}; tested but not documented {tested - documented[op_name]}"
