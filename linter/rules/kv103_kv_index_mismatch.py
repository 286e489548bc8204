"""KV103 kv-index-mismatch: paired K/V caches read or written at different indices."""

from __future__ import annotations

import re

import libcst as cst

from linter.pairs import (
    counterpart_of_dotted,
    dotted_name,
    is_kv_tensor_name,
    kv_side,
    normalized,
    source_of,
    swap_kv_text,
)
from linter.rules.base import Example, Rule
from linter.scopes import (
    DIFFER,
    SAME,
    Access,
    CallSite,
    Mismatch,
    Scope,
    ScopeTracking,
    mismatches,
)

# Name parts that make a K/V name a cache or pool (what this rule is about).
_CACHE_PARTS = frozenset({
    "cache", "caches", "pool", "pools", "buf", "buffer", "buffers", "pages", "past", "mem", "memory",
})
# Gather/scatter calls that read or write a cache at an index.
_INDEXED_CALLS = frozenset({
    "index_copy_", "index_copy", "index_put_", "index_put", "index_add_", "index_fill_",
    "index_select", "scatter_", "scatter", "scatter_add_", "masked_scatter_",
    "npu_scatter_nd_update_", "npu_scatter_nd_update", "scatter_update_", "scatter_update",
})
# Cache managers are attention code even when nothing in them is named after attention.
_CACHE_SCOPE = re.compile(r"kv|cache|pool", re.IGNORECASE)


class KVIndexMismatch(ScopeTracking, Rule):
    code = "KV103"
    name = "kv-index-mismatch"
    summary = "Paired K and V caches/pools indexed or updated with different index expressions"
    what = (
        "Finds a K cache or pool (`k_cache`, `key_cache`, `k_pool`, `k_buffer`, ...) and its "
        "paired V cache read or written in one function with index expressions that do not "
        "match: subscripts such as `k_pool[layer][block_ids]` vs `v_pool[layer][slot_ids]`, "
        "subscript stores, and paired gather/scatter calls with the same callee "
        "(`npu_scatter_nd_update_`, `index_copy_`, `index_put_`, ...). A K access is matched "
        "when any V access in the function has the same index after K names are renamed to "
        "their V partners. Stacked caches (`kv_cache[layer][0]`) and K-only pools are not pairs."
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
        "indices; the finding suggests the mirrored index for the V side."
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
        Example("def write_kv(k_buffer, v_buffer, loc, k, v):\n"
                "    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)\n"
                "    torch_npu.npu_scatter_nd_update_(v_buffer, loc, v)\n"),
        # No attention or cache-manager context.
        Example("def lookup(k_cache, v_cache, i, j):\n    return k_cache[i], v_cache[j]\n"),
    )
    INVALID = (
        Example("def attention(k_pool, v_pool, layer, block_ids, slot_ids):\n"
                "    k = k_pool[layer][block_ids]\n    v = v_pool[layer][slot_ids]\n"
                "    return k, v\n", line=2),
        Example("def attention(self, layer_id, loc):\n    k = self.k_buf[layer_id][loc]\n"
                "    v = self.v_buf[layer_id - 1][loc]\n    return k, v\n", line=2),
        Example("def write_kv(k_buffer, v_buffer, loc, slot, k, v):\n"
                "    torch_npu.npu_scatter_nd_update_(k_buffer, loc, k)\n"
                "    torch_npu.npu_scatter_nd_update_(v_buffer, slot, v)\n", line=2),
        Example("def store_kv_cache(k_cache, v_cache, slots, other, k, v):\n"
                "    k_cache[slots] = k\n    v_cache[other] = v\n", line=2),
        Example("def store_kv_cache(key_cache, value_cache, slots, other, k, v):\n"
                "    key_cache.index_copy_(0, slots, k)\n    value_cache.index_copy_(0, other, v)\n",
                line=2),
    )

    def check_scope(self, scope: Scope) -> None:
        if not (scope.is_attention_code(self.extra_callables)
                or any(_CACHE_SCOPE.search(name) for name in scope.enclosing)):
            return
        self._check(*self._indexed_accesses(scope), self._access_text)
        self._check(*self._indexed_calls(scope), self._call_text)

    def _check(self, keys: dict, values: dict, text) -> None:
        for group, k_sites in keys.items():
            base, tail = group
            partner = (counterpart_of_dotted(base, self.extra_pairs), tail)

            def compare(k, v):
                return SAME if swap_kv_text(text(k), self.extra_pairs) == text(v) else DIFFER

            for found in mismatches(k_sites, values.get(partner, []), compare, self._row):
                self._report(found, text)

    def _cache_side(self, scope: Scope, base: str | None) -> str | None:
        if base is None or base in scope.non_tensors or not is_kv_tensor_name(base, self.extra_pairs):
            return None
        tail = base.rsplit(".", 1)[-1]
        if not any(part.lower() in _CACHE_PARTS for part in tail.split("_")):
            return None
        return kv_side(tail, self.extra_pairs)

    def _indexed_accesses(self, scope: Scope) -> tuple[dict, dict]:
        keys: dict = {}
        values: dict = {}
        for access in scope.accesses:
            if access.quiet or not any(_has_index(sub) for sub in access.chain):
                continue
            side = self._cache_side(scope, access.base)
            if side is not None:
                (keys if side == "k" else values).setdefault((access.base, None), []).append(access)
        return keys, values

    def _indexed_calls(self, scope: Scope) -> tuple[dict, dict]:
        keys: dict = {}
        values: dict = {}
        for site in scope.calls:
            if site.quiet or site.tail not in _INDEXED_CALLS:
                continue
            sides = [(b, self._cache_side(scope, b)) for b in _cache_operands(site.node)]
            base, side = next(((b, s) for b, s in sides if s is not None), (None, None))
            if side is not None:
                (keys if side == "k" else values).setdefault((base, site.tail), []).append(site)
        return keys, values

    @staticmethod
    def _access_text(access: Access) -> str:
        return "".join(f"[{_normalized_elements(sub)}]" for sub in access.chain)

    @staticmethod
    def _call_text(site: CallSite) -> str:
        return normalized(site.node)

    def _row(self, site) -> int:
        return self.span(site.node).row

    def _report(self, found: Mismatch, text) -> None:
        k, v = found.key, found.value
        k_text, v_text = source_of(k.node), source_of(v.node)
        if isinstance(k, Access):
            what = f"`{k.base}` is indexed with `{text(k)}` but `{v.base}` with `{text(v)}`"
        else:
            what = f"`{k.tail}` updates the K and V caches at different indices: `{k_text}` vs `{v_text}`"
        message = f"paired K/V caches disagree on the index: {what}"
        mirrored = swap_kv_text(k_text, self.extra_pairs)
        suggestion = f"use one index for both caches (e.g. `{mirrored}`), after checking which is right"
        self.report_mismatch(found, message, suggestion)


def _normalized_elements(sub: cst.Subscript) -> str:
    return ",".join(normalized(element.slice) for element in sub.slice)


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


def _cache_operands(call: cst.Call) -> list[str]:
    """``k_cache`` in ``k_cache.index_copy_(...)`` or ``npu_scatter_nd_update_(k_cache, ...)``."""
    found = []
    if isinstance(call.func, cst.Attribute):
        receiver = dotted_name(call.func.value)
        if receiver is not None:
            found.append(receiver)
    positional = [arg.value for arg in call.args if arg.keyword is None]
    if positional and dotted_name(positional[0]) is not None:
        found.append(dotted_name(positional[0]))
    return found
