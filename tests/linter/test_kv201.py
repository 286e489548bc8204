"""KV201 kv-proj-heads-mismatch: K and V projections of one class with different head counts."""

from __future__ import annotations

import textwrap

import pytest

from linter.engine import lint_source


def findings(source: str):
    return lint_source(textwrap.dedent(source), codes=["KV201"])


def _attention(k_line: str, v_line: str, setup: str = "") -> str:
    return (
        "class Attention(nn.Module):\n"
        "    def __init__(self, config, hidden, num_heads, num_kv_heads, head_dim):\n"
        "        super().__init__()\n"
        + "".join(f"        {line}\n" for line in setup.splitlines())
        + f"        {k_line}\n"
        f"        {v_line}\n"
    )


@pytest.mark.parametrize(
    ("k_line", "v_line"),
    [
        pytest.param(
            "self.k_proj = nn.Linear(hidden, config.num_key_value_heads * head_dim)",
            "self.v_proj = nn.Linear(hidden, config.num_attention_heads * head_dim)",
            id="nn-linear-positional",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(in_features=hidden, out_features=num_kv_heads * head_dim)",
            "self.v_proj = nn.Linear(in_features=hidden, out_features=num_heads * head_dim)",
            id="nn-linear-keyword",
        ),
        pytest.param(
            "self.k_proj = ColumnParallelLinear(input_size=hidden, output_size=num_kv_heads * head_dim)",
            "self.v_proj = ColumnParallelLinear(hidden, hidden, bias=False)",
            id="column-parallel-keyword-vs-positional",
        ),
        pytest.param(
            "self.wk = ReplicatedLinear(hidden, self.num_kv_heads * self.head_dim)",
            "self.wv = ReplicatedLinear(hidden, self.num_heads * self.head_dim)",
            id="replicated-wk-wv",
        ),
        pytest.param(
            "self.to_k = nn.Linear(hidden, 8 * 64)",
            "self.to_v = nn.Linear(hidden, 32 * 64)",
            id="to-k-to-v-integers",
        ),
        pytest.param(
            "self.key = nn.Linear(hidden, num_kv_heads * head_dim)",
            "self.value = nn.Linear(hidden, self.all_head_size)",
            id="key-value-layers",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(hidden, head_dim)",
            "self.v_proj = nn.Linear(hidden, num_heads * head_dim)",
            id="mqa-single-head-vs-query-heads",
        ),
        pytest.param(
            "self.k_proj = quant_noise(nn.Linear(hidden, num_kv_heads * head_dim), q_noise, block)",
            "self.v_proj = quant_noise(nn.Linear(hidden, num_heads * head_dim), q_noise, block)",
            id="wrapped-linear",
        ),
        pytest.param(
            "self.k_proj = nn.LazyLinear(num_kv_heads * head_dim)",
            "self.v_proj = nn.LazyLinear(num_heads * head_dim)",
            id="lazy-linear-output-first",
        ),
    ],
)
def test_projections_with_different_head_counts_are_reported(k_line, v_line):
    assert [f.span.row for f in findings(_attention(k_line, v_line))] == [4]


def test_local_alias_is_resolved():
    source = _attention(
        "self.wk = ColumnParallelLinear(hidden, kv_out)",
        "self.wv = ColumnParallelLinear(hidden, num_heads * head_dim)",
        setup="kv_out = num_kv_heads * head_dim",
    )
    assert len(findings(source)) == 1


def test_self_attribute_alias_is_resolved():
    source = _attention(
        "self.k_proj = nn.Linear(hidden, self.kv_dim)",
        "self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim)",
        setup="self.kv_dim = self.num_heads * self.head_dim",
    )
    assert len(findings(source)) == 1


def test_finding_names_both_sides_and_suggests_the_kv_size():
    [finding] = findings(_attention(
        "self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)",
        "self.v_proj = nn.Linear(hidden, num_heads * head_dim)",
    ))
    assert "`num_kv_heads * head_dim`" in finding.message
    assert "`num_heads * head_dim`" in finding.message
    assert [r.span.row for r in finding.related] == [5]
    assert "num_kv_heads * head_dim" in finding.suggestion
    assert finding.fix is None


def test_projections_declared_in_different_methods_of_one_class_are_paired():
    source = """\
    class Attention(nn.Module):
        def build(self, hidden, num_heads, num_kv_heads, head_dim):
            self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)

        def build_value(self, hidden, num_heads, head_dim):
            self.v_proj = nn.Linear(hidden, num_heads * head_dim)
    """
    assert len(findings(source)) == 1


@pytest.mark.parametrize(
    ("k_line", "v_line"),
    [
        pytest.param(
            "self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim, bias=False)",
            "self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim, bias=True)",
            id="bias-only",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(self.kdim, embed_dim)",
            "self.v_proj = nn.Linear(self.vdim, embed_dim)",
            id="cross-attention-input-sizes",
        ),
        pytest.param(
            "self.wk = nn.Linear(hidden, num_heads * qk_head_dim)",
            "self.wv = nn.Linear(hidden, num_heads * v_head_dim)",
            id="mla-head-dims",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(hidden, num_heads * (qk_nope_head_dim + qk_rope_head_dim))",
            "self.v_proj = nn.Linear(hidden, num_heads * self.v_head_dim)",
            id="mla-summed-head-dims",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim)",
            "self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim)",
            id="self-and-bare-spelling",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(hidden, embed_dim)",
            "self.v_proj = nn.Linear(hidden, num_heads * head_dim)",
            id="full-width-is-query-heads",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(hidden, compute_width(config))",
            "self.v_proj = nn.Linear(hidden, num_heads * head_dim)",
            id="unclassifiable-size",
        ),
        pytest.param(
            "self.qkv_proj = nn.Linear(hidden, (num_heads + 2 * num_kv_heads) * head_dim)",
            "self.o_proj = nn.Linear(num_heads * head_dim, hidden)",
            id="fused-qkv",
        ),
        pytest.param(
            "self.q_proj = nn.Linear(hidden, num_heads * head_dim)",
            "self.kv_proj = nn.Linear(hidden, 2 * num_kv_heads * head_dim)",
            id="fused-kv",
        ),
        pytest.param(
            "self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)",
            "self.v_proj = RotatingBuffer(hidden, num_heads * head_dim)",
            id="not-a-linear",
        ),
        pytest.param(
            "self.k_proj = nn.Bilinear(hidden, hidden, num_kv_heads * head_dim)",
            "self.v_proj = nn.Bilinear(hidden, hidden, num_heads * head_dim)",
            id="bilinear-is-not-a-projection",
        ),
    ],
)
def test_look_alikes_are_silent(k_line, v_line):
    assert findings(_attention(k_line, v_line)) == []


def test_class_with_only_k_projection_is_silent():
    assert findings(_attention(
        "self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)",
        "self.q_proj = nn.Linear(hidden, num_heads * head_dim)",
    )) == []


def test_projections_of_different_classes_are_not_paired():
    source = """\
    class KeyTower(nn.Module):
        def __init__(self, hidden, num_kv_heads, head_dim):
            self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)

    class ValueTower(nn.Module):
        def __init__(self, hidden, num_heads, head_dim):
            self.v_proj = nn.Linear(hidden, num_heads * head_dim)
    """
    assert findings(source) == []


def test_branches_for_different_layouts_pair_within_each_branch():
    source = """\
    class Attention(nn.Module):
        def __init__(self, hidden, num_heads, head_dim, multi_query):
            if multi_query:
                self.k_proj = nn.Linear(hidden, head_dim)
                self.v_proj = nn.Linear(hidden, head_dim)
            else:
                self.k_proj = nn.Linear(hidden, num_heads * head_dim)
                self.v_proj = nn.Linear(hidden, num_heads * head_dim)
    """
    assert findings(source) == []


def test_alias_reassigned_in_the_class_is_not_trusted():
    source = _attention(
        "self.k_proj = nn.Linear(hidden, width)",
        "self.v_proj = nn.Linear(hidden, num_heads * head_dim)",
        setup="width = num_kv_heads * head_dim\nif wide:\n    width = num_heads * head_dim",
    )
    assert findings(source) == []


def test_projection_declared_in_a_conditional_expression_is_checked():
    source = _attention(
        "self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)",
        "self.v_proj = None if k_eq_v else nn.Linear(hidden, num_heads * head_dim)",
    )
    assert len(findings(source)) == 1


def test_a_generated_modeling_file_points_to_its_modular_source():
    source = (
        "#           This file was automatically generated from src/transformers/models/foo/modular_foo.py.\n"
        "#               Do NOT edit this file manually as any edits will be overwritten.\n"
        "class FooAttention(nn.Module):\n"
        "    def __init__(self, config):\n"
        "        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)\n"
        "        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)\n"
    )
    (finding,) = lint_source(source, codes=["KV201"])
    assert "generated from `src/transformers/models/foo/modular_foo.py`" in finding.suggestion
    assert finding.message.endswith("(generated from `src/transformers/models/foo/modular_foo.py`)")
    (plain,) = lint_source(source.split("\n", 2)[2], codes=["KV201"])
    assert "generated" not in plain.suggestion


_SHARED_KEY = """\
class SharedKeyAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.k_proj = nn.Linear(hidden_size, self.head_dim)
        self.v_proj = nn.Linear(hidden_size, hidden_size)

    def forward(self, x):
        k, v = self.k_proj(x), self.v_proj(x)
{repeats}        return attend(k, v)
"""


@pytest.mark.parametrize(
    ("repeats", "reported"),
    [
        pytest.param("        k = k.expand(-1, -1, 8, -1)\n", False, id="key-alone-expanded"),
        pytest.param("        k = torch.repeat_interleave(k, 8, dim=2)\n", False, id="key-alone-repeated"),
        pytest.param("", True, id="nothing-repeated"),
        pytest.param("        k = repeat_kv(k, 4)\n        v = repeat_kv(v, 4)\n", True, id="both-repeated"),
    ],
)
def test_one_side_repeated_alone_has_its_heads_on_purpose(repeats: str, reported: bool) -> None:
    """A class that repeats one side alone across heads built it with fewer heads on purpose;
    repeating both (GQA) or neither says nothing about the declarations."""
    found = findings(_SHARED_KEY.format(repeats=repeats))
    assert [f.span.row for f in found] == ([5] if reported else [])
