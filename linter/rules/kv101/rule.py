"""KV101 key-only-reshape: K cut along tokens or heads, its paired V left whole."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from linter.finding import Edit, Fix, Span
from linter.model.names import (
    LATENT_ATTENTION,
    RESHAPE_CALLS,
    STORAGE,
    counterpart_of_dotted,
    is_kv_tensor_name,
    is_query_name,
    kv_side,
    swap_kv_text,
    value_counterpart,
)
from linter.model.pairs import attention_kv_args, dotted_name, is_attention_call, normalized, source_of
from linter.model.reshapes import (
    PIECEWISE,
    TOKEN_HEAD,
    Reshape,
    reshape_of,
    strip_shape_keeping,
)
from linter.rules.base import Example, Mirror, Rule, free_names
from linter.model.scopes import (
    Binding,
    CallSite,
    HandAttention,
    Scope,
    ScopeTracking,
)
from linter.model.tensor_roots import tensor_root
from linter.plan.triggers import ATTENTION, PAIRED, Trigger

# A V binding built with any of these may already carry the matching token/head change.
_RESIZING_CALLS = RESHAPE_CALLS | {"cat", "concat", "concatenate", "stack", "pad", "gather", "roll", "repeat_kv"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_HOPS = 4


@dataclass(frozen=True)
class _Origin:
    reshape: Reshape
    # Where the K reshape was assigned (None when it is written inline in the call); with
    # ``via_loop``, the loop variable that walks the K pieces.
    binding: Binding | None
    via_loop: bool = False


class KeyOnlyReshape(ScopeTracking, Rule):
    code = "KV101"
    name = "key-only-reshape"
    summary = "Key sliced, narrowed, chunked, gathered or repeated along tokens/heads; value left unchanged"
    # A subscript or a reshaping call to cut K with, the attention vocabulary, and K/V names.
    trigger = Trigger(("[", "narrow", "chunk", "split", "unbind", "index_select", "repeat", "expand"), ATTENTION, PAIRED)
    what = (
        "Finds a key tensor cut or gathered along a token or head axis (slice, `narrow`, `chunk`, "
        "`split`, `index_select`, an integer/boolean index, `repeat_interleave`, `expand`) whose "
        "result is then used as the key next to its paired value, while that value gets no token "
        "or head operation anywhere in the same function. Operations on the last axis (the head "
        "dim: RoPE or MLA nope/rope splits) are not reported, nor are names that are loop keys, "
        "counters, masks or lengths, nor code that shows no sign of attention. Hand-written "
        "attention (scores from `q @ k.transpose(-2, -1)` or an `einsum` such as "
        "`einsum(\"bhqd,bhkd->bhqk\", q, k)`, a softmax of them, then `@ v` or an `einsum` "
        "summing the weights with `v` over its tokens) pairs its key and value as a kernel call "
        "does; an einsum term without `...` gives the key's rank, so `k[:, :, :n]` before "
        "`\"bhkd\"` is a token cut; K cut into pieces by the same call as Q in the same function "
        "(`q.unbind(2)` beside `k.unbind(2)`, differential attention) feeds several score maps "
        "over one V and is not reported; a piece unpacked from `torch.split(k, ...)` and a cut "
        "after axis moves (`k.transpose(1, 2)[:, :, :n]`) count as cuts of `k`."
    )
    why = (
        "Attention pairs the i-th key with the i-th value. When only K loses tokens (a ring "
        "chunk, a sliding window, a trimmed prefix) or heads, K and V describe different "
        "sequences: packed NPU kernels such as `npu_fusion_attention` fail with opaque shape "
        "errors, and broadcasting kernels silently attend to the wrong values."
    )
    bad = """\
def ring_step(q, k, v, start, end):
    k_chunk = k[start:end]
    return flash_attn_func(q, k_chunk, v)
"""
    good = """\
def ring_step(q, k, v, start, end):
    k_chunk = k[start:end]
    v_chunk = v[start:end]
    return flash_attn_func(q, k_chunk, v_chunk)
"""
    fix_text = (
        "Apply the same operation to the value. When the value is a plain name that is not "
        "rebound in between, `--fix` mirrors the key's operation onto it: it inserts "
        "`v_chunk = v[a:b]` after the key line and passes `v_chunk`, or rewrites an inline "
        "`v` to `v[:n]`. Otherwise the finding carries the mirrored line as a suggestion."
    )

    VALID = (
        # Both sides chunked the same way.
        Example("def f(q, k, v, a, b):\n    k_chunk = k[a:b]\n    v_chunk = v[a:b]\n"
                "    return flash_attn_func(q, k_chunk, v_chunk)\n"),
        # Head-dim slice (RoPE part) on K only.
        Example("def f(q, k, v, rope_dim):\n    k_rot = k[..., :rope_dim]\n"
                "    return F.scaled_dot_product_attention(q, k_rot, v)\n"),
        # Last axis of a 4-D SDPA input is the head dim.
        Example("def f(q, k, v, d):\n    return F.scaled_dot_product_attention(q, k[:, :, :, :d], v)\n"),
        # dim=-1 chunk is a head-dim split.
        Example("def attn(q, k, v):\n    k_nope, k_pe = k.split([128, 64], dim=-1)\n"
                "    return flash_attn_func(q, k_nope, v)\n"),
        # Dict keys are not tensors.
        Example("def attention_report(d):\n    for key, value in d.items():\n"
                "        print(key[:8], value)\n        log(key[:8], value)\n"),
        # A counter named k.
        Example("def attention_prefix(xs, v, n):\n    for k in range(n):\n"
                "        use(xs[:k], v)\n"),
        # Masks named after the key are not keys.
        Example("def attention(q, k, v, key_padding_mask, n):\n"
                "    key_padding_mask = key_padding_mask[:, :n]\n"
                "    return F.scaled_dot_product_attention(q, k, v, key_padding_mask)\n"),
        # Slicing only for logging and asserts.
        Example("def attention(q, k, v, n):\n    assert k[:n].sum() > 0\n"
                "    logger.debug(f'{k[:n]}')\n    return F.scaled_dot_product_attention(q, k, v)\n"),
        # A logging call given a slice of K beside V attends over neither.
        Example("def attention(q, k, v):\n    logger.debug('key rows %s, value %s', k[:, :2], v)\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n"),
        # Same tensor as K and V (MLA latent cache).
        Example("def mla(q, kv, n):\n    return flash_attn_func(q, kv[:n], kv[:n])\n"),
        # No attention context: a generic helper.
        Example("def take(k, v, n):\n    k = k[:n]\n    return combine(k, v)\n"),
        # K trimmed to V's length is a cure, not a cause.
        Example("def attention(q, k, v):\n    k = k[:, : v.shape[1]]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n"),
        # One call carrying two K/V pairs (new tokens, then the prefix): the empty K goes with the
        # empty V next to it, the whole K with the whole V.
        Example("class TritonAttnBackend:\n"
                "    def forward_prefix_only(self, q, k, v, out, indptr):\n"
                "        self.extend_fwd(q, k[:0], v[:0], out, k, v, indptr)\n"
                "        self.extend_fwd(q, k, v, out, k[:0], v[:0], indptr)\n"),
        # A latent (MLA) pool: its K is the compressed KV, the V argument is unused by the parent.
        Example("class ShardedMLAKVPool(MLAKVPool):\n"
                "    def set_kv_buffer(self, layer, loc, cache_k, cache_v):\n"
                "        owned, rows = self._plan(loc)\n"
                "        super().set_kv_buffer(layer, rows, cache_k.index_select(0, owned), cache_v)\n"),
        # Metadata read.
        Example("def attention(q, k, v):\n    b, s = k.shape[:2]\n"
                "    return F.scaled_dot_product_attention(q, k, v)\n"),
        # Hand-written attention over K and V split alike into pieces.
        Example("def forward(q, k, v, a, b):\n    k_old, k_new = k.split([a, b], dim=1)\n"
                "    v_old, v_new = v.split([a, b], dim=1)\n"
                "    probs = torch.softmax(q @ k_new.transpose(-2, -1), dim=-1)\n    return probs @ v_new\n"),
        # MLA: the key's nope/rope halves are a head-dim split; the value keeps its own width.
        Example("def forward(q, k, v, nope, rope):\n"
                "    k_nope, k_pe = torch.split(k, [nope, rope], dim=-1)\n"
                "    scores = torch.matmul(q, k_nope.transpose(-1, -2))\n"
                "    return torch.matmul(scores.softmax(dim=-1), v)\n"),
        # A key cut next to a softmax but never multiplied with its value: no attention here.
        Example("def rank_keys(x, k, v, n):\n    k = k[:n]\n"
                "    return (x @ k.transpose(-1, -2)).softmax(dim=-1), v\n"),
        # einsum scores of a K-only indexer: softmaxed and ranked, never summed with a value.
        Example("def select_blocks(q, k, v, blocks, topk):\n    k = k[:, :blocks]\n"
                "    scores = torch.einsum(\"bhd,bnhd->bhn\", q, k)\n"
                "    picked = scores.softmax(dim=-1).topk(topk, dim=-1).indices\n    return picked, v\n"),
        # Absorbed MLA: the einsum with the K-side weight is the query's absorption, and the
        # softmax weights meet the latent cache before the V-side weight.
        Example("def absorbed_decode(q_nope, k, v, kv_latent, heads):\n    k = k[:heads]\n"
                "    q_latent = torch.einsum(\"bhd,hdc->bhc\", q_nope, k)\n"
                "    scores = torch.einsum(\"bhc,btc->bht\", q_latent, kv_latent)\n"
                "    probs = scores.softmax(dim=-1)\n"
                "    out_latent = torch.einsum(\"bht,btc->bhc\", probs, kv_latent)\n"
                "    return torch.einsum(\"bhc,hdc->bhd\", out_latent, v)\n"),
        # Rotary frequencies by einsum (an outer product: nothing summed) beside a softmax.
        Example("def rotate_recent(q, k, v, t, inv_freq, n):\n    k = k[:, -n:]\n"
                "    freqs = torch.einsum(\"i,j->ij\", t, inv_freq)\n"
                "    gate = torch.einsum(\"i,j->ij\", freqs.softmax(-1).sum(-1), v)\n    return k * gate\n"),
        # einsum attention over a key cut on its head dim (the last axis of ``bhkd``).
        Example("def partial_rotary_attention(q, k, v, rot):\n    k = k[:, :, :, :rot]\n"
                "    scores = torch.einsum(\"bhqd,bhkd->bhqk\", q[..., :rot], k)\n"
                "    return torch.einsum(\"bhqk,bhkd->bhqd\", scores.softmax(-1), v)\n"),
        # Eager attention over whole K and V: no cut to follow.
        Example("""\
def eager_attention(q, k, v, scale):
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v)
"""),
        # K and V reach the kernel whole from the enclosing function (a closure recomputed in
        # the backward pass), and as the two halves of a cache entry.
        Example("class Attention(nn.Module):\n    def forward(self, q, k, v, past_key_value):\n"
                "        def attend(query):\n"
                "            return F.scaled_dot_product_attention(query, k, v)\n\n"
                "        def attend_past(query):\n"
                "            return F.scaled_dot_product_attention(query, past_key_value[0], past_key_value[1])\n\n"
                "        out = checkpoint(attend, q, use_reentrant=False)\n"
                "        return out + checkpoint(attend_past, q, use_reentrant=False)\n"),
        # The key trimmed to the tokens in use, the value rebuilt from its prefix and the new
        # tokens: both already describe the same tokens.
        Example("def extend_attention(q, k, v, v_prefix, n):\n    k = k[:, :n]\n"
                "    v = torch.cat([v_prefix, v], dim=1)\n"
                "    return flash_attn_func(q, k, v)\n"),
        # SageAttention-style quantisation: the key scaled per token, the value per tensor (or per
        # channel); only the key's scales have tokens to cut, and a scale is no key.
        Example("""\
def quantized_prefill_attention(q, k_fp8, v_fp8, k_scale, v_scale, num_tokens):
    return torch.ops._C.fp8_attention(q, k_fp8, v_fp8, k_scale[:num_tokens], v_scale)
"""),
        # Differential attention: Q and K cut into two halves alike, each half pair makes its own
        # score map over the whole V, and the two outputs are subtracted.
        Example("class DiffAttention(nn.Module):\n"
                "    def forward(self, q, k, v, lam):\n"
                "        b, h, n, d = q.shape\n"
                "        q = q.reshape(b, h // 2, 2, n, d)\n        k = k.reshape(b, h // 2, 2, n, d)\n"
                "        q_a, q_b = q.unbind(2)\n        k_a, k_b = k.unbind(2)\n"
                "        out_a = F.scaled_dot_product_attention(q_a, k_a, v)\n"
                "        out_b = F.scaled_dot_product_attention(q_b, k_b, v)\n"
                "        return out_a - lam * out_b\n"),
    )
    INVALID = (
        Example("def f(q, k, v, t):\n    k = k[:t]\n    return flash_attn_func(q, k, v)\n", line=2,
                expected_fix="def f(q, k, v, t):\n    k = k[:t]\n    v = v[:t]\n"
                             "    return flash_attn_func(q, k, v)\n"),
        Example("def f(q, k, v, a, b):\n    k_chunk = k[a:b]\n    return flash_attn_func(q, k_chunk, v)\n",
                line=2,
                expected_fix="def f(q, k, v, a, b):\n    k_chunk = k[a:b]\n    v_chunk = v[a:b]\n"
                             "    return flash_attn_func(q, k_chunk, v_chunk)\n"),
        Example("def f(q, key, value, s, n):\n    key = torch.narrow(key, 0, s, n)\n"
                "    return npu_fusion_attention(q, key, value, 8, 'BSND')\n", line=2),
        Example("def f(q, k, v, n, i):\n    k_parts = k.chunk(n)\n"
                "    return flash_attn_func(q, k_parts[i], v)\n", line=2,
                expected_fix="def f(q, k, v, n, i):\n    k_parts = k.chunk(n)\n    v_parts = v.chunk(n)\n"
                             "    return flash_attn_func(q, k_parts[i], v_parts[i])\n"),
        Example("def f(q, k, v, n):\n    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, 'TND')\n",
                line=2,
                expected_fix="def f(q, k, v, n):\n"
                             "    return torch_npu.npu_fusion_attention(q, k[:n], v[:n], 8, 'TND')\n"),
        Example("def f(q, k, v, L):\n    return F.scaled_dot_product_attention(q, k[:, :, :L], v)\n",
                line=2),
        # Attention-named scope, any call taking both.
        Example("class Attention:\n    def forward(self, q, k, v, idx):\n        k = k[idx]\n"
                "        return self.core(q, k, v)\n", line=3),
        # Shape-keeping steps in between do not hide the slice.
        Example("def f(q, k, v, t):\n    k = k[:, :t]\n    k = k.transpose(1, 2)\n"
                "    return F.scaled_dot_product_attention(q, k, v.transpose(1, 2))\n", line=2),
        # Hand-written attention: the scores use the cut key, the product the whole value.
        Example("def forward(q, k, v, window):\n    k = k[:, -window:]\n"
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
                "    return scores.softmax(dim=-1) @ v\n", line=2),
        # One piece of an unpacked split as the key, the value whole.
        Example("def forward(q, k, v, prefix, new):\n"
                "    k_prefix, k_new = torch.split(k, [prefix, new], dim=1)\n"
                "    return flash_attn_func(q, k_new, v)\n", line=2),
        # A cut after an axis move (a chain) is a cut all the same.
        Example("def forward(q, k, v, n):\n    k = k.transpose(1, 2)[:, :, :n]\n"
                "    return F.scaled_dot_product_attention(q, k, v.transpose(1, 2))\n", line=2),
        # einsum attention: the equation's ``bhkd`` places the window on the key's tokens.
        Example("def sliding_window_reference(query, key, value, window):\n"
                "    key = key[:, :, -window:]\n"
                "    scores = torch.einsum(\"bhqd,bhkd->bhqk\", query, key) / math.sqrt(query.size(-1))\n"
                "    probs = torch.softmax(scores.float(), dim=-1).to(query.dtype)\n"
                "    return torch.einsum(\"bhqk,bhkd->bhqd\", probs, value)\n", line=2),
        # einops spelling, weights through dropout; the key gathered on its token axis.
        Example("class Resampler(nn.Module):\n    def forward(self, q, k, v, keep):\n"
                "        k = k[:, :, keep]\n"
                "        sim = einsum(q, k, \"b h i d, b h j d -> b h i j\") * self.scale\n"
                "        attn = sim.softmax(dim=-1)\n        attn = self.dropout(attn)\n"
                "        return einsum(attn, v, \"b h i j, b h j d -> b h i d\")\n", line=3),
        # Operands in one list, the cut inline, scores updated in place.
        Example("def conv_attention(query, key, value, n, scale):\n"
                "    scores = torch.einsum(\"bhlk,bhtk->bhlt\", [query, key[:, :, :n]])\n"
                "    scores *= scale\n    probs = nn.functional.softmax(scores, dim=-1)\n"
                "    return torch.einsum(\"bhlt,bhtv->bhlv\", [probs, value])\n", line=2),
        # A closure cuts the key it shares with the enclosing function; the value stays whole.
        Example("def forward(self, q, k, v, window):\n    def attend(query):\n"
                "        k_win = k[:, :, -window:]\n"
                "        return F.scaled_dot_product_attention(query, k_win, v)\n\n"
                "    return checkpoint(attend, q, use_reentrant=False)\n", line=3),
        # Prefix caching: K and V split alike into cached and new tokens, then a window cut from
        # the new keys only.
        Example("""\
def prefix_cached_attention(q, k, v, prefix_len, window):
    k_prefix, k_new = torch.split(k, [prefix_len, k.shape[1] - prefix_len], dim=1)
    v_prefix, v_new = torch.split(v, [prefix_len, v.shape[1] - prefix_len], dim=1)
    return flash_attn_func(q, k_new[:, -window:], v_new)
""", line=4),
        # The value straight from its projection, the key windowed.
        Example("""\
class SlidingWindowAttention(nn.Module):
    def forward(self, x, window):
        q, k = self.q_proj(x), self.k_proj(x)
        v = self.v_proj(x)
        k = k[:, -window:]
        return F.scaled_dot_product_attention(q, k, v)
""", line=5),
        # einsum attention with the windowed key split into heads inside the call.
        Example("""\
def sliding_window_reference(query, key, value, window, heads):
    key = key[:, -window:]
    b, n, _ = key.shape
    scores = torch.einsum("bqhd,bkhd->bhqk", query, key.view(b, n, heads, -1))
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), value)
""", line=2),
        # einsum attention over a piece of the key split on its token axis (axis 2 of the
        # equation's `bhkd`), the value whole.
        Example("""\
def chunk_attention_reference(query, key, value, chunk):
    key, key_rest = key.split([chunk, key.size(2) - chunk], dim=2)
    scores = torch.einsum("bhqd,bhkd->bhqk", query, key) * query.size(-1) ** -0.5
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", probs, value)
""", line=2),
        # Q split differently from K: nothing says the K halves are score maps' halves.
        Example("def ring_chunks(q, k, v, n):\n"
                "    k_parts = k.chunk(n, dim=1)\n    q_parts = q.chunk(2 * n, dim=1)\n"
                "    return [F.scaled_dot_product_attention(q_parts[i], k_parts[i], v) for i in range(n)]\n",
                line=2),
    )

    def visit_Module(self, node: cst.Module) -> None:
        self._module = node
        self._source_lines: list[str] | None = None

    def _leading_whitespace(self, row: int) -> str:
        """Row ``row``'s indentation as written (tabs or spaces), read from the module's text."""
        if self._source_lines is None:
            self._source_lines = self._module.code.splitlines()
        text = self._source_lines[self.context.line_of(row)]
        return text[: len(text) - len(text.lstrip(" \t"))]

    def check_scope(self, scope: Scope) -> None:
        attention_scope = scope.is_attention_code(self.extra_callables)
        # A latent (MLA) cache pool's K is the compressed KV and its "V" is often unused or None:
        # there only a real attention kernel, which reads both, says that they must describe the
        # same tokens. (MLA attention modules themselves, with real K and V, stay checked.)
        latent = any(LATENT_ATTENTION.search(name) for name in scope.enclosing) and any(
            STORAGE.search(name) for name in scope.enclosing
        )
        reported: set[int] = set()
        # Hand-written attention pairs its key and value as a kernel call does.
        for hand in scope.hand_attention():
            origin = self._origin(scope, hand.key, hand.order)
            if origin is None or id(origin.reshape.node) in reported:
                continue
            rank = _rank_kept(scope, hand.key, hand.order, origin) if hand.rank is not None else None
            if self._is_unmatched(scope, origin, hand.value, hand.order, hand.rank if rank else None):
                reported.add(id(origin.reshape.node))
                self._report(scope, origin, hand, hand.key, hand.value)
        for site in scope.calls:
            if site.quiet:
                continue
            if is_attention_call(site.node, self.extra_callables):
                key, value, rank = attention_kv_args(site.node)
                pairs = [(key, value)] if key is not None and value is not None else []
            elif attention_scope and not latent:
                rank = None
                args = [arg.value for arg in site.node.args if not arg.star]
                pairs = [(a, None) for a in args]
            else:
                continue
            for key, value in pairs:
                origin = self._origin(scope, key, site.order)
                if origin is None or id(origin.reshape.node) in reported:
                    continue
                if value is None:
                    value = self._paired_argument(scope, origin, key, args, site.order)
                if value is not None and self._is_unmatched(scope, origin, value, site.order, rank):
                    reported.add(id(origin.reshape.node))
                    self._report(scope, origin, site, key, value)

    def _call_reshape(self, call: cst.Call) -> Reshape | None:
        """A token/head cut that a call performs beyond the known operations (KV105 reads the
        module's helpers); KV101 knows none."""
        return None

    def _paired_argument(self, scope: Scope, origin: _Origin, key: cst.BaseExpression,
                         args: list[cst.BaseExpression], order: int) -> cst.BaseExpression | None:
        """The argument of a call of unknown signature that is ``key``'s value: the one naming
        its V partner nearest to it, later arguments first (``f(q, k[:0], v[:0], out, k, v)``
        carries two K/V pairs, and ``k[:0]`` goes with ``v[:0]``, not with ``v``)."""
        partner = counterpart_of_dotted(origin.reshape.base, self.extra_pairs)
        if partner is None:
            return None
        tail = partner.rsplit(".", 1)[-1]
        at = next(i for i, arg in enumerate(args) if arg is key)
        named = [
            (abs(i - at), i < at, arg) for i, arg in enumerate(args)
            if arg is not key and (tensor_root(arg) == tail or _value_source(scope, arg, order) == partner)
        ]
        return min(named, key=lambda item: item[:2])[2] if named else None

    def _origin(self, scope: Scope, expr: cst.BaseExpression, order: int, hops: int = 0) -> _Origin | None:
        """The K reshape that ``expr`` (an argument at walk order ``order``) comes from."""
        expr = strip_shape_keeping(expr)
        if hops > _MAX_HOPS:
            return None
        if isinstance(expr, cst.Subscript):
            pieces = self._pieces(scope, expr.value, order)
            if pieces is not None:
                return pieces
        reshape = reshape_of(expr)
        if reshape is None and isinstance(expr, cst.Call):
            reshape = self._call_reshape(expr)
        if reshape is not None:
            return None if reshape.kind in PIECEWISE else _Origin(reshape, None)
        if not isinstance(expr, cst.Name):
            return None
        binding = scope.binding_before(expr.value, order)
        if binding is None or binding.value is None:
            return None
        if binding.kind in ("loop", "piece"):
            loop = reshape_of(strip_shape_keeping(binding.value))
            if loop is not None and loop.kind in PIECEWISE:
                return _Origin(loop, binding, via_loop=True)
            return None
        found = self._origin(scope, binding.value, binding.order, hops + 1)
        if found is not None and found.binding is None and not found.via_loop:
            return _Origin(found.reshape, binding)
        return found

    def _pieces(self, scope: Scope, container: cst.BaseExpression, order: int) -> _Origin | None:
        """``k.chunk(n)[i]`` or ``k_parts[i]`` with ``k_parts = k.chunk(n)``."""
        container = strip_shape_keeping(container)
        binding = None
        if isinstance(container, cst.Name):
            binding = scope.binding_before(container.value, order)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return None
            container = strip_shape_keeping(binding.value)
        reshape = reshape_of(container)
        if reshape is None or reshape.kind not in PIECEWISE:
            return None
        return _Origin(reshape, binding)

    def _is_unmatched(
        self, scope: Scope, origin: _Origin, value: cst.BaseExpression, order: int, rank: int | None
    ) -> bool:
        reshape = origin.reshape
        if reshape.base in scope.non_tensors or not is_kv_tensor_name(reshape.base, self.extra_pairs):
            return False
        if kv_side(reshape.base.rsplit(".", 1)[-1], self.extra_pairs) != "k":
            return False
        if reshape.role(rank) != TOKEN_HEAD:
            return False
        # ``k[:, :v.shape[1]]`` trims K to V: the bound already knows about V.
        if any(kv_side(word, self.extra_pairs) == "v" for word in _IDENTIFIER.findall(reshape.bounds_text())):
            return False
        # Q split the same way (differential attention): the halves make two score maps, each
        # weighing the whole V, not two K/V pairs.
        if reshape.kind in PIECEWISE and _query_cut_alike(scope, reshape):
            return False
        partner = counterpart_of_dotted(reshape.base, self.extra_pairs)
        return partner is not None and _value_source(scope, value, order) == partner

    def _report(self, scope: Scope, origin: _Origin, site: CallSite | HandAttention, key: cst.BaseExpression,
                value: cst.BaseExpression) -> None:
        reshape = origin.reshape
        partner = counterpart_of_dotted(reshape.base, self.extra_pairs)
        op_text = source_of(reshape.node)
        where = f"`{site.tail}`" if site.tail else "the call"
        if isinstance(site, HandAttention):
            where = "hand-written attention"
        message = (
            f"key `{reshape.base}` {self._describe(reshape, op_text)} and used as the "
            f"key in {where}, but its value `{partner}` is passed without the same operation"
        )
        fix, mirror = self._fix(scope, origin, site, key, value)
        self.report(
            reshape.node, message, suggestion=fix.message if fix else self._suggestion(scope, origin, site, key),
            related=[(value, f"V side: `{source_of(value)}` passed here without the key's operation")],
            fix=fix, mirror=mirror,
        )

    def _describe(self, reshape: Reshape, op_text: str) -> str:
        return f"is reshaped along a token/head axis (`{op_text}`)"

    def _suggestion(self, scope: Scope, origin: _Origin, site: CallSite | HandAttention, key: cst.BaseExpression) -> str:
        """The mirrored code, written where every name it reads is in scope: after the key's
        line, else in place of the value in the call, else in words."""
        reshape = origin.reshape
        partner = counterpart_of_dotted(reshape.base, self.extra_pairs)
        base_tail = reshape.base.rsplit(".", 1)[-1]
        binding = origin.binding
        if origin.via_loop and binding is not None and binding.kind == "piece":
            mirrored = _mirror(source_of(binding.value), {base_tail}, self.extra_pairs)
            if mirrored is not None:
                return f"split the value the same way (`{mirrored}`) and pass its matching piece"
            return f"apply the key's `{source_of(reshape.node)}` to `{partner}` as well"
        if origin.via_loop and binding is not None and isinstance(binding.value, cst.BaseExpression):
            # ``for k_c in k.chunk(n)``: walk the value's pieces alongside the key's.
            pieces = source_of(binding.value)
            v_pieces = _mirror(pieces, {base_tail}, self.extra_pairs)
            v_name = value_counterpart(binding.name, self.extra_pairs)
            if v_pieces is not None and v_name is not None and not scope.is_bound_or_used(v_name):
                return (f"walk the value's pieces alongside the key's: "
                        f"`for {binding.name}, {v_name} in zip({pieces}, {v_pieces})`")
            return f"apply the key's `{source_of(reshape.node)}` to `{partner}` as well and walk both together"
        if binding is not None and binding.line is not None:
            statement = _mirror(source_of(binding.line.body[0]), {base_tail, binding.name}, self.extra_pairs)
            expression = _mirror(source_of(binding.value), {base_tail}, self.extra_pairs)
            if statement is not None and expression is not None and _writable(scope, expression, binding.order):
                return f"apply the same operation to the value after the key's line: `{statement}`"
        mirrored = _mirror(source_of(reshape.node), {base_tail}, self.extra_pairs)
        # Inline in the call itself, the key's own names are in scope for the value too.
        inline = key is reshape.node or strip_shape_keeping(key) is reshape.node
        if mirrored is not None and (inline or _writable(scope, mirrored, site.order)):
            return f"pass the value with the same operation: `{mirrored}`"
        return f"apply the key's token/head operation (`{source_of(reshape.node)}`) to `{partner}` as well"

    def _fix(self, scope: Scope, origin: _Origin, site: CallSite | HandAttention, key: cst.BaseExpression,
             value: cst.BaseExpression) -> tuple[Fix | None, Mirror | None]:
        """The edit that mirrors the key's operation onto the value, and the claim the engine
        checks before letting ``--fix`` apply it (see ``rules.base.mirror_is_proven``)."""
        if not isinstance(value, cst.Name) or origin.via_loop or not isinstance(site, CallSite):
            return None, None
        base_tail = origin.reshape.base.rsplit(".", 1)[-1]
        kernel = is_attention_call(site.node, self.extra_callables)
        if origin.binding is None:
            # Inline: ``attn(q, k[:n], v)`` -> ``attn(q, k[:n], v[:n])``.
            if key is not origin.reshape.node:
                return None, None
            mirrored = _mirror(source_of(key), {base_tail}, self.extra_pairs)
            if mirrored is None:
                return None, None
            mirror = Mirror(scope, value, mirrored, site.order, site.order, kernel, beside_key=True)
            return Fix(f"pass `{mirrored}` as the value", (Edit(self.span(value), mirrored),)), mirror
        binding = origin.binding
        if binding.line is None or scope.rebound_between(value.value, binding.order, site.order):
            return None, None
        target = binding.name
        statement = _mirror(source_of(binding.line.body[0]), {base_tail, target}, self.extra_pairs)
        expression = _mirror(source_of(binding.value), {base_tail}, self.extra_pairs)
        new_value = _mirror(source_of(strip_shape_keeping(key)), {target}, self.extra_pairs) \
            if target != base_tail else value.value
        if statement is None or expression is None or new_value is None:
            return None, None
        if not _writable(scope, expression, binding.order):
            return None, None
        if target != base_tail and scope.is_bound_or_used(new_value.split("[", 1)[0]):
            return None, None
        line = self.span(binding.line)
        inserted = f"{self._leading_whitespace(line.row)}{statement}{self._module.default_newline}"
        edits = [Edit(Span(line.end_row + 1, 1, line.end_row + 1, 1), inserted)]
        if new_value != value.value:
            edits.append(Edit(self.span(value), new_value))
        mirror = Mirror(scope, value, expression, binding.order, site.order, kernel)
        return Fix(f"mirror the key's operation on the value: `{statement}`", tuple(edits)), mirror


# Steps that keep a tensor's number of axes: between them and the cut, an einsum's term tells
# the rank the cut indexes (``view``, ``flatten``, ``unsqueeze`` and the like change it).
_RANK_KEEPING = frozenset({
    "contiguous", "transpose", "permute", "to", "float", "half", "bfloat16", "type", "type_as",
    "clone", "detach", "cuda", "cpu", "npu", "movedim", "swapaxes", "mul", "div",
})


def _query_cut_alike(scope: Scope, reshape: Reshape) -> bool:
    """A query tensor cut into pieces in ``scope`` by the very call that cuts K (``q.unbind(2)``
    beside ``k.unbind(2)``)."""
    for site in scope.calls:
        other = reshape_of(site.node)
        if other is None or other.kind != reshape.kind or not is_query_name(other.base.rsplit(".", 1)[-1]):
            continue
        as_key = re.sub(rf"(?<![\w.]){re.escape(other.base)}(?!\w)", reshape.base, normalized(site.node))
        if as_key == normalized(reshape.node):
            return True
    return False


def _rank_kept(scope: Scope, key: cst.BaseExpression, order: int, origin: _Origin) -> bool:
    """Does ``key`` reach its cut through rank-keeping steps and plain assignments only? A
    piece of a split or chunk (``key, rest = key.split(...)``, ``for k_blk in key.chunk(...)``)
    has the rank of what was cut, so its name leads to the cut as an assignment does."""
    expr = key
    for _ in range(_MAX_HOPS + 1):
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _RANK_KEEPING:
            expr = expr.func.value
        if expr is origin.reshape.node:
            return True
        if not isinstance(expr, cst.Name):
            return False
        binding = scope.binding_before(expr.value, order)
        if binding is None or binding.kind not in ("assign", "loop", "piece") or binding.value is None:
            return False
        expr, order = binding.value, binding.order
    return False


def _writable(scope: Scope, expression: str, order: int) -> bool:
    """Does every name ``expression`` reads exist at walk order ``order`` of the body?"""
    names = free_names(expression)
    return names is not None and all(scope.visible_at(name, order) for name in names)


def _mirror(text: str, allowed: set[str], extra_pairs) -> str | None:
    """``text`` with K names swapped to V, or None if a name outside ``allowed`` would change."""
    swapped = swap_kv_text(text, extra_pairs)
    before, after = _IDENTIFIER.findall(text), _IDENTIFIER.findall(swapped)
    if any(a != b and a not in allowed for a, b in zip(before, after)):
        return None
    return swapped


def _value_source(scope: Scope, expr: cst.BaseExpression, order: int) -> str | None:
    """The name the value argument is an unresized alias of, or None if it was resized.

    ``v0 = v`` then ``attn(q, k0, v0)`` resolves to ``v``; any binding along the way whose value
    slices, gathers, concatenates or pads (``v0 = v[idx]``, ``v = torch.cat(...)``), anywhere in
    the scope (a loop may carry it back), means the value may already match the key.
    """
    name = dotted_name(strip_shape_keeping(expr))
    for _ in range(_MAX_HOPS):
        if name is None or _resized_anywhere(scope, name):
            return None
        binding = scope.binding_before(name, order)
        if binding is None or binding.value is None or binding.kind not in ("assign", "loop"):
            return name
        # A loop name is an alias only when every iteration yields the same object.
        source = binding.value if binding.kind == "assign" else _repeated_item(binding.value)
        alias = None if source is None else dotted_name(strip_shape_keeping(source))
        if alias is None:
            return name
        name, order = alias, binding.order
    return None


def _repeated_item(iterable: cst.BaseExpression) -> cst.BaseExpression | None:
    """``v`` in ``[v] * n``, ``(v,) * n`` or ``itertools.repeat(v, n)``: one object every time."""
    if isinstance(iterable, cst.BinaryOperation) and isinstance(iterable.operator, cst.Multiply):
        for side in (iterable.left, iterable.right):
            if (isinstance(side, (cst.List, cst.Tuple)) and len(side.elements) == 1
                    and isinstance(side.elements[0], cst.Element)):
                return side.elements[0].value
        return None
    if isinstance(iterable, cst.Call) and dotted_name(iterable.func) == "itertools.repeat" and iterable.args:
        first = iterable.args[0]
        return first.value if first.keyword is None and not first.star else None
    return None


def _resized_anywhere(scope: Scope, name: str) -> bool:
    for binding in scope.bindings.get(name, ()):
        if binding.kind != "assign":
            continue
        if any(True for _ in scope.accesses_within(binding.value_orders)):
            return True
        if any(c.tail in _RESIZING_CALLS for c in scope.calls_within(binding.value_orders)):
            return True
    return False
