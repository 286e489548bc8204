"""KV107: broken K/V twins, read by ``linter.model.symmetry`` on both paths."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchmarks.equivalence import findings
from linter.plan.screen_facts import Facts
from linter.rules.kv107.screen import SCREEN
from linter.model.symmetry import breaks
from linter.settings import Settings
from linter.engine import lint_source

# Each shape: the code, the break's kind, and the line it is reported on.
REPORTED = {
    "the key multiplied unrepeated in the branch beside the one that repeats K and V": ("""\
def prefill_or_decode(self, query, key, value, groups, decoding):
    if decoding:
        key = repeat_kv(key, groups)
        value = repeat_kv(value, groups)
        scores = query @ key.transpose(-1, -2)
    else:
        scores = (query
                  @ key.transpose(-1, -2))
    return scores.softmax(-1), value
""", "one-side-op", 7),
    "key projection kept for the value, the value projection used in the other branch": ("""\
class SelfAttention(nn.Module):
    def forward(self, hidden, reuse):
        if reuse:
            value_states = self.v_proj(hidden)
        key_states = self.k_proj(hidden).view(shape)
        value_states = self.k_proj(hidden).view(shape)
        return key_states, value_states
""", "twin-name", 6),
    "the key cache's getter for the value cache": ("""\
def gather(kv_cache, layer_idx, decode):
    if decode:
        return kv_cache.get_value_cache(layer_idx)
    key_cache = kv_cache.get_key_cache(layer_idx)
    value_cache = kv_cache.get_key_cache(layer_idx)
    return key_cache, value_cache
""", "twin-name", 5),
    "the key's block-shape helper for the value": ("""\
class KVCachePool:
    def get_v_block_shape(self):
        return (self.blocks, self.v_dim)

    def allocate(self):
        k_block_shape = self.get_k_block_shape()
        v_block_shape = self.get_k_block_shape()
        return k_block_shape, v_block_shape
""", "twin-name", 7),
    "the value stored into the key cache": ("""\
def save(key_cache, value_cache, slot_mapping, key, value):
    key_cache[slot_mapping] = key
    key_cache[slot_mapping] = value
""", "twin-name", 3),
    "the key scale read for the value": ("""\
def attach(self, layer):
    self.k_scale = layer.k_scale
    self.v_scale = layer.k_scale
""", "twin-name", 3),
    "the value's statement a word-for-word copy of the key's": ("""\
def prefetch_attention(tma_atom_k, tma_atom_q, tma_atom_v):
    prefetch_descriptor(tma_atom_k)
    prefetch_descriptor(tma_atom_q)
    prefetch_descriptor(tma_atom_k)
""", "twin-name", 4),
    "the transpose after a view dropped": ("""\
def heads(k, v, shape):
    k = k.view(shape).transpose(1, 2)
    v = v.view(shape)
    return k, v
""", "one-side-op", 3),
    "the key's rows of a fused weight taken for the value": ("""\
def split_weight(qkv_weight, q_size, kv_size):
    q_weight = qkv_weight[:q_size]
    k_weight = qkv_weight[q_size:q_size + kv_size]
    v_weight = qkv_weight[q_size:q_size + kv_size]
    return q_weight, k_weight, v_weight
""", "twin-name", 4),
    "the key's bound kept whole in the value's write": ("""\
def append(cache_k, cache_v, key_states, value_states, size):
    new_k = cache_k.as_strided(size, cache_k.stride())
    new_k[:, :, cache_k.size(2):cache_k.size(2) + key_states.size(2), :] = key_states
    new_v = cache_v.as_strided(size, cache_v.stride())
    new_v[:, :, cache_v.size(2):cache_k.size(2) + key_states.size(2), :] = value_states
    return new_k, new_v
""", "twin-name", 5),
    "the key read for the value beside a fused key_value name": ("""\
def eager_attention(module, query, key, value):
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(key, module.num_key_value_groups)
    return key_states, value_states
""", "twin-name", 3),
    "transpose dims not mirrored": ("""\
def heads_first(key_states, value_states):
    key_states = key_states.transpose(1, 2)
    value_states = value_states.transpose(-2, -1)
    return key_states, value_states
""", "one-side-op", 3),
    "permute dims not mirrored": ("""\
def heads_first(key, value):
    key = key.permute(0, 2, 1, 3)
    value = value.permute(0, 2, 3, 1)
    return key, value
""", "one-side-op", 3),
    "concatenation along another dim": ("""\
def extend_cache(past_key, past_value, key, value):
    key = torch.cat([past_key, key], dim=-2)
    value = torch.cat([past_value, value], dim=-1)
    return key, value
""", "one-side-op", 3),
    "concatenation in the other order": ("""\
def extend_cache(past_key, past_value, key, value):
    key = torch.cat((past_key, key), dim=2)
    value = torch.cat((value, past_value), dim=2)
    return key, value
""", "one-side-op", 3),
    "the GQA repeat dropped": ("""\
def expand_heads(self, key_states, value_states):
    key_states = key_states.repeat_interleave(self.groups, dim=1)
    value_states = value_states
    return key_states, value_states
""", "one-side-op", 3),
    "a slice bound off by one": ("""\
def window_attention(k, v, start, end):
    k = k[:, start:end]
    v = v[:, start:end - 1]
    return k, v
""", "one-side-slice", 3),
    "an offset dropped from the value's bound": ("""\
def chunk_attention(key, value, offset, size):
    key_chunk = key[offset:offset + size]
    value_chunk = value[offset:size]
    return key_chunk, value_chunk
""", "one-side-slice", 3),
    "the value's cut dropped": ("""\
def prefix(k_cache, v_cache, n):
    k_prefix = k_cache[:, :n]
    v_prefix = v_cache
    return k_prefix, v_prefix
""", "one-side-slice", 3),
    "a narrow length that differs": ("""\
def take_cache(k, v, start, length):
    k_part = k.narrow(1, start, length)
    v_part = v.narrow(1, start, length + 1)
    return k_part, v_part
""", "one-side-slice", 3),
    "the computed value rebuilt from the key": ("""\
def project(self, hidden):
    key = self.k_proj(hidden)
    value = self.v_proj(hidden)
    value = key.view(-1, self.heads, self.dim)
    return key, value
""", "v-rebuilt-from-k", 4),
    "a cache rolled along another axis for the key": ("""\
class SlidingCache:
    def shift(self, n):
        self.v = torch.roll(self.v, shifts=-n, dims=1)
        self.k = torch.roll(self.k, shifts=-n, dims=2)
""", "one-side-op", 3),
    "the key's list gathered for the value, the key name kept in both places": ("""\
class LayeredCache:
    def __init__(self):
        self.key_cache, self.value_cache = [], []

    def merge(self, parts, layer):
        keys = [p.key_cache[layer] for p in parts if p.key_cache[layer] is not None]
        values = [p.key_cache[layer] for p in parts if p.key_cache[layer] is not None]
        return torch.cat(keys), torch.cat(values)
""", "twin-name", 7),
    "the key normed with the query's norm, the key's norm tested": ("""\
def joint_attention(attn, query, key, value, ctx_query, ctx_key, ctx_value):
    if attn.ctx_norm_q is not None:
        ctx_query = attn.ctx_norm_q(ctx_query)
    if attn.ctx_norm_k is not None:
        ctx_key = attn.ctx_norm_q(ctx_key)
    key = torch.cat([ctx_key, key], dim=1)
    value = torch.cat([ctx_value, value], dim=1)
    return query, key, value
""", "twin-name", 5),
    "the new value kept for the cache in one branch only": ("""\
def attend_step(self, query, key_states, value_states, past_key, past_value):
    if self.value_transposed:
        out_value = value_states.transpose(-1, -2)
        value_states = out_value
    key_states = torch.cat([past_key, key_states], dim=-2)
    out_key = key_states
    scores = query @ key_states.transpose(-1, -2)
    return scores.softmax(-1) @ value_states, out_key, out_value
""", "one-side-op", 6),
    "the value left out of a layout move the query and key keep": ("""\
def self_attention(self, query, key, value, cos, sin):
    query = query.view(self.shape).transpose(1, 2)
    key = key.view(self.shape).transpose(1, 2)
    value = value.view(self.shape)
    query, key = apply_rotary(query, key, cos, sin)
    query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    return flash_attn_func(query, key, value)
""", "one-side-op", 4),
    "the value left out of an MLX-style transposition": ("""\
def mlx_attention(self, q, k, v, cache):
    q = q.transpose(0, 2, 1, 3)
    k = k.transpose(0, 2, 1, 3)
    v = v
    k, v = cache.update_and_fetch(k, v)
    return scaled_dot_product_attention(q, k, v, scale=self.scale)
""", "one-side-op", 4),
}

SILENT = {
    "K and V repeated before the if": """\
def attend(self, query, key, value, groups, decoding):
    key = repeat_kv(key, groups)
    value = repeat_kv(value, groups)
    if decoding:
        key = repeat_kv(key, groups)
        value = repeat_kv(value, groups)
        out = torch.matmul(query, key.transpose(2, 3))
    else:
        out = torch.matmul(query, key.transpose(2, 3))
    return out
""",
    "SDPA told the layout is GQA": """\
def attend(self, query, key, value, groups, fused):
    if fused:
        out = F.scaled_dot_product_attention(query, key, value, enable_gqa=True)
    else:
        key = repeat_kv(key, groups)
        value = repeat_kv(value, groups)
        out = F.scaled_dot_product_attention(query, key, value)
    return out
""",
    "K transposed for the scores": """\
def scores(q, k, v):
    k = k.transpose(-2, -1)
    v = v.transpose(1, 2)
    return (q @ k).softmax(-1) @ v
""",
    "K permuted for the scores": """\
def scores(q, k, v):
    k = k.permute(0, 2, 3, 1)
    v = v.permute(0, 2, 1, 3)
    return (q @ k).softmax(-1) @ v
""",
    "rotary embedding on the key only": """\
def prepare(k, v, cos, sin):
    k = rotate(k, cos, sin).transpose(1, 2)
    v = v.transpose(1, 2)
    return k, v
""",
    "norm on the key only": """\
def prepare(self, k, v):
    k = self.k_norm(k).to(v.dtype)
    v = v.to(v.dtype)
    return k, v
""",
    "the value's own head-dim bound": """\
def trim(k, v, head_dim, v_head_dim):
    k = k[..., :head_dim]
    v = v[..., :v_head_dim]
    return k, v
""",
    "a head-dim cut after an ellipsis": """\
def trim(k, v, d):
    k = k[..., :d]
    v = v[..., :d // 2]
    return k, v
""",
    "a fused buffer cut into its parts": """\
def split(kv, half):
    k = kv[:, :half]
    v = kv[:, half:]
    return k, v
""",
    "two copies of one statement naming both sides": """\
def run(q, k, v, cached):
    if cached:
        out = attend(q, k, v)
    else:
        out = attend(q, k, v)
    return out
""",
    "a value defaulted from the key under a test of the value": """\
def attend(q, k, v=None):
    if v is None:
        v = k.clone()
    return sdpa(q, k, v)
""",
    "a kept key name without a value counterpart": """\
class LatentAttention:
    def forward(self, x):
        k = self.k_up(x)
        v = self.k_up(x)[..., : self.rank]
        return k, v
""",
    "the metadata of the key read for the value": """\
def scales(k, v):
    k_scale = torch.ones(1, dtype=k.dtype)
    v_scale = torch.ones(1, dtype=k.dtype)
    return k_scale, v_scale
""",
    "a shared scale": """\
def attach(self, layer):
    self.k_scale = layer.kv_scale
    self.v_scale = layer.kv_scale
""",
    "a mapping's keys and values": """\
def convert(state_dict):
    for key, value in state_dict.items():
        k = state_dict[key.replace("q_proj", "k_proj")]
        v = state_dict[key.replace("q_proj", "v_proj")]
        yield torch.cat([k, v])
""",
    "one statement done twice in two branches": """\
def reset(k_cache, v_cache, full):
    if full:
        k_cache.zero_()
    else:
        k_cache.zero_()
    v_cache.zero_()
""",
    "the key cast to float32 for its norm": """\
def load(k_ptr, v_ptr, offs):
    k_raw = tl.load(k_ptr + offs).to(tl.float32)
    v_raw = tl.load(v_ptr + offs)
    return k_raw, v_raw
""",
    "the key's transpose for the scores, the value's left out": """\
def reshape(key_layer, value_layer, n, d):
    key_layer = key_layer.reshape(n, -1, d).transpose(-1, -2)
    value_layer = value_layer.reshape(n, -1, d)
    return key_layer, value_layer
""",
    "a value that mirrors the key of its own branch": """\
def update(self, full_key_states, full_value_states, window, record):
    if not record:
        self.keys = full_key_states[:, :, -window:, :]
        self.values = full_value_states[:, :, -window:, :]
    else:
        self.keys = full_key_states
        self.values = full_value_states
""",
    "the query and key passed as context": """\
def check(query, key, value, k_descale, v_descale):
    validate(k_descale, "k", query, key)
    validate(v_descale, "v", query, key)
""",
    "MLA's key and value sharing the latent": """\
def latent(kv_cache, rank):
    k = kv_cache[..., :rank]
    v = kv_cache[..., :rank]
    return k, v
""",
    "one slot index for both caches": """\
def slots(slot_mapping, block):
    k_slot = slot_mapping[block]
    v_slot = slot_mapping[block]
    return k_slot, v_slot
""",
    "the key transposed for the scores at the end of a chain": """\
def heads(key, value, n):
    key = key.transpose(1, 2).unflatten(1, (n, -1)).transpose(2, 3)
    value = value.transpose(1, 2).unflatten(1, (n, -1))
    return key, value
""",
    "query and key transposed for the rotary embedding": """\
def rope(q, k, v, shape, cos, sin):
    q = q.view(shape).transpose(1, 2)
    k = k.view(shape).transpose(1, 2)
    v = v.view(shape)
    q, k = rotate(q, k, cos, sin)
    return q.transpose(1, 2), k.transpose(1, 2), v
""",
    "query and key expanded to the value's heads": """\
def expand(q, k, v, n, ratio):
    q_n = q[n].float().repeat_interleave(ratio, dim=0)
    k_n = k[n].float().repeat_interleave(ratio, dim=0)
    v_n = v[n].float()
    return q_n, k_n, v_n
""",
    "an empty value made with the key's dtype and device": """\
def reset(self, key_states):
    self.keys = torch.tensor([], dtype=key_states.dtype, device=key_states.device)
    self.values = torch.tensor([], dtype=key_states.dtype, device=key_states.device)
""",
    "a mapping's keys and values outside attention code": """\
def merge(key, value, other_key, other_value):
    key = key.strip()
    value = value.strip().lower()
    return key, value
""",
    "twins too far apart": "def f(k, v):\n    k = k[:, :n]\n" + "    x = 1\n" * 14 + "    v = v[:, :n - 1]\n",
    "the value's head dim bound only after the statement": """\
def conv_attention(self, x, n_feat, heads):
    d_k = n_feat // heads
    k = self.key_linear(x)
    v = self.value_linear(x)
    k_h = k.view(x.shape[0], -1, heads, d_k)
    v_h = v.view(x.shape[0], -1, heads, d_k)
    batch, length, d_v = v.shape
    return k_h, v_h, self.conv(v.view(batch, d_v, length))
""",
    "the value's head dim a local of another method": """\
class CrossAttention(nn.Module):
    def mix(self, v):
        n, t, d_v = v.shape
        return self.conv(v.view(n, d_v, t))

    def forward(self, memory, heads, d_k):
        k, v = memory.chunk(2, -1)
        k_h = k.view(memory.shape[0], -1, heads, d_k)
        v_h = v.view(memory.shape[0], -1, heads, d_k)
        return k_h, v_h
""",
    "the value cached transposed under a transposed-layout switch": """\
def decode(self, key_states, value_states, past_key, past_value):
    key_states = torch.cat([past_key, key_states], dim=-2)
    if self.transposed_v_cache:
        value_states = torch.cat([past_value, value_states], dim=-1)
    else:
        value_states = torch.cat([past_value, value_states], dim=-2)
    return key_states, value_states
""",
    "the key kept transposed since its projection": """\
def attend_with_cache(self, key_layer, value_layer, past_key, past_value, n):
    key_layer = key_layer.reshape(n, -1, self.head_dim).transpose(-1, -2)
    value_layer = value_layer.reshape(n, -1, self.head_dim)
    key_layer = torch.cat([past_key, key_layer], dim=-1)
    value_layer = torch.cat([past_value, value_layer], dim=-2)
    return key_layer, value_layer
""",
    "the value twin set on every path, one path through a return": """\
def cache_step(self, key_states, value_states, past):
    if past is None:
        new_value = value_states
    else:
        return None
    new_key = key_states
    return new_key, new_value
""",
    "the value twin read only under the branch's own test": """\
def cache_step(self, key_states, value_states, keep):
    if keep:
        new_value = value_states.contiguous()
    new_key = key_states
    if keep:
        return new_key, new_value
    return new_key, None
""",
    "the value taking the query's and key's move later": """\
def self_attention(self, query, key, value, cos, sin):
    query = query.view(self.shape).transpose(1, 2)
    key = key.view(self.shape).transpose(1, 2)
    value = value.view(self.shape)
    query, key = apply_rotary(query, key, cos, sin)
    value = value.transpose(1, 2)
    return flash_attn_func(query, key, value)
""",
}


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_the_model_finds_each_break(name: str) -> None:
    code, kind, line = REPORTED[name]
    found = [(b.kind, b.node.lineno) for b in breaks(ast.parse(code))]
    assert found == [(kind, line)]


@pytest.mark.parametrize("name", sorted(SILENT))
def test_the_model_reads_deliberate_asymmetries_as_design(name: str) -> None:
    assert breaks(ast.parse(SILENT[name])) == []


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_the_rule_reports_on_the_break_line(name: str) -> None:
    code, _, line = REPORTED[name]
    assert [(f.code, f.span.row) for f in lint_source(code, codes=["KV107"])] == [("KV107", line)]


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_the_screen_passes_what_the_rule_reports(name: str) -> None:
    assert SCREEN(Facts(ast.parse(REPORTED[name][0])), Settings())


@pytest.mark.parametrize("name", sorted(SILENT))
def test_the_screen_stops_the_look_alikes(name: str) -> None:
    assert not SCREEN(Facts(ast.parse(SILENT[name])), Settings())
    assert lint_source(SILENT[name], codes=["KV107"]) == []


def test_columns_count_characters_not_bytes() -> None:
    code = 'def save(key_cache, value_cache, s, key, value):\n    key_cache[s] = key  # ключ\n    x = "ключ"; key_cache[s] = value\n'
    (finding,) = lint_source(code, codes=["KV107"])
    assert (finding.span.row, finding.span.column) == (3, code.split("\n")[2].index("key_cache") + 1)


def test_a_file_with_carriage_return_line_ends_is_reported_on_its_line() -> None:
    # ``ast`` ends a line at a lone "\r" as well; the file's text split at "\n" has one line.
    code = (
        "def caches(kv, layer, decoding):\r    if decoding:\r"
        "        return kv.get_key_cache(layer), kv.get_value_cache(layer)\r"
        "    key_cache = kv.get_key_cache(layer)\r    value_cache = kv.get_key_cache(layer)\r"
        "    return key_cache, value_cache\r"
    )
    (finding,) = lint_source(code, codes=["KV107"])
    assert (finding.span.row, finding.span.column) == (5, len("    value_cache = ") + 1)


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_fast_and_slow_paths_agree(name: str, tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    # One class deeper, beside a definition no rule reads: the fast path cuts the file.
    path.write_text("import torch\n\n\ndef unrelated(x):\n    return x + 1\n\n\n" + REPORTED[name][0])
    slow = findings([str(path)], prefilter=False, jobs=1)
    assert "KV107" in [code for _, code, *_ in slow]
    assert findings([str(path)], prefilter=True, jobs=1) == slow


def test_a_pair_in_a_header_does_not_make_the_rest_of_a_module_live() -> None:
    from linter.plan.text_plan import parse_plan

    text = (
        "import torch\n\n\ndef attend(q, k, v, t) -> tuple[int, int]:\n"
        "    k = k[:, :t]\n    v = v[:, :t + 1]\n    return flash_attn_func(q, k, v)\n"
    )
    plan = parse_plan(text, ["KV107"], Settings(select=frozenset({"KV107"})))
    assert not plan.whole and plan.ranges == ((3, 8),)


def test_statements_with_no_near_twin_leave_a_function_unparsed() -> None:
    from linter.plan.text_plan import parse_plan

    # The pair stands in the body, but no V statement repeats a K statement in all but one
    # place: nothing for the model to compare.
    text = "import torch\n\n\ndef attend(q, k, v, t):\n    k = rope(k, t)\n    return flash_attn_func(q, k[:, :t], v)\n"
    plan = parse_plan(text, ["KV107"], Settings(select=frozenset({"KV107"})))
    assert plan.ranges == ()


# PEP 695 syntax: libcst reads it, the standard library's parser of Python 3.11 does not.
_NEWER_SYNTAX = """\
def attention[T](q, k, v, n):
    k = k[:n]
    v = v[:n]
    return flash_attn_func(q, k, v)
"""


def test_a_module_the_running_python_cannot_parse_leaves_the_ast_model_silent():
    # The model reads the ``ast`` tree; where it cannot be built the rule says nothing rather
    # than fail.
    assert lint_source(_NEWER_SYNTAX, codes=["KV107"]) == []
