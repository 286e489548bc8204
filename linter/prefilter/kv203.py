"""KV203 needs a chunk/split call and a KV-head-count name.
"""

from __future__ import annotations

from linter.names import is_kv_head_count_name, kv_side
from linter.prefilter.file import _File
from linter.prefilter.words import identifier_set


# A mirror of KV203's splits (see ``vocabulary``).
_SPLIT_CALLS = frozenset({"chunk", "split", "tensor_split"})


def _kv203(f: _File) -> bool:
    # A KV head count's name has "head" or "group" in it (``sizes.is_kv_head_count_name``); the
    # split is of a fused QKV (its root says "qkv" or "query_key_value", any case), or unpacked
    # into three targets, the second K-side and the third V-side: both sides named in a chunk
    # (``_chunks_with``) that holds a split call.
    return (
        ("head" in f.text or "group" in f.text) and f.has_any(_SPLIT_CALLS)
        and any(is_kv_head_count_name(w) for w in f.names_containing("head") | f.names_containing("group"))
        and ("qkv" in f.lower_names or "query_key_value" in f.lower_names or _names_both_sides_near_a_split(f))
    )


def _names_both_sides_near_a_split(f: _File) -> bool:
    extra = f.settings.extra_pairs
    for chunk in f._chunks_with(_SPLIT_CALLS):
        sides = {kv_side(name, extra) for name in identifier_set(chunk)}
        if "k" in sides and "v" in sides:
            return True
    return False
