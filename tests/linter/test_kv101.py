"""KV101 key-only-reshape: every bug shape from the issue is found, every look-alike is not."""

from __future__ import annotations

import ast
import subprocess
import sys
from textwrap import dedent

import pytest

from linter.engine import lint_source
from linter.fixes import apply_fixes


def kv101(source: str):
    return lint_source(dedent(source), codes=["KV101"])


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def f(q, k, v, t):
                k = k[:t]
                return flash_attn_func(q, k, v)
            """,
            id="k-rebound-to-prefix",
        ),
        pytest.param(
            """
            def ring(q, k, v, a, b):
                k_chunk = k[a:b]
                return attn(q, k_chunk, v)
            """,
            id="chunk-into-attention-named-helper",
        ),
        pytest.param(
            """
            def f(q, key, value, s, n):
                key = torch.narrow(key, 0, s, n)
                return torch_npu.npu_fusion_attention(q, key, value, 8, "TND")
            """,
            id="torch-narrow",
        ),
        pytest.param(
            """
            def f(q, key, value, s, n):
                k = key.narrow(0, s, n)
                return flash_attn_varlen_func(q, k, value)
            """,
            id="method-narrow",
        ),
        pytest.param(
            """
            def f(q, k, v, n, i):
                k_parts = k.chunk(n)
                return flash_attn_func(q, k_parts[i], v)
            """,
            id="chunk-pieces-indexed",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                for k_piece in k.split(n):
                    out = flash_attn_func(q, k_piece, v)
            """,
            id="loop-over-split-pieces",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                return torch_npu.npu_fusion_attention(q, k[:n], v, 8, "BSND")
            """,
            id="inline-npu-fusion-attention",
        ),
        pytest.param(
            """
            def f(q, k, v, L):
                return F.scaled_dot_product_attention(q, k[:, :, :L], v)
            """,
            id="inline-sdpa-token-axis",
        ),
        pytest.param(
            """
            def f(q, k, v, idx):
                return F.scaled_dot_product_attention(q, k.index_select(2, idx), v)
            """,
            id="index-select-on-sdpa-sequence-axis",
        ),
        pytest.param(
            """
            def f(q, k, v, keep):
                k = k[keep]
                return flash_attn_varlen_func(q, k, v)
            """,
            id="boolean-or-integer-tensor-gather",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                k = k.repeat_interleave(n, dim=0)
                return flash_attn_func(q, k, v)
            """,
            id="repeat-interleave-token-axis",
        ),
        pytest.param(
            """
            def f(q, k, v, shape):
                k = k.expand(shape)
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="expand",
        ),
        pytest.param(
            """
            class LlamaAttention:
                def forward(self, q, key_states, value_states, t):
                    key_states = key_states[:, :t]
                    return self.core(q, key_states, value_states)
            """,
            id="attention-class-any-call-with-both",
        ),
        pytest.param(
            """
            def f(q, k, v, t):
                k = k[:t].contiguous()
                k = k.transpose(1, 2)
                return F.scaled_dot_product_attention(q, k, v.transpose(1, 2))
            """,
            id="through-shape-keeping-steps",
        ),
        pytest.param(
            """
            def f(q, k, v, idx):
                k0 = k[idx]
                v0 = v
                return flash_attn_varlen_func(q, k0, v0)
            """,
            id="value-aliased-without-the-gather",
        ),
        pytest.param(
            """
            def f(q, k, v, a, b):
                k_win = k[a:b]
                v_win = v[a:b]
                return flash_attn_func(q, k_win, v)
            """,
            id="value-sliced-but-the-whole-value-passed",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                q, k = q[:n], k[:n]
                return flash_attn_func(q, k, v)
            """,
            id="tuple-assignment-trims-query-and-key-only",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                k, v_unused = k[:n], v[:n]
                return flash_attn_func(q, k, v)
            """,
            id="tuple-assignment-trimmed-value-never-used",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                for k_c, v_c in zip(k.chunk(n), [v] * n):
                    out = flash_attn_func(q, k_c, v_c)
                return out
            """,
            id="zipped-key-chunks-with-the-whole-value-repeated",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                for k_c, v_c in zip(k.chunk(n), itertools.repeat(v)):
                    out = flash_attn_func(q, k_c, v_c)
                return out
            """,
            id="zipped-key-chunks-with-itertools-repeat-value",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                for k_c, v_c in zip(k.chunk(n), v.chunk(n)):
                    out = flash_attn_func(q, k_c, v)
                return out
            """,
            id="zipped-chunks-but-the-whole-value-passed",
        ),
    ],
)
def test_bug_shape_is_reported(source):
    findings = kv101(source)
    assert [f.code for f in findings] == ["KV101"]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def f(q, k, v, rope_dim):
                k_rot = k[..., :rope_dim]
                return flash_attn_func(q, k_rot, v)
            """,
            id="head-dim-ellipsis-slice",
        ),
        pytest.param(
            """
            def mla(q, k, v, nope, rope):
                k_nope, k_pe = k.split([nope, rope], dim=-1)
                return flash_attn_func(q, k_nope, v)
            """,
            id="mla-nope-rope-split",
        ),
        pytest.param(
            """
            def f(q, k, v, d):
                return F.scaled_dot_product_attention(q, k[:, :, :, :d], v)
            """,
            id="sdpa-last-axis",
        ),
        pytest.param(
            """
            def f(q, k, v, d):
                return torch_npu.npu_fusion_attention(q, k[:, :, :d], v, 8, "BSH")
            """,
            id="bsh-hidden-axis",
        ),
        pytest.param(
            """
            def f(q, k, v, a, b):
                return attn(q, k[:, :, a:b], v)
            """,
            id="axis-2-of-unknown-rank",
        ),
        pytest.param(
            """
            def f(q, k, v, s, e, dim):
                return flash_attn_func(q, k.narrow(dim, s, e), v)
            """,
            id="axis-held-in-a-variable",
        ),
        pytest.param(
            """
            def forward(self, x, q_size, kv_size):
                q, k, v = self.qkv(x).split([q_size, kv_size, kv_size], dim=-1)
                return flash_attn_func(q, k, v)
            """,
            id="fused-qkv-split",
        ),
        pytest.param(
            """
            def attention(q, k, v, cos, sin):
                k = apply_rotary(k, cos, sin)
                k = self.k_norm(k)
                k = k.transpose(1, 2)
                v = v.transpose(1, 2)
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="rope-norm-transpose",
        ),
        pytest.param(
            """
            def attention(q, kv_cache, layer):
                k = kv_cache[layer][0]
                v = kv_cache[layer][1]
                return flash_attn_func(q, k, v)
            """,
            id="stacked-cache-by-layer",
        ),
        pytest.param(
            """
            def attention(q, kv_cache):
                return flash_attn_func(q, kv_cache[:, 0], kv_cache[:, 1])
            """,
            id="stacked-cache-by-axis",
        ),
        pytest.param(
            """
            def mla(q, latent, n):
                return flash_attn_func(q, latent[:n], latent[:n])
            """,
            id="same-tensor-as-key-and-value",
        ),
        pytest.param(
            """
            def attention(q, k, v):
                b, s = k.shape[:2]
                n = k.size()[:1]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="metadata-reads",
        ),
        pytest.param(
            """
            def attention(q, k, v, n):
                assert k[:n].isfinite().all()
                logger.debug("head %s", k[:n])
                print(f"{k[:n]}")
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="slice-for-logging-and-asserts",
        ),
        pytest.param(
            """
            def attention(q, k, v, n):
                q = q[:, :n]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="slicing-q-alone",
        ),
        pytest.param(
            """
            def attention_summary(d, value):
                for key, value in d.items():
                    show(key[:8], value)
            """,
            id="dict-items-loop",
        ),
        pytest.param(
            """
            def attention_prefixes(xs, v, n):
                for k in range(n):
                    run(xs[:k], v)
            """,
            id="range-counter-named-k",
        ),
        pytest.param(
            """
            def attention(q, k, v, key_padding_mask, n):
                key_padding_mask = key_padding_mask[:, :n]
                return F.scaled_dot_product_attention(q, k, v, key_padding_mask)
            """,
            id="key-padding-mask",
        ),
        pytest.param(
            """
            def f(q, k, v, a, b):
                k_chunk = k[a:b]
                v_chunk = v[a:b]
                return flash_attn_func(q, k_chunk, v_chunk)
            """,
            id="both-sliced-alike",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                v = v[:n]
                return flash_attn_func(q, k[:n], v)
            """,
            id="value-rebound-sliced-earlier",
        ),
        pytest.param(
            """
            def split_rows(k, v, n):
                k = k[:n]
                return merge(k, v)
            """,
            id="no-attention-context",
        ),
        pytest.param(
            """
            def attention(q, k, v):
                k = k[:, : v.shape[1]]
                return F.scaled_dot_product_attention(q, k, v)
            """,
            id="key-trimmed-to-the-value-length",
        ),
        pytest.param(
            """
            def attention_indexer(q, k, ids):
                k = k[ids]
                return score(q, k)
            """,
            id="key-only-path-by-design",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                q, k, v = q[:n], k[:n], v[:n]
                return flash_attn_func(q, k, v)
            """,
            id="tuple-assignment-trims-all-three",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                k, v = k[:n], v[:n]
                return flash_attn_func(q, k, v)
            """,
            id="tuple-assignment-trims-key-and-value",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                for k_c, v_c in zip(k.chunk(n), v.chunk(n)):
                    out = flash_attn_func(q, k_c, v_c)
                return out
            """,
            id="zipped-key-and-value-chunks",
        ),
        pytest.param(
            """
            def f(q, k, v, n):
                for k_c, v_c in zip(k.chunk(n), v.repeat(n, 1)):
                    out = flash_attn_func(q, k_c, v_c)
                return out
            """,
            id="zipped-with-a-tensor-repeat-not-a-repeated-value",
        ),
    ],
)
def test_look_alike_is_silent(source):
    assert kv101(source) == []


def test_finding_names_the_key_line_and_the_value_line():
    (finding,) = kv101(
        """
        def f(q, k, v, a, b):
            k_chunk = k[a:b]
            return flash_attn_func(q, k_chunk, v)
        """
    )
    assert finding.span.row == 3
    assert [r.span.row for r in finding.related] == [4]
    assert "`k`" in finding.message and "`v`" in finding.message


def test_tuple_assignment_suggests_the_mirrored_operation_but_offers_no_fix():
    # The statement binds q too: mirroring the whole line would slice q twice.
    (finding,) = kv101(
        """
        def f(q, k, v, n):
            q, k = q[:n], k[:n]
            return flash_attn_func(q, k, v)
        """
    )
    assert (finding.span.row, finding.span.column, finding.related[0].span.row) == (3, 19, 4)
    assert finding.fix is None and "`v[:n]`" in finding.suggestion


def test_fix_mirrors_an_assigned_slice_onto_the_value():
    source = dedent(
        """
        def f(q, k, v, a, b):
            k_chunk = k[a:b]
            return flash_attn_func(q, k_chunk, v)
        """
    )
    (finding,) = lint_source(source, codes=["KV101"])
    assert finding.fix.applicability == "safe"
    assert apply_fixes(source, [finding]) == dedent(
        """
        def f(q, k, v, a, b):
            k_chunk = k[a:b]
            v_chunk = v[a:b]
            return flash_attn_func(q, k_chunk, v_chunk)
        """
    )


def test_fix_slices_an_inline_value_argument():
    source = "def f(q, k, v, n):\n    return npu_fusion_attention(q, k[:n], v, 8, 'TND')\n"
    (finding,) = lint_source(source, codes=["KV101"])
    assert apply_fixes(source, [finding]) == (
        "def f(q, k, v, n):\n    return npu_fusion_attention(q, k[:n], v[:n], 8, 'TND')\n"
    )


TAB_INDENTED = (
    "def f(q, k, v, a, b):\n"
    "\tif a:\n"
    "\t\tk_chunk = k[a:b]\n"
    "\t\treturn flash_attn_func(q, k_chunk, v)\n"
)
TAB_INDENTED_FIXED = (
    "def f(q, k, v, a, b):\n"
    "\tif a:\n"
    "\t\tk_chunk = k[a:b]\n"
    "\t\tv_chunk = v[a:b]\n"
    "\t\treturn flash_attn_func(q, k_chunk, v_chunk)\n"
)


def test_fix_indents_the_mirrored_line_like_the_key_line_in_a_tab_indented_file():
    (finding,) = lint_source(TAB_INDENTED, codes=["KV101"])
    assert apply_fixes(TAB_INDENTED, [finding]) == TAB_INDENTED_FIXED


def test_kvlint_fix_repairs_a_tab_indented_file_into_code_that_parses(tmp_path):
    target = tmp_path / "ring.py"
    target.write_text(TAB_INDENTED)
    subprocess.run([sys.executable, "-m", "linter", "check", "--no-cache", "--fix", str(target)],
                   check=False, cwd=tmp_path, capture_output=True)
    fixed = target.read_text()
    ast.parse(fixed)
    assert fixed == TAB_INDENTED_FIXED


def test_fix_keeps_the_files_line_endings():
    source = "def f(q, k, v, t):\r\n    k = k[:t]\r\n    return flash_attn_func(q, k, v)\r\n"
    (finding,) = lint_source(source, codes=["KV101"])
    assert apply_fixes(source, [finding]) == (
        "def f(q, k, v, t):\r\n    k = k[:t]\r\n    v = v[:t]\r\n    return flash_attn_func(q, k, v)\r\n"
    )


def test_no_fix_when_the_value_is_rebound_between_the_key_line_and_the_call():
    (finding,) = kv101(
        """
        def f(q, k, v, a, b):
            k_chunk = k[a:b]
            v = v.float()
            return flash_attn_func(q, k_chunk, v)
        """
    )
    assert finding.fix is None
    assert "v_chunk = v[a:b]" in finding.suggestion


def test_no_fix_when_the_mirrored_name_already_exists():
    (finding,) = kv101(
        """
        def f(q, k, v, idx, v_chunk):
            k_chunk = k[idx]
            return flash_attn_func(q, k_chunk, v)
        """
    )
    assert finding.fix is None


def test_no_fix_when_the_bound_names_a_key_side_variable():
    # Mirroring would rename k_len to v_len, which may not exist: suggest, do not rewrite.
    (finding,) = kv101(
        """
        def f(q, k, v, k_len):
            return flash_attn_func(q, k[:k_len], v)
        """
    )
    assert finding.fix is None
    assert finding.suggestion


def test_no_fix_for_a_value_that_is_not_a_plain_name():
    (finding,) = kv101(
        """
        def f(q, k, v, n):
            return flash_attn_func(q, k[:n], v.contiguous())
        """
    )
    assert finding.fix is None


def test_extra_attention_callable_from_settings_gives_context():
    from linter.settings import Settings

    source = "def f(q, k, v, n):\n    return my_kernel(q, k[:n], v)\n"
    assert lint_source(source, codes=["KV101"]) == []
    settings = Settings(extra_attention_callables=("my_kernel",))
    assert [f.code for f in lint_source(source, settings=settings, codes=["KV101"])] == ["KV101"]


def test_noqa_row_is_the_key_line():
    (finding,) = kv101(
        """
        def f(q, k, v, t):
            k = k[:t]
            return flash_attn_func(q, k, v)
        """
    )
    assert finding.noqa_row == 3


def test_a_call_of_unknown_signature_pairs_each_key_with_the_nearest_value():
    # Two K/V pairs in one call: k[:0] sits next to a whole v, which is the drift.
    (finding,) = lint_source(
        "class Backend:\n"
        "    def forward_attn(self, q, k, v, out):\n"
        "        self.extend_fwd(q, k[:0], v, out, k, v[:0])\n",
        codes=["KV101"],
    )
    assert finding.span.column == 28 and finding.related[0].span.column == 35


def test_a_real_attention_kernel_still_checks_latent_code():
    (finding,) = lint_source(
        "class DeepseekMLA:\n"
        "    def forward(self, q, k, v, n):\n"
        "        return flash_attn_varlen_func(q, k[:n], v)\n",
        codes=["KV101"],
    )
    assert finding.span.row == 3


def test_an_mla_attention_module_with_real_k_and_v_is_still_checked_at_any_call():
    (finding,) = lint_source(
        "class DeepseekV2MLA:\n"
        "    def forward(self, q, k, v, idx):\n"
        "        k = k[idx]\n"
        "        return self.attn(q, k, v)\n",
        codes=["KV101"],
    )
    assert finding.span.row == 3


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def chunked_attention(q, k, v, chunk):
                k = k[:, :chunk]
                out = flash_attn_func(q, k, v)
                return out + flash_attn_func(q * 0.5, k, v)
            """,
            id="kernel-called-twice",
        ),
        pytest.param(
            """
            def two_pass_attention(q, q2, k, v, n):
                k = k[:, :n]
                probs = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                first = probs @ v
                probs2 = torch.softmax(q2 @ k.transpose(-2, -1), dim=-1)
                return first, probs2 @ v
            """,
            id="hand-written-twice",
        ),
    ],
)
def test_one_finding_per_cut_however_often_the_key_is_used(source):
    [finding] = kv101(source)
    assert "is reshaped along a token/head axis" in finding.message
