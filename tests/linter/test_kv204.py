"""KV204 kv-view-query-length: the query input's length, however its shape is read."""

from __future__ import annotations

import pytest

from linter.engine import lint_source

_CROSS_ATTENTION = """\
class CrossAttention(nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, key_value_states=None):
        bsz = hidden_states.shape[0]
        tgt_len = {length}
        current = key_value_states if key_value_states is not None else hidden_states
        k = self.k_proj(current).view(bsz, tgt_len, self.heads, self.head_dim)
        v = self.v_proj(current).view(bsz, -1, self.heads, self.head_dim)
        return k, v
"""


def rows(length: str) -> list[int]:
    return [f.span.row for f in lint_source(_CROSS_ATTENTION.format(length=length), codes=["KV204"])]


@pytest.mark.parametrize(
    "length",
    [
        "hidden_states.shape[1]",
        "hidden_states.size(1)",
        # A slice that keeps the token axis, then indexed: the first of `shape[1:]` is axis 1.
        "hidden_states.shape[1:][0]",
        "hidden_states.size()[1:][0]",
    ],
)
def test_query_length_in_a_key_view_is_reported(length):
    assert rows(length) == [12]


@pytest.mark.parametrize("length", ["hidden_states.shape[0]", "hidden_states.size(0)", "key_value_states.shape[1]"])
def test_batch_or_key_side_length_is_not_reported(length):
    assert rows(length) == []
