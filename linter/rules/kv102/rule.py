"""KV102 kv-slice-mismatch: K and V both sliced along tokens/heads, with different bounds."""

from __future__ import annotations

import re

import libcst as cst

from linter.model.names import (
    counterpart_of_dotted,
    head_count_side,
    is_kv_tensor_name,
    kv_side,
    swap_kv_text,
)
from linter.model.pairs import source_of
from linter.model.reshapes import HEAD_DIM, TOKEN_HEAD, Reshape, axis_role, reshape_of
from linter.rules.base import Example, Rule
from linter.model.scopes import (
    DIFFER,
    SAME,
    Access,
    CallSite,
    Mismatch,
    Scope,
    ScopeTracking,
    mismatches,
)
from linter.plan.triggers import ATTENTION, PAIRED, Trigger


class KVSliceMismatch(ScopeTracking, Rule):
    code = "KV102"
    name = "kv-slice-mismatch"
    summary = "Key and value sliced along tokens/heads with different bounds"
    # Subscripts, in attention code, on K/V names.
    trigger = Trigger(("[",), ATTENTION, PAIRED)
    what = (
        "Finds a key and its paired value that are both sliced on token or head axes in one "
        "function, where no slice of the value has the same bounds as the key's (compared after "
        "removing whitespace and renaming K names to their V partners, so `k[:k_len]` matches "
        "`v[:v_len]`). Head-dim (last-axis) slices and slices whose axis cannot be placed are "
        "ignored; only attention code is checked, hand-written attention (`q @ k.transpose(-2, "
        "-1)`, a softmax, `@ v`, or the same written with `einsum`) included. The same axis moves before both subscripts "
        "(`k.transpose(1, 2)[:, :n]`) are seen through, and `split`/`chunk`/`tensor_split`/"
        "`narrow` of K and V along one token/head axis are compared by their sizes. A key rebuilt "
        "from a window of K by a call (`roped_k = rope(cache_k[:, :end])`, with no `roped_v`) "
        "stands in for K: its cuts are compared with V's, and the window only when it is never "
        "cut again. The key "
        "tensor's own name in a value bound is not renamed: `cache_v[:, a:cache_k.size(1)]` "
        "sizes the value by the key."
    )
    why = (
        "A key and value cut to different lengths no longer describe the same tokens: attention "
        "either fails on a shape mismatch or pairs keys with the wrong values. Off-by-one cache "
        "reads (`cache_k[:b, :p + s]` vs `cache_v[:b, :p]`) are the classic form."
    )
    bad = """\
def attention(q, cache_k, cache_v, b, p, s):
    keys = cache_k[:b, :p + s]
    values = cache_v[:b, :p]
    return F.scaled_dot_product_attention(q, keys, values)
"""
    good = """\
def attention(q, cache_k, cache_v, b, p, s):
    keys = cache_k[:b, :p + s]
    values = cache_v[:b, :p + s]
    return F.scaled_dot_product_attention(q, keys, values)
"""
    fix_text = (
        "Use the same bounds on both sides. kvlint does not rewrite either slice: which bound "
        "is right is a decision for a human, so the finding only suggests the mirrored slice."
    )

    VALID = (
        Example("def attention(q, k, v, n):\n    k = k[:n]\n    v = v[:n]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n"),
        # Whitespace and K->V renaming do not make bounds differ.
        Example("def attention(q, k, v, k_len, v_len):\n    k = k[: k_len]\n    v = v[:v_len]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n"),
        # Head-dim slices differ by design (MLA nope/rope vs value head dim).
        Example("def attention(q, k, v, nope, v_dim):\n    k_pe = k[..., nope:]\n    v = v[..., :v_dim]\n"
                "    return flash_attn_func(q, k_pe, v)\n"),
        # Stacked cache unpacking is not a K/V slice.
        Example("def attention(q, kv_cache, layer):\n    k = kv_cache[layer][0]\n    v = kv_cache[layer][1]\n"
                "    return flash_attn_func(q, k, v)\n"),
        # Axis 2 of a tensor of unknown rank: could be the head dim; stay silent.
        Example("def attention(q, k, v, a, b):\n    k = k[:, :, :a]\n    v = v[:, :, :b]\n"
                "    return self.attn(q, k, v)\n"),
        # No attention context.
        Example("def trim(k, v, n):\n    return k[:n], v[:n - 1]\n"),
        # A test that perturbs V on purpose after the real K/V pair: writing into V alone is no
        # drift between K and V.
        Example("def test_per_segment_attention_ignores_other_segments(q, k, v, bounds):\n"
                "    ref = [F.scaled_dot_product_attention(q[a:b], k[a:b], v[a:b]) for a, b in bounds]\n"
                "    v[bounds[0][1]:] += 1.0\n    return ref\n"),
        # Slicing Q alone.
        Example("def attention(q, k, v, n):\n    q = q[:n]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n"),
        # Each cache sized by itself: renaming makes the bounds equal, as they are.
        Example("def attention(q, cache_k, cache_v, a, n):\n    keys = cache_k[:, a:cache_k.size(1) + n]\n"
                "    values = cache_v[:, a:cache_v.size(1) + n]\n"
                "    return F.scaled_dot_product_attention(q, keys, values)\n"),
        # Split alike into prefix and new tokens.
        Example("def attention(q, k, v, a, b):\n    k_old, k_new = torch.split(k, [a, b], dim=1)\n"
                "    v_old, v_new = torch.split(v, [a, b], dim=1)\n    return flash_attn_func(q, k_new, v_new)\n"),
        # Dk != Dv (MLA): the head-dim splits differ by design.
        Example("def attention(q, k, v, nope, rope, v_dim):\n    k_nope, k_pe = k.split([nope, rope], dim=-1)\n"
                "    v, _ = v.split([v_dim, nope + rope - v_dim], dim=-1)\n    return flash_attn_func(q, k_nope, v)\n"),
        # Linear attention with separate V heads: each side is cut by its own head count.
        Example("def chunk_gated_delta_attention(q, k, v, num_k_heads, num_v_heads):\n"
                "    k_heads = k.chunk(num_k_heads, dim=1)\n    v_heads = v.chunk(num_v_heads, dim=1)\n"
                "    return recurrent_attention(q, k_heads, v_heads)\n"),
        # einsum products that are no attention (an outer product of rotary tables) make no
        # attention code.
        Example("def rope_tables(k, v, t, inv_freq, a, b):\n"
                "    freqs = torch.einsum(\"i,j->ij\", t, inv_freq).softmax(-1)\n"
                "    return k[:a] * freqs, v[:b]\n"),
        # After an axis move on one side only the two subscripts cut different axes.
        Example("def attention(q, k, v, n):\n    k = k.transpose(1, 2)[:, :n]\n    v = v[:, :n - 1]\n"
                "    return self.attn(q, k, v)\n"),
        # One token window of [batch, heads, tokens, head_dim] caches, counted from the end on
        # one side and from the start on the other: the axes cannot be compared.
        Example("def attend_cached(q, k_cache, v_cache, seq_len):\n    keys = k_cache[..., :seq_len, :]\n"
                "    values = v_cache[:, :, :seq_len, :]\n"
                "    return F.scaled_dot_product_attention(q, keys, values)\n"),
        # Halves cut two ways (a count of pieces, a piece size) cannot be compared by their text.
        Example("""\
def zigzag_ring_attention(q, k, v, seq_len):
    half = seq_len // 2
    k_front, k_back = k.chunk(2, dim=1)
    v_front, v_back = torch.split(v, half, dim=1)
    return flash_attn_func(q, torch.cat([k_back, k_front], dim=1), torch.cat([v_back, v_front], dim=1))
"""),
        # Each side's split sized by its own length (spelled `.shape` on one, `.size()` on the
        # other): a size read off V is no evidence against K.
        Example("""\
def attend_with_sink(q, k, v, num_sink):
    k_sink, k_rest = torch.split(k, [num_sink, k.shape[1] - num_sink], dim=1)
    v_sink, v_rest = torch.split(v, [num_sink, v.size(1) - num_sink], dim=1)
    return flash_attn_func(q, k_rest, v_rest)
"""),
        # A batch axis added in front of each: no token or head is cut.
        Example("""\
def single_sequence_attention(q, k, v):
    q, k, v = q[None], k[None], v[None]
    return F.scaled_dot_product_attention(q, k, v)[0]
"""),
        # Q, K and V split from the fused projection's output: no K or V tensor is cut.
        Example("""\
class Attention(nn.Module):
    def forward(self, hidden):
        q, k, v = self.qkv_proj(hidden).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        return self.attn(q, k, v)
"""),
        # MLA with V padded to K's head dim for the kernel: each side's head-dim split has its
        # own sizes by design.
        Example("""\
def mla_prefill(q, k, v, nope_dim, rope_dim, pad):
    k_nope, k_rope = torch.split(k, [nope_dim, rope_dim], dim=-1)
    v, _ = torch.split(v, [nope_dim, pad], dim=-1)
    return flash_attn_func(q, torch.cat([k_nope, k_rope], dim=-1), v)
"""),
        # RoPE applied to the cached window makes a new key; its cuts, not the window, pair with V's.
        Example("def forward(self, q, k, v, cache, sink, end, start):\n"
                "    temp_k = cache['k'].clone()\n    temp_v = cache['v'].clone()\n"
                "    temp_k[:, start:end] = k\n    temp_v[:, start:end] = v\n"
                "    roped_temp_k = apply_rope(temp_k[:, :end], self.freqs)\n"
                "    lo = max(sink, end - self.window)\n"
                "    keys = torch.cat([roped_temp_k[:, :sink], roped_temp_k[:, lo:end]], dim=1)\n"
                "    values = torch.cat([temp_v[:, :sink], temp_v[:, lo:end]], dim=1)\n"
                "    return F.scaled_dot_product_attention(q, keys, values)\n"),
        # Grouped-query attention by broadcast: K and V cut to the live tokens alike, then a
        # group axis added to each; a new axis cuts nothing and is compared with no cut.
        Example("""\
def grouped_query_attention(q, k, v, n_rep, seq_len):
    b, kv_heads, _, d = k.shape
    k = k[:, :, :seq_len, :]
    v = v[:, :, :seq_len, :]
    k = k[:, :, None].expand(b, kv_heads, n_rep, seq_len, d).reshape(b, kv_heads * n_rep, seq_len, d)
    v = v[:, :, None].expand(b, kv_heads, n_rep, seq_len, d).reshape(b, kv_heads * n_rep, seq_len, d)
    return F.scaled_dot_product_attention(q, k, v)
"""),
        # Top-k chunk selection (MoBA-style): each chunk of keys alone gates the chunks, then K
        # and V are gathered alike by the chosen tokens; a K slice beside a V gather is no pair.
        Example("""\
def topk_chunk_attention_reference(q, k, v, chunk_size, topk):
    num_tokens, num_heads, _ = k.shape
    bounds = [(s, min(s + chunk_size, num_tokens)) for s in range(0, num_tokens, chunk_size)]
    chunk_keys = torch.stack([k[s:e].float().mean(dim=0) for s, e in bounds])
    gate = torch.einsum("chd,lhd->hlc", chunk_keys, q.float())
    chosen = gate.topk(min(topk, len(bounds)), dim=-1).indices
    out = torch.empty_like(q)
    for head in range(num_heads):
        idx = torch.cat([torch.arange(*bounds[c]) for c in chosen[head, -1].tolist()])
        out[:, head] = F.scaled_dot_product_attention(q[:, head], k[idx, head], v[idx, head])
    return out
"""),
        # Partial RoPE puts K's rotary head-dim part back with a `cat`; both sides then take one
        # token window: the head-dim cut has no V cut to match.
        Example("""\
def forward(self, q, k, v, cos, sin, rope_dims, end):
    k_rot = apply_rope(k[..., :rope_dims], cos, sin)
    k = torch.cat((k_rot, k[..., rope_dims:]), dim=-1)
    k = k[..., :end, :]
    v = v[..., :end, :]
    return F.scaled_dot_product_attention(q, k, v)
"""),
        # A cut inside a log call is displayed, never attended over.
        Example("""\
def chunked_prefill_attention(q, k, v, start, chunk_len):
    keys = k.narrow(1, 0, start + chunk_len)
    values = v.narrow(1, 0, start + chunk_len)
    logger.debug("chunk at %d, first cached keys: %s", start, k.narrow(1, 0, 2))
    return flash_attn_func(q, keys, values, causal=True)
"""),
        # A gather into the K and V slots of one stacked [pages, 2, ...] tensor: `out=` names the
        # slot, and a gather is no cut into pieces.
        Example("""\
class PagedPrefillAttentionBackend:
    def stack_kv_pages(self, k_cache, v_cache, pages):
        paged_kv = k_cache.new_empty((pages.numel(), 2, *k_cache.shape[1:]))
        torch.index_select(k_cache, 0, pages, out=paged_kv[:, 0])
        torch.index_select(v_cache, 0, pages, out=paged_kv[:, 1])
        return paged_kv
"""),
        # `k` and `v` of a dict's items are the strings of a tuned-tile table, not tensors.
        Example("""\
class TritonPagedAttention:
    def load_tile_table(self, table):
        tiles = {}
        for k, v in table.items():
            head_dim, page_size = k.split(",")
            block_m, block_n = v.split("x")
            tiles[int(head_dim), int(page_size)] = (int(block_m), int(block_n))
        return tiles
"""),
    )
    INVALID = (
        # MLA caches read with each side's own head dim (a difference by design) and token
        # windows one step apart (the bug).
        Example("""\
def mla_cached_attention(q, k_cache, v_cache, p, s, qk_head_dim, v_head_dim):
    keys = k_cache[..., :p + s, :qk_head_dim]
    values = v_cache[..., :p, :v_head_dim]
    return F.scaled_dot_product_attention(q, keys, values)
""", line=2),
        Example("def attention(q, k, v, n):\n    k = k[:n]\n    v = v[:n - 1]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n", line=2),
        Example("class Attention:\n    def forward(self, q, b, p, s):\n"
                "        keys = self.cache_k[:b, :p + s]\n        values = self.cache_v[:b, :p]\n"
                "        return self.core(q, keys, values)\n", line=3),
        Example("def attention(q, cache_k, cache_v, b, p, s):\n    keys = cache_k[:b, : p + s]\n"
                "    values = cache_v[:b, :p]\n"
                "    return F.scaled_dot_product_attention(q, keys, values)\n", line=2),
        # Stores count too: the write windows of the two caches disagree.
        Example("def attention(q, k, v, cache_k, cache_v, s, e):\n    cache_k[:, s:e] = k\n"
                "    cache_v[:, s:e - 1] = v\n    return flash_attn_func(q, cache_k, cache_v)\n", line=2),
        # Hand-written attention is attention code.
        Example("def forward(q, k, v, n):\n    k = k[:, :n]\n    v = v[:, :n - 1]\n"
                "    probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)\n"
                "    return torch.matmul(probs, v)\n", line=2),
        # einsum attention is attention code too.
        Example("def chunk_reference(query, key, value, start, end):\n"
                "    key = key[:, start:end]\n    value = value[:, start:end + 1]\n"
                "    scores = torch.einsum(\"bqhd,bkhd->bhqk\", query, key)\n"
                "    weights = torch.softmax(scores, dim=-1)\n"
                "    return torch.einsum(\"bhqk,bkhd->bqhd\", weights, value)\n", line=2),
        # Windows counted from the end behind an ellipsis, one token apart.
        Example("""\
def sliding_window_attention(q, k_cache, v_cache, window):
    keys = k_cache[..., -window:, :]
    values = v_cache[..., -window + 1:, :]
    return F.scaled_dot_product_attention(q, keys, values)
""", line=2),
        # A batch axis added with `None` in front of the token cut.
        Example("""\
def decode_attention(q, k, v, n):
    keys = k[None, :, :n]
    values = v[None, :, :n - 1]
    return F.scaled_dot_product_attention(q, keys, values)
""", line=2),
        # The value's bound is the key's size: renaming K to V must not make the two equal.
        Example("def attention(q, cache_k, cache_v, a, n):\n    keys = cache_k[:, a:cache_k.size(1) + n]\n"
                "    values = cache_v[:, a:cache_k.size(1) + n]\n"
                "    return F.scaled_dot_product_attention(q, keys, values)\n", line=2),
        # Unpacked splits with different sizes.
        Example("def attention(q, k, v, a, b):\n    k_old, k_new = torch.split(k, [a, b], dim=1)\n"
                "    v_old, v_new = torch.split(v, [a, b - 1], dim=1)\n    return flash_attn_func(q, k_new, v_new)\n",
                line=2),
        # Chains: the same axis move on both sides, then different bounds.
        Example("def attention(q, k, v, n):\n    k = k.transpose(1, 2)[:, :n]\n    v = v.transpose(1, 2)[:, :n - 1]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n", line=2),
        # The key rebuilt by RoPE is cut one token longer than the value.
        Example("def forward(self, q, cache_k, cache_v, lo, end):\n"
                "    roped_k = apply_rope(cache_k[:, :end], self.freqs)\n"
                "    return F.scaled_dot_product_attention(q, roped_k[:, lo:end], cache_v[:, lo:end - 1])\n",
                line=3),
        # A window that starts past the start shifts the rebuilt key's indices: not merged.
        Example("def forward(self, q, cache_k, cache_v, lo, end, n):\n"
                "    roped_k = apply_rope(cache_k[:, lo:end], self.freqs)\n"
                "    return F.scaled_dot_product_attention(q, roped_k[:, :n], cache_v[:, lo:end - 1])\n",
                line=2),
        # A key window with its own value twin is compared as itself.
        Example("def forward(self, q, cache_k, cache_v, lo, end):\n"
                "    keys = apply_rope(cache_k[:, :end], self.freqs)\n    values = cache_v[:, :end - 1]\n"
                "    return F.scaled_dot_product_attention(q, keys[:, lo:], values[:, lo:])\n", line=2),
        # A plain alias of a window is no rebuilt key.
        Example("def forward(self, q, cache_k, cache_v, lo, end):\n    k_win = cache_k[:, :end]\n"
                "    return F.scaled_dot_product_attention(q, k_win[:, lo:end], cache_v[:, lo:end - 1])\n",
                line=2),
        # Two keys feed one rebuilt key: neither stands in for it.
        Example("def forward(self, q, cache_k, new_k, cache_v, new_v, n, end):\n"
                "    roped_k = apply_rope(torch.cat([cache_k[:, :end], new_k[:, :n]], dim=1))\n"
                "    values = torch.cat([cache_v[:, :end - 1], new_v[:, :n]], dim=1)\n"
                "    return F.scaled_dot_product_attention(q, roped_k[:, :end], values)\n", line=2),
        # Beside the same partial RoPE, V alone cut to the window: the key left whole is named.
        Example("""\
def forward(self, q, k, v, cos, sin, rope_dims, end):
    k_rot = apply_rope(k[..., :rope_dims], cos, sin)
    k = torch.cat((k_rot, k[..., rope_dims:]), dim=-1)
    v = v[..., :end, :]
    return F.scaled_dot_product_attention(q, k, v)
""", line=4),
        # Rebuilt by RoPE and never cut again: the window is the key's extent.
        Example("def forward(self, q, k, v, n):\n    roped_k = apply_rope(k[:, :n], self.freqs)\n"
                "    return F.scaled_dot_product_attention(q, roped_k, v[:, :n - 1])\n", line=2),
    )

    def check_scope(self, scope: Scope) -> None:
        if not scope.is_attention_code(self.extra_callables):
            return
        keys: dict[str, list[Access]] = {}
        values: dict[str, list[Access]] = {}
        for access in scope.accesses:
            if access.quiet or len(access.chain) != 1 or not _only_slices(access.node):
                continue
            if access.base in scope.non_tensors or not is_kv_tensor_name(access.base, self.extra_pairs):
                continue
            side = kv_side(access.base.rsplit(".", 1)[-1], self.extra_pairs)
            (keys if side == "k" else values).setdefault(access.base, []).append(access)
        self._merge_derived_keys(scope, keys)
        for base, k_accesses in keys.items():
            partner = counterpart_of_dotted(base, self.extra_pairs)
            for found in mismatches(k_accesses, values.get(partner or "", []), self._compare, self._row, self._cuts_tokens):
                self._report(found)
        self._check_cuts(scope)

    def _merge_derived_keys(self, scope: Scope, keys: dict[str, list[Access]]) -> None:
        """``roped_k = rope(cache_k[:, :end])``, then ``roped_k[:, a:end]`` beside
        ``cache_v[:, a:end]``: a K name with no V twin, made by a call from a window of K, is K
        transformed (RoPE applied to the cached window). Its cuts are K's cuts, compared with
        V's; the window it was made from is not, because V is cut from the whole cache instead.
        Where the derived name is never cut itself, the window stays the key's extent."""
        for name, bindings in scope.bindings.items():
            derived = keys.get(name)
            # A name in ``keys`` has a K side, hence a V counterpart.
            if not derived or scope.is_bound_or_used(counterpart_of_dotted(name, self.extra_pairs) or ""):
                continue
            fed = [
                (base, access)
                for binding in bindings
                if isinstance(binding.value, cst.Call)
                for base, accesses in keys.items()
                if base != name
                for access in accesses
                if not access.store and binding.value_orders[0] < access.order < binding.value_orders[1]
            ]
            # Only a prefix window keeps the derived key's indices equal to K's.
            if len({base for base, _ in fed}) != 1 or not all(_is_prefix(a.node) for _, a in fed):
                continue
            window = {id(access) for _, access in fed}
            base = fed[0][0]
            keys[base] = [a for a in keys[base] if id(a) not in window] + keys.pop(name)

    def _check_cuts(self, scope: Scope) -> None:
        """``torch.split(k, [a, b], dim=1)`` beside ``torch.split(v, [a, b - 1], dim=1)``: the
        pieces of K and V no longer line up."""
        keys: dict[str, list[tuple[CallSite, Reshape]]] = {}
        values: dict[str, list[tuple[CallSite, Reshape]]] = {}
        for site in scope.calls:
            if site.quiet or site.tail not in _CUTS:
                continue
            reshape = reshape_of(site.node)
            if reshape is None or reshape.base in scope.non_tensors or not is_kv_tensor_name(reshape.base, self.extra_pairs):
                continue
            side = kv_side(reshape.base.rsplit(".", 1)[-1], self.extra_pairs)
            (keys if side == "k" else values).setdefault(reshape.base, []).append((site, reshape))
        for base, k_cuts in keys.items():
            partner = counterpart_of_dotted(base, self.extra_pairs)
            v_cuts = values.get(partner or "", [])
            by_site = {id(site): reshape for site, reshape in (*k_cuts, *v_cuts)}
            def compare(k: CallSite, v: CallSite, by_site=by_site) -> str | None:
                return self._compare_cuts(by_site[id(k)], by_site[id(v)])

            for found in mismatches([s for s, _ in k_cuts], [s for s, _ in v_cuts], compare, self._row):
                k_text, v_text = source_of(found.key.node), source_of(found.value.node)
                message = (
                    f"`{by_site[id(found.key)].base}` and `{by_site[id(found.value)].base}` are cut into pieces "
                    f"along a token/head axis with different sizes: `{k_text}` vs `{v_text}`"
                )
                suggestion = (
                    f"cut both the same way (e.g. `{swap_kv_text(k_text, self.extra_pairs)}`), "
                    "after checking which sizes are right"
                )
                self.report_mismatch(found, message, suggestion)

    def _compare_cuts(self, k: Reshape, v: Reshape) -> str | None:
        if k.kind != v.kind or len(k.axes) != 1 or len(v.axes) != 1:
            return None
        (k_axis, k_bound, _), (v_axis, v_bound, _) = k.axes[0], v.axes[0]
        if k_axis is None or k_axis != v_axis or axis_role(k_axis, k_bound, False, None) != TOKEN_HEAD:
            return None
        if any(head_count_side(word) for word in _IDENTIFIER.findall(k_bound + "," + v_bound)):
            return None  # ``num_k_heads`` vs ``num_v_heads``: K and V heads differ by design
        keep = k.base.rsplit(".", 1)[-1]
        same = swap_kv_text(k_bound, self.extra_pairs) == _swap_except(v_bound, keep, self.extra_pairs)
        return SAME if same else DIFFER

    def _compare(self, k: Access, v: Access) -> str | None:
        if swap_kv_text(k.through, self.extra_pairs) != v.through:
            return None  # ``k.transpose(1, 2)[:, :n]`` and ``v[:, :n]`` cut different axes
        k_axes = _token_axes(k.node, self.extra_pairs)
        # The value's bound keeps the key tensor's own name: ``cache_v[:, a:cache_k.size(1) + n]``
        # sizes the value by the key, which renaming would make look like ``cache_k``'s bound.
        v_axes = _token_axes(v.node, self.extra_pairs, keep=k.base.rsplit(".", 1)[-1])
        if k_axes is None or v_axes is None:
            return None
        if _mixes_ends(k_axes, v_axes):
            return None
        verdict = SAME
        for axis in set(k_axes) | set(v_axes):
            k_bound, k_role = k_axes.get(axis, (":", TOKEN_HEAD))
            v_bound, v_role = v_axes.get(axis, (":", TOKEN_HEAD))
            if HEAD_DIM in (k_role, v_role) or k_bound == v_bound:
                continue
            if TOKEN_HEAD != k_role or TOKEN_HEAD != v_role:
                return None
            verdict = DIFFER
        return verdict

    def _cuts_tokens(self, k: Access) -> bool:
        """A key subscript that cuts the head dim alone (``k[..., rope_n_elem:]``, the rotary
        part put back by a ``cat``) keeps every token and head: it has no V cut to match. It
        still stands beside a V token cut as a key left whole."""
        axes = _token_axes(k.node, self.extra_pairs)
        return not axes or any(role != HEAD_DIM for _, role in axes.values())

    def _row(self, site) -> int:
        return self.span(site.node).row

    def _report(self, found: Mismatch) -> None:
        k, v = found.key, found.value
        k_text, v_text = source_of(k.node), source_of(v.node)
        message = (
            f"`{k.base}` and `{v.base}` are sliced along token/head axes with different bounds: "
            f"`{k_text}` vs `{v_text}`"
        )
        mirrored = swap_kv_text(k_text, self.extra_pairs)
        suggestion = f"slice both with the same bounds (e.g. `{mirrored}`), after checking which bound is right"
        self.report_mismatch(found, message, suggestion)


# Cuts of one tensor into pieces or a window, compared between K and V by their sizes.
_CUTS = frozenset({"split", "chunk", "tensor_split", "narrow"})


def _is_prefix(node: cst.Subscript) -> bool:
    """``k[:, :end]``: every slice starts at the start, so indices into the cut are K's."""
    return all(isinstance(e.slice, cst.Slice) and e.slice.lower is None and e.slice.step is None for e in node.slice)


def _only_slices(node: cst.Subscript) -> bool:
    """Slices, ``None`` and ``...`` only: integer/tensor indexing belongs to KV101/KV103."""
    for element in node.slice:
        if isinstance(element.slice, cst.Slice):
            continue
        value = element.slice.value
        if isinstance(value, cst.Ellipsis) or (isinstance(value, cst.Name) and value.value == "None"):
            continue
        return False
    return True


def _token_axes(node: cst.Subscript, extra_pairs, keep: str | None = None) -> dict[int, tuple[str, str]] | None:
    """axis -> (bound with K names other than ``keep`` swapped to V, role) for every
    non-trivial slice."""
    reshape = reshape_of(node)
    if reshape is None:
        return None
    return {
        axis: (_swap_except(bound, keep, extra_pairs), axis_role(axis, bound, not_last, None))
        for axis, bound, not_last in reshape.axes
    }


def _mixes_ends(a: dict[int, tuple[str, str]], b: dict[int, tuple[str, str]]) -> bool:
    """One side counts axes from the end (after ``...``), the other from the start."""
    signs = {axis < 0 for axis in a if axis != 0} | {axis < 0 for axis in b if axis != 0}
    return len(signs) > 1


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _swap_except(text: str, keep: str | None, extra_pairs) -> str:
    return _IDENTIFIER.sub(
        lambda m: m.group(0) if m.group(0) == keep else swap_kv_text(m.group(0), extra_pairs), text
    )
