"""KV210's ``ast`` screen: can a unit hold a K/V view, reshape or buffer whose sizes KV210
would question? It over-approximates the rule (``linter.rules.kv210.rule``): any K/V-side
name in the receiver or the assigned target stands for a side, any name anywhere in the unit
for the evidence the rule looks for on one object.
"""

from __future__ import annotations

import ast

from linter.plan.screen_facts import Facts, walk
from linter.model.size_roles import KERNEL_TWINS, gradient_side, key_dim, query_heads, value_dim, value_dim_twins
from linter.model.names import Role, kv_side, name_role
from linter.settings import Settings

_VIEWS = frozenset({"view", "reshape", "unflatten", "new_empty", "new_zeros", "new_ones", "new_full"})
_ALLOCATORS = frozenset({"empty", "zeros", "ones", "full", "randn", "rand", "empty_strided"})


def _tail(node: ast.expr) -> str | None:
    if type(node) is ast.Attribute:
        return node.attr
    if type(node) is ast.Name:
        return node.id
    return None


def _names(node: ast.AST) -> set[str]:
    """Names and attribute names in ``node``, and the strings a ``getattr`` reads."""
    found = set()
    for n in walk(node):
        kind = type(n)
        if kind is ast.Name:
            found.add(n.id)
        elif kind is ast.Attribute:
            found.add(n.attr)
        elif kind is ast.Constant and type(n.value) is str and n.value.isidentifier():
            found.add(n.value)
    return found


def kv210(facts: Facts, settings: Settings) -> bool:
    extra = settings.extra_pairs
    # ``getattr(config, "num_key_value_heads")`` reads the name its string spells.
    read_by_getattr = {
        a.value for c in facts.calls if type(c.func) is ast.Name and c.func.id == "getattr"
        for a in (*c.args, *(k.value for k in c.keywords)) if type(a) is ast.Constant and type(a.value) is str
    }
    known = facts.names | facts.attrs | facts.params | read_by_getattr
    counts = any(name_role(n) is Role.KV_HEADS for n in known)
    kernel_dims = {k for k, v in KERNEL_TWINS.items() if k in facts.params and v in facts.params}
    value_dims = bool(kernel_dims) or any(value_dim(n) for n in known)
    if not counts and not value_dims:
        return False

    def questioned(shape: set[str]) -> bool:
        if counts and any(query_heads(n) for n in shape):
            return True
        # A key or shared head dim, or a ``.shape``/``.size`` read of the key.
        return value_dims and any(key_dim(n) or value_dim_twins(n) or n in ("shape", "size") or n in kernel_dims for n in shape)

    def sided(node: ast.AST) -> bool:
        return any(kv_side(n, extra) or gradient_side(n) for n in _names(node))

    for call in facts.calls:
        func = call.func
        tail = _tail(func)
        if tail in _VIEWS and type(func) is ast.Attribute:
            receiver = func.value
            if not (sided(receiver) or (value_dims and type(receiver) is ast.Subscript)):
                continue
        elif tail in ("rearrange", "make_block_ptr") and call.args:
            if not sided(call.args[0]):
                continue
        else:
            continue
        if questioned(set().union(*(_names(a) for a in (*call.args, *call.keywords))) if call.args or call.keywords else set()):
            return True
    for targets, value in facts.assignments:
        if not any(kv_side(n, extra) or gradient_side(n) for t in targets if (n := _tail(t)) is not None):
            continue
        for node in walk(value):
            if type(node) is ast.Call and (_tail(node.func) in _ALLOCATORS or (_tail(node.func) or "").startswith("new_")):
                if questioned(set().union(*(_names(a) for a in (*node.args, *node.keywords))) if node.args or node.keywords else set()):
                    return True
    return False


SCREEN = kv210
