"""KV407's advice holds up when followed, and KV408 (KV heads replicated) is a warning: reported,
exit status 0 unless the user asks for warnings to fail the run."""

from __future__ import annotations

import json
import re

import pytest

from linter.cli import main

# Head counts of real configs: Qwen2.5-32B, Qwen3-1.7B, GLM-4-9B (multi_query_group_num),
# Falcon-40B (n_head_kv), Gemma-2-9B, and a multi-head model.
MODELS = {
    "qwen2.5-32b": {"model_type": "qwen2", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8},
    "qwen3-1.7b": {"model_type": "qwen3", "hidden_size": 2048, "head_dim": 128, "num_attention_heads": 16, "num_key_value_heads": 8},
    "glm-4-9b": {"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32, "multi_query_group_num": 2},
    "falcon-40b": {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "n_head_kv": 8, "new_decoder_architecture": True},
    "gemma-2-9b": {"model_type": "gemma2", "hidden_size": 3584, "head_dim": 256, "num_attention_heads": 16, "num_key_value_heads": 8},
    "mha": {"model_type": "llama", "hidden_size": 768, "num_attention_heads": 12},
}


def _config(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(MODELS[name], indent=2))
    return str(path)


def _findings(capsys, *args: str) -> tuple[int, list[dict]]:
    code = main(["check", "--no-cache", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def _suggested(message: str) -> tuple[list[int], list[int]]:
    clean = json.loads(re.search(r"expected a tensor-parallel size in (\[[\d, ]*\])", message).group(1))
    also = re.search(r"replicating each KV head: ([^;]*);", message)
    return clean, [int(n) for n in re.findall(r"(\d+) \(\d+x\)", also.group(1))] if also else []


def test_qwen2_5_32b_at_tp_16_suggests_only_sizes_that_pass(tmp_path, capsys):
    config = _config(tmp_path, "qwen2.5-32b")
    code, found = _findings(capsys, config, "--tp", "16")
    assert code == 1 and [f["code"] for f in found] == ["KV407"]
    assert _suggested(found[0]["message"]) == ([1, 2, 4, 8], [40])


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("tp", [3, 6, 16, 64])
def test_every_suggested_size_passes_and_every_replicating_size_only_warns(tmp_path, capsys, name, tp):
    config = _config(tmp_path, name)
    _, found = _findings(capsys, config, "--tp", str(tp))
    advice = [f["message"] for f in found if f["code"] == "KV407"]
    if not advice:
        return  # tp is fine for this model (or only replicates: the next test's case)
    clean, replicating = _suggested(advice[0])
    assert clean and tp not in clean
    for size in clean:
        assert _findings(capsys, config, "--tp", str(size)) == (0, [])
    for size in replicating:
        code, found = _findings(capsys, config, "--tp", str(size))
        assert code == 0 and [(f["code"], f["severity"]) for f in found] == [("KV408", "warning")]


@pytest.mark.parametrize(("name", "tp"), [("qwen3-1.7b", "16"), ("gemma-2-9b", "16"), ("falcon-40b", "16"), ("glm-4-9b", "4"), ("glm-4-9b", "8")])
def test_replicated_kv_heads_are_a_warning_that_exits_0(tmp_path, capsys, name, tp):
    config = _config(tmp_path, name)
    code = main(["check", "--no-cache", config, "--tp", tp])
    out = capsys.readouterr().out
    assert code == 0
    assert "KV408" in out and out.rstrip().endswith("Found 1 warning.")


def test_warnings_as_errors_from_the_command_line_or_the_config(tmp_path, capsys):
    config = _config(tmp_path, "glm-4-9b")
    assert main(["check", "--no-cache", config, "--tp", "8", "--warnings-as-errors"]) == 1
    settings = tmp_path / "kvlint.toml"
    settings.write_text("warnings-as-errors = true\n")
    assert main(["check", "--no-cache", "--config", str(settings), config, "--tp", "8"]) == 1
    assert main(["check", "--no-cache", "--config", str(settings), config, "--tp", "8", "--no-warnings-as-errors"]) == 0
    capsys.readouterr()


def test_machine_formats_mark_the_warning(tmp_path, capsys):
    config = _config(tmp_path, "glm-4-9b")
    main(["check", "--no-cache", "--format", "github", config, "--tp", "8"])
    assert capsys.readouterr().out.startswith("::warning file=")
    main(["check", "--no-cache", "--format", "sarif", config, "--tp", "8"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert [r["level"] for r in run["results"]] == ["warning"]
    rule = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "KV408")
    assert rule["defaultConfiguration"]["level"] == "warning"
