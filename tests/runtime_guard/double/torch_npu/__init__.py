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
        if func.namespace in ("npu", "atb"):
            calls.append(Call(func.__name__, args, kwargs, result))
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


_npu = torch.library.Library("npu", "DEF")
_npu.define(
    "npu_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, Tensor? pse=None, "
    "Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., int pre_tockens=2147483647, "
    "int next_tockens=2147483647, int inner_precise=0, int[]? prefix=None, int[]? actual_seq_qlen=None, "
    "int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False) "
    "-> (Tensor, Tensor, Tensor, Tensor, int, int, int)"
)
_FIA_ARGS = (
    "Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, Tensor? atten_mask=None, "
    "SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, Tensor? block_table=None, "
    "int num_heads=1, float scale=1., int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", "
    "int num_key_value_heads=0, int sparse_mode=0, int inner_precise=0, int block_size=0, bool softmax_lse_flag=False"
)
_npu.define(f"npu_fused_infer_attention_score({_FIA_ARGS}) -> (Tensor, Tensor)")
_npu.define(f"npu_fused_infer_attention_score.out({_FIA_ARGS}, Tensor(a!) attention_out, Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))")
_npu.define(
    "npu_fused_infer_attention_score_v2(Tensor query, Tensor key, Tensor value, *, Tensor? atten_mask=None, "
    "SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_kvlen=None, Tensor? block_table=None, int num_query_heads=1, "
    "int num_key_value_heads=0, float softmax_scale=1., int pre_tokens=2147483647, int next_tokens=2147483647, "
    "str input_layout=\"BSH\", int sparse_mode=0, int block_size=0, bool return_softmax_lse=False) -> (Tensor, Tensor)"
)
_npu.define(
    "npu_prompt_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, Tensor? padding_mask=None, "
    "Tensor? atten_mask=None, int[]? actual_seq_lengths=None, int num_heads=1, float scale_value=1., "
    "int pre_tokens=2147473647, int next_tokens=0, str input_layout=\"BSH\", int num_key_value_heads=0, "
    "int[]? actual_seq_lengths_kv=None, int sparse_mode=0) -> Tensor"
)
_npu.define(
    "npu_incre_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, Tensor? atten_mask=None, "
    "SymInt[]? actual_seq_lengths=None, Tensor? block_table=None, int num_heads=1, float scale_value=1., "
    "str input_layout=\"BSH\", int num_key_value_heads=0, int block_size=0, int inner_precise=1) -> Tensor"
)
_npu.define(
    "npu_scatter_pa_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_mapping, *, "
    "Tensor? compress_lens=None, Tensor? compress_seq_offset=None, Tensor? seq_lens=None, str cache_mode=\"Norm\") -> ()"
)


def _fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=0, next_tockens=0, inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, *rest):
    if input_layout == "TND" and actual_seq_qlen is not None and actual_seq_kvlen is not None:
        out = reference_packed_attention(query, key, value, actual_seq_qlen, actual_seq_kvlen, scale)
    else:
        out = _zeros_like_query(query, value)
    empty = query.new_zeros(0)
    return out, empty, empty.clone(), empty.clone(), 0, 0, 0


def _two_outputs(query, key, value, **kwargs):
    return _zeros_like_query(query, value), query.new_zeros(1)


def _fia_out(query, key, value, *, attention_out, softmax_lse, **kwargs):
    attention_out.zero_()
    return attention_out, softmax_lse


def _one_output(query, key, value, **kwargs):
    return _zeros_like_query(query, value)


def _scatter(key, value, key_cache, value_cache, slot_mapping, **kwargs):
    return None


_npu.impl("npu_fusion_attention", _fusion_attention, "CompositeExplicitAutograd")
_npu.impl("npu_fused_infer_attention_score", _two_outputs, "CompositeExplicitAutograd")
_npu.impl("npu_fused_infer_attention_score.out", _fia_out, "CompositeExplicitAutograd")
_npu.impl("npu_fused_infer_attention_score_v2", _two_outputs, "CompositeExplicitAutograd")
_npu.impl("npu_prompt_flash_attention", _one_output, "CompositeExplicitAutograd")
_npu.impl("npu_incre_flash_attention", _one_output, "CompositeExplicitAutograd")
_npu.impl("npu_scatter_pa_kv_cache", _scatter, "CompositeExplicitAutograd")


@torch.library.register_fake("npu::npu_fusion_attention", lib=_npu)
def _fusion_attention_fake(query, key, value, head_num, input_layout, *args, **kwargs):
    empty = query.new_empty(0)
    return query.new_empty(*query.shape[:-1], value.shape[-1]), empty, empty.clone(), empty.clone(), 0, 0, 0


npu_fusion_attention = torch.ops.npu.npu_fusion_attention
npu_fused_infer_attention_score = torch.ops.npu.npu_fused_infer_attention_score
npu_fused_infer_attention_score_v2 = torch.ops.npu.npu_fused_infer_attention_score_v2
npu_prompt_flash_attention = torch.ops.npu.npu_prompt_flash_attention
npu_incre_flash_attention = torch.ops.npu.npu_incre_flash_attention
npu_scatter_pa_kv_cache = torch.ops.npu.npu_scatter_pa_kv_cache

ATB_OPS = ("_npu_flash_attention", "_npu_paged_attention", "_npu_reshape_and_cache")
_atb: list = []


def _load_atb() -> None:
    """Register the ATB ops on first use, as torch_npu loads its ATB library lazily."""
    if _atb:
        return
    lib = torch.library.Library("atb", "DEF")
    lib.define("_npu_flash_attention(Tensor query, Tensor key, Tensor value, Tensor mask, Tensor seq_len, float scale_value, int num_heads, int num_kv_heads, Tensor(a!) out) -> ()")
    lib.define("_npu_paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, int num_heads, float scale_value, Tensor block_table, Tensor context_lens, Tensor(a!) out) -> ()")
    lib.define("_npu_reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, Tensor slot_indices) -> ()")
    for name in ATB_OPS:
        lib.impl(name, lambda *args, **kwargs: None, "CompositeExplicitAutograd")
    _atb.append(lib)


def _lazy_atb(name: str) -> Any:
    def lazy(*args: Any, **kwargs: Any) -> Any:
        _load_atb()
        op = getattr(torch.ops.atb, name)
        setattr(sys.modules[__name__], name, op)
        return op(*args, **kwargs)

    lazy.__name__ = name
    return lazy


for _name in ATB_OPS:
    setattr(sys.modules[__name__], _name, _lazy_atb(_name))
del _name


def load_atb_now() -> None:
    """Resolve the ATB ops the way a first call would, without calling one."""
    _load_atb()
    for name in ATB_OPS:
        setattr(sys.modules[__name__], name, getattr(torch.ops.atb, name))

