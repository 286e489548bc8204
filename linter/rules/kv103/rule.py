"""KV103 kv-index-mismatch: paired K/V caches read or written at different indices."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from linter.model.names import (
    CACHE_PARTS,
    INDEXED_CALLS,
    INDEXED_DATA_POSITION,
    INDEXED_FREE_FUNCTIONS,
    INDEXED_IGNORED_KEYWORDS,
    counterpart_of_dotted,
    is_kv_tensor_name,
    kv_side,
    swap_kv_text,
)
from linter.model.pairs import dotted_name, normalized, source_of
from linter.rules.base import Example, Rule
from linter.model.scopes import (
    DIFFER,
    SAME,
    Access,
    Branch,
    Mismatch,
    Scope,
    ScopeTracking,
    loops_around,
    mismatches,
)
from linter.plan.triggers import PAIRED, AnyCase, Trigger

# Cache managers are attention code even when nothing in them is named after attention.
_CACHE_SCOPE = re.compile(r"kv|cache|pool", re.IGNORECASE)


@dataclass(frozen=True)
class _Update:
    """A gather/scatter call on a K or V cache, reduced to what must match its partner."""

    node: cst.Call
    tail: str
    order: int
    operand: cst.BaseExpression  # the cache as written: ``k_cache``, ``self.k_buffer[layer_id]``
    chain: tuple[cst.BaseSlice, ...]  # the operand's own subscripts (``[layer_id]``)
    arguments: tuple[cst.CSTNode, ...]  # the index arguments: all but the operand and the data
    branch: Branch = ()


class KVIndexMismatch(ScopeTracking, Rule):
    code = "KV103"
    name = "kv-index-mismatch"
    summary = "Paired K and V caches/pools indexed or updated with different index expressions"
    # A cache-like name (any case), read or written by subscript or an indexed call, and its twin.
    trigger = Trigger(AnyCase("cache", "pool", "buf", "pages", "past", "mem"), ("[", "index_", "scatter"), PAIRED)
    what = (
        "Finds a K cache or pool (`k_cache`, `key_cache`, `k_pool`, `k_buffer`, ...) and its "
        "paired V cache read or written in one function with index expressions that do not "
        "match: subscripts such as `k_pool[layer][block_ids]` vs `v_pool[layer][slot_ids]`, "
        "subscript stores, and paired gather/scatter calls with the same callee "
        "(`npu_scatter_nd_update_(self.k_buffer[layer_id], loc, k)`, `index_copy_`, `index_put_`, "
        "...), where the cache's own subscripts and the index arguments are compared, not the data "
        "written. A K access is matched when any V access in the function has the same index after "
        "K names are renamed to their V partners; a K subscript one trailing whole axis (`:`) "
        "longer than V's, with the same selecting indices in order, reads the paged layout that "
        "splits K's head dim by `x` (`[blocks, heads, head_dim // x, block_size, x]`) and "
        "matches. Stacked caches (`kv_cache[layer][0]`) and K-only "
        "pools are not pairs."
    )
    why = (
        "K and V caches are two halves of one store: slot i of the key cache must hold the key "
        "of the token whose value sits in slot i of the value cache. Writing or reading them at "
        "different slots, blocks or layers makes attention combine one token's key with "
        "another token's value, silently, or overruns a block table at run time."
    )
    bad = """\
def write_kv(k_buffer, v_buffer, loc, slot, k, v):
    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)
    torch_npu.npu_scatter_nd_update_(v_buffer, slot, v)
"""
    good = """\
def write_kv(k_buffer, v_buffer, loc, k, v):
    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)
    torch_npu.npu_scatter_nd_update_(v_buffer, loc, v)
"""
    fix_text = (
        "Index both caches with the same expression. kvlint does not choose between the two "
        "indices: the finding names both as they are written (\"index both with `loc`, or both "
        "with `k_loc`\") and leaves the choice to you."
    )

    VALID = (
        Example("def attention(k_pool, v_pool, layer, block_ids):\n"
                "    return k_pool[layer][block_ids], v_pool[layer][block_ids]\n"),
        # K->V renaming: k_idx on K matches v_idx on V.
        Example("def write_kv_cache(k_cache, v_cache, k_idx, v_idx, k, v):\n"
                "    k_cache[k_idx] = k\n    v_cache[v_idx] = v\n"),
        # Stacked cache: one tensor, K and V at [0] and [1].
        Example("def attention(kv_cache, layer):\n"
                "    return kv_cache[layer][0], kv_cache[layer][1]\n"),
        # K-only pool by design (no V pool in this scope).
        Example("def attention_indexer(k_pool, ids):\n    return k_pool[ids]\n"),
        # K and V that are no cache, in two layouts: keys transposed ([heads, head_dim, tokens])
        # for the score product, values [heads, tokens, head_dim]; one token selection on each.
        Example("def sparse_decode(q, k, v, topk):\n    k = k[:, :, topk]\n    v = v[:, topk]\n"
                "    weights = torch.softmax(torch.einsum(\"hd,hdt->ht\", q, k), dim=-1)\n"
                "    return torch.einsum(\"ht,htd->hd\", weights, v)\n"),
        Example("def write_kv(k_buffer, v_buffer, loc, k, v):\n"
                "    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)\n"
                "    torch_npu.npu_scatter_nd_update_(v_buffer, loc, v)\n"),
        # No attention or cache-manager context.
        Example("def lookup(k_cache, v_cache, i, j):\n    return k_cache[i], v_cache[j]\n"),
        # Layer 0 read only for what every layer shares (device, dtype, sizes): no cache access.
        Example("class PagedKVPool:\n"
                "    def write_rows(self, layer, rows, k, v):\n"
                "        if rows.device != self.k_pool[0].device:\n"
                "            rows = rows.to(self.k_pool[0].device)\n"
                "        width = self.k_pool[0].shape[-1] * self.k_pool[0].element_size()\n"
                "        assert k.dtype == self.k_pool[0].dtype\n"
                "        self.k_pool[layer][rows] = k\n        self.v_pool[layer][rows] = v\n"
                "        return width\n"),
        Example("def unpack_staged_kv(staged, k_buffers, v_buffers, slots, layer):\n"
                "    dim = k_buffers[0].size(-1)\n    k_buffers[layer][slots] = staged[0].view(-1, dim)\n"
                "    v_buffers[layer][slots] = staged[1].view(-1, dim)\n"),
        # K and V handled in different arms of one ``if`` (one call loads K, another V): each
        # arm has its own tiling, and no run executes both.
        Example("class PagedKVLoader:\n"
                "    def load_attn_tile(self, cached_k_pages, cached_v_pages, is_v, owner, step, raw):\n"
                "        if not is_v:\n"
                "            for j in range(4):\n"
                "                raw[j] = cached_k_pages[owner * 4 + j]\n"
                "        else:\n"
                "            for j in range(4):\n"
                "                raw[j] = cached_v_pages[step * 8 + owner * 4 + j]\n"),
        # ``out=`` names the K and V slots of one stacked destination, not an index.
        Example("def stack_kv_pages(k_cache, v_cache, pages):\n"
                "    kv = k_cache.new_empty((pages.numel(), 2, *k_cache.shape[1:]))\n"
                "    torch.index_select(k_cache, 0, pages, out=kv[:, 0])\n"
                "    torch.index_select(v_cache, 0, pages, out=kv[:, 1])\n    return kv\n"),
        # A local helper that happens to share a tensor method's name has its own arguments:
        # the third one is a width, not an index.
        Example("class LatentKVPool:\n"
                "    def store(self, layer, loc, cache_k, cache_v):\n"
                "        def scatter(dst, src, width):\n"
                "            torch_npu.npu_scatter_nd_update_(dst.view(-1, width), loc.view(-1, 1), src.view(-1, width))\n"
                "        scatter(self.k_buf[layer], cache_k, self.latent_dim)\n"
                "        scatter(self.v_buf[layer], cache_v, self.rope_dim)\n"),
        # The same helper at module level: not bound in the method, still not torch's `scatter`.
        Example("def scatter(cache, values, width, loc):\n"
                "    torch_npu.npu_scatter_nd_update_(cache.view(-1, width), loc.view(-1, 1), values.view(-1, width))\n"
                "\n\n"
                "class LatentKVPool:\n"
                "    def store(self, layer, loc, cache_k, cache_v):\n"
                "        scatter(self.k_buf[layer], cache_k, self.latent_dim, loc)\n"
                "        scatter(self.v_buf[layer], cache_v, self.rope_dim, loc)\n"),
        # A local helper named after the op, with its own arguments: the second is each side's
        # row width, not an index.
        Example("class LatentKVPool:\n"
                "    def store(self, layer, loc, cache_k, cache_v):\n"
                "        def scatter_update_(cache, width, rows):\n"
                "            torch_npu.npu_scatter_nd_update_(cache.view(-1, width), loc.view(-1, 1), rows.view(-1, width))\n"
                "        scatter_update_(self.k_buf[layer], self.kv_lora_rank, cache_k)\n"
                "        scatter_update_(self.v_buf[layer], self.qk_rope_head_dim, cache_v)\n"),
        # Shapes of two cache layouts (the key's head size split by x): sizes, not slots.
        Example("def paged_cache_dims(key_cache_shape, value_cache_shape):\n"
                "    # key [blocks, kv_heads, head_size // x, block_size, x], value [blocks, kv_heads, head_size, block_size]\n"
                "    num_blocks = key_cache_shape[0]\n    block_size = key_cache_shape[3]\n"
                "    head_size = value_cache_shape[2]\n    return num_blocks, block_size, head_size\n"),
        # The same token selection on both caches, the keys read through a permute (tokens last
        # for the score product): the subscripts index different axes.
        Example("def sparse_decode(q, k_cache, v_cache, topk):\n"
                "    k = k_cache.permute(1, 2, 0)[:, :, topk]\n    v = v_cache[topk]\n"
                "    weights = torch.softmax(torch.einsum(\"hd,hdt->ht\", q, k), dim=-1)\n"
                "    return torch.einsum(\"ht,thd->hd\", weights, v)\n"),
        # The paged layout that stores K's head dim split by x ([blocks, heads, dim // x, block, x])
        # beside V's [blocks, heads, dim, block]: one slot, K's subscript one whole axis longer.
        Example("def check_kv_cache_write(key_cache, value_cache, block_table, positions, block_size):\n"
                "    blocks = block_table[:, positions // block_size]\n    slots = positions % block_size\n"
                "    stored_k = key_cache[blocks, :, :, slots, :].flatten(-2)\n"
                "    stored_v = value_cache[blocks, :, :, slots]\n    return stored_k, stored_v\n"),
        # A gather inside a log call is displayed, never attended over.
        Example("class PagedKVPool:\n"
                "    def gather_kv(self, layer, idx):\n"
                "        k = self.k_cache[layer].index_select(0, idx)\n"
                "        v = self.v_cache[layer].index_select(0, idx)\n"
                "        logger.debug(\"first gathered key row: %s\", self.k_cache[layer].index_select(0, idx[:1]))\n"
                "        return k, v\n"),
        # K read one sequence at a time in a loop, V for the whole batch at once: the
        # indices count different things.
        Example("""\
def check_kv_cache_copy(k_cache, v_cache, block_tables, seq_lens, block_size):
    k_rows = []
    for i in range(len(seq_lens)):
        pos = seq_lens[i] - 1
        block = block_tables[i, pos // block_size]
        k_rows.append(k_cache[block, :, pos % block_size, :])
    last = seq_lens - 1
    blocks = block_tables[torch.arange(len(seq_lens)), last // block_size]
    v_rows = v_cache[blocks, :, last % block_size, :]
    return torch.stack(k_rows), v_rows
"""),
    )
    INVALID = (
        # Beam search reorders each layer's cache, counted by enumerate: the value takes another index.
        Example("""\
def reorder_cache(past_key_values, beam_idx, prev_idx):
    reordered = []
    for layer, (past_k_cache, past_v_cache) in enumerate(past_key_values):
        reordered.append((past_k_cache.index_select(0, beam_idx), past_v_cache.index_select(0, prev_idx)))
    return reordered
""", line=4),
        # Caches unpacked from a layer -> (K, V) dict's items are tensors, not the dict's keys: a
        # block copy that reads V's destination where K reads its source is caught.
        Example("""\
def copy_kv_cache_blocks(kv_caches, src_blocks, dst_blocks):
    for layer_name, (k_cache, v_cache) in kv_caches.items():
        k_cache[dst_blocks] = k_cache[src_blocks]
        v_cache[dst_blocks] = v_cache[dst_blocks]
""", line=3),
        Example("def attention(k_pool, v_pool, layer, block_ids, slot_ids):\n"
                "    k = k_pool[layer][block_ids]\n    v = v_pool[layer][slot_ids]\n"
                "    return k, v\n", line=2),
        Example("def attention(self, layer_id, loc):\n    k = self.k_buf[layer_id][loc]\n"
                "    v = self.v_buf[layer_id - 1][loc]\n    return k, v\n", line=2),
        Example("def write_kv(k_buffer, v_buffer, loc, slot, k, v):\n"
                "    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)\n"
                "    torch_npu.npu_scatter_nd_update_(v_buffer, slot, v)\n", line=2),
        # The x-split K layout does not hide a slot that differs.
        Example("def check_kv_cache_write(key_cache, value_cache, block_table, positions, block_size):\n"
                "    blocks = block_table[:, positions // block_size]\n    slots = positions % block_size\n"
                "    stored_k = key_cache[blocks, :, :, slots, :].flatten(-2)\n"
                "    stored_v = value_cache[blocks, :, :, slots - 1]\n    return stored_k, stored_v\n",
                line=4),
        Example("def store_kv_cache(k_cache, v_cache, slots, other, k, v):\n"
                "    k_cache[slots] = k\n    v_cache[other] = v\n", line=2),
        # One axis longer on K but its last index selects: a leading axis written, not an x split.
        Example("def write_kv_slot(k_cache, v_cache, key, value, block, offset):\n"
                "    k_cache[:, block, offset] = key\n    v_cache[block, offset] = value\n", line=2),
        # As many axes on both, the slot on the head axis of V: the same selecting indices in
        # order are no x split.
        Example("def write_kv_slot(k_cache, v_cache, key, value, block, offset):\n"
                "    k_cache[block, offset, :] = key\n    v_cache[block, :, offset] = value\n", line=2),
        Example("def store_kv_cache(key_cache, value_cache, slots, other, k, v):\n"
                "    key_cache.index_copy_(0, slots, k)\n    value_cache.index_copy_(0, other, v)\n",
                line=2),
    )

    def check_scope(self, scope: Scope) -> None:
        if not (scope.is_attention_code(self.extra_callables)
                or any(_CACHE_SCOPE.search(name) for name in scope.enclosing)):
            return
        call_keys, call_values = self._indexed_calls(scope)
        # A cache subscripted as an update call's operand is compared as part of that call.
        operands = {id(site.operand) for site in self._sites(call_keys, call_values)}
        self._check(*self._indexed_accesses(scope, operands), self._access_parts)
        self._check(call_keys, call_values, self._call_parts)

    @staticmethod
    def _sites(*groups: dict):
        return (site for group in groups for sites in group.values() for site in sites)

    def _check(self, keys: dict, values: dict, parts) -> None:
        for group, k_sites in keys.items():
            base, tail = group
            partner = (counterpart_of_dotted(base, self.extra_pairs), tail)

            def compare(k, v):
                # One side read in a loop the other is not in (K per sequence, V for the whole
                # batch at once): the indices count different things.
                if loops_around(k) != loops_around(v):
                    return None
                k_parts, v_parts = parts(k), parts(v)
                if self._swapped(k_parts) == _texts(v_parts):
                    return SAME
                if parts == self._access_parts and self._x_split_alike(k_parts, v_parts):
                    return SAME
                return DIFFER

            for found in mismatches(k_sites, values.get(partner, []), compare, self._row):
                self._report(found, parts)

    def _x_split_alike(self, k_parts: tuple[cst.CSTNode, ...], v_parts: tuple[cst.CSTNode, ...]) -> bool:
        """K read through the paged layout that splits its head dim by ``x``, V through its own.

        K ``[blocks, heads, head_dim // x, block_size, x]`` has one axis more than V (``[blocks,
        heads, head_dim, block_size]`` or ``[blocks, heads, block_size, head_dim]``): the same slot
        is K's subscript with a trailing whole ``x`` axis, and the indices that select agree in
        order once the whole-axis cuts are set aside.
        """
        if len(k_parts) != len(v_parts) + 1 or not _whole_axis(k_parts[-1]):
            return False
        k_cuts = [text for part, text in zip(k_parts, self._swapped(k_parts)) if not _whole_axis(part)]
        v_cuts = [text for part, text in zip(v_parts, _texts(v_parts)) if not _whole_axis(part)]
        return k_cuts == v_cuts

    def _swapped(self, parts: tuple[cst.CSTNode, ...]) -> tuple[str, ...]:
        return tuple(swap_kv_text(text, self.extra_pairs) for text in _texts(parts))

    def _cache_side(self, scope: Scope, base: str | None) -> str | None:
        if base is None or not is_kv_tensor_name(base, self.extra_pairs):
            return None
        tail = base.rsplit(".", 1)[-1]
        if not any(part.lower() in CACHE_PARTS for part in tail.split("_")):
            return None
        return kv_side(tail, self.extra_pairs)

    def _indexed_accesses(self, scope: Scope, operands: set[int]) -> tuple[dict, dict]:
        keys: dict = {}
        values: dict = {}
        for access in scope.accesses:
            if access.quiet or access.through or id(access.node) in operands or not any(_has_index(sub) for sub in access.chain):
                continue
            side = self._cache_side(scope, access.base)
            if side is not None:
                (keys if side == "k" else values).setdefault((access.base, None), []).append(access)
        return keys, values

    def _indexed_calls(self, scope: Scope) -> tuple[dict, dict]:
        keys: dict = {}
        values: dict = {}
        for site in scope.calls:
            if site.quiet or site.tail not in INDEXED_CALLS:
                continue
            if isinstance(site.node.func, cst.Name) and (
                site.tail not in INDEXED_FREE_FUNCTIONS or site.tail in scope.bindings
            ):
                continue
            for operand, arg in _cache_operands(site.node):
                base, chain = _subscript_chain(operand)
                side = self._cache_side(scope, base)
                if side is not None:
                    update = _Update(site.node, site.tail, site.order, operand, chain,
                                     _index_arguments(site.node, site.tail, arg), site.branch)
                    (keys if side == "k" else values).setdefault((base, site.tail), []).append(update)
                    break
        return keys, values

    @staticmethod
    def _access_parts(access: Access) -> tuple[cst.CSTNode, ...]:
        return tuple(element.slice for sub in access.chain for element in sub.slice)

    @staticmethod
    def _call_parts(update: _Update) -> tuple[cst.CSTNode, ...]:
        return update.chain + update.arguments

    def _row(self, site) -> int:
        return self.span(site.node).row

    def _report(self, found: Mismatch, parts) -> None:
        k, v = found.key, found.value
        if isinstance(k, Access):
            k_index, v_index = _chain_text(k.chain), _chain_text(v.chain)
            what = f"`{k.base}` is indexed with `{k_index}` but `{v.base}` with `{v_index}`"
        else:
            k_index, v_index = (", ".join(_display(part) for part in parts(site)) for site in (k, v))
            what = (f"`{k.tail}` is called on the K and V caches with different indices: "
                    f"`{source_of(k.node)}` vs `{source_of(v.node)}`")
        message = f"paired K/V caches disagree on the index: {what}"
        self.report_mismatch(found, message, self._suggestion(parts(k), parts(v), k_index, v_index))

    def _suggestion(self, k_parts: tuple[cst.CSTNode, ...], v_parts: tuple[cst.CSTNode, ...],
                    k_index: str, v_index: str) -> str:
        """Name the indices that disagree as written; a mirrored name (``v_loc``) may not exist."""
        differing = [
            (k_part, v_part)
            for k_part, v_part, k_text, v_text in zip(k_parts, v_parts, self._swapped(k_parts), _texts(v_parts))
            if k_text != v_text
        ]
        if len(k_parts) == len(v_parts) and len(differing) == 1:
            (k_part, v_part), = differing
            return (f"index both with `{_display(v_part)}`, or both with `{_display(k_part)}`, "
                    "after checking which is right")
        return (f"index both the same way, with the V side's `{v_index}` or the K side's `{k_index}`, "
                "after checking which is right")


def _texts(parts: tuple[cst.CSTNode, ...]) -> tuple[str, ...]:
    return tuple(normalized(part) for part in parts)


def _whole_axis(part: cst.CSTNode) -> bool:
    """A bare ``:``: the whole axis, which says nothing about the slot read."""
    return isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None


def _display(node: cst.CSTNode) -> str:
    return " ".join(source_of(node).split())


def _chain_text(chain: tuple[cst.Subscript, ...]) -> str:
    return "".join(f"[{', '.join(_display(element.slice) for element in sub.slice)}]" for sub in chain)


def _has_index(sub: cst.Subscript) -> bool:
    """An element that selects or gathers (not a slice, ``None`` or ``...``)."""
    for element in sub.slice:
        if isinstance(element.slice, cst.Index):
            value = element.slice.value
            if not isinstance(value, cst.Ellipsis) and not (
                isinstance(value, cst.Name) and value.value == "None"
            ):
                return True
    return False


def _subscript_chain(expr: cst.BaseExpression) -> tuple[str | None, tuple[cst.BaseSlice, ...]]:
    """``self.k_buffer[layer_id]`` -> (``self.k_buffer``, the index slices, outermost last)."""
    subscripts = []
    while isinstance(expr, cst.Subscript):
        subscripts.append(expr)
        expr = expr.value
    chain = tuple(element.slice for sub in reversed(subscripts) for element in sub.slice)
    return dotted_name(expr), chain


def _cache_operands(call: cst.Call) -> list[tuple[cst.BaseExpression, cst.Arg | None]]:
    """Candidate caches, each with the argument that passes it (None for the receiver).

    ``k_cache`` in ``k_cache.index_copy_(...)``; ``self.k_buffer[layer_id]`` in
    ``npu_scatter_nd_update_(self.k_buffer[layer_id], ...)``.
    """
    found: list[tuple[cst.BaseExpression, cst.Arg | None]] = []
    if isinstance(call.func, cst.Attribute):
        found.append((call.func.value, None))
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if positional:
        found.append((positional[0].value, positional[0]))
    return found


def _index_arguments(call: cst.Call, tail: str, operand: cst.Arg | None) -> tuple[cst.CSTNode, ...]:
    """The call's arguments other than the cache operand and the data written or read."""
    data_position = INDEXED_DATA_POSITION.get(tail)
    kept: list[cst.CSTNode] = []
    position = 0
    for arg in call.args:
        if arg is operand:
            continue
        if arg.keyword is not None:
            if arg.keyword.value not in INDEXED_IGNORED_KEYWORDS:
                kept.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
            continue
        if position != data_position:
            kept.append(arg.value)
        position += 1
    return tuple(kept)
