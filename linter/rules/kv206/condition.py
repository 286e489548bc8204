"""KV206 needs a key head-dim name with its value twin, inside a view or allocation call.
"""

from __future__ import annotations

from linter.model.twins import key_head_dim_twin
from linter.plan.chains import bracket_groups
from linter.plan.file import _File
from linter.plan.vocabulary import _HEAD_DIM_PARTS
from linter.plan.words import identifier_set


def _kv206(f: _File) -> bool:
    # A key head-dim name (``qk_head_dim``, ``head_k_dim``, ``d_k``) with its value twin present,
    # passed to a view or an allocation (the screen and the rule read the names in its
    # arguments).
    uses = f.among_identifiers(_HEAD_DIM_USES)
    if not uses:
        return False
    names = set().union(*(f.names_containing(part, True) for part in _HEAD_DIM_PARTS))
    keys = {n for n in names if (twin := key_head_dim_twin(n)) is not None and f.has_any((twin,))}
    return bool(keys) and _passed_to_a_use(f, keys, uses)


def _passed_to_a_use(f: _File, keys: set[str], uses: frozenset[str]) -> bool:
    """Does one of ``keys`` stand inside the brackets of a call of one of ``uses``? On raw text
    a string or comment in the brackets may hide where they close: that call counts."""
    text, raw = f.text, not f.reduced
    return any(
        close is None or not keys.isdisjoint(identifier_set(text[inside:close]))
        for _, _, inside, close in bracket_groups(text, uses, raw)
    )


_HEAD_DIM_USES = frozenset({
    "view", "reshape", "unflatten", "empty", "zeros", "ones", "full", "randn", "rand",
    "new_empty", "new_zeros", "new_ones", "new_full",
})


CONDITION = _kv206
