"""KV103 needs attention or cache-manager context and a K *cache* name that is subscripted or an
indexed gather/scatter call.
"""

from __future__ import annotations

from linter.model.names import CACHE_PARTS, INDEXED_CALLS, is_kv_tensor_name, kv_side, value_counterpart
from linter.plan.file import _File


# Every cache part contains one of these:
_CACHE_PARTS_SHORT = ("cache", "pool", "buf", "pages", "past", "mem")
# KV103 speaks in attention code or in a scope named for a cache (any case).
_CACHE_SCOPE_WORDS = ("kv", "cache", "pool")


def _kv103(f: _File) -> bool:
    if not (f.attention_context() or any(word in f.lower_names for word in _CACHE_SCOPE_WORDS)):
        return False
    extra = f.settings.extra_pairs
    names = set().union(*(f.names_containing(part, ignore_case=True) for part in _CACHE_PARTS_SHORT))
    cache_names = [
        k for k in names
        if kv_side(k, extra) == "k" and is_kv_tensor_name(k, extra)
        and any(part.lower() in CACHE_PARTS for part in k.split("_"))
        and f.has_any([value_counterpart(k, extra) or k])
    ]
    if not cache_names:
        return False
    return f.has_any(INDEXED_CALLS) or any(f.subscripted(k) for k in cache_names)


CONDITION = _kv103
