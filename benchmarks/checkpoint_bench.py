"""A 1,000-tensor sharded checkpoint, headers only, checked by ``kvlint check DIR``.

The checkpoint is synthesised: a Llama-shaped config (32 query heads, 8 KV heads, head_dim 128,
125 layers of 8 tensors) and 10 shards whose headers describe BF16 tensors of the real sizes;
the data region is a sparse hole (``truncate``), so the files claim ~100 GB and cost nothing.
Also timed, in-process: reading the same headers with the ``safetensors`` package
(``safe_open(..., framework="numpy")`` and ``get_slice`` per tensor), when it is installed.
"""

from __future__ import annotations

import json
import math
import struct
import time
from pathlib import Path

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, SHARDS = 125, 4096, 32, 8, 128, 14336, 10


def tensors() -> dict[str, list[int]]:
    shapes = {}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        shapes[f"{p}.self_attn.q_proj.weight"] = [HEADS * HEAD_DIM, HIDDEN]
        shapes[f"{p}.self_attn.k_proj.weight"] = [KV_HEADS * HEAD_DIM, HIDDEN]
        shapes[f"{p}.self_attn.v_proj.weight"] = [KV_HEADS * HEAD_DIM, HIDDEN]
        shapes[f"{p}.self_attn.o_proj.weight"] = [HIDDEN, HEADS * HEAD_DIM]
        shapes[f"{p}.mlp.gate_proj.weight"] = [FFN, HIDDEN]
        shapes[f"{p}.mlp.up_proj.weight"] = [FFN, HIDDEN]
        shapes[f"{p}.mlp.down_proj.weight"] = [HIDDEN, FFN]
        shapes[f"{p}.input_layernorm.weight"] = [HIDDEN]
    return shapes


def write_checkpoint(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    shapes = tensors()
    names = list(shapes)
    weight_map = {}
    for s in range(SHARDS):
        shard = f"model-{s + 1:05d}-of-{SHARDS:05d}.safetensors"
        header, offset = {}, 0
        for name in names[s::SHARDS]:
            size = 2 * math.prod(shapes[name])
            header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [offset, offset + size]}
            offset += size
            weight_map[name] = shard
        raw = json.dumps(header, separators=(",", ":")).encode()
        with open(directory / shard, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + offset)  # sparse: the tensor bytes are never written
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))
    config = {"model_type": "llama", "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "head_dim": HEAD_DIM, "num_hidden_layers": LAYERS, "intermediate_size": FFN}
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    return len(shapes)


def safetensors_package_seconds(directory: Path) -> float | None:
    try:
        from safetensors import safe_open
    except ImportError:
        return None
    start = time.perf_counter()
    for shard in sorted(directory.glob("*.safetensors")):
        with safe_open(str(shard), framework="numpy") as f:
            for name in f.keys():  # noqa: SIM118 - a safe_open handle is not a dict
                piece = f.get_slice(name)
                piece.get_shape(), piece.get_dtype()
    return time.perf_counter() - start


def own_reader_seconds(directory: Path) -> float:
    from linter.checkpoint.model import load_directory

    start = time.perf_counter()
    model = load_directory(str(directory))
    assert len(model.tensors) == LAYERS * 8 and not model.problems
    return time.perf_counter() - start
