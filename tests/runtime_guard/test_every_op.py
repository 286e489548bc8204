"""Every guarded op, through the torch_npu double: a valid call is judged and passes (or goes
unjudged with the reason its case names), each single mutation is rejected with its check named
(and the words its case names), and the docs' per-op "Checks:" lines name exactly the checks held
here (tests/runtime_guard/op_cases.py holds the calls). Ops are keyed by (namespace, name):
torch_npu's (ops.ROWS) and other packages' (ops.PACKAGE_ROWS, registered in the double as
importing the package would) alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError, ops, patching
from tests.runtime_guard.op_cases import CASES, NOT_PASSED

RUNTIME_GUARD_MD = Path(__file__).parents[2] / "docs" / "runtime_guard.md"

pytestmark = pytest.mark.usefixtures("guard")

GUARDED = {(row.namespace, row.name) for row in ops.ROWS + ops.PACKAGE_ROWS}
TORCH_NPU_NAMESPACES = ("npu", "atb")


def case_id(key: tuple) -> str:
    return key[1] if key[0] in TORCH_NPU_NAMESPACES else ".".join(key)


VALID = [pytest.param(key, case, id=f"{case_id(key)}-{index}") for key, cases in CASES.items() for index, case in enumerate(cases)]
MUTATED = [
    pytest.param(key, case, mutation, id=f"{case_id(key)}-{index}-{mutation.check}-{mutation.what}")
    for key, cases in CASES.items()
    for index, case in enumerate(cases)
    for mutation in case.mutations
]


def guarded_op(key: tuple, overload: str):
    namespace, name = key
    torch_npu.load_atb_now()  # as a first ATB call would; the guard wraps what torch_npu assigns
    if namespace not in TORCH_NPU_NAMESPACES:
        torch_npu.load_package_ops()  # as importing vllm-ascend or custom_ops would, after the guard
    op = getattr(getattr(torch.ops, namespace), name)
    return getattr(op, overload) if overload else op


def mutated(op, args: tuple, kwargs: dict, change: dict) -> tuple:
    """``change`` applied by argument name: a positional argument is found by its schema position;
    ``NOT_PASSED`` drops a keyword argument."""
    positions = [name for name, _, _ in ops.schema_params(op)]
    args, kwargs = list(args), dict(kwargs)
    for name, value in change.items():
        index = positions.index(name)
        if value is NOT_PASSED:
            del kwargs[name]
        elif index < len(args):
            args[index] = value
        else:
            kwargs[name] = value
    return tuple(args), kwargs


def valid_call_problem(op, case) -> str | None:
    """What is wrong with ``case``'s valid call through the guard (None: nothing): rejected, let
    through by a failure of the guard, or judged where it must go unjudged (or the reverse)."""
    unjudged = patching.reporter().unjudged
    unjudged.clear()
    args, kwargs = case.build()
    try:
        op(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a valid call rejected (or broken)
        return f"the valid call raised {type(error).__name__}: {error}"
    reasons = [reason for _, reason in unjudged]
    if case.unjudged:
        return None if any(case.unjudged in reason for reason in reasons) else f"must go unjudged ({case.unjudged!r}); noted: {reasons}"
    return f"must be judged; went unjudged: {reasons}" if reasons else None


def mutation_problem(op, case, mutation) -> str | None:
    """What is wrong with ``mutation`` of ``case`` through the guard (None: rejected as it must be)."""
    args, kwargs = mutated(op, *case.build(), mutation.change())
    try:
        op(*args, **kwargs)
    except KVConsistencyError as error:
        if error.check != mutation.check:
            return f"{mutation.what}: rejected by {error.check}, not {mutation.check}"
        return None if mutation.says in str(error) else f"{mutation.what}: the message does not say {mutation.says!r}: {error}"
    except Exception as error:  # noqa: BLE001
        return f"{mutation.what}: raised {type(error).__name__}: {error}"
    return f"{mutation.what}: not rejected"


def test_every_guarded_op_has_a_case_with_mutations():
    assert set(CASES) == GUARDED, f"ops without cases: {GUARDED - set(CASES)}; cases of no op: {set(CASES) - GUARDED}"
    # A call the guard lets through unjudged may have nothing it checks to mutate.
    assert all(cases and all(case.mutations or case.unjudged for case in cases) for cases in CASES.values())


@pytest.mark.parametrize(("key", "case"), VALID)
def test_valid_call_passes_and_reaches_the_op(key, case):
    op = guarded_op(key, case.overload)
    torch_npu.calls.clear()
    assert (problem := valid_call_problem(op, case)) is None, problem
    assert torch_npu.calls, "the valid call must reach the op"
    reached = torch_npu.calls[-1]
    assert (reached.namespace, reached.op.partition(".")[0]) == key, f"the valid call reached {reached.namespace}::{reached.op}"


@pytest.mark.parametrize(("key", "case", "mutation"), MUTATED)
def test_single_mutation_is_rejected_with_its_check(key, case, mutation):
    op = guarded_op(key, case.overload)
    torch_npu.calls.clear()
    assert (problem := mutation_problem(op, case, mutation)) is None, problem
    assert not torch_npu.calls, "a rejected call must not reach the op"


PACKAGE_OP = re.compile(r"^torch\.ops\.(\w+)\.(\w+)$")


def documented_checks() -> dict:
    """(namespace, name) -> the checks its per-op section's "Checks:" line names, from docs/runtime_guard.md.

    A torch_npu op is named as torch_npu names it (`npu_fusion_attention`), another package's op in full
    (`torch.ops._C_ascend.npu_lightning_indexer`)."""
    text = RUNTIME_GUARD_MD.read_text()
    section = text[text.index("## Per op") : text.index("## Your own attention wrappers")]
    found: dict = {}
    for paragraph in section.split("\n\n"):
        heading = re.match(r"\*\*(.+?)\*\*", paragraph)
        if not heading:
            continue
        shared = re.search(r"^Checks: (.+?)\.$", paragraph, re.MULTILINE)
        own = dict(re.findall(r"^Checks of `([\w.]+)`: (.+?)\.$", paragraph, re.MULTILINE))
        for name in re.findall(r"`([^`]+)`", heading.group(1)):
            package = PACKAGE_OP.match(name)
            key = (package.group(1), package.group(2)) if package else (ops.ROWS_BY_NAME[name].namespace, name) if name in ops.ROWS_BY_NAME else None
            if key not in GUARDED:
                continue
            listed = own.get(name) or (shared and shared.group(1))
            assert listed, f"the section on {heading.group(1)} has no 'Checks:' line for {name}"
            found[key] = set(re.findall(r"`([a-z_]+)`", listed))
    return found


def test_the_docs_name_for_each_op_exactly_the_checks_its_mutations_hold():
    documented = documented_checks()
    assert set(documented) == GUARDED, f"guarded ops without a 'Checks:' line: {GUARDED - set(documented)}"
    for key, cases in CASES.items():
        tested = {mutation.check for case in cases for mutation in case.mutations}
        assert documented[key] == tested, f"{case_id(key)}: documented but not tested {documented[key] - tested}; tested but not documented {tested - documented[key]}"
