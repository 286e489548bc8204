"""K/V ops of other packages on the test double: torch.ops._C_ascend.* (vllm-ascend) and
torch.ops.custom.* (custom_ops), registered under the packages' own schemas (package_schemas.py)
after the guard is installed, as importing the package does: they are wrapped, unwrapped again,
and reach the kernel with the caller's tensors or unjudged. Each op's valid call and one mutation
per check are in op_cases.py (test_every_op.py runs them)."""

from __future__ import annotations

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError, ops, patching
from runtime_guard.reporting import KVGuardNotJudgedWarning
from tests.runtime_guard.op_cases import CASES


@pytest.fixture
def packages(guard):
    torch_npu.load_package_ops()
    return guard


def op(namespace: str, name: str):
    return getattr(getattr(torch.ops, namespace), name)


def check_of(target, *args, **kwargs) -> str | None:
    try:
        target(*args, **kwargs)
    except KVConsistencyError as error:
        return error.check
    return None


def test_package_ops_are_wrapped_when_registered_after_the_guard(packages):
    for row in ops.PACKAGE_ROWS:
        wrapper = op(row.namespace, row.name)
        assert isinstance(wrapper, patching.GuardedOp), f"torch.ops.{row.namespace}.{row.name}"
        names = {name for name, _, _ in ops.schema_params(patching.unwrap(wrapper))}
        assert {role for role in row.roles if isinstance(role, str)} <= names, row


def test_uninstalling_puts_the_raw_package_ops_back(packages):
    import runtime_guard

    runtime_guard.uninstall()
    assert not isinstance(op("_C_ascend", "npu_sparse_flash_attention"), patching.GuardedOp)


@pytest.mark.parametrize("namespace", ["_C_ascend", "custom"])
def test_a_valid_sparse_attention_call_reaches_the_kernel_with_the_callers_tensors(packages, namespace):
    (case,) = CASES[(namespace, "npu_sparse_flash_attention")]
    args, kwargs = case.build()
    before = len(torch_npu.calls)
    assert check_of(op(namespace, "npu_sparse_flash_attention"), *args, **kwargs) is None
    key = kwargs["key"] if namespace == "_C_ascend" else args[1]
    reached = torch_npu.calls[before:]
    assert len(reached) == 1 and reached[0].args[1] is key, "the kernel gets the caller's key cache itself"


@pytest.mark.parametrize("namespace", ["_C_ascend", "custom"])
@pytest.mark.parametrize("name", ["npu_lightning_indexer", "npu_lightning_indexer_quant"])
def test_an_indexer_layout_pair_the_guard_does_not_know_goes_to_the_kernel_noted(packages, warn_guard, namespace, name):
    case = CASES[(namespace, name)][0]  # the judged call (the table may hold unjudged ones after it)
    args, kwargs = case.build()
    kwargs["layout_key"] = "PA_NZ"
    with pytest.warns(KVGuardNotJudgedWarning, match="layout_key='PA_NZ'"):
        assert check_of(op(namespace, name), *args, **kwargs) is None
    assert any("PA_NZ" in row[1] for row in warn_guard.not_judged_rows())
