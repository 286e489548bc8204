"""KV203 gqa-equal-qkv-split: fused QKV cut into equal thirds where K/V have their own head count."""

from __future__ import annotations

import textwrap

import pytest

from linter.engine import lint_source


def findings(source: str):
    return lint_source(textwrap.dedent(source), codes=["KV203"])


def _gqa_class(forward_body: str) -> str:
    return (
        "class Attention(nn.Module):\n"
        "    def __init__(self, config):\n"
        "        self.num_key_value_heads = config.num_key_value_heads\n"
        "\n"
        "    def forward(self, x, b, s):\n"
        + "".join(f"        {line}\n" for line in forward_body.splitlines())
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("q, k, v = self.qkv_proj(x).chunk(3, dim=-1)", id="method-chunk"),
        pytest.param("qkv = self.wqkv(x)\nq, k, v = torch.chunk(qkv, 3, -1)", id="torch-chunk"),
        pytest.param("q, k, v = self.qkv(x).tensor_split(3, -1)", id="tensor-split"),
        pytest.param(
            "query, key, value = self.c_attn(x).split(self.hidden_size, dim=2)",
            id="split-one-int-size-into-three-names",
        ),
        pytest.param("parts = qkv.split([h, h, h], dim=-1)", id="split-three-equal-sizes"),
        pytest.param(
            "sizes = [self.head_dim] * 3\nq, k, v = qkv.split(sizes, dim=-1)",
            id="split-by-a-local-equal-size",
        ),
        pytest.param(
            "sizes = [h, h, h]\nq, k, v = qkv.split(sizes, dim=-1)",
            id="split-by-a-local-list-of-equal-sizes",
        ),
        pytest.param("q, k, v = self.query_key_value(x).float().chunk(3, dim=2)", id="through-methods"),
    ],
)
def test_equal_three_way_splits_are_reported(body):
    assert len(findings(_gqa_class(body))) == 1


def test_module_level_function_with_a_kv_head_count_is_reported():
    source = """\
    def attention(qkv, num_kv_heads):
        q, k, v = qkv.chunk(3, dim=-1)
        return q, k, v
    """
    assert [f.span.row for f in findings(source)] == [2]


def test_finding_points_at_the_split_and_the_kv_head_count():
    [finding] = findings(_gqa_class("q, k, v = self.qkv_proj(x).chunk(3, dim=-1)"))
    assert finding.span.row == 6
    assert "chunk(3, dim=-1)" in finding.message
    assert "num_key_value_heads" in finding.message
    assert [r.span.row for r in finding.related] == [3]
    assert "split([" in finding.suggestion
    assert finding.fix is None


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            "q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)",
            id="split-by-sizes",
        ),
        pytest.param("k, v = self.kv_proj(x).chunk(2, dim=-1)", id="kv-chunk-two"),
        pytest.param(
            "qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim)\n"
            "q, k, v = qkv.chunk(3, dim=2)",
            id="stacked-axis-by-name",
        ),
        pytest.param(
            "q, k, v = self.qkv(x).reshape(b, s, 3, -1).chunk(3, dim=2)",
            id="stacked-axis-inline",
        ),
        pytest.param("q, k, v = torch.stack([a, b, c]).chunk(3, dim=1)", id="stacked-by-torch-stack"),
        pytest.param("q, k, v = self.qkv(x).chunk(3)", id="default-dim-zero"),
        pytest.param("q, k, v = self.qkv(x).chunk(3, dim=self.split_dim)", id="unreadable-dim"),
        pytest.param(
            "shift, scale, gate = self.modulation(x).chunk(3, dim=-1)",
            id="not-a-qkv-tensor",
        ),
        pytest.param("q, kv = self.qkv(x).split(self.hidden_size, dim=-1)", id="split-int-into-two"),
        pytest.param(
            "q, k, v = self.qkv(x).split(self.split_sizes, dim=-1)",
            id="split-by-an-unknown-sizes-attribute",
        ),
        pytest.param(
            "sizes = [self.q_size, self.kv_size, self.kv_size]\nq, k, v = qkv.split(sizes, dim=-1)",
            id="split-by-a-local-list-of-sizes",
        ),
        pytest.param(
            "assert self.num_key_value_heads == self.num_heads\nq, k, v = self.qkv(x).chunk(3, dim=-1)",
            id="asserted-mha",
        ),
        pytest.param(
            "if self.num_key_value_heads == self.num_heads:\n"
            "    q, k, v = self.qkv(x).chunk(3, dim=-1)\n"
            "else:\n"
            "    q, k, v = self.qkv(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)",
            id="branch-on-kv-heads",
        ),
        pytest.param(
            "if self.multi_query:\n"
            "    q, k, v = self.c_attn(x).split((self.embed_dim, self.kv_dim, self.kv_dim), dim=2)\n"
            "else:\n"
            "    q, k, v = self.c_attn(x).split(3 * [self.head_dim], dim=3)",
            id="branch-on-multi-query-flag",
        ),
    ],
)
def test_look_alikes_are_silent(body):
    assert findings(_gqa_class(body)) == []


def test_plain_multi_head_class_is_silent():
    source = """\
    class Attention(nn.Module):
        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
    """
    assert findings(source) == []


def test_kv_head_count_of_another_class_does_not_count():
    source = """\
    class Config:
        num_key_value_heads = 8

    class Attention(nn.Module):
        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
    """
    assert findings(source) == []


def test_kv_head_count_passed_as_a_keyword_name_only_does_not_count():
    source = """\
    class VisionAttention(nn.Module):
        def __init__(self, embed_dim, num_heads, head_dim):
            self.qkv = QKVParallelLinear(embed_dim, head_dim, total_num_heads=num_heads,
                                         total_num_kv_heads=num_heads)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
    """
    assert findings(source) == []


def test_kv_head_count_passed_as_a_keyword_value_counts():
    source = """\
    class Attention(nn.Module):
        def __init__(self, config, embed_dim, num_heads, head_dim):
            self.qkv = QKVParallelLinear(embed_dim, head_dim, total_num_heads=num_heads,
                                         total_num_kv_heads=config.num_kv_heads)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
    """
    assert len(findings(source)) == 1


def test_a_kv_head_count_assigned_from_its_own_source_still_counts():
    # Equal by assignment in one branch, a real KV count in the other: GQA is possible.
    source = """\
    class Attention(nn.Module):
        def __init__(self, config):
            if config.mha:
                self.num_kv_heads = config.num_heads
            else:
                self.num_kv_heads = config.num_key_value_heads

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
    """
    assert [f.span.row for f in findings(source)] == [9]


def test_suggestion_uses_the_per_rank_sizes_the_class_defines():
    source = """\
    class Attention(nn.Module):
        def __init__(self, config, tp_size):
            self.total_num_heads = config.num_attention_heads
            self.total_num_kv_heads = config.num_key_value_heads
            self.num_heads = self.total_num_heads // tp_size
            self.num_kv_heads = max(1, self.total_num_kv_heads // tp_size)
            self.head_dim = config.hidden_size // self.total_num_heads

        def forward(self, x):
            q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
    """
    [finding] = findings(source)
    assert finding.suggestion.endswith(
        "`.split([self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim, "
        "self.num_kv_heads * self.head_dim], dim=-1)`"
    )


def test_suggestion_never_names_a_global_count_under_tensor_parallelism():
    source = """\
    class Attention(nn.Module):
        def __init__(self, config, tp_size):
            self.tp_size = tp_size
            self.total_num_kv_heads = config.num_key_value_heads

        def forward(self, x):
            q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
    """
    [finding] = findings(source)
    assert "total_num_kv_heads *" not in finding.suggestion
    assert "<KV heads per rank>" in finding.suggestion


def test_suggestion_prefers_the_q_and_kv_sizes_the_class_defines():
    source = """\
    class Attention(nn.Module):
        def __init__(self, config):
            self.num_kv_heads = config.num_key_value_heads
            self.q_size = config.num_attention_heads * config.head_dim
            self.kv_size = self.num_kv_heads * config.head_dim

        def forward(self, x):
            q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
    """
    [finding] = findings(source)
    assert "[self.q_size, self.kv_size, self.kv_size]" in finding.suggestion
