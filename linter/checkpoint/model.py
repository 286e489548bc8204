"""One model on disk: its config.json, its safetensors headers, and where each thing sits.

A model directory holds ``config.json`` and either ``model.safetensors.index.json`` (sharded:
its ``weight_map`` names the shard of every tensor) or ``*.safetensors`` files. Findings point
at the JSON key in config.json, at the tensor's line in the index for sharded checkpoints, and
at the tensor's name in the header (row 1) for single-file ones. Anything unreadable becomes a
``FileProblem`` naming the file; nothing here raises.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from linter.checkpoint.header import HeaderError, TensorInfo, name_column, read_header
from linter.checkpoint.jsonpos import Path, key_positions
from linter.diagnostics import FileProblem
from linter.finding import Span

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"


@dataclass
class JsonFile:
    path: str
    text: str
    data: dict
    _positions: dict[Path, tuple[int, int]] | None = None

    def span(self, key: Path) -> Span:
        """The key's name in the file; a missing key points at its nearest present parent."""
        if self._positions is None:
            self._positions = key_positions(self.text)
        while key:
            if key in self._positions:
                row, col = self._positions[key]
                return Span(row, col, row, col + len(json.dumps(str(key[-1]))))
            key = key[:-1]
        return Span(1, 1, 1, 2)


@dataclass
class Model:
    config: JsonFile | None = None
    index: JsonFile | None = None
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    problems: list[FileProblem] = field(default_factory=list)

    def tensor_location(self, name: str) -> tuple[str, Span]:
        if self.index is not None:
            return self.index.path, self.index.span(("weight_map", name))
        info = self.tensors[name]
        column = name_column(info.file, name)
        return info.file, Span(1, column, 1, column + len(json.dumps(name)))

    def texts(self) -> dict[str, str]:
        return {f.path: f.text for f in (self.config, self.index) if f is not None}


def _read_json(path: str, model: Model) -> JsonFile | None:
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8-sig")
    except OSError as exc:
        model.problems.append(FileProblem(path, "EKV001", f"cannot read: {exc.strerror or exc}"))
        return None
    except UnicodeDecodeError as exc:
        model.problems.append(FileProblem(path, "EKV002", f"not UTF-8 JSON ({exc.reason} at byte {exc.start})"))
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        model.problems.append(FileProblem(path, "EKV002", f"not valid JSON: {exc.msg}", exc.lineno, exc.colno))
        return None
    if not isinstance(data, dict):
        model.problems.append(FileProblem(path, "EKV002", "not a JSON object; a model config is {...}"))
        return None
    return JsonFile(path, text, data)


def load_config(path: str) -> Model:
    model = Model()
    model.config = _read_json(path, model)
    return model


def load_directory(directory: str) -> Model:
    model = Model()
    config = os.path.join(directory, CONFIG)
    if os.path.isfile(config):
        model.config = _read_json(config, model)
    else:
        model.problems.append(FileProblem(directory, "EKV001", f"no {CONFIG} in this model directory; weights cannot be checked without it"))
    index = os.path.join(directory, INDEX)
    if os.path.isfile(index):
        model.index = _read_json(index, model)
        if model.index is not None:
            _load_sharded(directory, model)
    else:
        for name in sorted(os.listdir(directory)):
            if name.endswith(".safetensors"):
                _load_file(os.path.join(directory, name), model)
    return model


def _load_sharded(directory: str, model: Model) -> None:
    assert model.index is not None
    weight_map = model.index.data.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        model.problems.append(FileProblem(model.index.path, "EKV002", "no weight_map of tensor name -> shard file"))
        return
    for shard in dict.fromkeys(weight_map.values()):
        path = os.path.join(directory, shard)
        if os.path.isfile(path):
            _load_file(path, model)
        else:
            model.problems.append(FileProblem(path, "EKV001", f"missing: {INDEX} lists it as a shard"))
    # The index is what loaders follow: a tensor it lists must be in the shard it names.
    for name, shard in weight_map.items():
        info = model.tensors.get(name)
        if (info is None or os.path.basename(info.file) != shard) and os.path.isfile(os.path.join(directory, shard)):
            span = model.index.span(("weight_map", name))
            model.problems.append(FileProblem(
                model.index.path, "EKV002", f"{name} is listed in {shard} but that shard's header does not hold it",
                span.row, span.column,
            ))


def _load_file(path: str, model: Model) -> None:
    try:
        model.tensors.update(read_header(path))
    except HeaderError as exc:
        model.problems.append(FileProblem(path, "EKV002", f"not a readable safetensors file: {exc}"))
