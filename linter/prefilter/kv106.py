"""KV106 needs a K-side scale name (``k_scale``, ``key_descale``, any case) with its V twin.
"""

from __future__ import annotations

from linter.names import is_scale_name
from linter.prefilter.file import _File


def _kv106(f: _File) -> bool:
    # A K-side scale name (``k_scale``, ``_k_scale``, ``key_descale``) with its V twin present.
    return "scale" in f.lower and any(is_scale_name(k) for k in f.k_names)
