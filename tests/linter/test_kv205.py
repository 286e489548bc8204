"""KV205 kv-view-query-heads: a KV-sized projection viewed with the query head count."""

from __future__ import annotations

from textwrap import dedent

from linter.engine import lint_source


def kv205(source: str):
    return lint_source(dedent(source), codes=["KV205"])


# `kv_dim` reads as the KV width, but here it is the per-head width of keys and values (T5's
# `d_kv` under another name): a size that also names the query head count is query-sized, so
# viewing it with that count is right. The query head count in the size is what tells.
PER_HEAD_WIDTH = """
    class EncoderAttention(nn.Module):
        def __init__(self, d_model, n_heads, n_kv_heads, kv_dim):
            super().__init__()
            self.n_heads = n_heads
            self.n_kv_heads = n_kv_heads
            self.kv_dim = kv_dim
            self.q_proj = nn.Linear(d_model, n_heads * kv_dim)
            self.k_proj = nn.Linear(d_model, {size})

        def forward(self, x):
            b, s, _ = x.shape
            k = self.k_proj(x).view(b, s, self.n_heads, -1)
            return k.transpose(1, 2)
"""


def test_size_naming_the_query_head_count_beside_a_kv_named_width_is_silent():
    assert kv205(PER_HEAD_WIDTH.format(size="self.n_heads * self.kv_dim")) == []


def test_size_naming_only_the_kv_head_count_is_reported():
    findings = kv205(PER_HEAD_WIDTH.format(size="self.n_kv_heads * self.kv_dim"))
    assert [(f.code, f.span.row) for f in findings] == [("KV205", 13)]
    assert "`self.n_heads`, the query head count" in findings[0].message
