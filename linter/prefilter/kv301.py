"""KV301 needs a class and a ``self.`` attribute pair.
"""

from __future__ import annotations

from linter.names import is_kv_tensor_name, value_counterpart
from linter.prefilter.file import _File
from linter.prefilter.words import _GAP


def _kv301(f: _File) -> bool:
    # A class attribute pair ``self.k_cache`` / ``self.v_cache``.
    if "class" not in f.text or "self" not in f.text or not f.has_class():
        return False
    extra = f.settings.extra_pairs
    return any(
        is_kv_tensor_name(k, extra) and f.followed_by("self", rf"\.{_GAP}{k}\b")
        and f.followed_by("self", rf"\.{_GAP}{value_counterpart(k, extra) or k}\b")
        for k in f.k_names
    )
