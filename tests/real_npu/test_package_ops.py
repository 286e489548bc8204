"""K/V ops of other packages (vllm-ascend's torch.ops._C_ascend, custom_ops' torch.ops.custom) under the
real torch_npu: wrapped once the package registers them, after the guard and torch_npu are in place.

The schemas are the packages' own (package_schemas.py names the files and commits); registering
them here is what importing the package does. Shapes follow the call sites: vllm-ascend's SFA
(device_op.py npu_sparse_flash_attention, sfa_cp.py's lightning indexer) and sglang's DSA paths:
DeepSeek-V3.2 with 16 local heads, latent 512 + rope 64, block size 128, a 64-dim index key.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from runtime_guard import ops, patching
from tests.real_npu.harness import npu_tensor, passes, rejected, torch

PACKAGE_SCHEMAS = Path(__file__).resolve().parents[1] / "runtime_guard" / "double" / "torch_npu" / "package_schemas.py"
BF16 = torch.bfloat16
_libraries: list = []


def _schemas() -> tuple:
    spec = importlib.util.spec_from_file_location("package_schemas", PACKAGE_SCHEMAS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SCHEMAS


@pytest.fixture(scope="module", autouse=True)
def packages_loaded():
    """What `import vllm_ascend` / `import custom_ops` do: define the ops (no kernels: the harness's
    tensors stop before any)."""
    if not _libraries:
        for namespace in ("_C_ascend", "custom"):
            library = torch.library.Library(namespace, "DEF")
            for text in _schemas():
                if text.startswith(namespace + "::"):
                    library.define(text.partition("::")[2])
            _libraries.append(library)


def op(namespace: str, name: str):
    return getattr(getattr(torch.ops, namespace), name)


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("row", ops.PACKAGE_ROWS, ids=lambda row: f"{row.namespace}.{row.name}")
def test_every_package_op_is_wrapped_once_registered_and_binds_every_role_by_name(row):
    wrapper = op(row.namespace, row.name)
    assert isinstance(wrapper, patching.GuardedOp)
    assert wrapper._label == f"torch.ops.{row.namespace}.{row.name}"
    schema_names = {name for name, _, _ in ops.schema_params(patching.unwrap(wrapper))}
    assert {role for role in row.roles if isinstance(role, str)} <= schema_names


# --- sparse flash attention: query (T, 16, 512), latent K = V paged (blocks, 128, 1, 512), rope (blocks, 128, 1, 64)


def sfa_call(namespace: str, key=None, value=None, key_rope=None) -> tuple:
    q, k = npu_tensor(8, 16, 512, dtype=BF16), key if key is not None else npu_tensor(64, 128, 1, 512, dtype=BF16)
    args = [q, k, value if value is not None else k, npu_tensor(8, 1, 2048, dtype=torch.int32), 0.0417]
    if namespace == "custom":
        args.append(1)  # custom_ops' sparse_block_size is positional
    kwargs = {
        "block_table": npu_tensor(4, 32, dtype=torch.int32), "actual_seq_lengths_query": npu_tensor(4, dtype=torch.int32), "actual_seq_lengths_kv": npu_tensor(4, dtype=torch.int32),
        "query_rope": npu_tensor(8, 16, 64, dtype=BF16), "key_rope": key_rope if key_rope is not None else npu_tensor(64, 128, 1, 64, dtype=BF16),
        "layout_query": "TND", "layout_kv": "PA_BSND", "sparse_mode": 3,
    }
    return tuple(args), kwargs


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("namespace", ["_C_ascend", "custom"])
def test_sparse_flash_attention_call_passes_and_single_mutations_are_stopped(namespace):
    target = op(namespace, "npu_sparse_flash_attention")
    passes(target, *sfa_call(namespace)[0], **sfa_call(namespace)[1])
    k = npu_tensor(64, 128, 1, 512, dtype=BF16)
    for mutation, check in (
        ({"value": npu_tensor(64, 128, 2, 512, dtype=BF16)}, "k_v_head_counts_match"),
        ({"value": npu_tensor(64, 64, 1, 512, dtype=BF16)}, "k_v_token_counts_match"),
        ({"key_rope": npu_tensor(63, 128, 1, 64, dtype=BF16)}, "caches_match"),
        ({"value": torch.empty(64, 128, 1, 512, dtype=BF16)}, "one_device_of_type"),
    ):
        args, kwargs = sfa_call(namespace, key=k, **mutation)
        rejected(target, check, *args, **kwargs)


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("namespace,name", [("_C_ascend", "npu_kv_quant_sparse_flash_attention"), ("custom", "npu_sparse_flash_attention_antiquant")])
def test_quantised_sparse_attention_call_passes_and_a_short_v_is_stopped(namespace, name):
    # C8: int8 latent K/V (blocks, 128, 1, 656) with per-tile scales and rope inline.
    k = npu_tensor(64, 128, 1, 656, dtype=torch.int8)
    head = [npu_tensor(8, 16, 576, dtype=BF16), k, k, npu_tensor(8, 1, 2048, dtype=torch.int32), 0.0417]
    head += [1, 1, 1] if namespace == "custom" else []  # sparse_block_size, key/value quant modes
    kwargs = {"block_table": npu_tensor(4, 32, dtype=torch.int32), "layout_query": "TND", "layout_kv": "PA_BSND"}
    target = op(namespace, name)
    passes(target, *head, **kwargs)
    short = list(head)
    short[2] = npu_tensor(64, 127, 1, 656, dtype=torch.int8)
    rejected(target, "k_v_token_counts_match", *short, **kwargs)


# --- lightning indexer: query (T, 64, 128) against a paged index key (blocks, 128, 1, 128)


def indexer_call(name: str, key=None, query=None, block_table="table") -> tuple:
    q = query if query is not None else npu_tensor(8, 64, 128, dtype=BF16)
    k = key if key is not None else npu_tensor(64, 128, 1, 128, dtype=BF16)
    args = [q, k, npu_tensor(8, 64, dtype=BF16)]
    if name.endswith("_quant"):
        args += [npu_tensor(8, 64, dtype=torch.float16), npu_tensor(64, 128, 1, dtype=torch.float16)]
    kwargs = {"actual_seq_lengths_query": npu_tensor(4, dtype=torch.int32), "actual_seq_lengths_key": npu_tensor(4, dtype=torch.int32), "layout_query": "TND", "layout_key": "PA_BSND", "sparse_count": 2048}
    if block_table == "table":
        kwargs["block_table"] = npu_tensor(4, 32, dtype=torch.int32)
    elif block_table is not None:
        kwargs["block_table"] = block_table
    return tuple(args), kwargs


@pytest.mark.usefixtures("guard")
@pytest.mark.parametrize("namespace", ["_C_ascend", "custom"])
@pytest.mark.parametrize("name", ["npu_lightning_indexer", "npu_lightning_indexer_quant"])
def test_lightning_indexer_call_passes_and_single_mutations_are_stopped(namespace, name):
    target = op(namespace, name)
    args, kwargs = indexer_call(name)
    passes(target, *args, **kwargs)
    for mutation, check in (
        ({"key": npu_tensor(64, 128, 1, 64, dtype=BF16)}, "q_k_head_dims_match"),
        ({"key": npu_tensor(64, 128, 3, 128, dtype=BF16)}, "kv_heads_divide_q_heads"),
        ({"key": npu_tensor(8192, 1, 128, dtype=BF16)}, "rank_matches_layout"),
        ({"block_table": None}, "block_table_shape"),
    ):
        args, kwargs = indexer_call(name, **mutation)
        rejected(target, check, *args, **kwargs)
