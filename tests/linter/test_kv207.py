"""KV207 reads a base class from the sibling module a modular file imports it from."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

from linter.engine import lint_source

BASE = dedent("""\
    class EncoderAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.head_dim = config.hidden_size // config.num_attention_heads
            self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
            self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
""")
MODULAR = dedent("""\
    from ..encoder.modeling_encoder import EncoderAttention


    class DiarizationAttention(EncoderAttention):
        def __init__(self, config):
            super().__init__(config)
            self.v_proj = nn.Linear(config.hidden_size, config.{heads} * self.head_dim, bias=False)
""")


def _tree(tmp_path: Path, heads: str) -> Path:
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder" / "modeling_encoder.py").write_text(BASE)
    (tmp_path / "diarization").mkdir()
    modular = tmp_path / "diarization" / "modular_diarization.py"
    modular.write_text(MODULAR.format(heads=heads))
    return modular


def test_a_redeclared_value_projection_is_compared_with_the_key_of_the_imported_base(tmp_path):
    modular = _tree(tmp_path, "num_attention_heads")
    [finding] = lint_source(modular.read_text(), path=str(modular), codes=["KV207"])
    assert finding.span.row == 7
    assert "inherits `k_proj` from `EncoderAttention`" in finding.message


def test_the_same_head_count_as_the_imported_key_is_silent(tmp_path):
    modular = _tree(tmp_path, "num_key_value_heads")
    assert lint_source(modular.read_text(), path=str(modular), codes=["KV207"]) == []


def test_a_base_module_that_is_missing_or_broken_contributes_nothing(tmp_path):
    modular = _tree(tmp_path, "num_attention_heads")
    (tmp_path / "encoder" / "modeling_encoder.py").write_text("class EncoderAttention(:\n")
    assert lint_source(modular.read_text(), path=str(modular), codes=["KV207"]) == []
    (tmp_path / "encoder" / "modeling_encoder.py").unlink()
    assert lint_source(modular.read_text(), path=str(modular), codes=["KV207"]) == []


def test_a_base_imported_by_absolute_name_of_the_own_package_is_read(tmp_path):
    # transformers' own files import bases by their full name
    # (``from transformers.models.llama.modeling_llama import LlamaAttention``).
    package = tmp_path / "speechlib"
    for folder in ("", "models", "models/encoder", "models/diarization"):
        (package / folder).mkdir(exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    (package / "models" / "encoder" / "modeling_encoder.py").write_text(BASE)
    modular = package / "models" / "diarization" / "modeling_diarization.py"
    text = MODULAR.format(heads="num_attention_heads").replace(
        "from ..encoder.modeling_encoder", "from speechlib.models.encoder.modeling_encoder")
    modular.write_text(text)
    [finding] = lint_source(text, path=str(modular), codes=["KV207"])
    assert finding.span.row == 7 and "inherits `k_proj` from `EncoderAttention`" in finding.message
    # Another package's module of the same path is not this tree's: not read.
    other = text.replace("from speechlib.", "from otherlib.")
    assert lint_source(other, path=str(modular), codes=["KV207"]) == []
    # The same head count as the inherited key: silent.
    same = text.replace("num_attention_heads * self.head_dim, bias", "num_key_value_heads * self.head_dim, bias")
    assert lint_source(same, path=str(modular), codes=["KV207"]) == []
