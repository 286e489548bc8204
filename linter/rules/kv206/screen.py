"""KV206's ``ast`` screen: can this unit's tree hold a finding of KV206? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.twins import key_head_dim_twin
from linter.model.names import (
    kv_side,
)
from linter.settings import Settings
from linter.plan.screen_facts import _is_kv_tensor, _kv_projections, _names_in, _tail, Facts, walk


_KV206_VIEWS = frozenset({"view", "reshape", "unflatten"})
_ALLOCATORS = frozenset({
    "empty", "zeros", "ones", "full", "randn", "rand", "new_empty", "new_zeros", "new_ones", "new_full",
})


def _kv206(facts: Facts, settings: Settings) -> bool:
    """A key head dim whose value twin is named too, in a view of a V-side ``*Linear``
    projection's output or in an allocation assigned to a V-side tensor."""
    extra = settings.extra_pairs
    known = facts.names | facts.attrs | facts.params | {fn.name for fn in facts.functions}

    def names_key_dim(call: ast.Call) -> bool:
        return any(
            (twin := key_head_dim_twin(n)) is not None and twin in known
            for a in (*call.args, *call.keywords) for n in _names_in(a)
        )

    if any(kv_side(attr, extra) == "v" for attr in _kv_projections(facts, extra)) and any(
        isinstance(call.func, ast.Attribute) and call.func.attr in _KV206_VIEWS and names_key_dim(call)
        for call in facts.calls
    ):
        return True
    for targets, value in facts.assignments:
        if any(_is_kv_tensor(t, "v", extra) for t in targets) and any(
            isinstance(call, ast.Call) and ((tail := _tail(call.func)) in _ALLOCATORS or (tail or "").startswith("new_"))
            and names_key_dim(call)
            for call in walk(value)
        ):
            return True
    return False

SCREEN = _kv206
