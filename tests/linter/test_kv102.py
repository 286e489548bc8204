"""KV102 kv-slice-mismatch: K and V both sliced on token/head axes, bounds disagree."""

from __future__ import annotations

from textwrap import dedent

import pytest

from linter.engine import lint_source


def kv102(source: str):
    return lint_source(dedent(source), codes=["KV102"])


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def attention(q, k, v, n):
                k = k[:n]
                v = v[:n - 1]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="off-by-one-prefix",
        ),
        pytest.param(
            """
            class Attention:
                def forward(self, q, bsz, start_pos, seqlen):
                    keys = self.cache_k[:bsz, : start_pos + seqlen]
                    values = self.cache_v[:bsz, : start_pos]
                    return self.core(q, keys, values)
            """,
            id="llama-cache-read",
        ),
        pytest.param(
            """
            def attention(q, k, v, cache_k, cache_v, s, e):
                cache_k[:, s:e] = k
                cache_v[:, s:e - 1] = v
                return flash_attn_func(q, cache_k, cache_v)
            """,
            id="cache-write-windows",
        ),
        pytest.param(
            """
            def ring_attn_step(q, key, value, a, b, c):
                return flash_attn_func(q, key[a:b], value[a:c])
            """,
            id="inline-ring-chunks",
        ),
        pytest.param(
            """
            def attention(q, k, v, n, w):
                k = k[:, -w:]
                v = v[:, -n:]
                return flash_attn_func(q, k, v)
            """,
            id="sliding-window-second-axis",
        ),
    ],
)
def test_bug_shape_is_reported(source):
    assert [f.code for f in kv102(source)] == ["KV102"]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def attention(q, k, v, n):
                k = k[: n]
                v = v[:n]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="same-bounds-modulo-whitespace",
        ),
        pytest.param(
            """
            def attention(q, k, v, k_len, v_len):
                return flash_attn_func(q, k[:k_len], v[:v_len])
            """,
            id="same-bounds-modulo-kv-renaming",
        ),
        pytest.param(
            """
            def mla_attention(q, k, v, nope, v_head_dim):
                k_pe = k[..., nope:]
                v = v[..., :v_head_dim]
                return flash_attn_func(q, k_pe, v)
            """,
            id="head-dim-slices-differ-by-design",
        ),
        pytest.param(
            """
            def attention(q, k, v, a, b):
                return F.scaled_dot_product_attention(q, k[:, :, :, :a], v[:, :, :, :b])
            """,
            id="sdpa-head-dims-differ",
        ),
        pytest.param(
            """
            def attention(q, k, v, a, b):
                k = k[:, :, :a]
                v = v[:, :, :b]
                return self.attn(q, k, v)
            """,
            id="axis-2-of-unknown-rank",
        ),
        pytest.param(
            """
            def attention(q, kv_cache, layer):
                return flash_attn_func(q, kv_cache[layer][0], kv_cache[layer][1])
            """,
            id="stacked-cache",
        ),
        pytest.param(
            """
            def attention(q, kv_cache):
                return flash_attn_func(q, kv_cache[:, 0], kv_cache[:, 1])
            """,
            id="stacked-cache-axis",
        ),
        pytest.param(
            """
            def attention(q, k, v, n):
                assert k[:n].shape == v[:n - 1].shape
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="slices-only-in-an-assert",
        ),
        pytest.param(
            """
            def attention(q, k, v, n, m):
                q = q[:n]
                return F.scaled_dot_product_attention(q, k[:m], v[:m])
            """,
            id="query-sliced-differently",
        ),
        pytest.param(
            """
            def attention_table(d, n):
                for key, value in d.items():
                    show(key[:8], value[:n])
            """,
            id="dict-items-loop",
        ),
        pytest.param(
            """
            def attention(q, k, v, key_padding_mask, value_padding_mask, n):
                key_padding_mask = key_padding_mask[:, :n]
                value_padding_mask = value_padding_mask[:, :n - 1]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="masks-are-not-tensors-of-keys",
        ),
        pytest.param(
            """
            def attention(q, k, v):
                b, s = k.shape[:2]
                t = v.shape[:1]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="metadata",
        ),
        pytest.param(
            """
            def trim(k, v, n):
                return k[:n], v[:n - 1]
            """,
            id="no-attention-context",
        ),
    ],
)
def test_look_alike_is_silent(source):
    assert kv102(source) == []


def test_finding_names_both_slices_and_has_no_fix():
    (finding,) = kv102(
        """
        def attention(q, k, v, n):
            k = k[:n]
            v = v[:n - 1]
            return F.scaled_dot_product_attention(q, k, v)
        """
    )
    assert (finding.span.row, [r.span.row for r in finding.related]) == (3, [4])
    assert "k[:n]" in finding.message and "v[:n - 1]" in finding.message
    assert finding.fix is None
    assert "v[:n]" in finding.suggestion


def test_extra_value_slice_without_a_key_partner_is_reported_at_the_value():
    (finding,) = kv102(
        """
        def attention(q, k, v, n, m):
            out = flash_attn_func(q, k[:n], v[:n])
            return out + flash_attn_func(q, k, v[:m])
        """
    )
    assert finding.span.row == 4
    assert [r.span.row for r in finding.related] == [3]


def test_each_mismatched_pair_is_reported_once():
    findings = kv102(
        """
        def attention(q, k, v, a, b, c):
            return flash_attn_func(q, k[a:b], v[a:c])
        """
    )
    assert len(findings) == 1


# KIVI-style quantised caches keep one key scale per group of tokens and one value scale per
# token, so per-sequence pieces of the two scale tensors have different sizes by design. Only
# K/V tensors are compared: bookkeeping twins (`k_scale`/`v_scale`) cut unlike are no finding,
# while the quantised tensors themselves cut the same way are.
_PER_SEQUENCE_SCALES = """
def dequant_attention(q, k_q, v_q, k_scale, v_scale, seq_lens, group_size):
    groups_per_seq = [(n + group_size - 1) // group_size for n in seq_lens]
    k_scales = torch.split({k_scale}, groups_per_seq)
    v_scales = torch.split({v_scale}, seq_lens)
    k = dequant(k_q, k_scales)
    v = dequant(v_q, v_scales)
    return F.scaled_dot_product_attention(q, k, v)
"""


def test_scale_twins_cut_to_their_own_group_counts_are_not_a_mismatch():
    assert kv102(_PER_SEQUENCE_SCALES.format(k_scale="k_scale", v_scale="v_scale")) == []
    (finding,) = kv102(_PER_SEQUENCE_SCALES.format(k_scale="k_q", v_scale="v_q"))
    assert finding.span.row == 4 and "`k_q` and `v_q` are cut into pieces" in finding.message


# Cuts are compared only on one axis: K in the rotary kernel's [batch, tokens, heads, head_dim]
# beside V in [batch, heads, tokens, head_dim], each split on its own token axis, must not be
# compared by the sizes' text (here the same sizes spelled two ways).
def test_cuts_on_different_axes_of_two_layouts_are_not_compared():
    source = """
    def sink_window_attention(q, k, v, num_sink, seq_len):
        rest = seq_len - num_sink
        k_sink, k_rest = torch.split(k, [num_sink, rest], dim=1)
        v_sink, v_rest = torch.split(v, [num_sink, seq_len - num_sink], dim={v_axis})
        return flash_attn_func(q, k_rest, v_rest.transpose(1, 2))
    """
    assert kv102(source.format(v_axis=2)) == []
    (finding,) = kv102(source.format(v_axis=1))
    assert finding.span.row == 4 and "different sizes" in finding.message


# A key cache kept pre-transposed ([batch, heads, head_dim, tokens], so `q @ k` needs no
# transpose) puts its token axis last, where a slice of unknown rank may be the head dim; beside
# V ([batch, heads, tokens, head_dim]) cut to the same tokens it is no mismatch. The same holds
# with V kept transposed for a decode GEMV. A sibling with the token bound off by one on
# same-layout caches is reported.
@pytest.mark.parametrize(
    ("k_slice", "v_slice"),
    [
        pytest.param("k[:, :, :, :n]", "v[:, :, :n, :]", id="key-transposed"),
        pytest.param("k[:, :, :n, :]", "v[:, :, :, :n]", id="value-transposed"),
    ],
)
def test_a_transposed_cache_cut_on_its_last_axis_is_not_compared(k_slice, v_slice):
    source = f"""
    def decode_window(q, k, v, n):
        k = {k_slice}
        v = {v_slice}
        return decode_attention(q, k, v)
    """
    assert kv102(source) == []
    same_layout = source.replace(k_slice, "k[:, :, :n - 1, :]").replace(v_slice, "v[:, :, :n, :]")
    (finding,) = kv102(same_layout)
    assert finding.span.row == 3 and "k[:, :, :n - 1, :]" in finding.message
