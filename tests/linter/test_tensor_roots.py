"""Which name a tensor expression is about."""

from __future__ import annotations

import libcst as cst
import pytest

from linter.model.tensor_roots import tensor_root


@pytest.mark.parametrize(
    ("expr", "root"),
    [
        ("self.k_proj(x)", "k_proj"),
        ("key_cache[layer_idx]", "key_cache"),
        ("k.contiguous().transpose(1, 2)", "k"),
        ("self.qkv(x).float()", "qkv"),
        ("v.view(b, s, h, d).reshape(b, s, -1)", "v"),
        ("apply_rope(k, cos, sin)", "apply_rope"),
        ("(k + v)", None),
    ],
)
def test_tensor_root(expr, root):
    assert tensor_root(cst.parse_expression(expr)) == root
