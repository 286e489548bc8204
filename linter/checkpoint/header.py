"""safetensors headers: tensor names, dtypes and shapes, without reading any tensor data.

A ``.safetensors`` file starts with an 8-byte little-endian header length N, then N bytes of
JSON mapping each tensor name to ``{"dtype", "shape", "data_offsets"}`` (plus an optional
``__metadata__``). Reading those N+8 bytes ourselves needs no dependency and no tensor bytes;
the ``safetensors`` package would add a compiled wheel to the linter's install for the same
result (see docs/checkpoints.md for the measured comparison).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass

# safetensors itself refuses headers above 100 MB (safetensors/src/tensor.rs, MAX_HEADER_SIZE).
MAX_HEADER_BYTES = 100_000_000


class HeaderError(Exception):
    """A file that is not a readable safetensors file; the message says why."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str


def read_header(path: str) -> dict[str, TensorInfo]:
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise HeaderError("shorter than the 8-byte header length; not a safetensors file")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES or length > os.fstat(f.fileno()).st_size - 8:
                raise HeaderError(f"header length {length:,} runs past the file; not a safetensors file or truncated")
            raw = f.read(length)
    except OSError as exc:
        raise HeaderError(exc.strerror or str(exc)) from None
    try:
        text = raw.decode("utf-8")
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeaderError(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise HeaderError("header is not a JSON object")
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("shape"), list) and isinstance(entry.get("dtype"), str)
                and all(isinstance(d, int) and d >= 0 for d in entry["shape"])):
            raise HeaderError(f"tensor {name!r} has no valid dtype and shape in the header")
        tensors[name] = TensorInfo(name, entry["dtype"], tuple(entry["shape"]), path)
    return tensors


def name_column(path: str, name: str) -> int:
    """1-based column of ``name`` in the file's first line: the header is one line of JSON after
    the 8 length bytes, so editors and SARIF viewers land on the tensor. Looked up only for a
    finding, so a clean checkpoint never searches its header."""
    try:
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            raw = f.read(min(length, MAX_HEADER_BYTES))
    except (OSError, struct.error):
        return 1
    offset = raw.find(json.dumps(name).encode())
    return offset + 9 if offset >= 0 else 1
