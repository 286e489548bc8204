"""Which axis a K/V operation acts on: token/head (evidence), head dim (never), or unknown (silence)."""

from __future__ import annotations

import libcst as cst
import pytest

from linter.model.reshapes import (
    AMBIGUOUS,
    HEAD_DIM,
    TOKEN_HEAD,
    reshape_of,
    strip_shape_keeping,
)


def role(expression: str, rank: int | None = None) -> str:
    return reshape_of(cst.parse_expression(expression)).role(rank)


@pytest.mark.parametrize(
    ("expression", "rank", "expected"),
    [
        ("k[:n]", None, TOKEN_HEAD),
        ("k[a:b]", None, TOKEN_HEAD),
        ("k[:, :n]", None, TOKEN_HEAD),
        ("k[:, :n, :]", None, TOKEN_HEAD),
        ("k[:, :, :n, :]", None, TOKEN_HEAD),
        ("k[..., :n, :]", None, TOKEN_HEAD),
        ("k[..., :rope_dim]", None, HEAD_DIM),
        ("k[:, :rope_dim]", None, AMBIGUOUS),
        ("k[:, :, :n]", None, AMBIGUOUS),
        ("k[:, :, :n]", 4, TOKEN_HEAD),
        ("k[:, :, :n]", 3, HEAD_DIM),
        ("k[:, :, :, :n]", 4, HEAD_DIM),
        ("k[idx]", None, TOKEN_HEAD),
        ("k.chunk(2)", None, TOKEN_HEAD),
        ("k.chunk(2, dim=-1)", None, HEAD_DIM),
        ("k.split([a, b], -1)", None, HEAD_DIM),
        ("k.split(s, dim)", None, AMBIGUOUS),
        ("k.split(s, dim=0x0)", None, TOKEN_HEAD),
        ("torch.narrow(k, 0, s, n)", None, TOKEN_HEAD),
        ("k.narrow(-2, s, n)", None, TOKEN_HEAD),
        ("k.index_select(0, idx)", None, TOKEN_HEAD),
        ("k.repeat_interleave(n, dim=1)", None, TOKEN_HEAD),
        ("k.repeat_interleave(n, dim=2)", None, AMBIGUOUS),
        ("k.expand(b, h, s, d)", None, TOKEN_HEAD),
    ],
)
def test_axis_role(expression, rank, expected):
    assert role(expression, rank) == expected


@pytest.mark.parametrize(
    "expression",
    ["kv[:, 0]", "kv_cache[layer]", "k[None]", "k[:, None]", "k[:]", "k[...]", "k.view(b, s, h, d)", "f(k)[:n]"],
)
def test_not_a_reshape(expression):
    assert reshape_of(cst.parse_expression(expression)) is None


def test_function_and_method_forms_name_the_tensor():
    assert reshape_of(cst.parse_expression("torch.narrow(key, 0, s, n)")).base == "key"
    assert reshape_of(cst.parse_expression("self.k_cache.narrow(0, s, n)")).base == "self.k_cache"
    assert reshape_of(cst.parse_expression("torch.chunk(k, 4)")).kind == "chunk"


def test_shape_keeping_calls_are_stripped_down_to_the_operation():
    stripped = strip_shape_keeping(cst.parse_expression("k[:t].contiguous().transpose(1, 2)"))
    assert cst.Module([]).code_for_node(stripped) == "k[:t]"
