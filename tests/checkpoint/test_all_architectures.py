"""Every configuration class transformers ships, saved as config.json and checked.

The findings must be exactly the defended ones below, and the head counts kvlint resolves must
be the ones transformers' own config objects report.
"""

from __future__ import annotations

import warnings

import pytest

from linter.checkpoint import check_model, checkpoint_codes
from linter.checkpoint.model import load_directory
from linter.checkpoint.resolve import resolve
from linter.settings import Settings

pytestmark = pytest.mark.slow

# Default configs that are genuinely inconsistent: no head_dim, and hidden_size not a multiple
# of the heads. transformers floors the head size (GLM-4.5 MoE: 4096 // 96 = 42, so q_proj has
# 4032 rows for a 4096 hidden size; Qwen3-Omni-MoE text: 2048 // 28 = 73). The released
# checkpoints of both set head_dim = 128; these defaults describe no trained model.
DEFENDED = {
    ("glm4_moe", "KV402"), ("glm4v_moe", "KV402"), ("glm4v_moe_text", "KV402"),
    ("qwen3_omni_moe_text", "KV402"), ("qwen3_omni_moe_thinker", "KV402"),
}


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import transformers
        from transformers import AutoConfig
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

        transformers.logging.set_verbosity_error()
        root = tmp_path_factory.mktemp("configs")
        saved, refused = {}, {}
        for model_type in CONFIG_MAPPING_NAMES:
            try:
                config = AutoConfig.for_model(model_type)
                config.save_pretrained(root / model_type)
            except Exception as exc:  # noqa: BLE001 - a config class that cannot build its defaults
                refused[model_type] = exc
                continue
            saved[model_type] = (root / model_type, config)
    return saved, refused


def test_every_architecture_checks_clean_except_the_defended(configs):
    saved, refused = configs
    assert len(saved) > 800
    # gemma4_assistant's and nougat's defaults do not validate in transformers itself.
    assert set(refused) <= {"gemma4_assistant", "nougat"}
    settings = Settings(select=frozenset(checkpoint_codes()))
    found = {(t, f.code) for t, (path, _) in saved.items() for f in check_model(load_directory(str(path)), settings)}
    assert found == DEFENDED


def test_resolved_head_counts_are_transformers_own(configs):
    saved, _ = configs
    compared = 0
    for model_type, (path, config) in saved.items():
        try:
            text = config.get_text_config(decoder=True)
        except ValueError:
            continue  # several text configs: transformers itself will not pick one
        try:
            heads = getattr(text, "num_attention_heads", None)
            kv = getattr(text, "num_key_value_heads", None)
        except Exception:  # noqa: BLE001, S112 - per-layer (heterogeneous) configs refuse a global count
            continue
        g = resolve(load_directory(str(path)).config.data)
        if isinstance(heads, int) and g.num_heads() is not None:
            assert g.num_heads() == heads, model_type
            compared += 1
            if isinstance(kv, int) and not g.is_mla:
                assert g.num_kv_heads() == kv, model_type
    assert compared > 400
