"""KV206 needs a key head-dim name with its value twin, and a view or allocation call.
"""

from __future__ import annotations

from linter.model.twins import key_head_dim_twin
from linter.prefilter.file import _File
from linter.prefilter.vocabulary import _HEAD_DIM_PARTS


def _kv206(f: _File) -> bool:
    # A key head-dim name (``qk_head_dim``, ``head_k_dim``, ``d_k``) with its value twin present,
    # and a view or an allocation to use it in.
    if not f.has_any(_HEAD_DIM_USES):
        return False
    names = set().union(*(f.names_containing(part, True) for part in _HEAD_DIM_PARTS))
    return any((twin := key_head_dim_twin(n)) is not None and f.has_any((twin,)) for n in names)


_HEAD_DIM_USES = (
    "view", "reshape", "unflatten", "empty", "zeros", "ones", "full", "randn", "rand",
    "new_empty", "new_zeros", "new_ones", "new_full",
)
