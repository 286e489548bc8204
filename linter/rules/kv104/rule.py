"""KV104: the value side computed from the key side's twin while the value twin exists."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.classes import ClassModel, OwnerTracking
from linter.model.functions import FunctionModel, function_model
from linter.model.walk import children
from linter.model.names import is_kv_tensor_name, key_counterpart, kv_side, value_counterpart
from linter.model.pairs import dotted_name, source_of
from linter.rules.base import Example, Rule
from linter.model.tensor_roots import tensor_root
from linter.plan.triggers import PAIRED, Trigger

# In-place writes whose source tensor is the argument at this position.
_WRITES = {"copy_": 0, "index_copy_": 2, "index_copy": 2}


def _calls(expr: cst.CSTNode) -> Iterator[cst.Call]:
    # A lambda's calls run when it is called, not when this value is computed.
    if isinstance(expr, cst.Lambda):
        return
    if isinstance(expr, cst.Call):
        yield expr
    for child in children(expr):
        yield from _calls(child)


def _head_dim_store(node: cst.CSTNode) -> bool:
    """``k[..., a:b] = ...``: a write into part of the last (head-dim) axis."""
    return (
        isinstance(node, cst.Subscript) and len(node.slice) > 1
        and isinstance(node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.Ellipsis)
    )


def _tail(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class ValueFromKeyTwin(OwnerTracking, Rule):
    code = "KV104"
    # Every finding names a K-side name and the V twin that sits unused.
    trigger = Trigger(PAIRED)
    name = "value-from-key-twin"
    summary = "Value computed, reshaped or stored through the key side's twin while the value twin sits unused"
    what = (
        "Finds the value side of attention produced by the key side's machinery where the value "
        "side has its own: a V-side target (`v`, `value_states`, `self.v_cache`) assigned from "
        "a call of a K-side callable (`self.k_proj(x)`, `self.get_k_cache_shape()`) while the "
        "class (or the function's parameters) holds the V twin (`v_proj`, `get_v_cache_shape`) and this function "
        "never uses it; a value parameter overwritten from the key parameter before it was ever "
        "read (`value = key.view(...)` in `def f(query, key, value)`); a V-side tensor written "
        "into a K-side cache (`k_cache[slots] = v`, `key_cache.copy_(value)`) where the V cache "
        "exists; a value-side method (`get_value_buffer`) that returns or writes the K-side "
        "attribute while the class has the V one; and a function returning the same K-side "
        "tensor twice (`return k_cache, k_cache`) where the V twin exists. The evidence is always the value twin that is "
        "defined and left unused, never a name alone."
    )
    why = (
        "Copy-paste between the K and V lines is the most common K/V bug that ships: the value "
        "becomes a second copy of the key, the shapes still agree (or agree for the models that "
        "were tested), and the model silently attends over the wrong values. Multi-head latent "
        "attention that uses K as V on purpose has no separate V projection, cache or helper, so "
        "it is not reported."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, hidden, kv_size):
        super().__init__()
        self.k_proj = nn.Linear(hidden, kv_size)
        self.v_proj = nn.Linear(hidden, kv_size)

    def forward(self, x):
        k = self.k_proj(x)
        v = self.k_proj(x)
        return k, v
"""
    good = """\
class Attention(nn.Module):
    def __init__(self, hidden, kv_size):
        super().__init__()
        self.k_proj = nn.Linear(hidden, kv_size)
        self.v_proj = nn.Linear(hidden, kv_size)

    def forward(self, x):
        k = self.k_proj(x)
        v = self.v_proj(x)
        return k, v
"""
    fix_text = (
        "Use the value twin: `self.v_proj(x)`, `get_v_cache_shape()`, `value`, `v_cache`. No "
        "automatic fix: when the key twin was meant (K used as V by design), delete the unused "
        "value twin instead so the intent is visible."
    )

    VALID = (
        Example(good),
        # MLA with K as V: there is no V projection to use.
        Example("""\
class LatentAttention(nn.Module):
    def __init__(self, hidden, rank):
        super().__init__()
        self.kv_a_proj = nn.Linear(hidden, rank)

    def forward(self, x):
        k = self.kv_a_proj(x)
        v = k
        return k, v
"""),
        # A shared-KV layer: the V projection is used where it exists.
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden, size, k_eq_v):
        super().__init__()
        self.k_proj = nn.Linear(hidden, size)
        self.v_proj = None if k_eq_v else nn.Linear(hidden, size)

    def forward(self, x):
        k = self.k_proj(x)
        v = self.v_proj(x) if self.v_proj is not None else self.k_proj(x)
        return k, v
"""),
        # A value parameter read first, then defaulted from the key.
        Example("""\
def attend(query, key, value=None):
    if value is None:
        value = key.clone()
    return F.scaled_dot_product_attention(query, key, value)
"""),
        # K-only indexer cache: nothing V-side is written into it.
        Example("""\
class Indexer:
    def __init__(self, pool):
        self.k_cache = pool

    def store(self, slots, k):
        self.k_cache[slots] = k
"""),
        # MLA: the key's latent part is the value.
        Example("""\
def mla_inputs(k_input, v_input, k_pe, rank):
    k_input[..., :rank] = v_input
    k_input[..., rank:] = k_pe
    return F.scaled_dot_product_attention(q, k_input, v_input)
"""),
        # MLA again, the latent not the value twin itself: a write into part of the key's head
        # dim builds the key, whatever V-side name fills it.
        Example("""\
def build_latent_key(key, value, kv_c, k_pe, rank):
    v_latent = kv_c.unsqueeze(1)
    key[..., :rank] = v_latent
    key[..., rank:] = k_pe
    value.copy_(v_latent)
    return key, value
"""),
        # Each cache gets its own side.
        Example("""\
def write(key_cache, value_cache, slots, key, value):
    key_cache[slots] = key
    value_cache[slots] = value
"""),
        # MLA pool: the value is a view of the key buffer, and there is no value buffer.
        Example("""\
class LatentPool:
    def __init__(self, k, rank):
        self.k_buffer = k
        self.rank = rank

    def get_value_buffer(self, layer):
        return self.k_buffer[layer][..., : self.rank]
"""),
        # Allocation through each side's own helper.
        Example("""\
class Pool:
    def get_k_shape(self):
        return (self.n, self.k_dim)

    def get_v_shape(self):
        return (self.n, self.v_dim)

    def allocate(self):
        self.k_cache = torch.empty(self.get_k_shape())
        self.v_cache = torch.empty(self.get_v_shape())
"""),
        # A key projected with the key's own layer in a method of its own; values by a layer
        # looked up by index.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, dim, kv_dim):
        super().__init__()
        self.k_proj = nn.Linear(kv_dim, dim)
        self.v_proj = nn.Linear(kv_dim, dim)
        self.value_heads = nn.ModuleList([nn.Identity()])

    def project_keys(self, memory):
        # The encoder's keys are cached once; values are projected per layer elsewhere.
        key = self.k_proj(memory)
        return key

    def project_values(self, memory, layer):
        value = self.value_heads[layer](memory)
        return value
"""),
        # Keys and values tied to one projection: no value projection exists to be missed.
        Example("""\
class TiedKVAttention(nn.Module):
    # Keys and values share one projection: there is no value projection.
    def __init__(self, dim, head_dim):
        super().__init__()
        self.q_proj = nn.Linear(dim, head_dim)
        self.k_proj = nn.Linear(dim, head_dim)
        self.o_proj = nn.Linear(head_dim, dim)

    def forward(self, x):
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.k_proj(x)
        return self.o_proj(F.scaled_dot_product_attention(q, k, v)), (k, v)
"""),
        # MLA: a local value cut from the latent key, not a value parameter overwritten.
        Example("""\
def mla_decode(q, key, kv_lora_rank):
    # The latent key's first kv_lora_rank dims are the value.
    value = key[..., :kv_lora_rank]
    return flash_attn_with_kvcache(q, key, value)
"""),
        # A value parameter replaced from the cache, not from the key.
        Example("""\
def decode_attention(query, key, value, cache, layer_idx):
    # On decode the cache holds this layer's keys and values, the new token's included.
    key = cache.key_cache[layer_idx]
    value = cache.value_cache[layer_idx]
    return F.scaled_dot_product_attention(query, key, value), key, value
"""),
        # The value parameter bound to the key itself: K-as-V written on purpose.
        Example("""\
def latent_attention(query, key, value):
    # The compressed latent serves as both sides; the value argument is ignored.
    value = key
    return F.scaled_dot_product_attention(query, key, value)
"""),
        # Checkpoints with one KV scale give the key's for both sides: a scale is no tensor.
        Example("""\
def kv_scales(k_scale, v_scale=None):
    # Checkpoints with one KV scale give it for both sides.
    if v_scale is None:
        return k_scale, k_scale
    return k_scale, v_scale
"""),
        # MLA: one latent cache read as the key and the value, no value cache beside it.
        Example("""\
class MLAKVCache:
    def get_key_value(self, layer):
        # One latent cache is read as the key and as the value.
        k_cache = self.latent_cache[layer]
        return k_cache, k_cache
"""),
        # A checkpoint's scales loaded by name: `value` is the state dict's entry, not the V side.
        Example("""\
class KVCacheScales(nn.Module):
    def __init__(self):
        super().__init__()
        self.k_scale = nn.Parameter(torch.ones(()), requires_grad=False)
        self.v_scale = nn.Parameter(torch.ones(()), requires_grad=False)

    def load_kv_scales(self, state_dict, prefix):
        for name, value in state_dict.items():
            if name == prefix + "k_scale":
                self.k_scale.copy_(value)
            elif name == prefix + "v_scale":
                self.v_scale.copy_(value)
"""),
        # MLA in a [tokens, heads, dim] layout: the latent value fills the key's first dims,
        # indexed axis by axis rather than through `...`.
        Example("""\
def build_mla_key(k_input, v_input, k_pe, kv_lora_rank):
    k_input[:, :, :kv_lora_rank] = v_input
    k_input[:, :, kv_lora_rank:] = k_pe
    return k_input, v_input
"""),
        # One pool for MHA and MLA models: without a value buffer the key's latent is the value.
        Example("""\
class TokenToKVPool:
    def __init__(self, k_buffer, v_buffer, kv_lora_rank):
        self.k_buffer = k_buffer
        self.v_buffer = v_buffer  # None for MLA models
        self.kv_lora_rank = kv_lora_rank

    def get_value_buffer(self, layer_id):
        if self.v_buffer is None:
            return self.k_buffer[layer_id][..., : self.kv_lora_rank]
        else:
            return self.v_buffer[layer_id]
"""),
        # The indexer's key-only cache restored page by page: `value` is each mapping entry.
        Example("""\
class IndexerKeyCache:
    def __init__(self, k_cache):
        self.k_cache = k_cache

    def load_pages(self, pages):
        for layer_id, value in pages.items():
            self.k_cache[layer_id] = value
"""),
        # One checkpoint scale for both sides: the value's scale parameter set from the key's.
        # A scale is bookkeeping, not a value tensor.
        Example("""\
def quantize_kv(key, value, k_scale, v_scale, shared_kv_scale):
    if shared_kv_scale:
        v_scale = k_scale.view(1)
    key = (key / k_scale).to(torch.float8_e4m3fn)
    value = (value / v_scale).to(torch.float8_e4m3fn)
    return key, value
"""),
        # A prefix cache sorts its leaves by the tokens they match: the key function is called
        # by the sort, it computes no values.
        Example("""\
class RadixCache:
    def node_key(self, node):
        # The token ids the node matches.
        return tuple(node.key)

    def node_value(self, node):
        # The KV cache slots that hold those tokens.
        return node.value

    def eviction_order(self, leaves):
        # Oldest first, ties broken by the tokens each leaf matches.
        value_nodes = sorted(leaves, key=lambda n: (n.last_access_time, self.node_key(n)))
        return value_nodes
"""),
        # A graph key unpacked with the verify step's token count: one piece of a dictionary
        # key's tuple, not a value computed beside a key.
        Example("""\
class TargetVerifyGraphs:
    def __init__(self, num_draft_tokens):
        self.num_draft_tokens = num_draft_tokens
        self.graphs = {}

    def _graph_key(self, batch_size):
        # Graphs are captured per padded batch; the verify step runs every draft token.
        num_tokens_v = batch_size * self.num_draft_tokens
        return (batch_size, num_tokens_v), num_tokens_v

    def _graph_value(self, batch_size):
        return self.graphs[self._graph_key(batch_size)[0]]

    def replay(self, batch_size, input_ids):
        graph_key, num_tokens_v = self._graph_key(batch_size)
        self.static_input_ids[:num_tokens_v].copy_(input_ids)
        self.graphs[graph_key].replay()
"""),
        # Packed K/V in the key argument, unpacked along their stacked axis: the value is the
        # key tensor's second half, not a copy of the key.
        Example("""\
def encoder_attention(query, key, value, kv_packed):
    # With kv_packed the encoder's K and V arrive stacked in `key` as [b, s, 2, h, d] and
    # `value` is None.
    if kv_packed:
        key, value = key.permute(2, 0, 3, 1, 4)
    else:
        key, value = key.transpose(1, 2), value.transpose(1, 2)
    return F.scaled_dot_product_attention(query, key, value)
"""),
        # MLA behind a backend signature that passes a value it does not use: the value is cut
        # from a key built here, not from the key argument.
        Example("""\
class MLAAttentionImpl:
    def forward(self, query, kv_c_normed, k_pe, value, kv_lora_rank):
        # `value` is part of the backend's signature; the latent key serves as both sides.
        key = torch.cat([kv_c_normed, k_pe], dim=-1)
        value = key[..., :kv_lora_rank]
        return flash_attn_varlen_func(query, key, value)
"""),
        # An MTP draft's pool reads the layers it shares with the target model from the
        # target's MLA pool, which keeps keys only: the key buffer fetched there is another
        # pool's, and the value is its latent part.
        Example("""\
class DraftKVPool:
    def __init__(self, target_pool, k_buffer, v_buffer, num_draft_layers, kv_lora_rank):
        self.target_pool = target_pool
        self.k_buffer = k_buffer
        self.v_buffer = v_buffer
        self.num_draft_layers = num_draft_layers
        self.kv_lora_rank = kv_lora_rank

    def get_key_buffer(self, layer_id):
        if layer_id < self.num_draft_layers:
            return self.k_buffer[layer_id]
        return self.target_pool.get_key_buffer(layer_id)

    def get_value_buffer(self, layer_id):
        if layer_id < self.num_draft_layers:
            return self.v_buffer[layer_id]
        return self._shared_value_buffer(layer_id)

    def _shared_value_buffer(self, layer_id):
        # MLA: the value is the first kv_lora_rank dims of the latent key.
        v_latent = self.target_pool.get_key_buffer(layer_id)
        return v_latent[..., : self.kv_lora_rank]
"""),
        # The same pool reaching the target's key buffer through a local: `pool.k_buffer` is
        # the target pool's, not this class's.
        Example("""\
class DraftKVPool:
    def __init__(self, target_pool, k_buffer, v_buffer, num_draft_layers):
        self.target_pool = target_pool
        self.k_buffer = k_buffer
        self.v_buffer = v_buffer
        self.num_draft_layers = num_draft_layers

    def get_value_buffer(self, layer_id):
        if layer_id < self.num_draft_layers:
            return self.v_buffer[layer_id]
        return self._shared_value_buffer(layer_id)

    def _shared_value_buffer(self, layer_id):
        # MLA: the value is the first kv_lora_rank dims of the target's latent key.
        pool, pool_layer_id = self._side(layer_id)
        return pool.k_buffer[pool_layer_id][..., : pool.kv_lora_rank]
"""),
    )
    INVALID = (
        Example(bad, line=9),
        # The value parameter is dead: overwritten from the key before any read.
        Example("""\
def attend(query, key, value, b, s, h, d):
    key = key.view(b, s, h, d)
    value = key.view(b, s, h, d)
    return F.scaled_dot_product_attention(query, key, value)
""", line=3),
        # The value written into the key cache.
        Example("""\
def write(key_cache, value_cache, slots, key, value):
    key_cache[slots] = key
    key_cache[slots] = value
""", line=3),
        # The value cache allocated with the key's shape helper.
        Example("""\
class Pool:
    def get_k_shape(self):
        return (self.n, self.k_dim)

    def get_v_shape(self):
        return (self.n, self.v_dim)

    def allocate(self):
        self.k_cache = torch.empty(self.get_k_shape())
        self.v_cache = torch.empty(self.get_k_shape())
""", line=10),
        # The key cache returned as the value cache.
        Example("""\
class Cache:
    def __init__(self, k, v):
        self.k_cache = k
        self.v_cache = v

    def get(self):
        return self.k_cache, self.k_cache
""", line=7),
        # The value getter hands out the key buffer.
        Example("""\
class TokenPool:
    def __init__(self, k, v):
        self.k_buffer = k
        self.v_buffer = v

    def get_key_buffer(self, layer):
        return self.k_buffer[layer]

    def get_value_buffer(self, layer):
        return self.k_buffer[layer]
""", line=10),
        # Written through the key cache with copy_.
        Example("""\
class Cache:
    def __init__(self, k, v):
        self.key_cache = k
        self.value_cache = v

    def update(self, key, value):
        self.key_cache.copy_(key)
        self.key_cache.copy_(value)
""", line=8),
        # The value written into the key's cache, whose twin is a local unpacked beside it.
        Example("""\
def update_cache(kv_cache, slots, key, value):
    key_cache, value_cache = kv_cache.unbind(0)
    key_cache.index_copy_(0, slots, key)
    key_cache.index_copy_(0, slots, value)
    return key_cache, value_cache
""", line=4),
    )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = self.enter_function()
        model = function_model(node)
        self._twin_calls(model, owner)
        self._dead_value_parameter(model)
        self._crossed_writes(model, owner)
        self._returned_twice(model, owner)
        if owner is not None and kv_side(node.name.value, self.extra_pairs) == "v":
            self._value_method_on_key(node.name.value, model, owner)

    @staticmethod
    def _twin_exists(twin: str, via_self: bool, owner: ClassModel | None, model: FunctionModel) -> bool:
        # Only the class or the function itself: every fact of a finding then lies in one
        # top-level definition, which the pre-filter relies on.
        if via_self:
            return owner is not None and owner.defines(twin)
        return twin in model.params

    def _twin_calls(self, model: FunctionModel, owner: ClassModel | None) -> None:
        """``v = self.k_proj(x)`` where ``self.v_proj`` exists and this function never uses it."""
        for assignment in model.assignments:
            target = _tail(assignment.name)
            if assignment.position is not None or kv_side(target, self.extra_pairs) != "v":
                continue
            for call in _calls(assignment.value):
                callee = dotted_name(call.func)
                if callee is None or callee.count(".") > 1:
                    continue
                via_self = callee.startswith("self.")
                if "." in callee and not via_self:
                    continue  # ``torch.k_fn``, ``module.k_fn``: not this class's twin
                k_name = _tail(callee)
                if kv_side(k_name, self.extra_pairs) != "k":
                    continue
                twin = value_counterpart(k_name, self.extra_pairs)
                if twin is None or twin == target or model.mentions(twin):
                    continue
                if not self._twin_exists(twin, via_self, owner, model):
                    continue
                shown = f"self.{twin}" if via_self else twin
                self.report(
                    call,
                    f"value `{assignment.name}` is computed with `{callee}`, the key side's "
                    f"callable, though `{shown}` exists and this function never uses it",
                    suggestion=f"call `{shown}` for the value side",
                )
                break

    def _dead_value_parameter(self, model: FunctionModel) -> None:
        """``value = key.view(...)`` in a function that receives ``value`` and never read it."""
        for assignment in model.assignments:
            target = assignment.name
            if assignment.position is not None or "." in target or target not in model.params or not is_kv_tensor_name(target, self.extra_pairs):
                continue
            key = key_counterpart(target, self.extra_pairs)
            if key is None or key not in model.params or tensor_root(assignment.value) != key:
                continue
            if not isinstance(assignment.value, (cst.Call, cst.Subscript)):
                continue  # ``value = key``: an alias, what K-as-V code writes on purpose
            if model.read_before(target, assignment.order):
                continue
            self.report(
                assignment.value,
                f"value parameter `{target}` is overwritten with `{source_of(assignment.value)}`, "
                f"built from the key `{key}`, before it is ever read",
                suggestion=f"build `{target}` from `{target}`, not from `{key}`",
            )

    def _v_twin_present(self, k_tail: str, model: FunctionModel, owner: ClassModel | None) -> str | None:
        twin = value_counterpart(k_tail, self.extra_pairs)
        if twin is None:
            return None
        if model.mentions(twin) or twin in model.params or (owner is not None and owner.defines(twin)):
            return twin
        return None

    def _crossed_writes(self, model: FunctionModel, owner: ClassModel | None) -> None:
        """``k_cache[slots] = v`` or ``k_cache.copy_(v)`` where the V cache exists."""
        writes: list[tuple[cst.CSTNode, str, cst.BaseExpression]] = [
            (store.node, store.base, store.value) for store in model.stores
        ]
        for call in model.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _WRITES:
                base = dotted_name(func.value)
                positional = [a.value for a in call.args if a.keyword is None and not a.star]
                index = _WRITES[func.attr.value]
                if base is not None and index < len(positional):
                    writes.append((call, base, positional[index]))
        for node, base, value in writes:
            k_tail = _tail(base)
            if kv_side(k_tail, self.extra_pairs) != "k" or not is_kv_tensor_name(k_tail, self.extra_pairs):
                continue
            if not isinstance(value, (cst.Name, cst.Attribute)):
                continue
            v_tail = _tail(dotted_name(value) or "")
            if kv_side(v_tail, self.extra_pairs) != "v" or not is_kv_tensor_name(v_tail, self.extra_pairs):
                continue
            twin = self._v_twin_present(k_tail, model, owner)
            if twin is None or twin == v_tail or _head_dim_store(node):
                # ``k[..., :rank] = v``: MLA builds its key from the value's latent on purpose.
                continue
            self.report(
                node,
                f"value `{source_of(value)}` is written into the key side `{base}` although "
                f"the value side `{twin}` exists",
                suggestion=f"write `{source_of(value)}` into `{twin}`",
            )

    def _value_method_on_key(self, method: str, model: FunctionModel, owner: ClassModel) -> None:
        """``def get_value_buffer(self, i): return self.k_buffer[i]`` where ``self.v_buffer``
        exists and this method never mentions it."""
        sites = [(r.value, r.value) for r in model.returns if r.value is not None]
        sites += [(store.node, store.node) for store in model.stores]
        for node, expr in sites:
            root = expr
            while isinstance(root, (cst.Subscript, cst.Call)):
                func = root.func if isinstance(root, cst.Call) else None
                if func is not None and not isinstance(func, cst.Attribute):
                    break
                root = root.value if isinstance(root, cst.Subscript) else func.value
            name = dotted_name(root)
            if name is None or not name.startswith("self.") or name.count(".") != 1:
                continue
            attr = name[5:]
            if kv_side(attr, self.extra_pairs) != "k" or not is_kv_tensor_name(attr, self.extra_pairs):
                continue
            twin = value_counterpart(attr, self.extra_pairs)
            if twin is None or not owner.defines(twin) or model.mentions(twin):
                continue
            self.report(
                node,
                f"value-side method `{method}` reaches the key side `self.{attr}` although "
                f"`self.{twin}` exists and this method never uses it",
                suggestion=f"use `self.{twin}` in `{method}`",
            )
            return

    def _returned_twice(self, model: FunctionModel, owner: ClassModel | None) -> None:
        """``return k_cache, k_cache`` where ``v_cache`` exists."""
        for ret in model.returns:
            if not isinstance(ret.value, cst.Tuple) or len(ret.value.elements) != 2:
                continue
            first, second = (e.value for e in ret.value.elements)
            name = dotted_name(first)
            if name is None or dotted_name(second) != name:
                continue
            k_tail = _tail(name)
            if kv_side(k_tail, self.extra_pairs) != "k" or not is_kv_tensor_name(k_tail, self.extra_pairs):
                continue
            twin = self._v_twin_present(k_tail, model, owner)
            if twin is None:
                continue
            self.report(
                second,
                f"`{name}` is returned as both the key and the value side although `{twin}` exists",
                suggestion=f"return `{twin}` as the value side",
            )
