"""KV103 kv-index-mismatch: paired K/V caches read or written at different indices."""

from __future__ import annotations

from textwrap import dedent

import pytest

from linter.engine import lint_source


def kv103(source: str):
    return lint_source(dedent(source), codes=["KV103"])


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def paged_attention(q, k_pool, v_pool, layer, block_ids, slot_ids):
                k = k_pool[layer][block_ids]
                v = v_pool[layer][slot_ids]
                return flash_attn_func(q, k, v)
            """,
            id="pool-read-block-vs-slot",
        ),
        pytest.param(
            """
            class TokenToKVPool:
                def get_kv(self, layer_id, loc):
                    return self.k_buf[layer_id][loc], self.v_buf[layer_id - 1][loc]
            """,
            id="layer-off-by-one",
        ),
        pytest.param(
            """
            class MHATokenToKVPool:
                def set_kv_buffer(self, k_buffer, v_buffer, loc, slot, k, v):
                    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)
                    torch_npu.npu_scatter_nd_update_(v_buffer, slot, v)
            """,
            id="scatter-nd-update",
        ),
        pytest.param(
            """
            def write_kv_cache(key_cache, value_cache, slots, other, k, v):
                key_cache.index_copy_(0, slots, k)
                value_cache.index_copy_(0, other, v)
            """,
            id="index-copy",
        ),
        pytest.param(
            """
            def write_kv_cache(k_cache, v_cache, a, b, k, v):
                k_cache.index_put_((a,), k)
                v_cache.index_put_((b,), v)
            """,
            id="index-put",
        ),
        pytest.param(
            """
            def store_kv_cache(k_cache, v_cache, slots, other, k, v):
                k_cache[slots] = k
                v_cache[other] = v
            """,
            id="subscript-assignment",
        ),
        pytest.param(
            """
            class AscendTokenToKVPool:
                def set_kv_buffer(self, layer_id, loc, k_loc, cache_k, cache_v):
                    torch_npu.npu_scatter_nd_update_(self.k_buffer[layer_id], k_loc, cache_k)
                    torch_npu.npu_scatter_nd_update_(self.v_buffer[layer_id], loc, cache_v)
            """,
            id="scatter-nd-update-on-a-per-layer-buffer",
        ),
        pytest.param(
            """
            class AscendTokenToKVPool:
                def set_kv_buffer(self, layer_id, loc, cache_k, cache_v):
                    torch_npu.npu_scatter_nd_update_(self.k_buffer[layer_id], loc, cache_k)
                    torch_npu.npu_scatter_nd_update_(self.v_buffer[layer_id - 1], loc, cache_v)
            """,
            id="scatter-nd-update-into-another-layer",
        ),
        pytest.param(
            """
            class KVPool:
                def set_kv_buffer(self, layer_id, loc, slot, cache_k, cache_v):
                    self.k_buffer[layer_id].index_copy_(0, loc, cache_k)
                    self.v_buffer[layer_id].index_copy_(0, slot, cache_v)
            """,
            id="index-copy-on-a-per-layer-buffer",
        ),
    ],
)
def test_bug_shape_is_reported(source):
    assert [f.code for f in kv103(source)] == ["KV103"]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            """
            def paged_attention(q, k_pool, v_pool, layer, block_ids):
                return flash_attn_func(q, k_pool[layer][block_ids], v_pool[layer][ block_ids ])
            """,
            id="same-index-modulo-whitespace",
        ),
        pytest.param(
            """
            def write_kv_cache(k_cache, v_cache, k_slots, v_slots, k, v):
                k_cache[k_slots] = k
                v_cache[v_slots] = v
            """,
            id="same-index-modulo-kv-renaming",
        ),
        pytest.param(
            """
            def attention(q, kv_cache, layer):
                return flash_attn_func(q, kv_cache[layer][0], kv_cache[layer][1])
            """,
            id="stacked-cache-unpacking",
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
            def sparse_attention_indexer(q, k_pool, layer, topk):
                keys = k_pool[layer][topk]
                return score(q, keys)
            """,
            id="key-only-pool-by-design",
        ),
        pytest.param(
            """
            class KVPool:
                def set_kv_buffer(self, k_buffer, v_buffer, loc, k, v):
                    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)
                    torch_npu.npu_scatter_nd_update_(v_buffer, loc, v)
            """,
            id="matched-scatter",
        ),
        pytest.param(
            """
            def lookup(k_cache, v_cache, i, j):
                return k_cache[i], v_cache[j]
            """,
            id="no-attention-or-cache-context",
        ),
        pytest.param(
            """
            def attention(q, k_cache, v_cache, slots):
                assert k_cache[slots].shape == v_cache[0].shape
                return flash_attn_func(q, k_cache, v_cache)
            """,
            id="indexing-only-in-an-assert",
        ),
        pytest.param(
            """
            def attention(q, k_cache, v_cache, a, b):
                return flash_attn_func(q, k_cache[:a], v_cache[:b])
            """,
            id="pure-slices-belong-to-kv102",
        ),
        pytest.param(
            """
            def attention(q, k_cache, v_cache, slots, other):
                k_cache[slots] = q
                v_cache[slots] = q
                k = k_cache[other]
                v = v_cache[other]
                return flash_attn_func(q, k, v)
            """,
            id="every-key-index-has-a-value-partner",
        ),
        pytest.param(
            """
            class AscendTokenToKVPool:
                def set_kv_buffer(self, layer_id, loc, cache_k, cache_v):
                    torch_npu.npu_scatter_nd_update_(self.k_buffer[layer_id], loc, cache_k)
                    torch_npu.npu_scatter_nd_update_(self.v_buffer[layer_id], loc, cache_v)
            """,
            id="matched-scatter-on-a-per-layer-buffer",
        ),
        pytest.param(
            """
            class MLATokenToKVPool:
                def set_kv_buffer(self, layer_id, loc, cache_k, cache_v):
                    torch_npu.npu_scatter_nd_update_(
                        self.k_buffer[layer_id], loc, cache_k.view(-1, 1, self.qk_head_dim))
                    torch_npu.npu_scatter_nd_update_(
                        self.v_buffer[layer_id], loc, cache_v.view(-1, 1, self.v_head_dim))
            """,
            id="written-data-differs-but-not-the-index",
        ),
        pytest.param(
            """
            class KVPool:
                def set_kv_buffer(self, layer_id, loc, cache_k, cache_v):
                    self.k_cache[layer_id].index_put_((loc,), values=cache_k.to(self.dtype))
                    self.v_cache[layer_id].index_put_((loc,), values=cache_v)
            """,
            id="keyword-data-argument-differs-but-not-the-index",
        ),
    ],
)
def test_look_alike_is_silent(source):
    assert kv103(source) == []


def test_finding_names_both_accesses_and_both_indices():
    (finding,) = kv103(
        """
        def paged_attention(q, k_pool, v_pool, layer, block_ids, slot_ids):
            k = k_pool[layer][block_ids]
            v = v_pool[layer][slot_ids]
            return flash_attn_func(q, k, v)
        """
    )
    assert (finding.span.row, [r.span.row for r in finding.related]) == (3, [4])
    assert "[layer][block_ids]" in finding.message and "[layer][slot_ids]" in finding.message
    assert finding.fix is None


def test_unmatched_key_is_reported_against_the_nearest_value_access():
    findings = kv103(
        """
        def attention(q, k_cache, v_cache, a, b, c):
            v_far = v_cache[c]
            x = 1
            y = 2
            k = k_cache[a]
            v = v_cache[b]
            return flash_attn_func(q, k, v)
        """
    )
    # The far V access (row 3) is unmatched too and gets its own finding against the K line.
    assert sorted((f.span.row, f.related[0].span.row) for f in findings) == [(3, 6), (6, 7)]


def test_update_call_finding_points_at_both_calls():
    (finding,) = kv103(
        """
        class MHATokenToKVPool:
            def set_kv_buffer(self, loc, slot, k, v):
                torch_npu.npu_scatter_nd_update_(self.k_buffer, loc, k)
                torch_npu.npu_scatter_nd_update_(self.v_buffer, slot, v)
        """
    )
    assert (finding.span.row, [r.span.row for r in finding.related]) == (4, [5])
    assert "npu_scatter_nd_update_" in finding.message


def test_layer_mismatch_in_an_update_call_is_one_finding_on_the_call():
    (finding,) = kv103(
        """
        class AscendTokenToKVPool:
            def set_kv_buffer(self, layer_id, loc, cache_k, cache_v):
                torch_npu.npu_scatter_nd_update_(self.k_buffer[layer_id], loc, cache_k)
                torch_npu.npu_scatter_nd_update_(self.v_buffer[layer_id - 1], loc, cache_v)
        """
    )
    assert (finding.span.row, finding.span.column, [r.span.row for r in finding.related]) == (4, 9, [5])
    assert "npu_scatter_nd_update_" in finding.message


def test_suggestion_names_the_two_indices_as_written_for_a_subscript():
    (finding,) = kv103(
        """
        class AscendTokenToKVPool:
            def set_kv_buffer(self, layer_id, loc, k_loc, cache_k, cache_v):
                self.k_buffer[layer_id][k_loc] = cache_k
                self.v_buffer[layer_id][loc] = cache_v
        """
    )
    assert finding.suggestion == "index both with `loc`, or both with `k_loc`, after checking which is right"


def test_suggestion_names_the_two_indices_as_written_for_an_update_call():
    (finding,) = kv103(
        """
        class AscendTokenToKVPool:
            def set_kv_buffer(self, layer_id, loc, k_loc, cache_k, cache_v):
                torch_npu.npu_scatter_nd_update_(self.k_buffer[layer_id], k_loc, cache_k)
                torch_npu.npu_scatter_nd_update_(self.v_buffer[layer_id], loc, cache_v)
        """
    )
    assert finding.suggestion == "index both with `loc`, or both with `k_loc`, after checking which is right"


def test_suggestion_offers_both_index_chains_as_written_when_several_indices_differ():
    source = """
        def paged_attention(q, k_pool, v_pool, k_layer, layer, block_ids, slot_ids):
            k = k_pool[k_layer][block_ids]
            v = v_pool[layer][slot_ids]
            return flash_attn_func(q, k, v)
        """
    (finding,) = kv103(source)
    assert finding.suggestion == (
        "index both the same way, with the V side's `[layer][slot_ids]` or the K side's "
        "`[k_layer][block_ids]`, after checking which is right"
    )


def test_metadata_reads_of_layer_zero_do_not_hide_a_real_mismatch():
    # The ``[0].device`` reads are no accesses; the two writes still disagree.
    (finding,) = lint_source(
        "class KVPool:\n"
        "    def write(self, layer, loc, slot, k, v):\n"
        "        loc = loc.to(self.k_pool[0].device)\n"
        "        self.k_pool[layer][loc] = k\n"
        "        self.v_pool[layer][slot] = v\n",
        codes=["KV103"],
    )
    assert finding.span.row == 4 and "[slot]" in finding.message


def test_one_mismatched_value_is_one_finding_however_many_keys_differ_from_it():
    findings = lint_source(
        "def write_kv(k_cache, v_cache, a, b, c, k, v):\n"
        "    k_cache[a] = k\n    k_cache[b] = k\n    k_cache[a] += k\n"
        "    v_cache[c] = v\n",
        codes=["KV103"],
    )
    assert [f.span.row for f in findings] == [4]


def test_out_keyword_is_no_index_but_a_real_index_difference_still_counts():
    (finding,) = lint_source(
        "def gather_kv(k_cache, v_cache, pages, other, kv):\n"
        "    torch.index_select(k_cache, 0, pages, out=kv[:, 0])\n"
        "    torch.index_select(v_cache, 0, other, out=kv[:, 1])\n",
        codes=["KV103"],
    )
    assert finding.span.row == 2 and "out=" not in finding.suggestion
