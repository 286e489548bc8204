"""KV210 gives each size of a K/V shape a role from where it comes, and checks the role."""

from __future__ import annotations

from textwrap import dedent

import pytest

from linter.engine import lint_source
from linter.model.size_roles import (
    Assigned, equal_by_construction, equal_to_query, key_state, kv_length_name, makes_buffers, size_kind, value_dim,
    value_dim_twins, value_tile_from_key,
)


def _lint(code: str) -> list:
    return lint_source(dedent(code), path="attn.py", codes=["KV210"])


def _assigned(**texts: str) -> dict[str, list[Assigned]]:
    """name -> one assignment whose text is the given one and which reads its identifiers."""
    import re

    return {n: [Assigned(frozenset(re.findall(r"[A-Za-z_]\w*", t)) - {"self"}, t)] for n, t in texts.items()}


def test_a_kv_count_assigned_from_the_query_count_is_multi_head():
    assert equal_to_query("num_kv_heads", _assigned(num_kv_heads="num_heads", num_heads="config.n_head"))


def test_a_kv_count_with_its_own_fallback_is_not_multi_head():
    assigned = _assigned(num_kv_heads="num_headsifnum_kv_headsisNoneelsenum_kv_heads", num_heads="num_heads")
    assert not equal_to_query("num_kv_heads", assigned)


def test_a_kv_count_read_by_getattr_under_its_own_name_is_not_the_query_count():
    assigned = {"num_kv_heads": [Assigned(frozenset({"getattr", "config", "num_key_value_heads", "num_attention_heads"}),
                                          'getattr(config,"num_key_value_heads",config.num_attention_heads)')]}
    assert not equal_to_query("num_kv_heads", assigned)


def test_value_head_dim_from_the_same_source_is_the_key_head_dim():
    assigned = _assigned(v_head_dim="config.head_dim", head_dim="config.head_dim")
    assert equal_by_construction("v_head_dim", "head_dim", assigned)
    assert not equal_by_construction("v_head_dim", "head_dim", _assigned(v_head_dim="v.shape[2]", head_dim="q.shape[2]"))


@pytest.mark.parametrize("name, twin", [
    ("qk_head_dim", "v_head_dim"), ("head_k_dim", "head_v_dim"), ("d_k", "d_v"), ("kdim", "vdim"),
    ("head_dim", "v_head_dim"), ("head_size", "head_size_v"),
])
def test_key_and_shared_head_dims_name_their_value_twins(name, twin):
    assert twin in value_dim_twins(name)
    assert value_dim(twin) and not value_dim(name)


GQA = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = {kv}
        self.head_dim = config.head_dim

    def forward(self, hidden_states, b, s):
        {body}
"""


@pytest.mark.parametrize("body", [
    "k = self.k_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)",
    "v = rearrange(self.v_proj(hidden_states), 'b s (h d) -> b s h d', h=self.num_heads)",
    "self.k_cache = torch.zeros(b, s, self.num_heads, self.head_dim, dtype=torch.bfloat16)",
    "key = self.k_norm(self.k_proj(hidden_states)).view(-1, self.num_heads * self.head_dim)",
])
def test_query_head_count_in_a_kv_shape_is_reported_under_gqa(body):
    [finding] = _lint(GQA.format(kv="config.num_key_value_heads", body=body))
    assert finding.span.row == 9 and "the query head count" in finding.message


@pytest.mark.parametrize("kv, body", [
    # Multi-head attention by construction.
    ("self.num_heads", "k = self.k_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)"),
    # The KV head count in the shape.
    ("config.num_key_value_heads", "k = self.k_proj(hidden_states).view(b, s, self.num_key_value_heads, -1)"),
    # Attention output: weights times V carries the query heads.
    ("config.num_key_value_heads", "o = torch.matmul(hidden_states, self.v).view(b, s, self.num_heads * self.head_dim)"),
])
def test_kv_shapes_that_carry_the_right_head_count_are_silent(kv, body):
    assert _lint(GQA.format(kv=kv, body=body)) == []


def test_a_nested_function_reads_its_methods_class():
    code = """\
    class Pattern:
        def __init__(self, layer):
            self.num_kv_heads = layer.num_kv_heads
            self.head_size = layer.head_size
            self.head_size_v = layer.head_size_v

        def make(self):
            def pattern(qkv):
                v = qkv[:, 1]
                return v.view(-1, self.num_kv_heads, self.head_size)
            return pattern
    """
    [finding] = _lint(code)
    assert finding.span.row == 10 and "`head_size_v`" in finding.message


def test_value_padded_to_the_key_dim_before_the_view_is_silent_but_not_a_view_inside_the_pad():
    before = """\
    def f(v, heads, qk_head_dim, v_head_dim):
        v = F.pad(v, [0, qk_head_dim - v_head_dim])
        return v.view(-1, heads, qk_head_dim)
    """
    inside = """\
    def f(v, heads, qk_head_dim, v_head_dim):
        return F.pad(v.view(-1, heads, qk_head_dim), [0, qk_head_dim - v_head_dim])
    """
    assert _lint(before) == []
    [finding] = _lint(inside)
    assert finding.span.row == 2


def test_attention_output_cut_to_the_value_dim_is_flattened_with_it():
    code = """\
    class MLA(nn.Module):
        def __init__(self, heads, qk_head_dim, v_head_dim):
            super().__init__()
            self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim

        def forward(self, out):
            return out.view(-1, self.heads, self.qk_head_dim)[..., : self.v_head_dim].reshape(-1, self.heads * {dim})
    """
    [finding] = _lint(code.format(dim="self.qk_head_dim"))
    assert "`self.qk_head_dim`" in finding.message
    assert _lint(code.format(dim="self.v_head_dim")) == []


KERNEL = """\
@triton.jit
def bwd_kernel(v, dv, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
               BK: tl.constexpr, BV: tl.constexpr):
    i_t = tl.program_id(0)
    p_v = tl.make_block_ptr(v, (T, {dim}), (H * {dim}, 1), (i_t * BT, 0), (BT, {tile}), (1, 0))
    b_dv = tl.zeros([BT, {tile}], dtype=tl.float32)
    return tl.load(p_v), b_dv
"""


def test_a_kernels_value_block_and_tile_take_the_value_dims():
    assert _lint(KERNEL.format(dim="V", tile="BV")) == []
    rows = sorted(f.span.row for f in _lint(KERNEL.format(dim="K", tile="BK")))
    assert rows == [5, 6]
    # The shape right, the tile the key's: each kernel dim is checked on its own.
    [finding] = _lint(KERNEL.format(dim="V", tile="BK").replace("b_dv = tl.zeros([BT, BK]", "b_dv = tl.zeros([BT, BV]"))
    assert finding.span.row == 5 and "`BK`" in finding.message


@pytest.mark.parametrize("target", ["self.bias_v", "self.tau_wv"])
def test_positional_biases_and_weights_for_v_are_no_value_buffers(target):
    code = f"""\
    class Attention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * config.head_dim)
            self.bias_u = nn.Parameter(torch.zeros(config.num_attention_heads, config.head_dim))
            {target} = nn.Parameter(torch.zeros(config.num_attention_heads, config.head_dim))
    """
    assert _lint(code) == []


def test_memory_keys_allocated_with_the_query_heads_are_reported():
    code = """\
    class Attention(nn.Module):
        def __init__(self, heads, kv_heads, dim_head, num_mem_kv):
            super().__init__()
            self.kv_heads = kv_heads
            self.mem_k = nn.Parameter(torch.randn(heads, num_mem_kv, dim_head))
    """
    [finding] = _lint(code)
    assert finding.span.row == 5 and "`kv_heads`" in finding.message


def test_local_sizes_and_a_layers_own_head_counts_are_roles_too():
    extend = """\
    def forward_extend(q, k, v, num_heads, num_kv_heads, head_dim, v_head_dim):
        k = k.view(-1, num_kv_heads, head_dim)
        v = v.view(-1, num_kv_heads, head_dim)
        return q.view(-1, num_heads, head_dim), k, v
    """
    paged = """\
    def paged_kv(layer, k_cache, v_cache, page_size):
        k_cache = k_cache.view(-1, page_size, layer.tp_q_head_num, layer.head_dim)
        v_cache = v_cache.view(-1, page_size, layer.tp_v_head_num, layer.head_dim)
        return k_cache, v_cache, layer.tp_k_head_num
    """
    [finding] = _lint(extend)
    assert finding.span.row == 3 and "`v_head_dim`" in finding.message
    [finding] = _lint(paged)
    assert finding.span.row == 2 and "`layer.tp_k_head_num`" in finding.message


GETATTR = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.kv = getattr(config, "{kv}")
        self.head_dim = config.head_dim

    def forward(self, hidden_states, b, s):
        k = self.k_proj(hidden_states).view(b, s, getattr(self.config, "{q}"), self.head_dim)
"""


@pytest.mark.parametrize("kv, q, planned", [
    ("num_key_value_heads", "num_attention_heads", True),
    # What a getattr reads is in its string, gone from the code the condition reads; a
    # getattr of names no role knows is no evidence.
    ("hidden_act", "hidden_size", False),
    ("hidden_act", "num_attention_heads", False),
])
def test_the_text_condition_reads_what_a_getattr_names(kv, q, planned):
    from benchmarks.equivalence import default_settings
    from linter.plan.text_plan import parse_plan

    text = "import torch\nfrom torch import nn\n\n\n" + GETATTR.format(kv=kv, q=q)
    assert parse_plan(text, ["KV210"], default_settings()).needed is planned


SCREENED = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.v_head_dim = config.v_head_dim

    def forward(self, hidden_states, b, s):
        {body}
"""


@pytest.mark.parametrize("body, admitted", [
    ("k = self.k_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)", True),
    ("v = self.v_proj(hidden_states).view(b, s, -1, self.head_dim)", True),
    ("v = v.view(b, s, -1, getattr(self.config, 'head_dim'))", True),
    ("v = v.view(b, s, -1, key.shape[-1])", True),
    # The rule reads the key's head dim off the key only.
    ("v = v.view(b, s, -1, x.shape[-1])", False),
    # The rule asks the value-dim question of V alone.
    ("k = self.k_proj(hidden_states).view(b, s, -1, self.head_dim)", False),
    # The KV head count beside the query's in one shape, the value's head dim in V's shape.
    ("k = k.view(b, s, self.num_heads // self.num_key_value_heads, self.num_key_value_heads, -1)", False),
    ("v = self.v_proj(hidden_states).view(b, s, -1, self.v_head_dim)", False),
    # A size is asked of the object it is read on: this config holds no KV head count.
    ("k = k.view(b, s, cfg.num_attention_heads, -1)", False),
    ("k = k.view(b, s, cfg.num_attention_heads, -1) if cfg.num_key_value_heads else k", True),
    # A latent (MLA) head dim in the shape: head counts follow the path there.
    ("k = k.view(b, s, self.num_heads, self.qk_nope_head_dim)", False),
    # No K/V side: the rule reads no shape of it.
    ("o = self.kv_b_proj(hidden_states)[0].view(b, s, self.num_heads, self.head_dim)", False),
])
def test_the_ast_screen_reads_the_sites_the_rule_reads(body, admitted):
    import ast

    from benchmarks.equivalence import default_settings
    from linter.plan.screen_facts import Facts
    from linter.rules.kv210.screen import SCREEN

    text = SCREENED.format(body=body)
    assert SCREEN(Facts(ast.parse(text), (text.split("\n"), 0)), default_settings()) is admitted
    # The screen may say yes where the rule is silent, never no where it reports.
    assert admitted or not _lint(text)


@pytest.mark.parametrize("name, makes", [
    ("create_kv_cache", True), ("init_cache", True), ("allocate_kv", True),
    ("get_kv_cache", False), ("update_cache", False), ("create_mask", False),
])
def test_a_cache_helper_is_a_making_verb_with_a_cache_noun(name, makes):
    assert makes_buffers(name) is makes


@pytest.mark.parametrize("name, kv", [
    ("k_len", True), ("kv_seq_len", True), ("max_seqlen_k", True), ("src_len", True),
    ("seqlen", False), ("q_len", False), ("k_scale", False),
])
def test_the_keys_own_length_is_a_length_named_for_a_kv_side(name, kv):
    assert kv_length_name(name) is kv


def test_a_value_tile_from_the_keys_size_names_the_key_it_reads():
    assert value_tile_from_key("BV", ["min", "triton", "next_power_of_2", "K"]) == "K"
    # The value's own size read too, or the value's dim itself: no finding.
    assert value_tile_from_key("BV", ["min", "K", "V"]) is None
    assert value_tile_from_key("V", ["K"]) is None
    assert value_tile_from_key("BK", ["K"]) is None


def test_size_kinds_tell_a_head_dim_from_a_model_width():
    assert size_kind(["head_dim"]) == "head"
    assert size_kind(["hidden_dim"]) == "width"
    assert size_kind(["head_dim", "hidden_dim"]) is None
    assert size_kind(["n"]) is None


def test_a_key_state_has_the_keys_own_head_dim_and_not_the_values():
    assert key_state(["batch", "num_heads", "head_k_dim", "num_slots"])
    assert not key_state(["batch", "num_heads", "head_k_dim", "head_v_dim"])  # a K x V state
    assert not key_state(["total", "num_heads", "head_dim_qk"])  # the query shares it


def test_a_kv_view_with_the_query_length_names_the_keys_own_length():
    code = """\
    def attend(query, key, kv_heads):
        b, seqlen = query.shape[:2]
        max_seqlen_k = key.shape[1]
        return key.view(b, seqlen, kv_heads, -1)
    """
    [finding] = _lint(code)
    assert "`seqlen`, the query's length" in finding.message and "`max_seqlen_k`" in finding.message
    # Bound after the view, the keys' length is no evidence about it.
    assert _lint("""\
    def attend(query, key, kv_heads):
        b, seqlen = query.shape[:2]
        out = key.view(b, seqlen, kv_heads, -1)
        max_seqlen_k = key.shape[1]
        return out, max_seqlen_k
    """) == []


def test_a_value_buffer_made_from_the_value_is_reported_once():
    # ``value_cache = value.new_zeros(...)``: read with its receiver, not again as a named buffer.
    findings = _lint("""\
class MiMoAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_dim
        self.v_head_dim = config.v_head_dim

    def init_cache(self, value, slots):
        value_cache = value.new_zeros(slots, self.num_kv_heads, self.head_dim)
        return value_cache
""")
    assert [(f.span.row, f.span.column) for f in findings] == [(8, 65)]


@pytest.mark.parametrize("cut", [
    pytest.param(":, :, :v_head_dim", id="axes-from-the-front"),
    pytest.param("0, :, :v_head_dim", id="first-item-indexed"),
    pytest.param("..., rope_dim:v_head_dim", id="from-a-start"),
    pytest.param("..., :v_head_dim:2", id="with-a-step"),
])
def test_a_cut_that_keeps_other_columns_than_the_value_dim_leaves_a_key_dim_flatten_reported(cut):
    # Only `x[..., :v_head_dim]` (and a 1-D `x[:v_head_dim]`) excuses an output shaped with the
    # key's head dim: a cut from a start or with a step keeps other columns, and a cut without a
    # leading `...` counts its axes from the front. Read as such a cut, the output's name would be
    # excused wherever it is flattened, and this wrong flatten would go unreported.
    code = f"""\
    def merge_heads(attn_output, num_heads, qk_head_dim, v_head_dim, rope_dim):
        attn_output = attn_output[{cut}]
        return attn_output.reshape(-1, num_heads * qk_head_dim)
    """
    [finding] = _lint(code)
    assert finding.span.row == 3 and "`qk_head_dim`" in finding.message


STATE = """\
class GatedLinearAttention(nn.Module):
    def __init__(self, num_heads, num_kv_heads, head_k_dim, conv_size):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.conv_size = num_heads, num_kv_heads, conv_size
        self.head_k_dim = head_k_dim

    def init_state(self, {receiver}, batch):
        return ({receiver}.new_zeros(batch, self.num_heads * self.head_k_dim, self.conv_size),)
"""


def test_a_state_allocated_off_the_query_is_the_querys_not_a_key_slot_state():
    # The query's convolution state holds the key's head dim per query head; allocated off `q`
    # (and returned unnamed) it is the query's buffer. Off another tensor, a buffer with the key's
    # own head dim made in `init_state` is a key-slot state and must take the KV head count.
    assert _lint(STATE.format(receiver="q")) == []
    [finding] = _lint(STATE.format(receiver="x"))
    assert finding.span.row == 8 and "key-side state" in finding.message


# PEP 695 syntax: libcst reads it, the standard library's parser of Python 3.11 does not.
_NEWER_SYNTAX = """\
class Attention(nn.Module):
    def forward[T](self, hidden: T):
        q, k, v = self.qkv_proj(hidden).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        return self.attn(q, k, v)
"""


def test_a_unit_the_running_python_cannot_parse_leaves_the_ast_models_silent():
    # The lookup, tile, input-width and output-norm models read the ``ast`` tree; where it
    # cannot be built they say nothing rather than fail, and the libcst reading still runs.
    assert lint_source(_NEWER_SYNTAX, codes=["KV210"]) == []


_KEY_NORM_MODEL = """\
from .configuration_tiny import TinyConfig


class TinyAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * config.head_dim)
        self.k_norm = RMSNorm(config.hidden_size)

    def forward(self, x):
        return self.k_norm(self.k_proj(x))
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_a_key_norm_of_the_query_width_is_right_where_the_imported_config_rejects_grouped_kv(tmp_path, guarded):
    # The config module, beside the model, decides whether K may have fewer heads than Q.
    check = ("        if self.num_key_value_heads != self.num_attention_heads:\n"
             "            raise ValueError('no grouped-query attention')\n") if guarded else ""
    (tmp_path / "configuration_tiny.py").write_text(
        "class TinyConfig:\n"
        "    def __init__(self, num_attention_heads=8, num_key_value_heads=None):\n"
        "        self.num_attention_heads = num_attention_heads\n"
        "        self.num_key_value_heads = num_key_value_heads or num_attention_heads\n" + check)
    model = tmp_path / "modeling_tiny.py"
    model.write_text(_KEY_NORM_MODEL)
    findings = lint_source(_KEY_NORM_MODEL, path=str(model), codes=["KV210"])
    assert [f.span.row for f in findings] == ([] if guarded else [8])
