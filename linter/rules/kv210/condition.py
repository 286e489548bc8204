"""KV210 needs, in one class (or function), a call of a view, reshape, ``rearrange``,
allocation or block pointer whose statement names a K/V side (``k = k.view(...)``,
``self.v_cache = torch.zeros(...)``, ``rearrange(self.k_proj(x), ...)``) and whose arguments
name a query head count while a KV head count is named in the unit, or a key or shared head
dim (a ``.shape``/``.size`` read, a Triton kernel's ``K``/``BK``) while a value head dim is. A
``getattr`` stands in for any of these names (in code-only text its string is gone), and a
statement whose start cannot be found stands for any side.
"""

from __future__ import annotations

from linter.model.size_roles import KERNEL_TWINS, gradient_side, key_dim, query_heads, value_dim, value_dim_twins
from linter.model.names import Role, kv_side, name_role
from linter.plan.chains import bracket_groups
from linter.plan.file import _File
from linter.plan.words import identifier_set

# Identifiers (whole words) of the calls the rule reads.
_SHAPE_WORDS = (
    "view", "reshape", "unflatten", "rearrange", "empty", "zeros", "ones", "full", "rand", "randn",
    "empty_strided", "new_empty", "new_zeros", "new_ones", "new_full", "make_block_ptr",
)


def _kv210(f: _File) -> bool:
    if not f.has_any(_SHAPE_WORDS):
        return False
    ids = f.identifiers  # one set for the many single-word questions below
    wild = "getattr" in ids
    kernel = any(key in ids and value in ids for key, value in KERNEL_TWINS.items())
    counts = f.names_containing("head", ignore_case=True) | f.names_containing("group", ignore_case=True)
    kv_counts = wild or any(name_role(n) is Role.KV_HEADS for n in counts)
    dims = (f.names_containing("dim", ignore_case=True) | f.names_containing("size", ignore_case=True)
            | f.names_containing("channels", ignore_case=True) | f.names_containing("d_v", ignore_case=True)
            | f.names_containing("dv", ignore_case=True))
    value_dims = wild or kernel or any(value_dim(n) for n in dims)
    if not kv_counts and not value_dims:
        return False
    extra = f.settings.extra_pairs
    text, raw = f.text, not f.reduced
    for at, _, inside, close in bracket_groups(text, frozenset(_SHAPE_WORDS), raw):
        if close is None:
            return True
        start = f.statement_start(at) if f.reduced else None
        if start is None:
            return True
        prefix = identifier_set(text[start:at])
        sizes = identifier_set(text[inside:close])
        if not (wild or "[" in text[start:at] or any(kv_side(n, extra) or gradient_side(n) for n in prefix | sizes)):
            continue
        if kv_counts and (wild or any(query_heads(n) for n in sizes)):
            return True
        if value_dims and (wild or any(
                key_dim(n) or value_dim_twins(n) or n in ("shape", "size") or n in KERNEL_TWINS for n in sizes)):
            return True
    return False


CONDITION = _kv210
