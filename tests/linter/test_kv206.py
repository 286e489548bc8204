"""KV206 value-head-dim-from-key: where a finding points and what it quotes."""

from __future__ import annotations

from textwrap import dedent

from linter.engine import lint_source


def kv206(source: str):
    return lint_source(dedent(source), codes=["KV206"])


def test_an_attribute_head_dim_is_quoted_and_pointed_at_as_written():
    # The finding names the expression to replace: `self.qk_head_dim`, not its last part.
    source = """
        class Attention(nn.Module):
            def __init__(self, hidden, heads, qk_head_dim, v_head_dim):
                super().__init__()
                self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim
                self.v_proj = nn.Linear(hidden, heads * v_head_dim)

            def forward(self, x, b, s):
                return self.v_proj(x).view(b, s, self.heads, self.qk_head_dim)
        """
    [finding] = kv206(source)
    line = dedent(source).splitlines()[finding.span.row - 1]
    assert line[finding.span.column - 1:].startswith("self.qk_head_dim)")
    assert "`self.qk_head_dim`" in finding.message
    assert "`v_head_dim`" in finding.message
