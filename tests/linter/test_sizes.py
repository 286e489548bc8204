"""Size expressions: which factors are head counts, head dims or widths, and when two differ."""

from __future__ import annotations

import libcst as cst
import pytest

from linter.model.names import Role, is_kv_head_count_name, name_role
from linter.model.sizes import Aliases, heads_mismatch


@pytest.mark.parametrize(
    "name",
    ["num_heads", "n_heads", "n_head", "nheads", "heads", "num_attention_heads", "total_num_heads",
     "num_heads_per_partition", "num_local_heads"],
)
def test_query_head_counts(name):
    assert name_role(name) is Role.Q_HEADS


@pytest.mark.parametrize(
    "name",
    ["num_kv_heads", "num_key_value_heads", "n_kv_heads", "kv_heads", "total_num_kv_heads",
     "num_kv_heads_per_partition", "nheads_k", "num_heads_kv", "num_query_groups",
     "multi_query_group_num", "num_k_heads", "num_v_heads"],
)
def test_kv_head_counts(name):
    assert name_role(name) is Role.KV_HEADS
    assert is_kv_head_count_name(name)


@pytest.mark.parametrize(
    "name",
    ["head_dim", "head_size", "qk_head_dim", "v_head_dim", "qk_nope_head_dim", "qk_rope_head_dim",
     "head_k_dim", "head_v_dim", "d_k", "d_v", "dim_head", "kv_channels", "rotary_dim",
     "hidden_size_per_attention_head", "hidden_per_head"],
)
def test_head_dims(name):
    assert name_role(name) is Role.HEAD_DIM


@pytest.mark.parametrize(
    ("name", "role"),
    [("hidden_size", Role.Q_WIDTH), ("embed_dim", Role.Q_WIDTH), ("all_head_size", Role.Q_WIDTH),
     ("inner_dim", Role.Q_WIDTH), ("kv_dim", Role.KV_WIDTH), ("kv_size", Role.KV_WIDTH),
     ("inner_kv_dim", Role.KV_WIDTH)],
)
def test_widths(name, role):
    assert name_role(name) is role


@pytest.mark.parametrize(
    "name", ["num_key_value_groups", "n_rep", "bsz", "seq_len", "head", "kv_lora_rank", "lookahead"]
)
def test_names_that_count_no_heads_are_unknown(name):
    assert name_role(name) is Role.UNKNOWN


def _mismatch(left, right, **kwargs):
    return heads_mismatch(cst.parse_expression(left), cst.parse_expression(right), **kwargs)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("self.num_key_value_heads * self.head_dim", "self.num_heads * self.head_dim"),
        ("hidden_size", "num_kv_heads * head_dim"),
        ("bsz * self.num_heads", "bsz * self.num_kv_heads"),
        ("1", "self.num_heads"),
        ("8", "32"),
        ("num_kv_heads * (hidden_size // num_heads)", "hidden_size"),
        ("getattr(config, 'num_key_value_heads', 8) * d", "config.num_attention_heads * d"),
        ("kv_dim", "num_heads * head_dim"),
    ],
)
def test_different_head_counts_mismatch(left, right):
    assert _mismatch(left, right) is not None


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("num_heads * qk_head_dim", "num_heads * v_head_dim"),  # MLA: head dims only
        ("self.num_kv_heads * self.head_dim", "num_kv_heads * head_dim"),  # same attribute
        ("embed_dim", "num_heads * head_dim"),  # full width is the query head count
        ("num_kv_heads", "num_key_value_heads"),  # two spellings of the KV count
        ("8", "num_heads"),  # a bare integer other than 1 is unclassifiable
        ("bsz", "q_len"),  # not head counts at all
        ("int(x)", "num_heads"),
        ("num_heads * (qk_nope_head_dim + qk_rope_head_dim)", "num_heads * v_head_dim"),
        ("head_dim", "hidden_size"),  # without implicit_one, a bare head dim says nothing
        ("num_k_heads", "num_v_heads"),  # linear attention counts K and V heads separately
    ],
)
def test_same_or_unclassifiable_head_counts_do_not_mismatch(left, right):
    assert _mismatch(left, right) is None


def test_a_size_of_only_head_dims_is_one_head_when_asked():
    found = _mismatch("self.head_dim", "num_heads * head_dim", implicit_one=True)
    assert found is not None and (found.left, found.right) == (1, "q")
    assert _mismatch("self.head_dim", "num_kv_heads * head_dim", implicit_one=True) is None


def test_mismatch_reports_what_each_side_names():
    found = _mismatch("num_kv_heads * head_dim", "num_heads * head_dim")
    assert (found.left, found.right) == ("kv", "q")


def _aliases(source: str) -> Aliases:
    aliases = Aliases()
    for statement in cst.parse_module(source).body:
        assign = statement.body[0]
        aliases.record(assign.targets[0].target, assign.value)
    return aliases


def test_local_and_self_aliases_resolve():
    aliases = _aliases("kv_out = num_kv_heads * head_dim\nself.kv_dim = self.num_heads * self.head_dim\n")
    assert _mismatch("kv_out", "num_heads * head_dim", resolve=aliases.resolve) is not None
    assert _mismatch("self.kv_dim", "num_kv_heads * head_dim", resolve=aliases.resolve) is not None


def test_a_name_assigned_twice_does_not_resolve():
    aliases = _aliases("h = num_kv_heads\nh = num_heads\n")
    assert aliases.resolve(cst.Name("h")) is None
    assert _mismatch("h * head_dim", "num_heads * head_dim", resolve=aliases.resolve) is None


def test_a_named_width_is_kept_when_its_alias_is_unreadable():
    aliases = _aliases("self.hidden_size = compute(config)\n")
    assert _mismatch("self.hidden_size", "num_kv_heads * head_dim", resolve=aliases.resolve) is not None


_PAIRS = [
    ("num_key_value_heads * head_dim", "num_heads * head_dim"),
    ("num_heads * qk_head_dim", "num_heads * v_head_dim"),
    ("self.tp_k_head_num", "self.tp_v_head_num"),
    ("1", "self.num_heads"),
    ("8", "4"),
    ("-1", "2"),
    ("self.page_size", "1"),
    ("getattr(config, 'num_attention_heads')", "config.num_kv_heads"),
    ("hidden_size // num_heads", "head_dim"),
    ("(qk_nope_head_dim + qk_rope_head_dim) * n", "n * v_head_dim"),
    ("kv_dim", "hidden_size"),
    ("(num_kv_heads) * d", "num_kv_heads*d"),
    ("x.shape[2]", "num_heads"),
    ("kv", "num_heads"),
]


@pytest.mark.parametrize(("left", "right"), _PAIRS)
@pytest.mark.parametrize("implicit_one", [False, True])
def test_the_ast_screens_compare_sizes_as_the_rules_do(left: str, right: str, implicit_one: bool) -> None:
    # ``ast_sizes`` reads the standard library's tree for ``heads``, as ``sizes`` reads
    # libcst's; ``kv`` resolves to a KV width through an alias on both.
    import ast

    from linter.model import ast_sizes

    aliases, tree_aliases = Aliases(), ast_sizes.Aliases()
    aliases.record(cst.parse_expression("kv"), cst.parse_expression("num_kv_heads * head_dim"))
    tree_aliases.record(ast.parse("kv", mode="eval").body, ast.parse("num_kv_heads * head_dim", mode="eval").body)
    expected = heads_mismatch(cst.parse_expression(left), cst.parse_expression(right), resolve=aliases.resolve, implicit_one=implicit_one)
    found = ast_sizes.heads_mismatch(
        ast.parse(left, mode="eval").body, ast.parse(right, mode="eval").body, resolve=tree_aliases.resolve, implicit_one=implicit_one
    )
    assert found == expected
