"""Config resolution, JSON key positions, header reading and the rules' edge cases, on small
inputs written here (no transformers needed)."""

from __future__ import annotations

import json
import struct

import pytest

from linter.checkpoint.header import HeaderError, name_column, read_header
from linter.checkpoint.jsonpos import key_positions
from linter.checkpoint.resolve import resolve
from linter.cli import main
from tests.checkpoint.conftest import write_safetensors


def test_key_positions_follow_nesting_arrays_and_escapes():
    text = '{\n  "a": "x\\"}{,",\n  "text_config": {\n    "num_key_value_heads": 2,\n    "l": [{"k": 1}, {"k": 2}]\n  }\n}'
    positions = key_positions(text)
    assert positions[("a",)] == (2, 3)
    assert positions[("text_config", "num_key_value_heads")] == (4, 5)
    assert positions[("text_config", "l", 1, "k")] == (5, 22)
    assert json.loads(text)  # the scanner's input is valid JSON


@pytest.mark.parametrize(("config", "heads", "kv"), [
    ({"num_attention_heads": 8, "num_key_value_heads": 2}, 8, 2),
    ({"n_head": 8}, 8, 8),  # no KV key: as many as the query heads
    ({"num_attention_heads": 8, "num_kv_heads": 8, "multi_query": True}, 8, 1),  # Falcon-7B
    ({"num_attention_heads": 8, "num_kv_heads": 2, "multi_query": True, "new_decoder_architecture": True}, 8, 2),
    ({"n_heads": 16, "attn_config": {"kv_n_heads": 4}}, 16, 4),  # DBRX
    ({"num_attention_heads": 32, "multi_query_group_num": 2}, 32, 2),  # ChatGLM
    ({"num_attention_heads": 99, "text_config": {"num_attention_heads": 8, "num_key_value_heads": 4}}, 8, 4),
])
def test_resolution_follows_the_aliases_real_configs_use(config, heads, kv):
    g = resolve(config)
    assert (g.num_heads(), g.num_kv_heads()) == (heads, kv)


def test_n_head_kv_wins_like_vllm():
    g = resolve({"num_attention_heads": 8, "num_kv_heads": 2, "n_head_kv": 1})
    assert g.num_kv_heads() == 1 and g.kv_heads.name == "n_head_kv"


def _header_file(tmp_path, raw: bytes, length: int | None = None):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw)
    return str(path)


@pytest.mark.parametrize(("raw", "length", "reason"), [
    (b"{}", 10**12, "runs past the file"),
    (b"not json", None, "header is not JSON"),
    (b"[1]", None, "not a JSON object"),
    (b'{"w": {"dtype": "F16", "shape": [-1]}}', None, "tensor 'w' has no valid dtype and shape"),
])
def test_bad_headers_say_why(tmp_path, raw, length, reason):
    with pytest.raises(HeaderError, match=reason):
        read_header(_header_file(tmp_path, raw, length))


def test_header_reads_shapes_skips_metadata_and_locates_names(tmp_path):
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a.weight": [4, 2], "b.weight": [3]})
    tensors = read_header(str(path))
    assert {n: (t.dtype, t.shape) for n, t in tensors.items()} == {"a.weight": ("BF16", (4, 2)), "b.weight": ("BF16", (3,))}
    raw = path.read_bytes()
    assert raw[name_column(str(path), "b.weight") - 1:].startswith(b'"b.weight"')


def _model(tmp_path, config: dict, shapes: dict | None = None):
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    if shapes is not None:
        write_safetensors(tmp_path / "model.safetensors", shapes)
    return tmp_path


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(["check", "--no-cache", *args])
    return code, capsys.readouterr().out


def _layers(n: int, k_rows: list[int], v_rows: list[int]) -> dict:
    shapes = {}
    for i in range(n):
        shapes[f"model.layers.{i}.self_attn.k_proj.weight"] = [k_rows[i], 64]
        shapes[f"model.layers.{i}.self_attn.v_proj.weight"] = [v_rows[i], 64]
    return shapes


def test_kv_weights_disagree_when_the_config_cannot_size_them(tmp_path, capsys):
    # hidden_size 66 over 4 heads, no head_dim: KV402, and K/V can only be compared to each other
    model = _model(tmp_path, {"hidden_size": 66, "num_attention_heads": 4, "num_key_value_heads": 2}, _layers(2, [32, 32], [32, 64]))
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert "KV402 hidden_size = 66 is not a multiple of num_attention_heads = 4" in out
    assert ("KV405 model.layers.1.self_attn.v_proj.weight has shape [64, 64] but model.layers.1.self_attn.k_proj.weight "
            "has [32, 64]; expected [32, 64]") in out


def test_odd_layer_out_when_the_config_cannot_size_it(tmp_path, capsys):
    model = _model(tmp_path, {"hidden_size": 66, "num_attention_heads": 4}, _layers(3, [32, 48, 32], [32, 48, 32]))
    code, out = run(capsys, "--format", "concise", "--ignore", "KV402", str(model))
    assert code == 1
    assert "KV406 model.layers.1.self_attn.k_proj.weight has shape [48, 64], expected [32, 64] like 2 of the 3 layers" in out
    assert out.count("KV406") == 2  # k_proj and v_proj of layer 1, nothing for the others


def test_vision_tower_and_cross_attention_are_not_held_to_the_text_config(tmp_path, capsys):
    shapes = {
        **_layers(2, [32, 32], [32, 32]),
        "model.vision_tower.encoder.layers.0.self_attn.k_proj.weight": [48, 48],
        "model.layers.0.encoder_attn.k_proj.weight": [80, 64],
    }
    model = _model(tmp_path, {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}, shapes)
    assert run(capsys, str(model)) == (0, "All checks passed!\n")


@pytest.mark.parametrize(("config", "message"), [
    ({"num_attention_heads": 8, "num_key_value_heads": 16}, "KV401 num_key_value_heads = 16 is more than num_attention_heads = 8; expected at most 8 KV heads"),
    ({"num_attention_heads": 0}, "KV401 num_attention_heads is 0; expected a whole number of query heads >= 1"),
    ({"num_attention_heads": 8, "head_dim": -1}, "KV402 head_dim is -1; expected a whole number >= 1"),
    ({"num_attention_heads": 8, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "qk_head_dim": 24},
     "KV403 qk_head_dim = 24 but qk_nope_head_dim + qk_rope_head_dim = 8 + 8 = 16; expected 16"),
])
def test_config_only_findings(tmp_path, capsys, config, message):
    code, out = run(capsys, "--format", "concise", str(_model(tmp_path, config) / "config.json"))
    assert code == 1 and message in out


def test_json_output_points_at_the_key(tmp_path, capsys):
    model = _model(tmp_path, {"hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 3})
    code, out = run(capsys, "--format", "json", str(model))
    assert code == 1
    (entry,) = json.loads(out)
    assert entry["code"] == "KV401" and entry["name"] == "kv-heads-config"
    assert entry["location"] == {"row": 4, "column": 3} and entry["end_location"] == {"row": 4, "column": 24}
    assert entry["filename"] == str((model / "config.json").resolve())


def test_select_ignore_and_per_file_ignores_apply(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    model = _model(tmp_path / "m", {"num_attention_heads": 8, "num_key_value_heads": 3})
    assert run(capsys, str(model))[0] == 1
    assert run(capsys, "--select", "KV1", str(model))[0] == 0
    assert run(capsys, "--ignore", "KV401", str(model))[0] == 0
    (tmp_path / "pyproject.toml").write_text('[tool.kvlint]\nper-file-ignores = {"m/config.json" = ["KV401"]}\n')
    assert run(capsys, str(model))[0] == 0  # found by walking up from the model, like for code


def test_baseline_records_checkpoint_findings(tmp_path, capsys):
    model = _model(tmp_path, {"num_attention_heads": 8, "num_key_value_heads": 3}, _layers(2, [32, 32], [32, 64]))
    baseline = tmp_path / "baseline.json"
    assert main(["check", "--no-cache", "--write-baseline", str(baseline), str(model)]) == 0
    capsys.readouterr()
    assert run(capsys, "--baseline", str(baseline), str(model)) == (0, "All checks passed!\n")


def test_tp_must_be_positive(capsys):
    assert main(["check", "--tp", "0", "."]) == 2
    assert "--tp must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["swa_num_key_value_heads", "num_key_value_heads_per_layer", "kv_source_layers"])
def test_configs_with_per_layer_geometry_are_not_compared_layer_by_layer(tmp_path, capsys, key):
    # inkling's sliding-window layers, sapiens2's per-layer list, mistral_large4's shared KV:
    # layers legitimately differ from the top-level counts
    config = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, key: [1, 2] if key != "swa_num_key_value_heads" else 1}
    model = _model(tmp_path, config, _layers(3, [32, 16, 32], [32, 16, 32]))
    assert run(capsys, str(model)) == (0, "All checks passed!\n")


def _sharded(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}))
    shapes = _layers(2, [32, 32], [32, 32])
    names = list(shapes)
    write_safetensors(tmp_path / "a.safetensors", {n: shapes[n] for n in names[:2]})
    write_safetensors(tmp_path / "b.safetensors", {n: shapes[n] for n in names[2:]})
    weight_map = {**dict.fromkeys(names[:2], "a.safetensors"), **dict.fromkeys(names[2:], "b.safetensors")}
    return tmp_path, weight_map


def _write_index(model, weight_map):
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))


def test_sharded_checkpoint_is_read_through_its_index(tmp_path, capsys):
    model, weight_map = _sharded(tmp_path)
    _write_index(model, weight_map)
    assert run(capsys, str(model)) == (0, "All checks passed!\n")


def test_index_naming_the_wrong_shard_or_a_missing_one_is_a_file_problem(tmp_path, capsys):
    model, weight_map = _sharded(tmp_path)
    name = "model.layers.1.self_attn.k_proj.weight"
    _write_index(model, {**weight_map, name: "a.safetensors", "lm_head.weight": "c.safetensors"})
    assert main(["check", "--no-cache", str(model)]) == 2
    err = capsys.readouterr().err
    assert f"model.safetensors.index.json:6: EKV002 {name} is listed in a.safetensors but that shard's header does not hold it" in err
    assert "c.safetensors:1: EKV001 missing: model.safetensors.index.json lists it as a shard" in err


def test_checking_a_model_loads_neither_torch_nor_numpy_nor_a_parser(tmp_path):
    import subprocess
    import sys

    model = _model(tmp_path, {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3}, _layers(2, [32, 32], [32, 32]))
    probe = (
        "import json, sys\nfrom linter.cli import main\ncode = main(sys.argv[1:])\n"
        "print(json.dumps({'code': code, 'loaded': sorted(m for m in ('torch', 'numpy', 'safetensors', 'transformers', 'libcst') if m in sys.modules)}))"
    )
    out = subprocess.run([sys.executable, "-c", probe, "check", "--no-cache", "--format", "concise", str(model)],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"code": 1, "loaded": []}


def test_checkpoint_codes_match_the_rules():
    from linter.checkpoint import checkpoint_codes, checkpoint_rules

    assert checkpoint_codes() == tuple(r.code for r in checkpoint_rules())
