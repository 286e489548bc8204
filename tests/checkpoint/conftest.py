"""Tiny real checkpoints for the checkpoint rules, built once per session (transformers is a
test-only dependency; the linter never imports it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.checkpoint.tiny_models import (
    MODELS,
    build,
    build_llava,
    build_v_with_query_heads,
)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("tiny")
    built = {}
    for name, (model_type, overrides) in MODELS.items():
        build(model_type, overrides, str(root / name))
        built[name] = root / name
    build_llava(str(root / "llava"))
    built["llava"] = root / "llava"
    build_v_with_query_heads(str(root / "llama_v_query_heads"))
    built["llama_v_query_heads"] = root / "llama_v_query_heads"
    # Sharded: save_pretrained writes model.safetensors.index.json and several shards.
    build(*MODELS["llama"], str(root / "llama_sharded"), max_shard_size="20KB")
    built["llama_sharded"] = root / "llama_sharded"
    built["baichuan"] = _baichuan_from_llama(built["llama"], root / "baichuan")
    return built


def _baichuan_from_llama(llama: Path, target: Path) -> Path:
    """Baichuan's checkpoints are Llama's with q/k/v fused into one W_pack (Baichuan is remote
    code, not in transformers): convert the real Llama checkpoint the way Baichuan stores it."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    shutil.copytree(llama, target)
    tensors = load_file(str(llama / "model.safetensors"))
    for name in [n for n in tensors if n.endswith("self_attn.q_proj.weight")]:
        stem = name.removesuffix("q_proj.weight")
        parts = [tensors.pop(f"{stem}{p}_proj.weight") for p in "qkv"]
        tensors[f"{stem}W_pack.weight"] = np.concatenate(parts)
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


def copy_model(source: Path, target: Path, **config_changes) -> Path:
    """A copy of ``source`` with config.json keys changed (a value of ... deletes the key;
    ``text_config`` changes go in a dict under that key)."""
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    for key, value in config_changes.items():
        section = config
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
            continue
        if value is ...:
            section.pop(key)
        else:
            section[key] = value
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def rewrite_tensor(file: Path, name: str, rows: int) -> None:
    """Give tensor ``name`` in ``file`` a different number of rows (real data, cut or tiled)."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(file))
    t = tensors[name]
    tensors[name] = np.resize(t, (rows, *t.shape[1:])).astype(t.dtype)
    save_file(tensors, str(file), metadata={"format": "pt"})


def write_safetensors(path: Path, shapes: dict[str, list[int]], dtype: str = "BF16") -> None:
    """A safetensors file with these tensor shapes and zero data (for cases no model class
    produces, such as a config that cannot size its projections)."""
    import math
    import struct

    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
