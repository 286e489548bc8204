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


_LATENT_VALUES = """
    class LatentAttention(nn.Module):
        def __init__(self, heads, qk_head_dim, v_head_dim):
            super().__init__()
            self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim

        def forward(self, x, n):
            values = torch.full({args})
            return values
    """


def test_a_keyword_outside_the_shape_is_no_size_of_the_value():
    # `fill_value=` scales the entries; only the shape argument can carry the key's head dim.
    silent = _LATENT_VALUES.format(args="(n, self.heads, 1), fill_value=self.qk_head_dim ** -0.5, dtype=x.dtype")
    assert kv206(silent) == []
    shaped = _LATENT_VALUES.format(args="size=(n, self.heads, self.qk_head_dim), fill_value=0.0")
    assert [f.message.split(" is shaped")[0] for f in kv206(shaped)] == ["`values`"]
