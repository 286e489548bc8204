"""The sharpened ``ast`` screens: code in the shapes their rules report still passes them, and
look-alikes the rules stay silent on (the slow path says so) are stopped before libcst."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import replace

import pytest

from linter.plan.screen_facts import _OUTPUT_INDEX, _OUTPUT_KEYWORDS, walk
from linter.rules.kv101.screen import _RESIZING_CALLS
from linter.plan.screens import reporting
from linter.plan.screens import may_report
from linter.runner import _lint_text, job_for
from linter.settings import Settings


def _screen(code: str, text: str) -> bool:
    return may_report(ast.parse(text), [code], Settings())


def _reported(code: str, text: str) -> list[str]:
    """The codes the slow path (every line parsed and visited) reports for ``code`` alone."""
    job = replace(job_for(Settings(select=frozenset({code}))), prefilter=False)
    return [f.code for f in _lint_text(text, "<test>", job)]


def _passes_and_reports(code: str, text: str) -> None:
    assert _reported(code, text) == [code], "the shape must be one the rule reports"
    assert _screen(code, text) and _screen_with_text(code, text)


def _stopped_and_silent(code: str, text: str) -> None:
    """The rule is silent and the screen stops ``text``, asked as the runner asks it (with
    the lines the tree was parsed from)."""
    assert _reported(code, text) == [], "a look-alike the rule reports would be a wrong stop"
    assert not _screen_with_text(code, text)


# KV101: the key cut, the whole value beside it in one call.
KV101_REPORTED = {
    "inline cut beside the whole value, any call of an attention class": """\
class PagedAttentionImpl:
    def forward(self, query, key, value, num_tokens):
        return self.kernel(query, key[:num_tokens], value)
""",
    "cut bound to a name, value passed through an alias": """\
def decode_attention(query, key, value, start, end):
    key_window = key[start:end]
    value_in = value
    return flash_attn_func(query, key_window, value_in)
""",
    "a piece of an unpacked split, the value as a keyword": """\
def prefix_attention(query, key, value, done, todo):
    key_done, key_todo = key.split([done, todo], dim=0)
    return flash_attn_func(query, k=key_todo, v=value)
""",
    "a cut after axis moves, then hand-written attention": """\
def reference_attention(q, k, v, keep):
    k = k.transpose(1, 2)[:, :keep]
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v.transpose(1, 2)
""",
    "key pieces looped beside the same value every pass": """\
def grouped_attention(query, key, value, groups):
    outputs = []
    for key_part, value_part in zip(key.split(groups, dim=1), [value] * len(groups)):
        outputs.append(flash_attn_func(query, key_part, value_part))
    return outputs
""",
    "two K/V pairs in one call of unknown signature, the cut key's nearest value whole": """\
class ChunkedAttnBackend:
    def forward_chunk(self, q, k, v, out, n):
        self.extend_kernel(q, k[:n], v, out, k[:0], v[:0])
""",
    "equally near values on both sides of the cut key: the later one, whole": """\
class SplitAttention:
    def forward(self, q, k, v, n):
        return self.kernel(q, v[:0], k[:n], v)
""",
    "an attention kernel in a latent (MLA) pool's method": """\
class MLAPagedPool:
    def reference_attention(self, q, cache_k, cache_v, n):
        return flash_attn_func(q, cache_k[:n], cache_v)
""",
    "any call in an MLA attention module that is no pool": """\
class MLAAttention:
    def forward(self, q, k, v, n):
        return self.core(q, k[:n], v)
""",
}

KV101_SILENT = {
    "both sides cut where paired, the whole value only beside the whole key": """\
class FlashAttentionImpl:
    def forward(self, layer, query, key, value, kv_cache, num_actual_tokens):
        self.update_cache(layer, key, value, kv_cache)
        return self.kernel(query[:num_actual_tokens], key[:num_actual_tokens], value[:num_actual_tokens])
""",
    "the value rebound to a cut of itself": """\
def chunk_attention(query, key, value, n):
    value = value[:n]
    return flash_attn_func(query, key[:n], value)
""",
    "a head-dim cut (the last axis, after ...)": """\
def rope_attention(query, key, value, rope_dim):
    key_rot = key[..., :rope_dim]
    return flash_attn_func(query, key_rot, value)
""",
    "a bound naming the value (trimming the key to it)": """\
def trimmed_attention(query, key, value):
    return flash_attn_func(query, key[:, : value.shape[1]], value)
""",
    "an axis held in a variable (unplaceable)": """\
def narrowed_attention(query, key, value, axis, n):
    return flash_attn_func(query, key.narrow(axis, 0, n), value)
""",
    "a cut inside another call's argument, no origin": """\
def padded_attention(query, key, value, n, extra):
    return flash_attn_func(query, torch.cat([key[:, :n], extra], dim=1), value)
""",
    "a name bound to a call given the cut key, beside the whole value": """\
def attention(query, key, value, n, out_proj):
    partial = flash_attn_func(query, key[:, :n], value[:, :n])
    return out_proj(partial, value)
""",
    "key and value pieces zipped, the whole value passed elsewhere": """\
def grouped_attention(query, key, value, groups, chunked):
    if chunked:
        return [
            flash_attn_func(q_part, key_part, value_part)
            for q_part, key_part, value_part in zip(
                query.split(groups, dim=1), key.split(groups, dim=1), value.split(groups, dim=1)
            )
        ]
    return flash_attn_func(query, key, value)
""",
    "a cut of another key (a reference cache) beside this key's whole value": """\
class ReferenceAttention:
    def forward(self, query, key, value, key_cache, value_cache, slot, n):
        key_rot = rotate(key[:, :n])
        ref_key = key_cache[slot]
        ref_value = value_cache[slot]
        return self.attend(query, key_rot, value, ref_key, ref_value)
""",
    "a cut of the pool's key buffer beside the whole value written into it": """\
class PagedKVPool:
    def store(self, layer, loc, cache_k, cache_v, valid):
        if self.fallback:
            return self.store(layer, loc[valid], cache_k.index_select(0, valid), cache_v.index_select(0, valid))
        write_rows(cache_k, cache_v, self.k_buffer[layer - self.first], self.v_buffer[layer - self.first], loc)
""",
    "two K/V pairs in one call of unknown signature, each cut key beside its cut value": """\
class PrefixAttnBackend:
    def forward_new_tokens_only(self, q, k, v, out, indptr):
        self.extend_kernel(q, k, v, out, k[:0], v[:0], indptr)
""",
    "equally near values on both sides of the cut key: the later one, cut": """\
class SplitAttention:
    def forward(self, q, k, v, n):
        return self.kernel(q, v, k[:n], v[:0])
""",
    "a latent (MLA) pool's method handing the cut key to its parent, the value whole": """\
class ShardedMLATokenPool(MLATokenToKVPool):
    def set_kv_buffer(self, layer, loc, cache_k, cache_v):
        keep, rows = self.owned(loc)
        super().set_kv_buffer(layer, rows, cache_k.index_select(0, keep), cache_v)
""",
}


@pytest.mark.parametrize("name", sorted(KV101_REPORTED))
def test_kv101_shapes_it_reports_pass_its_screen(name: str) -> None:
    _passes_and_reports("KV101", KV101_REPORTED[name])


@pytest.mark.parametrize("name", sorted(KV101_SILENT))
def test_kv101_look_alikes_are_stopped(name: str) -> None:
    _stopped_and_silent("KV101", KV101_SILENT[name])


def test_kv101_scopes_are_functions_not_the_unit() -> None:
    # The cut in one method and the whole value in another never meet in one scope.
    text = """\
class RingAttention:
    def first(self, query, key, value, n):
        return self.kernel(query, key[:n], value[:n])

    def second(self, query, key, value):
        return self.kernel(query, key, value)
"""
    _stopped_and_silent("KV101", text)


def test_kv101_keeps_a_bound_whose_text_runs_into_a_keyword() -> None:
    # The rule reads the bound's text without whitespace (``v_lenifc``), so a V name next to
    # a keyword may be no V name to it: the screen does not drop such a cut.
    text = "def f(q, k, v, v_len, n, c):\n    return flash_attn_func(q, k[: v_len if c else n], v)\n"
    assert _screen("KV101", text)


def test_kv101_resizing_calls_are_the_rules() -> None:
    from linter.rules.kv101 import rule as kv101_key_only_reshape

    assert _RESIZING_CALLS == kv101_key_only_reshape._RESIZING_CALLS


# KV201: sizes the rule compares, written differently or alike.
KV201_REPORTED = """\
class CrossAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_dim
        self.k_proj = None if config.shared_kv else nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
        self.v_proj = weight_norm(nn.Linear(config.hidden_size, out_features=config.num_attention_heads * self.head_dim))
"""


def test_kv201_a_wrapped_or_optional_layer_passes_its_screen() -> None:
    _passes_and_reports("KV201", KV201_REPORTED)


def test_kv201_equal_sizes_written_with_other_brackets_are_stopped() -> None:
    text = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.k_proj = nn.Linear(config.hidden_size, (config.num_key_value_heads * self.head_dim), bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads  *  self.head_dim)
"""
    _stopped_and_silent("KV201", text)


def test_kv201_a_size_behind_unpacked_arguments_passes() -> None:
    text = """\
class Attention(nn.Module):
    def __init__(self, dims, config):
        self.k_proj = nn.Linear(*dims)
        self.v_proj = nn.Linear(*dims)
"""
    assert _screen("KV201", text)


# Sizes written differently whose factors name the same heads once names resolve (or none).
KV201_RESOLVED = {
    "a neutral width resolved to a product with a factor of its own": """\
class GroupedMixer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.channels = self.hidden_size * config.group_count
        self.key_proj = ReplicatedLinear(config.embed_dim, self.channels, bias=False)
        self.value_proj = ReplicatedLinear(config.embed_dim, self.hidden_size, bias=False)
""",
    "a local alias of the same product": """\
class Attention(nn.Module):
    def __init__(self, hidden, num_kv_heads, head_dim):
        super().__init__()
        out = num_kv_heads * head_dim
        self.k_proj = nn.Linear(hidden, out)
        self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim)
""",
}


@pytest.mark.parametrize("name", sorted(KV201_RESOLVED))
def test_kv201_sizes_alike_once_resolved_are_stopped(name: str) -> None:
    _stopped_and_silent("KV201", KV201_RESOLVED[name])


@pytest.mark.parametrize("text", [
    # A local alias of the KV product, against the query heads.
    """\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        out = num_kv_heads * head_dim
        self.k_proj = nn.Linear(hidden, out)
        self.v_proj = nn.Linear(hidden, num_heads * head_dim)
""",
    # A ``self`` attribute set in another method: the class's attributes are every method's.
    """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self._widths(config)
        self.k_proj = nn.Linear(config.hidden_size, self.width)
        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)

    def _widths(self, config):
        self.width = config.num_key_value_heads * self.head_dim
""",
    # A class declared inside a function.
    """\
def build(hidden, num_heads, num_kv_heads, head_dim):
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wk = nn.Linear(hidden, num_kv_heads * head_dim)
            self.wv = nn.Linear(hidden, num_heads * head_dim)

    return Attention()
""",
])
def test_kv201_sizes_that_differ_once_resolved_pass_its_screen(text: str) -> None:
    _passes_and_reports("KV201", text)


def test_kv201_output_keywords_are_the_models() -> None:
    from linter.model import classes

    assert _OUTPUT_KEYWORDS == classes._OUTPUT_KEYWORDS
    assert _OUTPUT_INDEX == classes._OUTPUT_INDEX


# KV204: the states a K/V projection reads must be the optional (cross-attention) input.
KV204_CHOSEN_IN_A_TUPLE = """\
class CrossAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        bsz, tgt_len, _ = hidden_states.size()
        states, mask = (encoder_hidden_states if encoder_hidden_states is not None else hidden_states), attention_mask
        key = self.key(states).view(bsz, tgt_len, -1, self.head_dim)
        return key, mask
"""


def test_kv204_states_chosen_in_a_tuple_pass_its_screen() -> None:
    _passes_and_reports("KV204", KV204_CHOSEN_IN_A_TUPLE)


def test_kv204_self_attention_on_a_required_input_is_stopped() -> None:
    text = """\
class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.head_dim = hidden // heads
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, attention_mask=None):
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        key = self.k_proj(hidden_states).view(hidden_shape)
        value = self.v_proj(hidden_states).view(hidden_shape)
        return key, value, attention_mask
"""
    _stopped_and_silent("KV204", text)


KV204_UNPACKED = """\
class ParallelAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q = ColumnParallelLinear(dim, dim)
        self.to_k = ColumnParallelLinear(dim, dim)

    def forward(self, x, context=None):
        states = x if context is None else context
        q_shape = (*x.shape[:-1], self.heads, -1)
        q, _ = self.to_q(x)
        {bound}
        return q.view(q_shape), k.view(q_shape)
"""


def test_kv204_a_projection_unpacked_from_a_tuple_is_stopped() -> None:
    # ``k, _ = self.to_k(...)`` is no simple binding: the rule never reads ``k`` as the
    # projection's output.
    _stopped_and_silent("KV204", KV204_UNPACKED.replace("{bound}", "k, _ = self.to_k(states)"))


@pytest.mark.parametrize("bound", ["k = self.to_k(states)", "k, bias = self.to_k(states), None"])
def test_kv204_a_projection_bound_alone_or_paired_passes_its_screen(bound: str) -> None:
    _passes_and_reports("KV204", KV204_UNPACKED.replace("{bound}", bound))


# KV205: a view of the K/V projection's output with the query head count as one element.
def test_kv205_a_shape_passed_as_one_tuple_passes_its_screen() -> None:
    text = """\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)

    def forward(self, x, b, s):
        return self.k_proj(x).view((b, s, self.num_heads, self.head_dim))
"""
    _passes_and_reports("KV205", text)


def test_kv205_query_and_output_views_are_stopped() -> None:
    text = """\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)

    def forward(self, x, b, s):
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim)
        out = attend(q, self.k_proj(x))
        return out.transpose(1, 2).reshape(b, s, self.num_heads * self.head_dim)
"""
    _stopped_and_silent("KV205", text)


def test_kv205_a_projection_reached_through_names_passes_its_screen() -> None:
    text = """\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.k_proj, self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim), nn.Linear(hidden, num_kv_heads * head_dim)

    def forward(self, x, b, s):
        projected, values = self.k_proj(x), self.v_proj(x)
        key = projected
        return key.view(b, s, self.num_heads, self.head_dim), values
"""
    _passes_and_reports("KV205", text)


@pytest.mark.parametrize("viewed", [
    # A piece of a fused projection's output: the rule reads no one projection in it.
    "qkv, _ = self.qkv_proj(x)\n        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)",
    # A K-side projection declared with the query's width.
    "k = self.k_norm_proj(x)",
    # The K projection of two inputs at once.
    "k = self.k_proj(x, bias)",
])
def test_kv205_views_of_no_kv_sized_projection_are_stopped(viewed: str) -> None:
    text = f"""\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.qkv_proj = QKVParallelLinear(hidden, head_dim, num_heads, num_kv_heads)
        self.k_proj = RowLinear(hidden, num_kv_heads * head_dim)
        self.k_norm_proj = nn.Linear(hidden, num_heads * head_dim)

    def forward(self, x, b, s, bias):
        {viewed}
        return k.view(b, s, self.num_heads, self.head_dim)
"""
    _stopped_and_silent("KV205", text)


def test_kv204_a_length_read_by_size_on_the_query_passes_its_screen() -> None:
    text = """\
class DecoderAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.head_dim = hidden // heads
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, key_value_states=None):
        bsz = hidden_states.size(0)
        q_len = hidden_states.size(1)
        value = self.v_proj(key_value_states)
        return value.reshape(bsz, q_len, -1, self.head_dim)
"""
    _passes_and_reports("KV204", text)


def test_kv204_a_shape_read_off_the_projected_states_themselves_is_stopped() -> None:
    text = """\
class CrossAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, encoder_hidden_states=None):
        bsz, tgt_len = hidden_states.shape[:-1]
        query = self.query(hidden_states).view(bsz, tgt_len, -1, self.head_dim)
        kv_shape = (*encoder_hidden_states.shape[:-1], -1, self.head_dim)
        key = self.key(encoder_hidden_states).view(kv_shape)
        return query, key
"""
    _stopped_and_silent("KV204", text)


# KV102 and KV103 compare their sites as text: with the unit's lines at hand, sites all alike
# (K names swapped to V) are stopped.
def _screen_with_text(code: str, text: str) -> bool:
    return code in reporting(ast.parse(text), [code], Settings(), (text.split("\n"), 0))


def _text_compared(code: str, reported: str, alike: str) -> None:
    _passes_and_reports(code, reported)
    _stopped_and_silent(code, alike)
    assert _screen(code, alike), "without the text the screen keeps its old, wider answer"


def test_kv102_slices_compared_as_the_rule_compares_them() -> None:
    reported = """\
def prefill_attention(query, cache_k, cache_v, b, p, s):
    keys = cache_k[:b, :p + s]
    values = cache_v[:b, :p]
    return F.scaled_dot_product_attention(query, keys, values)
"""
    alike = reported.replace("cache_v[:b, :p]", "cache_v[ :b,  :p + s ]")
    _text_compared("KV102", reported, alike)


def test_kv102_cuts_compared_as_the_rule_compares_them() -> None:
    reported = """\
def chunked_attention(query, key, value, n):
    key_parts = torch.split(key, [n, n], dim=1)
    value_parts = torch.split(value, [n, n - 1], dim=1)
    return flash_attn_func(query, key_parts[0], value_parts[0])
"""
    alike = reported.replace("[n, n - 1]", "[n, n]")
    _text_compared("KV102", reported, alike)


def test_kv102_whole_and_new_axes_are_no_cuts() -> None:
    # A Triton kernel's offsets broadcast along new axes: K and V are named, nothing is cut.
    reported = """\
def attention_kernel(q_ptr, k_ptr, v_ptr, offs_k, offs_v, n):
    b_k = tl.load(k_ptr + offs_k[:, None] * n)
    b_v = tl.load(v_ptr + offs_v[None, :] * n)
    o_k = offs_k[:n]
    o_v = offs_v[:n - 1]
    return tl.dot(b_k, b_v)
"""
    alike = reported.replace("    o_k = offs_k[:n]\n    o_v = offs_v[:n - 1]\n", "    o_k = offs_k[..., :]\n    o_v = offs_v[:n]\n")
    _text_compared("KV102", reported, alike)


# KV102 reports a site that no site of the other side matches (``scopes.mismatches``): K and V
# cut alike, each way twice (a ring's local and remote halves), are stopped; a match the rule
# cannot use (in the other arm of an ``if``, quiet, inside a chain, behind other axis moves)
# is no match.
_KV102_HALVES = """\
def ring_attention(q, k, v, num_rep, c):
    k_local, k_remote = k[:, :-num_rep], k[:, -num_rep:]
    v_local, v_remote = v[:, :-num_rep], v[:, -num_rep:]
    return flash_attn_func(q, k_local, v_local), flash_attn_func(q, k_remote, v_remote)
"""
# Each site has one alike by its text on the other side; one of those the rule cannot use.
KV102_UNUSABLE_MATCHES = {
    "in the other arm of an if": """\
def attention(q, k, v, n, m, c):
    k_all = k[:, :m]
    if c:
        k = k[:, :n]
        v = v[:, :m]
    else:
        v = v[:, :n]
    return flash_attn_func(q, k, v), k_all
""",
    "quiet": """\
def attention(q, k, v, n):
    k_new = k[:, :n]
    logger.info("value %s", v[:, :n])
    k = k[:, :n - 1]
    v = v[:, :n - 1]
    return flash_attn_func(q, k, v), k_new
""",
    "inside a chain": """\
def attention(q, k, v, n):
    k_new = k[:, :n]
    first = v[:, :n][0]
    k = k[:, :n - 1]
    v = v[:, :n - 1]
    return flash_attn_func(q, k, v, first), k_new
""",
    "behind other axis moves": """\
def attention(q, k, v, n):
    k_t = k.transpose(1, 2)[:, :n]
    v_new = v[:, :n]
    k = k[:, :n - 1]
    v = v.transpose(1, 2)[:, :n - 1]
    return flash_attn_func(q, k, v, v_new), k_t
""",
}


def test_kv102_sites_matched_on_both_sides_are_stopped() -> None:
    _stopped_and_silent("KV102", _KV102_HALVES)
    one_differs = _KV102_HALVES.replace("v[:, -num_rep:]", "v[:, -num_rep - 1:]")
    assert set(_reported("KV102", one_differs)) == {"KV102"} and _screen_with_text("KV102", one_differs)


@pytest.mark.parametrize("name", sorted(KV102_UNUSABLE_MATCHES))
def test_kv102_a_match_the_rule_cannot_use_is_no_match(name: str) -> None:
    text = KV102_UNUSABLE_MATCHES[name]
    assert set(_reported("KV102", text)) == {"KV102"}, "the shape must be one the rule reports"
    assert _screen_with_text("KV102", text)

def test_kv102_a_value_written_to_reports_nothing_of_its_own() -> None:
    # A test checks that one image's attention ignores another's: K and V cut alike per
    # image, then the later image's values perturbed in place.
    written = """\
def test_attention_keeps_images_apart(q, k, v, bounds):
    ref = torch.cat([F.scaled_dot_product_attention(q[a:b], k[a:b], v[a:b]) for a, b in bounds])
    v[bounds[0][1]:] += 100
    return ref
"""
    _stopped_and_silent("KV102", written)
    read = written.replace("v[bounds[0][1]:] += 100", "ref = ref + F.scaled_dot_product_attention(q, k, v[bounds[0][1]:])")
    _passes_and_reports("KV102", read)


def test_kv103_indices_compared_as_the_rule_compares_them() -> None:
    reported = """\
class PagedAttention:
    def store(self, key, value, slots, slot_ids):
        self.k_cache[self.layer][slots] = key
        self.v_cache[self.layer][slot_ids] = value
"""
    alike = reported.replace("[slot_ids]", "[slots]")
    _text_compared("KV103", reported, alike)


def test_kv103_indexed_calls_compared_as_the_rule_compares_them() -> None:
    reported = """\
class KVPool:
    def set_kv_buffer(self, layer_id, loc, cache_k, cache_v):
        self.k_buffer[layer_id].index_copy_(0, loc, cache_k)
        self.v_buffer[layer_id - 1].index_copy_(0, loc, cache_v)
"""
    alike = reported.replace("[layer_id - 1]", "[layer_id]")
    _text_compared("KV103", reported, alike)

# KV103 reports a site that no site of the other side it meets matches (``scopes.mismatches``),
# and reads only the sites the rule records: subscripts that index (not slices only), not
# quiet (``k_buffers[0].device``), indexed calls on a cache as a tensor method or a known free
# function, compared on the cache's subscripts and the index arguments (not the data written,
# not ``out=``). Look-alikes with no such site are stopped.
KV103_NO_SITE_REPORTS = {
    "windows sliced alike, in two layouts": """\
class CachedSelfAttention:
    def forward(self, layer, k_new, v_new, start, n, packed):
        if packed:
            layer.k_cache[:, :, start:start + n].copy_(k_new)
            layer.v_cache[:, :, start:start + n].copy_(v_new)
            return layer.k_cache[:, :, :start + n], layer.v_cache[:, :, :start + n]
        layer.k_cache[:, start:start + n].copy_(k_new)
        layer.v_cache[:, start:start + n].copy_(v_new)
        return layer.k_cache[:, :start + n], layer.v_cache[:, :start + n]
""",
    "one layer read for what all layers share": """\
def scatter_staged_kv(staged, k_buffers, v_buffers, slots):
    dim = k_buffers[0].shape[-1]
    width = dim * k_buffers[0].element_size()
    staged = staged.to(k_buffers[0].device)
    for layer in range(len(k_buffers)):
        k_buffers[layer][slots] = staged[0].view(-1, dim)
        v_buffers[layer][slots] = staged[1].view(-1, dim)
    return width
""",
    "rows moved: each index matched on the other side": """\
def move_kv_cache_rows(k_pools, v_pools, dst, src):
    for k_pool, v_pool in zip(k_pools, v_pools):
        k_pool[dst] = k_pool[src]
        v_pool[dst] = v_pool[src]
""",
    "a local helper named like a tensor method": """\
class LatentKVPool:
    def store_tiled(self, layer, loc, latent, rope):
        def scatter(dst, src, width):
            torch_npu.npu_scatter_nd_update_(dst.view(-1, width), loc.view(-1, 1), src.view(-1, width))

        row = layer - self.first_layer
        scatter(self.k_buf[row], latent, self.latent_dim)
        scatter(self.v_buf[row], rope, self.rope_dim)
""",
    "gathers into the two halves of one output": """\
class PagedKVCopier:
    def stack_pages(self, k_cache, v_cache, pages):
        out = k_cache.new_empty((pages.numel(), 2, *k_cache.shape[1:]))
        torch.index_select(k_cache, 0, pages, out=out[:, 0])
        torch.index_select(v_cache, 0, pages, out=out[:, 1])
        return out
""",
    "updates with data of different widths": """\
class LatentKVPool:
    def store(self, layer, loc, k, v):
        torch_npu.npu_scatter_nd_update_(self.k_buffer[layer], loc, k.view(-1, self.latent_dim))
        torch_npu.npu_scatter_nd_update_(self.v_buffer[layer], loc, v.view(-1, self.rope_dim))
""",
    "a value written at a row of its own": """\
def refresh_kv_cache(k_cache, v_cache, slots, spare, k_new, v_new):
    k_cache[slots] = k_new
    v_cache[slots] = v_new
    v_cache[spare] = 0
    return k_cache[slots] + 1
""",
}
# Shapes next to those the rule reports: they pass.
KV103_REPORTED_NEARBY = {
    "windows at different layers": """\
class CachedSelfAttention:
    def forward(self, layer, k_new, v_new, start, n):
        layer.k_cache[self.layer_idx, :, start:start + n].copy_(k_new)
        layer.v_cache[self.layer_idx - 1, :, start:start + n].copy_(v_new)
""",
    "one layer's rows read for real": """\
def scatter_staged_kv(staged, k_buffers, v_buffers, slots):
    dim = k_buffers[0].shape[-1]
    for layer in range(len(k_buffers)):
        first = k_buffers[0][slots]
        k_buffers[layer][slots] = staged[0].view(-1, dim)
        v_buffers[layer][slots] = staged[1].view(-1, dim)
    return first
""",
    "a free function this scope binds: its caches compared as accesses": """\
def write_kv(k_buffer, v_buffer, loc, npu_scatter_nd_update_):
    npu_scatter_nd_update_(k_buffer[loc], 0)
    npu_scatter_nd_update_(v_buffer[loc - 1], 0)
""",
}


def _edited(text: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


# ... and look-alikes edited into sites the rule reports: name -> (the look-alike, its edits).
KV103_REPORTED_EDITS = {
    "rows moved from different sources": (
        "rows moved: each index matched on the other side", [("v_pool[dst] = v_pool[src]", "v_pool[dst] = v_pool[dst]")]),
    "a local helper handed different rows": (
        "a local helper named like a tensor method", [("self.v_buf[row]", "self.v_buf[row + 1]")]),
    "gathers of different pages": (
        "gathers into the two halves of one output", [("pages):", "pages, rows):"), ("v_cache, 0, pages", "v_cache, 0, rows")]),
    "updates at different locations": (
        "updates with data of different widths", [("loc, k, v):", "loc, slot, k, v):"), ("self.v_buffer[layer], loc", "self.v_buffer[layer], slot")]),
    "a value read at a row of its own": (
        "a value written at a row of its own",
        [("    v_cache[spare] = 0\n    return k_cache[slots] + 1", "    return k_cache[slots] + v_cache[spare]")]),
}
KV103_REPORTED_NEARBY.update(
    (name, _edited(KV103_NO_SITE_REPORTS[look_alike], edits)) for name, (look_alike, edits) in KV103_REPORTED_EDITS.items()
)


@pytest.mark.parametrize("name", sorted(KV103_NO_SITE_REPORTS))
def test_kv103_look_alikes_with_no_site_to_report_are_stopped(name: str) -> None:
    text = KV103_NO_SITE_REPORTS[name]
    _stopped_and_silent("KV103", text)


@pytest.mark.parametrize("name", sorted(KV103_REPORTED_NEARBY))
def test_kv103_sites_the_rule_reports_pass(name: str) -> None:
    text = KV103_REPORTED_NEARBY[name]
    _passes_and_reports("KV103", text)


# KV104: the value side produced by the key side's twin.
KV104_REPORTED = {
    "the key projection called for the value in a literal tuple": """\
class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.wk = nn.Linear(hidden, hidden)
        self.wv = nn.Linear(hidden, hidden)

    def forward(self, x):
        k, v = self.wk(x), self.wk(x)
        return k, v
""",
    "a value getter returning a view of the key buffer": """\
class TokenPool:
    def __init__(self, k, v):
        self.k_buffer = k
        self.v_buffer = v

    def get_value_buffer(self, layer):
        return self.k_buffer[layer].view(-1)
""",
    "a value setter storing into the key buffer": """\
class TokenPool:
    def __init__(self, k, v):
        self.k_buffer = k
        self.v_buffer = v

    def set_value_buffer(self, loc, data):
        self.k_buffer[loc] = data
""",
    "a value input written into the key cache beside the value cache": """\
def write(k_cache, v_cache, slots, v_input):
    k_cache[slots] = v_input
    return v_cache
""",
    "a value input copied into the key cache beside the value cache": """\
def write(k_cache, v_cache, v_input):
    k_cache.copy_(v_input)
    return v_cache
""",
}
KV104_REPORTED["a nested tuple reading the whole value again"] = _edited(
    KV104_REPORTED["the key projection called for the value in a literal tuple"],
    [("k, v = self.wk(x), self.wk(x)\n        return k, v", "(k, v), *rest = self.wk(x), self.wk(x)\n        return k, v, rest")],
)

KV104_SILENT = {
    # Each side through its own projection, unpacked from a literal tuple.
    "a tuple of each side's projection": """\
class VisionAttention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.wq = nn.Linear(hidden, hidden)
        self.wk = nn.Linear(hidden, hidden)
        self.wv = nn.Linear(hidden, hidden)

    def forward(self, x):
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        return attend(q, k, v)
""",
    # MQA: the value getter hands out the key getter's buffer, a call the rule does not follow.
    "a value getter delegating to the key getter": """\
class LatentPool:
    def __init__(self, kv):
        self.kv_buffer = kv

    def get_key_buffer(self, layer):
        return self.kv_buffer[layer]

    def get_value_buffer(self, layer):
        return self.get_key_buffer(layer)
""",
    # A value-named method that only tidies a K-side bookkeeping attribute.
    "a value-named method calling a method of a K-side attribute": """\
class Cache(Base):
    def lookup_value(self, key):
        if key in self.recent_keys:
            self.recent_keys.move_to_end(key)
        return super().lookup_value(key)
""",
    # A store through two subscripts: the function model records no store without a named base.
    "a value setter storing through two subscripts": """\
class TokenPool:
    def __init__(self, k, v):
        self.k_buffer = k
        self.v_buffer = v

    def set_value_buffer(self, layer, loc, data):
        self.k_buffer[layer][loc] = data
""",
    # MLA: the key's latent part is the value, written into the key under the value's twin name.
    "the key built from its own value twin": """\
class LatentAttention(nn.Module):
    def forward(self, q, v_input, k_pe):
        k_input = q.new_empty(q.shape[0], self.heads, self.dim)
        k_input[..., : self.rank] = v_input
        k_input[..., self.rank :] = k_pe
        return self.attn(q, k_input, v_input)
""",
}


@pytest.mark.parametrize("name", sorted(KV104_REPORTED))
def test_kv104_shapes_it_reports_pass_its_screen(name: str) -> None:
    _passes_and_reports("KV104", KV104_REPORTED[name])


@pytest.mark.parametrize("name", sorted(KV104_SILENT))
def test_kv104_look_alikes_are_stopped(name: str) -> None:
    _stopped_and_silent("KV104", KV104_SILENT[name])


def test_text_that_is_not_the_sites_own_is_never_alike() -> None:
    # Lines that do not match the tree (a wrong offset) must not make two sites look alike.
    text = "def f(q, k_cache, v_cache, a, b):\n    return attention(q, k_cache[a], v_cache[b])\n"
    shifted = ["x"] + text.split("\n")
    assert "KV103" in reporting(ast.parse(text), ["KV103"], Settings(), (shifted, 0))


def test_lines_too_few_for_the_tree_are_no_error() -> None:
    text = "def f(q, k_cache, v_cache, a):\n    return attention(q, k_cache[a], v_cache[a])\n"
    assert "KV103" in reporting(ast.parse(text), ["KV103"], Settings(), (["def f(): pass"], 0))


# KV203: an equal-thirds split of what reads as a fused QKV output.
KV203_FUSED = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.W_pack = nn.Linear(config.hidden_size, 3 * config.hidden_size)

    def forward(self, hidden_states):
        query_states, key_states, value_states = self.W_pack(hidden_states).chunk(3, dim=-1)
        return query_states, key_states, value_states
"""


def test_kv203_parts_unpacked_into_q_k_v_names_pass_its_screen() -> None:
    _passes_and_reports("KV203", KV203_FUSED)


def test_kv203_thirds_of_something_else_are_stopped() -> None:
    # A gated MLP's three branches, in a class that also names a KV head count.
    text = KV203_FUSED.replace("query_states, key_states, value_states", "gate, up, skip")
    _stopped_and_silent("KV203", text)


# A fused projection split by a list of sizes held in a name, the way gated linear attention
# splits q, k, v and a gate: the rule reads the name through its one assignment.
KV203_BY_NAME = """\
class GatedAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_k_heads = config.linear_num_key_heads
        self.head_k_dim = config.linear_key_head_dim
        self.in_proj_qkvz = nn.Linear(config.hidden_size, 4 * self.head_k_dim)

    def forward(self, hidden_states):
        mixed_qkvz = self.in_proj_qkvz(hidden_states)
        sizes = SIZES
        (PARTS) = torch.split(mixed_qkvz, sizes, dim=-1)
        return PARTS
"""


@pytest.mark.parametrize(
    ("sizes", "parts"),
    [
        ("[self.head_k_dim, self.head_k_dim, self.head_k_dim]", "query, key, value"),
        ("[self.head_k_dim] * 3", "query, key, value"),
    ],
)
def test_kv203_a_name_assigned_equal_thirds_passes_its_screen(sizes: str, parts: str) -> None:
    _passes_and_reports("KV203", KV203_BY_NAME.replace("SIZES", sizes).replace("PARTS", parts))


@pytest.mark.parametrize(
    ("sizes", "parts"),
    [
        # Four parts: no equal thirds, whatever the sizes.
        ("[self.head_k_dim, self.head_k_dim, self.head_k_dim, self.head_k_dim]", "query, key, value, z"),
        # Sizes read from elsewhere, unpacked into four names.
        ("self.split_sizes(hidden_states)", "query, key, value, z"),
    ],
)
def test_kv203_a_name_holding_other_sizes_is_stopped(sizes: str, parts: str) -> None:
    _stopped_and_silent("KV203", KV203_BY_NAME.replace("SIZES", sizes).replace("PARTS", parts))


def _kv203_screen(text: str, lines: list[str] | None = None) -> bool:
    """KV203's screen as the runner asks it: with the lines the tree was parsed from."""
    return may_report(ast.parse(text), ["KV203"], Settings(), (text.split("\n") if lines is None else lines, 0))


# Tensor-parallel attention splitting its fused output by sizes held in a name and unpacked
# into three names: the rule reads the name through its one assignment before the split, and
# only equal sizes are thirds.
KV203_SIZES_NAMED = """\
class ShardedAttention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        self.tp_size = tp_size
        self.num_kv_heads = config.num_key_value_heads // tp_size
        self.head_dim = config.head_dim
        self.q_size = config.num_attention_heads // tp_size * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.qkv_proj = QKVParallelLinear(config.hidden_size, self.head_dim)

    def forward(self, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
SPLIT
        return qkv
"""


def _filled(template: str, place: str, lines: str) -> str:
    """``template`` with ``lines`` at ``place``, indented as a method's body."""
    return template.replace(place, textwrap.indent(textwrap.dedent(lines), " " * 8).rstrip("\n"))


@pytest.mark.parametrize(
    ("split", "reported"),
    [
        ("widths = [self.head_dim] * 3\nq, k, v = qkv.split(widths, dim=-1)", True),
        ("widths = [self.kv_size, self.kv_size, self.kv_size]\nq, k, v = qkv.split(widths, dim=-1)", True),
        # One width for every part, through a name.
        ("widths = self.kv_size\nq, k, v = qkv.split(widths, dim=-1)", True),
        # Assigned twice: the rule reads the name itself, a KV width.
        ("kv_size = self.kv_size\nif self.tp_size > 1:\n    kv_size = self.head_dim\nq, k, v = qkv.split(kv_size, dim=-1)", True),
        # Parts gathered into one name: equal thirds by the sizes alone.
        ("widths = [self.head_dim] * 3\nqkv = torch.split(qkv, widths, dim=-1)", True),
        # Other sizes assigned in a function inside: not this function's name.
        ("def unused():\n    widths = [self.q_size, self.kv_size, self.kv_size]\nwidths = [self.head_dim] * 3\nqkv = torch.split(qkv, widths, dim=-1)", True),
        # Query and KV sizes, unpacked into three names.
        ("widths = [self.q_size, self.kv_size, self.kv_size]\nq, k, v = qkv.split(widths, dim=-1)", False),
        # Per-rank sizes repeated for every rank, the parts gathered into one name.
        ("widths = [self.q_size, self.kv_size, self.kv_size] * self.tp_size\nqkv = torch.split(qkv, widths, dim=-1)", False),
    ],
)
def test_kv203_sizes_read_through_a_name_count_as_thirds_when_equal(split: str, reported: bool) -> None:
    (_passes_and_reports if reported else _stopped_and_silent)("KV203", _filled(KV203_SIZES_NAMED, "SPLIT", split))


# Encoder attention that declares a KV head count for its fused projection's sake, the count
# made equal to the query head count by assignment: no GQA, and the rule is silent.
KV203_EQUAL_HEADS = """\
class EncoderSelfAttention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
HEADS
        self.num_kv_heads = max(1, self.total_num_kv_heads // tp_size)
        self.head_dim = config.d_model // config.num_heads
        self.qkv_proj = QKVParallelLinear(config.d_model, self.head_dim, self.total_num_heads, self.total_num_kv_heads)

    def forward(self, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.chunk(3, dim=-1)
        return q, k, v
"""


@pytest.mark.parametrize(
    ("heads", "reported"),
    [
        ("self.total_num_heads = self.total_num_kv_heads = config.num_heads", False),
        ("self.total_num_heads = config.num_heads\nself.total_num_kv_heads = self.total_num_heads", False),
        ("self.total_num_heads = config.num_heads\nself.total_num_kv_heads = config.num_key_value_heads", True),
        # The rule reads the value's text: a comment inside it, a string.
        (
            (
                "self.total_num_heads = config.num_heads\nself.total_num_kv_heads = (\n"
                "    self.total_num_heads  # until num_key_value_heads lands\n)"
            ),
            True,
        ),
        (
            (
                "self.total_num_heads = config.num_heads\n"
                "self.total_num_kv_heads = getattr(config, 'num_key_value_heads', self.total_num_heads)"
            ),
            True,
        ),
        # An annotated assignment is none the rule records.
        ("self.total_num_heads = config.num_heads\nself.total_num_kv_heads: int = self.total_num_heads", True),
    ],
)
def test_kv203_kv_heads_count_unless_assigned_the_query_heads(heads: str, reported: bool) -> None:
    (_passes_and_reports if reported else _stopped_and_silent)("KV203", _filled(KV203_EQUAL_HEADS, "HEADS", heads))


def test_kv203_heads_proven_only_from_the_lines_the_tree_was_parsed_from() -> None:
    text = _filled(KV203_EQUAL_HEADS, "HEADS", "self.total_num_heads = self.total_num_kv_heads = config.num_heads")
    assert _kv203_screen(text, ["x = 1"] * len(text.split("\n")))
    assert _screen("KV203", text)  # no lines at all


def test_kv203_a_split_in_a_class_body_inside_a_method_is_the_methods_class() -> None:
    # The rule files a function's splits under the class around the function.
    text = """\
class Attention(nn.Module):
    def __init__(self, config):
        self.num_kv_heads = config.num_key_value_heads

    def build(self, qkv):
        class Parts:
            query, key, value = qkv.chunk(3, dim=-1)
        return Parts
"""
    _passes_and_reports("KV203", text)


def test_kv203_a_kv_head_count_of_a_class_inside_is_not_the_splits() -> None:
    text = """\
class Attention(nn.Module):
    class Defaults:
        num_key_value_heads = 8

    def forward(self, qkv):
        return qkv.chunk(3, dim=-1)
"""
    _stopped_and_silent("KV203", text)


# KV202: K and V views of one form naming different head counts, as ``heads`` compares them.
KV202_REPORTED = {
    "paged caches, query head count on the value": """\
def write(key_cache, value_cache, num_blocks, block_size, num_kv_heads, num_heads, head_size):
    key_cache = key_cache.view(num_blocks, block_size, num_kv_heads, head_size)
    value_cache = value_cache.view(num_blocks, block_size, num_heads, head_size)
""",
    "projections viewed, the count reached through a local alias": """\
class Attention:
    def forward(self, x):
        kv_heads = self.config.num_key_value_heads
        k = self.k_proj(x).view(2, 4, kv_heads, self.head_dim)
        v = self.v_proj(x).view(2, 4, self.num_attention_heads, self.head_dim)
        return k, v
""",
    "MQA: one head against the query count, in a decorated method": """\
class Attention:
    @torch.no_grad()
    def forward(self, k, v, b, s):
        k = k.reshape((b, s, 1, self.head_dim))
        v = v.reshape((b, s, self.n_heads, self.head_dim))
""",
    "einops with the counts as keywords, a getattr naming one": """\
def split_heads(self, k, v):
    k = rearrange(k, "b s (h d) -> b s h d", h=self.num_kv_heads)
    v = rearrange(v, "b s (h d) -> b s h d", h=getattr(self.config, "num_attention_heads"))
""",
}

KV202_SILENT = {
    "each side on a count of its own (linear attention), head dims differing": """\
def forward_extend(self, layer, k_cache, v_cache):
    k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.qk_head_dim)
    v_cache = v_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.v_head_dim)
""",
    "a page size against a literal one (unclassifiable)": """\
def forward_decode(self, layer, k_cache, v_cache):
    k_cache = k_cache.view(-1, 1, layer.num_kv_heads, layer.head_dim)
    v_cache = v_cache.view(-1, self.page_size, layer.num_kv_heads, layer.head_dim)
""",
    "views in two functions (scopes are functions)": """\
def view_key(k, num_kv_heads, head_dim):
    return k.view(2, 4, num_kv_heads, head_dim)

def view_value(v, num_heads, head_dim):
    return v.view(2, 4, num_heads, head_dim)
""",
    "a query viewed into a K-named buffer": """\
def decode_dummies(q, v, num_heads, num_kv_heads, head_dim):
    k_pair = q.reshape(2, 1, num_heads, head_dim)
    v_pair = v.reshape(2, 1, num_kv_heads, head_dim)
""",
    "an alias assigned twice resolves to nothing": """\
def forward(self, k, v, b, s, config):
    n = config.num_kv_heads
    n = config.num_attention_heads
    k = k.view(b, s, n, self.head_dim)
    v = v.view(b, s, self.num_key_value_heads, self.head_dim)
""",
}


@pytest.mark.parametrize("name", sorted(KV202_REPORTED))
def test_kv202_shapes_it_reports_pass_its_screen(name: str) -> None:
    _passes_and_reports("KV202", KV202_REPORTED[name])


@pytest.mark.parametrize("name", sorted(KV202_SILENT))
def test_kv202_look_alikes_are_stopped(name: str) -> None:
    _stopped_and_silent("KV202", KV202_SILENT[name])


def test_kv202_a_method_screened_alone_is_its_own_scope() -> None:
    # The runner screens a class's methods one by one (``METHOD_SCOPED``): the method node
    # itself, not a module holding it, is the tree.
    body = KV202_REPORTED["MQA: one head against the query count, in a decorated method"]
    method = ast.parse(body).body[0].body[0]
    assert isinstance(method, ast.FunctionDef) and may_report(method, ["KV202"], Settings())
    silent = ast.parse(KV202_SILENT["a page size against a literal one (unclassifiable)"]).body[0]
    assert not may_report(silent, ["KV202"], Settings())


# KV301: one side of a pair set together rebuilt from itself, in a method that never reads the other.
KV301_REPORTED = {
    "the twin read in another method only": """\
class WindowCache:
    def __init__(self, k, v):
        self.k = k
        self.v = v

    def write(self, key, value, start, end):
        self.k[:, start:end] = key
        self.v[:, start:end] = value

    def detach(self):
        self.k = self.k.detach()
""",
    "the twin assigned, never read": """\
class KVCache:
    def __init__(self):
        self.k_cache = None
        self.v_cache = None

    def evict(self, keep):
        self.k_cache = self.k_cache[:, -keep:]
        self.v_cache = None
""",
    "the twin read only in a nested function": """\
class KVCache:
    def __init__(self, shape):
        self.key_cache = torch.zeros(shape)
        self.value_cache = torch.zeros(shape)

    def shift(self, n):
        def later():
            return self.value_cache.sum()
        self.key_cache[:, :-n] = self.key_cache[:, n:].clone()
        return later
""",
}
KV301_SILENT = {
    "the twin read in the same method, on another branch": """\
class WindowCache:
    def __init__(self, k, v):
        self.k = k
        self.v = v

    def update(self, key, value, start, end, detach):
        if detach:
            self.k = self.k.detach()
        self.k[:, start:end] = key
        self.v[:, start:end] = value
""",
    "both sides rebuilt together": """\
class LayerCache:
    def __init__(self):
        self.k_cache = None
        self.v_cache = None

    def store(self, k, v):
        self.k_cache = torch.cat([self.k_cache, k], dim=1)
        self.v_cache = torch.cat([self.v_cache, v], dim=1)
""",
    "the sides set in different methods, never together": """\
class SplitCache:
    def __init__(self, k):
        self.k_cache = k

    def set_values(self, v):
        self.v_cache = v

    def evict(self, keep):
        self.k_cache = self.k_cache[:, -keep:]
""",
}


@pytest.mark.parametrize("name", sorted(KV301_REPORTED))
def test_kv301_shapes_it_reports_pass_its_screen(name: str) -> None:
    _passes_and_reports("KV301", KV301_REPORTED[name])


@pytest.mark.parametrize("name", sorted(KV301_SILENT))
def test_kv301_look_alikes_are_stopped(name: str) -> None:
    _stopped_and_silent("KV301", KV301_SILENT[name])


def test_walk_gives_ast_walk_s_nodes_less_the_contexts() -> None:
    # Keyword-only parameters without defaults and ``**`` in a dict literal leave None among
    # the nodes; match patterns and ``global`` hold identifiers, not nodes.
    tree = ast.parse(
        "def f(a, *, b, c=1, **kw):\n    global g\n    return {**kw, 'a': a}\n"
        "match f:\n    case Point(x=0, y=[1, *rest]) as p:\n        pass\n"
    )
    expected = sorted(id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context))
    assert sorted(id(n) for n in walk(tree)) == expected
