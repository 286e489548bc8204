"""KV210 needs, in one class (or function), a view, reshape, allocation or block-pointer word
and either a query head count beside a KV head count, a value head dim (``size_roles``), or a
Triton kernel's key and value dims; a ``getattr`` stands in for any of these names: in
code-only text its string is gone.
"""

from __future__ import annotations

from linter.model.size_roles import KERNEL_TWINS, query_heads, value_dim
from linter.names import Role, name_role
from linter.prefilter.file import _File

# Identifiers (whole words) of the calls the rule reads.
_SHAPE_WORDS = (
    "view", "reshape", "unflatten", "rearrange", "empty", "zeros", "ones", "full", "rand", "randn",
    "empty_strided", "new_empty", "new_zeros", "new_ones", "new_full", "make_block_ptr",
)


def _kv210(f: _File) -> bool:
    if not f.has_any(_SHAPE_WORDS):
        return False
    if any(f.has_any((key,)) and f.has_any((value,)) for key, value in KERNEL_TWINS.items()):
        return True  # a Triton kernel's key and value dims (``K``/``V``, ``BK``/``BV``)
    getattr_read = f.has_any(("getattr",))
    counts = f.names_containing("head", ignore_case=True) | f.names_containing("group", ignore_case=True)
    if (getattr_read or any(query_heads(n) for n in counts)) and (
            getattr_read or any(name_role(n) is Role.KV_HEADS for n in counts)):
        return True
    dims = (f.names_containing("dim", ignore_case=True) | f.names_containing("size", ignore_case=True)
            | f.names_containing("channels", ignore_case=True) | f.names_containing("d_v", ignore_case=True)
            | f.names_containing("dv", ignore_case=True))
    return getattr_read or any(value_dim(n) for n in dims)
