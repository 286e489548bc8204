"""Building valid calls of every guarded attention op in every layout, and mutating them."""

from __future__ import annotations

from typing import Any

import torch
import torch_npu

from tests.runtime_guard.conftest import ends, npu


def shape_for(layout: str, batch: int, seq: int, heads: int, dim: int) -> tuple:
    return {
        "TND": (batch * seq, heads, dim),
        "NTD": (heads, batch * seq, dim),
        "BSND": (batch, seq, heads, dim),
        "BNSD": (batch, heads, seq, dim),
        "BSH": (batch, seq, heads * dim),
        "SBH": (seq, batch, heads * dim),
    }[layout]


def lengths_for(layout: str, batch: int, seq: int) -> list:
    return ends(*[seq] * batch) if layout in ("TND", "NTD") else [seq] * batch


class AttentionCase:
    """One call: tensors and arguments in the op-neutral terms the tests mutate."""

    def __init__(self, op: str, layout: str, batch: int = 2, seq: int = 4, heads: int = 4, kv_heads: int = 2, dim: int = 8, v_dim: int | None = None) -> None:
        self.op, self.layout, self.heads, self.kv_heads = op, layout, heads, kv_heads
        self.q = npu(*shape_for(layout, batch, seq, heads, dim))
        self.k = npu(*shape_for(layout, batch, seq, kv_heads, dim))
        self.v = npu(*shape_for(layout, batch, seq, kv_heads, v_dim or dim))
        self.q_lens = lengths_for(layout, batch, seq)
        self.kv_lens = lengths_for(layout, batch, seq)
        self.declare_kv_heads = True

    def arguments(self) -> tuple:
        kv = self.kv_heads if self.declare_kv_heads else 0
        if self.op == "npu_fusion_attention":
            return (self.q, self.k, self.v, self.heads, self.layout), {"actual_seq_qlen": self.q_lens, "actual_seq_kvlen": self.kv_lens, "scale": 0.5}
        if self.op == "npu_fused_infer_attention_score_v2":
            return (self.q, self.k, self.v), {"num_query_heads": self.heads, "input_layout": self.layout, "num_key_value_heads": kv, "actual_seq_qlen": self.q_lens, "actual_seq_kvlen": self.kv_lens}
        if self.op == "npu_incre_flash_attention":
            return (self.q, self.k, self.v), {"num_heads": self.heads, "input_layout": self.layout, "num_key_value_heads": kv, "actual_seq_lengths": self.kv_lens}
        return (self.q, self.k, self.v), {"num_heads": self.heads, "input_layout": self.layout, "num_key_value_heads": kv, "actual_seq_lengths": self.q_lens, "actual_seq_lengths_kv": self.kv_lens}

    def call(self, via: str = "torch_npu") -> Any:
        args, kwargs = self.arguments()
        op = getattr(torch_npu, self.op) if via == "torch_npu" else getattr(torch.ops.npu, self.op)
        return op(*args, **kwargs)


OP_LAYOUTS = [
    ("npu_fusion_attention", layout) for layout in ("TND", "BSND", "BNSD", "BSH", "SBH")
] + [
    ("npu_fused_infer_attention_score", layout) for layout in ("TND", "NTD", "BSND", "BNSD", "BSH")
] + [
    ("npu_fused_infer_attention_score_v2", layout) for layout in ("TND", "BSND", "BNSD", "BSH")
] + [
    ("npu_prompt_flash_attention", layout) for layout in ("BSND", "BNSD", "BSH")
] + [
    ("npu_incre_flash_attention", layout) for layout in ("BSND", "BNSD", "BSH")
]


def token_axis(layout: str) -> int:
    """The axis a window trim or ring chunk slices: packed tokens, or the sequence axis."""
    return {"TND": 0, "NTD": 1, "BSND": 1, "BNSD": 2, "BSH": 1, "SBH": 0}[layout]


def narrowed(tensor: torch.Tensor, axis: int, length: int) -> torch.Tensor:
    return torch_npu.npu(torch_npu.host(tensor).narrow(axis, 0, length).contiguous(), tensor.device.index)


def with_heads(tensor: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    """Same tokens and head dim, another head count (for H layouts the hidden size changes)."""
    shape = list(tensor.shape)
    if layout in ("BSH", "SBH"):
        shape[2] = shape[2] // 2 * heads  # every test tensor uses kv_heads=2
    else:
        shape[{"TND": 1, "NTD": 0, "BSND": 2, "BNSD": 1}[layout]] = heads
    return npu(*shape, dtype=tensor.dtype)
