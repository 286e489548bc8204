"""KV107: a V-side statement that breaks the symmetry with its K twin."""

from __future__ import annotations


import libcst as cst

from linter.finding import Finding
from linter.model.symmetry import Break, breaks
from linter.rules.base import Example, Rule
from linter.plan.triggers import PAIRED, AnyCase, Trigger


class BrokenKvTwin(Rule):
    code = "KV107"
    # Attention code (``names.TWIN_ATTENTION_WORDS``), and a K-side statement with its V twin.
    trigger = Trigger(
        AnyCase("attn", "attention", "softmax", "sdpa", "flash", "head", "query", "rotary", "rope", "cache",
                "proj", "scale", "mla", "kv"),
        PAIRED,
    )
    name = "broken-kv-twin"
    summary = "Value statement that repeats its key twin but breaks the symmetry in one place"
    what = (
        "Pairs each value-side statement with its key twin: the nearby statement (within 12 "
        "lines of one function) that, with its key-side names renamed to their value sides "
        "(`k_proj` -> `v_proj`, `key_cache` -> `value_cache`, `get_k_shape` -> `get_v_shape`), "
        "has the value statement's shape. Where the two differ in exactly one place, it "
        "reports: a key-side name or expression the value statement kept (`v = self.k_proj(x)`, "
        "`value_cache = kv.get_key_cache(i)`, `v_scale = layer.k_scale`, `k_cache[s] = value`, "
        "`cache_v[:, a:cache_k.size(2) + key.size(2)]`) while the value counterpart exists in the "
        "function or its class; axes moved differently (`transpose`/`permute`/`movedim` dims, a "
        "`cat` dim or operand order); the twin's layout op or GQA repeat missing on the value "
        "(`.transpose(1, 2)`, `repeat_kv(...)`); a token or head slice bound (or `narrow` length) "
        "that differs, or a cut missing on the value. It also reports K and V cutting the same "
        "rows of a fused tensor (`v_w = qkv_w[q:q + kv]` beside `k_w = qkv_w[q:q + kv]`), a value "
        "statement that became a word-for-word copy of its key twin where the value counterpart "
        "exists, and a value that already held a result rebuilt from its key twin alone (`v = "
        "k.clone()` after `v = self.v_proj(x)`). Most of KV104's findings (the key's projection, "
        "shape helper or cache used for the value) and of KV102's (one slice bound differing) are "
        "special cases where the key twin stands nearby; KV107 needs no unused twin, only one "
        "that exists. KV106's scale fallback (`v_scale or k_scale`) has no key twin statement and "
        "stays KV106's. "
        "The same renaming pairs a key statement with its query twin (`query = attn.norm_q(query)`, "
        "`key = attn.norm_q(key)` where `attn.norm_k` exists): only a member kept on the query "
        "side is reported there, since Q and K differ in ops and cuts by design. And a key name "
        "set on every path whose value twin is set in one branch only, both read after it "
        "(`new_k = k` beside `if t: new_v = ...`, then `return new_k, new_v`), is reported at "
        "the key's assignment; a value name set in one branch and then overwritten, before any "
        "read, by a line copied from its key twin (`new_v = v` beside `new_k = k` after `if t: "
        "new_v = v.transpose(-1, -2)`) is reported at the overwrite. Branches of one `if` are "
        "twins too: where one branch repeats K "
        "and V to the query's head count (`repeat_kv(key_states, groups)`) and the other "
        "multiplies the query with the same K, or the weights with the same V, unrepeated "
        "(`torch.matmul`, `@`, SDPA without `enable_gqa`), the product is reported, unless the "
        "`if` tests a group or KV head count itself."
    )
    why = (
        "K and V are written as pairs of near-identical lines, and copy-paste between them is "
        "the K/V bug that ships most: one name left unswapped, one dim not mirrored, one "
        "bound not updated. The shapes usually still agree, so nothing fails; the model "
        "attends over wrong values. Deliberate asymmetries are not reported: RoPE, a norm or a "
        "cast on K only (another callable), K transposed for `Q @ K^T` while V keeps its last "
        "axis (or K's axes moved where the K it binds is then multiplied by the query: "
        "`baddbmm(batch1=q, batch2=k)`, `torch.bmm(q, k)`, `q @ k`), an op the query shares with the key (RoPE's layout, where Q and K move back or V moves later; Q and K expanded to V's "
        "heads), a head-dim cut after an ellipsis (Dk != Dv), a bound naming a value size of its "
        "own, a fused buffer cut into parts, a mapping's `key`/`value` loop variables, a value "
        "that mirrors the key of its own branch, a value counterpart bound only further down "
        "(or a local of another method: no evidence at the statement), K or V kept transposed "
        "([.., head_dim, seq]) on purpose, so that one side works along axis -1 where the "
        "other works along -2: under a test naming a transposed layout (`if "
        "self.transpose_value:`), or for a side named transposed (`k_t`) or laid out earlier "
        "with its last axis moved."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, hidden, kv_size):
        super().__init__()
        self.k_proj = nn.Linear(hidden, kv_size)
        self.v_proj = nn.Linear(hidden, kv_size)

    def forward(self, x):
        k = self.k_proj(x).transpose(1, 2)
        v = self.k_proj(x).transpose(1, 2)
        return k, v
"""
    good = """\
class Attention(nn.Module):
    def __init__(self, hidden, kv_size):
        super().__init__()
        self.k_proj = nn.Linear(hidden, kv_size)
        self.v_proj = nn.Linear(hidden, kv_size)

    def forward(self, x):
        k = self.k_proj(x).transpose(1, 2)
        v = self.v_proj(x).transpose(1, 2)
        return k, v
"""
    fix_text = (
        "Make the value statement mirror its key twin: swap the kept key-side name for its "
        "value counterpart, move the same axes, apply the same op, cut the same bounds. No "
        "automatic fix: where the asymmetry is meant, say so in a comment and suppress the line."
    )

    VALID = (
        # The ``if`` itself tells plain multi-head attention from GQA: only one branch repeats.
        Example("""\
def eager_attention(self, query_states, key_states, value_states):
    if self.num_key_value_groups == 1:
        scores = torch.matmul(query_states, key_states.transpose(2, 3))
    else:
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        scores = torch.matmul(query_states, key_states.transpose(2, 3))
    return torch.matmul(scores.softmax(-1), value_states)
"""),
        Example(good),
        # The wrapper asserts the head dims equal, then describes V's tiles with K's: one value.
        Example("""\
def attention_forward(q, k, v, o, block_m):
    HEAD_DIM_Q, HEAD_DIM_K = q.shape[-1], k.shape[-1]
    HEAD_DIM_V = v.shape[-1]
    assert HEAD_DIM_Q == HEAD_DIM_K == HEAD_DIM_V
    rows = k.shape[0] * k.shape[1] * k.shape[2]
    desc_k = TensorDescriptor(k, shape=[rows, HEAD_DIM_K], strides=[HEAD_DIM_K, 1], block_shape=[block_m, HEAD_DIM_K])
    desc_v = TensorDescriptor(v, shape=[rows, HEAD_DIM_K], strides=[HEAD_DIM_K, 1], block_shape=[block_m, HEAD_DIM_K])
    return launch(q, desc_k, desc_v, o)
"""),
        # An empty V cache allocated with K's shape, dtype and device: K's geometry, not its data
        # (whether that geometry fits V is KV210's question, where V has a head dim of its own).
        Example("""\
class DecoderAttention(nn.Module):
    def init_cache(self, key_states, value_states):
        cache_k = torch.zeros(key_states.shape, dtype=self.k_proj.weight.dtype, device=key_states.device)
        cache_v = torch.zeros(key_states.shape, dtype=self.k_proj.weight.dtype, device=key_states.device)
        return cache_k, cache_v
"""),
        # K of a 3-d layout moved for the batched score product with Q, V left for probs @ V.
        Example("""\
def alibi_attention(self, fused, alibi, batch, n):
    query, key, value = self._split_heads(fused)
    query = query.reshape(batch * self.heads, n, self.head_dim)
    key = key.reshape(batch * self.heads, n, self.head_dim).transpose(1, 2)
    value = value.reshape(batch * self.heads, n, self.head_dim)
    scores = alibi.baddbmm(batch1=query, batch2=key, beta=1.0, alpha=self.scale)
    probs = torch.softmax(scores, dim=-1)
    return torch.bmm(probs, value)
"""),
        # K transposed for the scores, V kept as is.
        Example("""\
def attend(q, k, v):
    k = k.permute(0, 2, 3, 1)
    v = v.permute(0, 2, 1, 3)
    return torch.softmax(q @ k, -1) @ v
"""),
        # RoPE on K only: another callable, not a dropped layout op.
        Example("""\
def prepare(self, k, v, cos, sin):
    k = apply_rotary(k, cos, sin).transpose(1, 2)
    v = v.transpose(1, 2)
    return k, v
"""),
        # The head-dim cut after an ellipsis: Dk and Dv may differ.
        Example("""\
def unpad(k, v, d):
    k = k[..., :d]
    v = v[..., :d - 64]
    return k, v
"""),
        # A fused buffer cut into its K and V parts.
        Example("""\
def split_kv(kv, half):
    k_part = kv[:, :half]
    v_part = kv[:, half:]
    return k_part, v_part
"""),
        # A bound that names the value's own size.
        Example("""\
def trim(k, v, n, v_len):
    k = k[:, :n]
    v = v[:, :v_len]
    return k, v
"""),
        # A value defaulted from the key only when it is missing.
        Example("""\
def attend(q, k, v=None):
    if v is None:
        v = k.clone()
    return F.scaled_dot_product_attention(q, k, v)
"""),
        # A shared scale with no value scale of its own.
        Example("""\
def load(self, layer):
    self.k_scale = layer.kv_scale
    self.v_scale = layer.kv_scale
"""),
        # The value's own head dim is bound only further down: no evidence at the statement.
        Example("""\
def conv_attention(self, x, n_feat, heads):
    d_k = n_feat // heads
    k_h = self.key_linear(x).view(x.shape[0], -1, heads, d_k)
    v_h = self.value_linear(x).view(x.shape[0], -1, heads, d_k)
    batch, length, d_v = x.shape
    return k_h, v_h, d_v
"""),
        # The value cached transposed ([.., head_dim, seq]) under its layout switch.
        Example("""\
def decode(self, key_states, value_states, past_key, past_value):
    key_states = torch.cat([past_key, key_states], dim=-2)
    if self.transposed_v_cache:
        value_states = torch.cat([past_value, value_states], dim=-1)
    return key_states, value_states
"""),
        # The key kept transposed since its projection: its tokens are its last axis.
        Example("""\
def attend_with_cache(self, key_layer, value_layer, past_key, past_value, n):
    key_layer = key_layer.reshape(n, -1, self.head_dim).transpose(-1, -2)
    key_layer = torch.cat([past_key, key_layer], dim=-1)
    value_layer = torch.cat([past_value, value_layer], dim=-2)
    return key_layer, value_layer
"""),
        # The new value read only under the test that set it.
        Example("""\
def cache_step(self, key_states, value_states, keep):
    if keep:
        new_value = value_states.contiguous()
    new_key = key_states
    if keep:
        return new_key, new_value
    return new_key, None
"""),
        # Q and K moved for the rotary embedding, V taking the same move afterwards.
        Example("""\
def self_attention(self, query, key, value, cos, sin):
    query = query.view(self.shape).transpose(1, 2)
    key = key.view(self.shape).transpose(1, 2)
    value = value.view(self.shape)
    query, key = apply_rotary(query, key, cos, sin)
    value = value.transpose(1, 2)
    return flash_attn_func(query, key, value)
"""),
        # The value twin set in a branch is read before the line that mirrors its key twin
        # sets it again; and both twins set in the branch are both set again.
        Example("""\
def attention_step(self, hidden, cache):
    key_states = self.k_proj(hidden)
    value_states = self.v_proj(hidden)
    if self.value_transposed:
        new_value_states = value_states.transpose(-1, -2)
        cache.write_value(new_value_states)
    cache.write_value(new_value_states if self.value_transposed else value_states)
    new_key_states = key_states
    new_value_states = value_states
    return new_key_states, new_value_states


def attention_reset(self, hidden):
    key_states = self.k_proj(hidden)
    value_states = self.v_proj(hidden)
    if self.warmup:
        new_key_states = key_states.float()
        new_value_states = value_states.float()
    new_key_states = key_states
    new_value_states = value_states
    return new_key_states, new_value_states
"""),
    )
    INVALID = (
        Example(bad, line=9),
        # The value cache read through the key's getter; the value getter serves decoding.
        Example("""\
def caches(kv, layer, decoding):
    if decoding:
        return kv.get_key_cache(layer), kv.get_value_cache(layer)
    key_cache = kv.get_key_cache(layer)
    value_cache = kv.get_key_cache(layer)
    return key_cache, value_cache
""", line=5),
        # The value projection replaced by the key's although the value projection is used
        # in the other branch.
        Example("""\
class Attention(nn.Module):
    def forward(self, x, cached):
        if cached:
            v = self.v_proj(x)
        k = self.k_proj(x)
        v = self.k_proj(x)
        return k, v
""", line=6),
        # The value written into the key cache.
        Example("""\
def store(key_cache, value_cache, slots, key, value):
    key_cache[slots] = key
    key_cache[slots] = value
""", line=3),
        # The value transposed as if for the scores.
        Example("""\
def to_heads(k, v):
    k = k.transpose(1, 2)
    v = v.transpose(2, 3)
    return k, v
""", line=3),
        # The value's parts concatenated in the other order.
        Example("""\
def join(k_nope, k_rope, v_nope, v_rope):
    k = torch.cat([k_nope, k_rope], dim=-1)
    v = torch.cat([v_rope, v_nope], dim=-1)
    return k, v
""", line=3),
        # The GQA repeat dropped on the value side.
        Example("""\
def expand(k, v, groups):
    k = repeat_kv(k, groups)
    v = v
    return k, v
""", line=3),
        # The value cut one token short.
        Example("""\
def window_attention(k, v, start, end):
    k = k[:, start:end]
    v = v[:, start:end - 1]
    return k, v
""", line=3),
        # The value scale read from the key's attribute.
        Example("""\
def load(self, layer):
    self.k_scale = layer.k_scale
    self.v_scale = layer.k_scale
""", line=3),
        # The computed value thrown away for a copy of the key.
        Example("""\
def project(self, x):
    k = self.k_proj(x)
    v = self.v_proj(x)
    v = k.contiguous()
    return k, v
""", line=4),
        # The key rolled along another axis than the value.
        Example("""\
class SlidingCache:
    def shift(self, n):
        self.v = torch.roll(self.v, shifts=-n, dims=1)
        self.k = torch.roll(self.k, shifts=-n, dims=2)
""", line=3),
        # The key's list gathered for the value: the key name kept wherever it stands.
        Example("""\
class LayeredCache:
    def __init__(self):
        self.key_cache, self.value_cache = [], []

    def merge(self, parts, layer):
        keys = [p.key_cache[layer] for p in parts if p.key_cache[layer] is not None]
        values = [p.key_cache[layer] for p in parts if p.key_cache[layer] is not None]
        return keys, values
""", line=7),
        # The key normed with the query's norm although the key's norm is tested.
        Example("""\
def joint_attention(attn, key, value, ctx_query, ctx_key, ctx_value):
    if attn.ctx_norm_q is not None:
        ctx_query = attn.ctx_norm_q(ctx_query)
    if attn.ctx_norm_k is not None:
        ctx_key = attn.ctx_norm_q(ctx_key)
    return torch.cat([ctx_key, key], dim=1), torch.cat([ctx_value, value], dim=1)
""", line=5),
        # The new value kept for the cache in one branch only, the new key on every path.
        Example("""\
def attention_step(self, key_states, value_states, past_key):
    if self.value_transposed:
        out_value = value_states.transpose(-1, -2)
    key_states = torch.cat([past_key, key_states], dim=-2)
    out_key = key_states
    return key_states, out_key, out_value
""", line=5),
        # V left out of the move Q and K keep, then moved back with them.
        Example("""\
def self_attention(self, query, key, value, cos, sin):
    query = query.view(self.shape).transpose(1, 2)
    key = key.view(self.shape).transpose(1, 2)
    value = value.view(self.shape)
    query, key = apply_rotary(query, key, cos, sin)
    return flash_attn_func(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2))
""", line=4),
        # The prefill branch multiplies the query with K unrepeated; the decode branch of the
        # same ``if`` repeats K and V to the query's head count first.
        Example("""\
def quantized_attention(self, query_states, key_states, value_states, cache, groups):
    if cache.is_empty(self.layer_idx):
        scores = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scale
        out = torch.matmul(scores.softmax(-1), value_states)
        cache.store(key_states, value_states, self.layer_idx)
    else:
        key_states, value_states = cache.update(key_states, value_states, self.layer_idx)
        key_states = repeat_kv(key_states, groups)
        value_states = repeat_kv(value_states, groups)
        scores = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scale
        out = torch.matmul(scores.softmax(-1), value_states)
    return out
""", line=3),
        # K moved again in the score product: the first move was a heads move V lacks.
        Example("""\
def eager_attention(self, query, key, value, batch, n):
    query = query.view(batch, n, self.heads, self.head_dim).transpose(1, 2)
    key = key.view(batch, n, self.heads, self.head_dim).transpose(1, 2)
    value = value.view(batch, n, self.heads, self.head_dim)
    probs = torch.softmax(torch.matmul(query, key.transpose(-1, -2)) * self.scale, dim=-1)
    return torch.matmul(probs, value)
""", line=4),
        # The value twin set in a branch, then overwritten before any read by the line copied
        # from its key twin.
        Example("""\
def attention_step(self, hidden, past_key, past_value):
    key_states = self.k_proj(hidden)
    value_states = self.v_proj(hidden)
    if self.value_transposed:
        new_value_states = value_states.transpose(-1, -2)
        value_states = new_value_states
    new_key_states = key_states
    new_value_states = value_states
    key_states = torch.cat([past_key, key_states], dim=-2)
    return key_states, new_key_states, new_value_states
""", line=8),
    )

    def visit_Module(self, node: cst.Module) -> None:
        # The model reads the standard library's tree, the one the ``ast`` screen reads: one
        # code for both paths. The text is the file's own lines (the fast path blanks the
        # others), so lines agree; columns are converted from UTF-8 bytes.
        parsed = self.context.python_tree(node)
        if parsed is None:
            return
        tree, lines = parsed
        for found in breaks(tree, self.extra_pairs):
            self._report(found, lines)

    def _report(self, found: Break, lines: list[str]) -> None:
        node = found.node
        span = self.ast_span(node, lines)
        self.findings.append(Finding(
            code=self.code, message=found.message, path=self.context.path, span=span,
            suggestion=found.suggestion, noqa_row=span.row,
        ))

