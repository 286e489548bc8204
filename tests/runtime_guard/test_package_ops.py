"""K/V ops of other packages on the test double: torch.ops._C_ascend.* (vllm-ascend) and
torch.ops.custom.* (custom_ops), registered under the packages' own schemas (package_schemas.py)
after the guard is installed, as importing the package does. Each op: a valid call passes, and one
mutation per check its validator makes is rejected naming that check."""

from __future__ import annotations

import pytest
import torch
import torch_npu

from runtime_guard import KVConsistencyError, ops, patching
from tests.runtime_guard.conftest import npu

BF16 = torch.bfloat16


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


def sfa(namespace: str, **changes) -> tuple:
    k = changes.pop("key", npu(4, 16, 1, 32, dtype=BF16))
    args = [npu(6, 8, 32, dtype=BF16), k, changes.pop("value", k), npu(6, 1, 16, dtype=torch.int32), 0.1]
    args += [1] if namespace == "custom" else []
    kwargs = {"block_table": npu(2, 2, dtype=torch.int32), "key_rope": npu(4, 16, 1, 8, dtype=BF16), "layout_query": "TND", "layout_kv": "PA_BSND", **changes}
    return tuple(args), kwargs


SFA_MUTATIONS = [
    ({"value": npu(4, 16, 2, 32, dtype=BF16)}, "k_v_head_counts_match"),
    ({"value": npu(4, 8, 1, 32, dtype=BF16)}, "k_v_token_counts_match"),
    ({"value": npu(4, 16, 32, dtype=BF16)}, "rank_matches_layout"),
    ({"key_rope": npu(3, 16, 1, 8, dtype=BF16)}, "caches_match"),
    ({"value": torch.zeros(4, 16, 1, 32, dtype=BF16)}, "one_device_of_type"),
    ({"value": "kv"}, "arguments_are_tensors"),
]


@pytest.mark.parametrize("namespace", ["_C_ascend", "custom"])
def test_sparse_flash_attention(packages, namespace):
    target = op(namespace, "npu_sparse_flash_attention")
    args, kwargs = sfa(namespace)
    before = len(torch_npu.calls)
    assert check_of(target, *args, **kwargs) is None
    assert len(torch_npu.calls) == before + 1 and torch_npu.calls[-1].args[1] is args[1], "the valid call reaches the kernel with the caller's tensors"
    for change, check in SFA_MUTATIONS:
        args, kwargs = sfa(namespace, **change)
        assert check_of(target, *args, **kwargs) == check, change


@pytest.mark.parametrize("namespace,name", [("_C_ascend", "npu_kv_quant_sparse_flash_attention"), ("custom", "npu_sparse_flash_attention_antiquant")])
def test_quantised_sparse_attention(packages, namespace, name):
    target = op(namespace, name)

    def call(value=None, layout="PA_BSND"):
        k = npu(4, 16, 1, 40, dtype=torch.int8)
        args = [npu(6, 8, 40, dtype=BF16), k, k if value is None else value, npu(6, 1, 16, dtype=torch.int32), 0.1]
        args += [1, 1, 1] if namespace == "custom" else []
        return check_of(target, *args, layout_query="TND", layout_kv=layout)

    assert call() is None
    assert call(npu(4, 15, 1, 40, dtype=torch.int8)) == "k_v_token_counts_match"
    assert call(npu(4, 16, 2, 40, dtype=torch.int8)) == "k_v_head_counts_match"
    assert call(npu(4, 16, 40, dtype=torch.int8)) == "rank_matches_layout"
    assert call(torch.zeros(4, 16, 1, 40, dtype=torch.int8)) == "one_device_of_type"
    assert call("v") == "arguments_are_tensors"


def indexer(name: str, **changes) -> tuple:
    args = [changes.pop("query", npu(6, 8, 16, dtype=BF16)), changes.pop("key", npu(4, 16, 1, 16, dtype=BF16)), npu(6, 8, dtype=BF16)]
    if name.endswith("_quant"):
        args += [npu(6, 8, dtype=torch.float16), npu(4, 16, 1, dtype=torch.float16)]
    kwargs = {"block_table": npu(2, 2, dtype=torch.int32), "layout_query": "TND", "layout_key": "PA_BSND", **changes}
    return tuple(args), kwargs


@pytest.mark.parametrize("namespace", ["_C_ascend", "custom"])
@pytest.mark.parametrize("name", ["npu_lightning_indexer", "npu_lightning_indexer_quant"])
def test_lightning_indexer(packages, warn_guard, namespace, name):
    import runtime_guard

    runtime_guard.install("raise")
    target = op(namespace, name)
    assert check_of(target, *indexer(name)[0], **indexer(name)[1]) is None
    for change, check in (
        ({"key": npu(4, 16, 1, 8, dtype=BF16)}, "q_k_head_dims_match"),
        ({"key": npu(4, 16, 3, 16, dtype=BF16)}, "kv_heads_divide_q_heads"),
        ({"key": npu(64, 1, 16, dtype=BF16)}, "rank_matches_layout"),
        ({"block_table": None}, "block_table_shape"),
        ({"block_table": npu(2, dtype=torch.int32)}, "block_table_shape"),
        ({"key": torch.zeros(4, 16, 1, 16, dtype=BF16)}, "one_device_of_type"),
        ({"key": None}, "arguments_are_tensors"),
    ):
        args, kwargs = indexer(name, **change)
        assert check_of(target, *args, **kwargs) == check, change
    # A layout pair it does not know goes to the kernel, noted as not judged.
    args, kwargs = indexer(name, layout_key="PA_NZ")
    assert check_of(target, *args, **kwargs) is None
    assert any("PA_NZ" in row[1] for row in warn_guard.not_judged_rows())
