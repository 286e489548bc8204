"""Test double of torch_npu for a CPU-only machine (tests only; the guard never imports this).

Ops are registered with torch.library under torch_npu's dispatcher schemas, so torch_npu.X and
torch.ops.npu.X are the same real OpOverloadPacket with .default/.out overloads. Tensors made by
``npu()`` report an ``npu`` device; their ops record what they receive. The ATB ops start as lazy
Python wrappers that load the ``atb`` library on first call and overwrite themselves with
torch.ops.atb.*, as torch_npu does.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NamedTuple

import torch
from torch.utils._pytree import tree_map

from torch_npu.schemas import SCHEMAS

if torch._C._get_privateuse1_backend_name() != "npu":
    torch.utils.rename_privateuse1_backend("npu")
    # torch_npu registers torch.npu; dynamo looks it up for the renamed backend.
    _device_module = types.ModuleType("torch.npu")
    _device_module.is_available = lambda: False
    _device_module.device_count = lambda: 0
    _device_module.current_device = lambda: 0
    _device_module._is_in_bad_fork = lambda: False
    _device_module.manual_seed_all = lambda seed: None
    torch._register_device_module("npu", _device_module)


class Call(NamedTuple):
    op: str
    args: tuple
    kwargs: dict
    result: Any
    namespace: str = ""  # torch.ops.<namespace>: npu, atb, or another package's


calls: list = []


class NpuTensor(torch.Tensor):
    """A CPU tensor that reports device npu:<index>."""

    @staticmethod
    def __new__(cls, data: torch.Tensor, index: int = 0) -> NpuTensor:  # noqa: PYI034 - a wrapper subclass
        tensor = torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(), dtype=data.dtype, device=torch.device("npu", index))
        tensor.data_ = data
        return tensor

    def __repr__(self) -> str:
        return f"NpuTensor(shape={tuple(self.shape)}, dtype={self.dtype}, device={self.device})"

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        index = next((a.device.index for a in (*args, *kwargs.values()) if isinstance(a, NpuTensor)), 0)
        unwrap = lambda x: x.data_ if isinstance(x, NpuTensor) else x
        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        result = tree_map(lambda x: NpuTensor(x, index) if isinstance(x, torch.Tensor) else x, out)
        if func.namespace in ("npu", "atb", "_C_ascend", "custom"):
            calls.append(Call(func.__name__, args, kwargs, result, func.namespace))
        return result


def npu(tensor: torch.Tensor, index: int = 0) -> NpuTensor:
    return NpuTensor(tensor, index)


def host(tensor: Any) -> torch.Tensor:
    """The CPU data behind an npu() tensor (tests only: the guard never does this)."""
    return tensor.data_ if isinstance(tensor, NpuTensor) else tensor


def reference_packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_ends: list, kv_ends: list, scale: float) -> torch.Tensor:
    """Numerical oracle: per-sequence softmax(q k^T * scale) v over TND tensors, GQA by head repetition."""
    q, k, v = host(q), host(k), host(v)
    groups = q.shape[1] // k.shape[1]
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[2])
    q_start = kv_start = 0
    for q_end, kv_end in zip(q_ends, kv_ends):
        if q_end == 0 and kv_end == 0 and q_start > 0:
            break  # trailing EOD padding
        qs = q[q_start:q_end].transpose(0, 1)
        ks = k[kv_start:kv_end].repeat_interleave(groups, dim=1).transpose(0, 1)
        vs = v[kv_start:kv_end].repeat_interleave(groups, dim=1).transpose(0, 1)
        weights = torch.softmax(qs @ ks.transpose(1, 2) * scale, dim=-1)
        out[q_start:q_end] = (weights @ vs).transpose(0, 1)
        q_start, kv_start = q_end, kv_end
    return out


def _zeros_like_query(query: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return query.new_zeros(*query.shape[:-1], value.shape[-1]) if query.dim() in (3, 4) and value.dim() == query.dim() else query.new_zeros(query.shape)


def _returns(schema: Any, bound: dict) -> Any:
    """Outputs shaped as the schema says: written arguments for Tensor(a!), zeros for fresh tensors."""
    tensors = [v for v in bound.values() if isinstance(v, torch.Tensor)]
    written = {alias: a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write for alias in a.alias_info.before_set}
    results = []
    for ret in schema.returns:
        kind = str(ret.type)
        aliases = [alias for alias in (ret.alias_info.before_set if ret.alias_info is not None else ()) if alias in written]
        if aliases:
            results.append(bound[written[aliases[0]]])
        elif kind == "Tensor[]":
            results.append([])
        elif kind.startswith("Tensor"):
            query, value = bound.get("query"), bound.get("value")
            results.append(_zeros_like_query(query, value) if isinstance(query, torch.Tensor) and isinstance(value, torch.Tensor) else tensors[0].new_zeros(0))
        else:
            results.append({"int": 0, "SymInt": 0, "float": 0.0, "bool": False}[kind])
    return None if not results else results[0] if len(results) == 1 else tuple(results)


def _record_meta(name: str, args: tuple, kwargs: dict, result: Any) -> None:
    """A call over meta tensors (shape inference: torch_npu's meta kernels) is recorded as an npu()
    tensor's call is; npu() tensors reach the ops unwrapped, as CPU tensors, so never twice."""
    if any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in (*args, *kwargs.values())):  # not a FakeTensor: its device is npu
        namespace, _, op = name.partition("::")
        calls.append(Call(op, args, kwargs, result, namespace))


def _generic(schema: Any) -> Any:
    names = [a.name for a in schema.arguments]

    def impl(*args: Any, **kwargs: Any) -> Any:
        bound = dict(zip(names, args), **kwargs)
        result = _returns(schema, bound)
        _record_meta(schema.name, args, kwargs, result)
        return result

    return impl


def _fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=0, next_tockens=0, inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, *rest, **kwargs):
    if input_layout == "TND" and actual_seq_qlen is not None and actual_seq_kvlen is not None:
        out = reference_packed_attention(query, key, value, actual_seq_qlen, actual_seq_kvlen, scale)
    else:
        out = _zeros_like_query(query, value)
    empty = query.new_zeros(0)
    return out, empty, empty.clone(), empty.clone(), 0, 0, 0


def _out_list(query, key, value, *, out, **kwargs):
    """FIA/FIA_v2 .out: the real schema takes ``Tensor[] out`` (attention_out, softmax_lse)."""
    out[0].zero_()
    return out[0], out[1]


_IMPLS = {"npu::npu_fusion_attention": _fusion_attention, "npu::npu_fused_infer_attention_score.out": _out_list, "npu::npu_fused_infer_attention_score_v2.out": _out_list}


def _define(lib: Any, namespace: str) -> None:
    """Register every schema of ``namespace`` from schemas.SCHEMAS, with a generic or specific impl."""
    for text in SCHEMAS:
        if not text.startswith(namespace + "::"):
            continue
        schema = torch._C.parse_schema(text)
        qualified = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        lib.define(text.partition("::")[2])
        lib.impl(qualified.partition("::")[2], _IMPLS.get(qualified) or _generic(schema), "CompositeExplicitAutograd")


_npu = torch.library.Library("npu", "DEF")
_define(_npu, "npu")


@torch.library.register_fake("npu::npu_fusion_attention", lib=_npu)
def _fusion_attention_fake(query, key, value, head_num, input_layout, *args, **kwargs):
    empty = query.new_empty(0)
    result = query.new_empty(*query.shape[:-1], value.shape[-1]), empty, empty.clone(), empty.clone(), 0, 0, 0
    _record_meta("npu::npu_fusion_attention", (query, key, value, head_num, input_layout, *args), kwargs, result)  # also its Meta kernel
    return result


for _schema in SCHEMAS:
    if _schema.startswith("npu::"):
        _op_name = _schema[5:].partition("(")[0].partition(".")[0]
        setattr(sys.modules[__name__], _op_name, getattr(torch.ops.npu, _op_name))

# The real torch_npu exposes its ATB ops as lazy functions: most as torch_npu.X, a few only as
# torch_npu.atb.X (op_plugin/atb/_atb_ops.py's API_LIST and ATB_API_LIST); a first call of either
# loads the library and replaces every lazy function with torch.ops.atb.X.
ATB_MODULE_OPS = ("npu_multi_head_latent_attention", "npu_paged_cache_load", "npu_ring_mla", "npu_self_attention_prefix_encoder")
ATB_OPS = tuple(sorted({text[5:].partition("(")[0].partition(".")[0] for text in SCHEMAS if text.startswith("atb::")} - set(ATB_MODULE_OPS)))
atb = types.ModuleType(f"{__name__}.atb")
sys.modules[atb.__name__] = atb
_atb: list = []


def _load_atb() -> None:
    """Register the ATB ops on first use, as torch_npu loads its ATB library lazily."""
    if _atb:
        return
    lib = torch.library.Library("atb", "DEF")
    _define(lib, "atb")
    _atb.append(lib)


def _lazy_atb(name: str) -> Any:
    def lazy(*args: Any, **kwargs: Any) -> Any:
        load_atb_now()
        return getattr(torch.ops.atb, name)(*args, **kwargs)

    lazy.__name__ = name
    return lazy


for _name in ATB_OPS:
    setattr(sys.modules[__name__], _name, _lazy_atb(_name))
for _name in ATB_MODULE_OPS:
    setattr(atb, _name, _lazy_atb(_name))
del _name


def load_atb_now() -> None:
    """Resolve the ATB ops the way a first call would, without calling one."""
    _load_atb()
    for name in ATB_OPS:
        setattr(sys.modules[__name__], name, getattr(torch.ops.atb, name))
    for name in ATB_MODULE_OPS:
        setattr(atb, name, getattr(torch.ops.atb, name))


_packages: list = []


def load_package_ops() -> None:
    """Register the _C_ascend and custom ops (package_schemas.py), as importing vllm-ascend or
    custom_ops loads their libraries: after torch_npu, at a time of the package's choosing."""
    if _packages:
        return
    from torch_npu.package_schemas import SCHEMAS as PACKAGE_SCHEMAS

    for namespace in ("_C_ascend", "custom"):
        lib = torch.library.Library(namespace, "DEF")
        for text in PACKAGE_SCHEMAS:
            if text.startswith(namespace + "::"):
                schema = torch._C.parse_schema(text)
                lib.define(text.partition("::")[2])
                lib.impl(schema.name.partition("::")[2], _generic(schema), "CompositeExplicitAutograd")
        _packages.append(lib)
