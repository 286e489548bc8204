"""KV202 kv-view-heads-mismatch: K and V viewed to different head counts in one scope."""

from __future__ import annotations

import textwrap

import pytest

from linter.engine import lint_source


def findings(source: str):
    return lint_source(textwrap.dedent(source), codes=["KV202"])


def _function(k_line: str, v_line: str, setup: str = "") -> str:
    return (
        "def forward(self, x, k, v, b, s):\n"
        + "".join(f"    {line}\n" for line in setup.splitlines())
        + f"    {k_line}\n    {v_line}\n"
    )


@pytest.mark.parametrize(
    ("k_line", "v_line"),
    [
        pytest.param(
            "k = self.k_proj(x).view(b, s, self.num_kv_heads, self.head_dim)",
            "v = self.v_proj(x).view(b, s, self.num_heads, self.head_dim)",
            id="projection-output-views",
        ),
        pytest.param(
            "key_states = key_states.reshape(b, s, self.num_key_value_heads, self.head_dim)",
            "value_states = value_states.reshape(b, s, self.num_attention_heads, self.head_dim)",
            id="key-states-reshape",
        ),
        pytest.param(
            "k = k.view((b, s, 1, self.head_dim))",
            "v = v.view((b, s, self.n_heads, self.head_dim))",
            id="mqa-tuple-argument",
        ),
        pytest.param(
            "k = k.unflatten(-1, (self.num_kv_heads, self.head_dim))",
            "v = v.unflatten(-1, (self.num_heads, self.head_dim))",
            id="unflatten",
        ),
        pytest.param(
            "k = torch.reshape(k, (b, s, self.num_kv_heads, self.head_dim))",
            "v = torch.reshape(v, (b, s, self.num_heads, self.head_dim))",
            id="torch-reshape-function",
        ),
        pytest.param(
            "k = k.view(b * self.num_kv_heads, -1, self.head_dim)",
            "v = v.view(b * self.num_heads, -1, self.head_dim)",
            id="batch-times-heads-axis",
        ),
        pytest.param(
            "k = k.view(b, s, 8, 128)",
            "v = v.view(b, s, 32, 128)",
            id="integer-head-counts",
        ),
        pytest.param(
            "k = rearrange(k, 'b s (h d) -> b h s d', h=self.num_kv_heads)",
            "v = rearrange(v, 'b s (h d) -> b h s d', h=self.num_heads)",
            id="einops-rearrange",
        ),
        pytest.param(
            "k = k.view(b, s, h_kv, self.head_dim)",
            "v = v.view(b, s, self.num_heads, self.head_dim)",
            id="local-alias",
        ),
    ],
)
def test_views_with_different_head_counts_are_reported(k_line, v_line):
    setup = "h_kv = self.num_kv_heads" if "h_kv" in k_line else ""
    rows = [f.span.row for f in findings(_function(k_line, v_line, setup))]
    assert rows == [2 + len(setup.splitlines())]


def test_paged_cache_views_are_reported():
    source = """\
    def write(key_cache, value_cache, num_blocks, block_size, num_kv_heads, num_heads, head_size):
        key_cache = key_cache.view(num_blocks, block_size, num_kv_heads, head_size)
        value_cache = value_cache.view(num_blocks, block_size, num_heads, head_size)
    """
    assert [f.span.row for f in findings(source)] == [2]


def test_finding_names_both_views_and_suggests_the_kv_count():
    [finding] = findings(_function(
        "k = k.view(b, s, self.num_kv_heads, self.head_dim)",
        "v = v.view(b, s, self.num_heads, self.head_dim)",
    ))
    assert "`self.num_kv_heads`" in finding.message and "`self.num_heads`" in finding.message
    assert [r.span.row for r in finding.related] == [3]
    assert "self.num_kv_heads" in finding.suggestion
    assert finding.fix is None


def test_module_level_views_are_checked():
    source = """\
    k = k.view(b, s, num_kv_heads, head_dim)
    v = v.view(b, s, num_heads, head_dim)
    """
    assert len(findings(source)) == 1


@pytest.mark.parametrize(
    ("k_line", "v_line"),
    [
        pytest.param(
            "k = k.view(b, s, self.num_kv_heads, self.head_dim)",
            "v = v.view(b, s, num_kv_heads, head_dim)",
            id="same-attribute-spelled-two-ways",
        ),
        pytest.param(
            "k = k.view(b, s, -1, self.head_dim)",
            "v = v.view(b, s, self.num_heads, self.head_dim)",
            id="minus-one-wildcard",
        ),
        pytest.param(
            "k = kv.view(-1, self.num_heads, self.qk_head_dim)",
            "v = kv.view(-1, self.num_heads, self.v_head_dim)",
            id="mla-head-dims",
        ),
        pytest.param(
            "k = k.view(b, s, self.num_kv_heads, self.head_dim)",
            "v = v.view(b, s, self.num_kv_heads * self.head_dim)",
            id="different-ranks",
        ),
        pytest.param(
            "k = k.view(b, s, k.size(2), self.head_dim)",
            "v = v.view(b, s, self.num_heads, self.head_dim)",
            id="unclassifiable-head-axis",
        ),
        pytest.param(
            "k = k.view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)",
            "v = v.transpose(1, 2)",
            id="transpose-only-on-v",
        ),
        pytest.param(
            "k = k.view(b, kv_len, self.num_kv_heads, self.head_dim)",
            "v = v.view(b, q_len, self.num_kv_heads, self.head_dim)",
            id="token-axes-are-not-head-counts",
        ),
        pytest.param(
            "q = q.view(b, s, self.num_heads, self.head_dim)",
            "k = k.view(b, s, self.num_kv_heads, self.head_dim)",
            id="query-and-key",
        ),
        pytest.param(
            "k = k.view(b, s, self.num_k_heads, self.head_k_dim)",
            "v = v.view(b, s, self.num_v_heads, self.head_v_dim)",
            id="linear-attention-separate-k-and-v-heads",
        ),
        pytest.param(
            "k = k.view(torch.int8)",
            "v = v.view(torch.float16)",
            id="dtype-views",
        ),
        pytest.param(
            "k = k.view(b, s, self.num_kv_heads, 2, self.head_dim // 2)",
            "v = v.view(b, s, self.num_kv_heads, self.head_dim)",
            id="head-dim-split-into-pairs",
        ),
    ],
)
def test_look_alikes_are_silent(k_line, v_line):
    assert findings(_function(k_line, v_line)) == []


def test_views_in_different_functions_are_not_paired():
    source = """\
    def keys(k, b, s, num_kv_heads, d):
        return k.view(b, s, num_kv_heads, d)

    def values(v, b, s, num_heads, d):
        return v.view(b, s, num_heads, d)
    """
    assert findings(source) == []


def test_a_matching_v_view_in_the_scope_silences_the_pair():
    source = _function(
        "k = k.view(b, s, self.num_kv_heads, self.head_dim)",
        "v = v.view(b, s, self.num_kv_heads, self.head_dim)",
        setup="v_full = v.view(b, s, self.num_heads, self.head_dim) if expand else None",
    )
    assert findings(source) == []


def test_linear_attention_labels_name_query_key_and_value_heads():
    (finding,) = lint_source(
        "def forward_decode(self, q, k, v, b):\n"
        "    key = k.view(b, 1, self.num_v_heads, self.head_k_dim)\n"
        "    value = v.view(b, 1, self.num_heads, self.head_v_dim)\n",
        codes=["KV202"],
    )
    assert "(value heads)" in finding.message and "(query/key heads)" in finding.message
    assert "KV heads" not in finding.message and "same number of heads" not in finding.message
    assert "not the value's `self.num_v_heads`" in finding.suggestion


def test_a_key_view_of_a_query_tensor_is_no_key_view():
    source = (
        "def launch(q, k, v, d, n):\n"
        "    k_dummy = q.reshape(2, 1, 128, d)\n"
        "    v_dummy = v.reshape(-1, 1, 64, d)\n"
    )
    assert lint_source(source, codes=["KV202"]) == []
    assert len(lint_source(source.replace("q.reshape", "k.reshape"), codes=["KV202"])) == 1


def test_one_mismatched_value_view_is_one_finding():
    source = (
        "def forward(self, k, v, b, s, cached):\n"
        "    if cached:\n"
        "        k = k.view(b, s, self.num_kv_heads, self.head_dim)\n"
        "    else:\n"
        "        k = k.view(b, s, self.num_kv_heads, self.head_dim)\n"
        "    v = v.view(b, s, self.num_heads, self.head_dim)\n"
    )
    assert [f.span.row for f in lint_source(source, codes=["KV202"])] == [3]


def test_calls_that_would_raise_at_run_time_are_read_as_no_view():
    # Code being edited: a rearrange without its pattern, a torch.reshape or an unflatten
    # without arguments. They are no views; the mismatch beside them is still reported.
    source = (
        "def forward(self, hidden_states, b, s):\n"
        "    k = self.k_proj(hidden_states).view(b, s, self.num_kv_heads, self.head_dim)\n"
        "    v = self.v_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)\n"
        "    k_heads = rearrange(k)\n"
        "    v_flat = torch.reshape()\n"
        "    k_split = k.unflatten()\n"
        "    return self.attn(self.q, k, v)\n"
    )
    assert [f.span.row for f in lint_source(source, codes=["KV202"])] == [2]


MLA_PATHS = """\
def forward(self, q, k, v, t):
    if self.absorbed:
        v_latent = k[..., : self.kv_lora_rank].view(t, 1, self.kv_lora_rank)
        return self.decode(q, k, v_latent)
    k = k.view(t, self.num_heads, self.qk_head_dim)
    v = v.view(t, {v_heads}, self.v_head_dim)
    return self.prefill(q, k, v)
"""


def test_a_value_viewed_off_the_key_is_no_key_view():
    # MLA's absorbed decode takes its value from the latent key (its first kv_lora_rank
    # columns, one head shared by all query heads) while the prefill path views per-head K and
    # V. `v_latent` is made of `k` but is a value: read as a key view it would be paired with
    # the prefill `v` and reported as one head against the query heads.
    assert findings(MLA_PATHS.format(v_heads="self.num_heads")) == []
    [finding] = findings(MLA_PATHS.format(v_heads="self.num_kv_heads"))
    assert finding.span.row == 5 and "`self.num_heads`" in finding.message
