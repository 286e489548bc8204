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
