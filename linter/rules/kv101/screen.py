"""KV101's ``ast`` screen: can this unit's tree hold a finding of KV101? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Callable, Collection
from linter.model.ast_sizes import int_value
from linter.model.names import (
    ATTENTION_CALLABLES,
    AXISLESS_RESHAPES,
    LATENT_ATTENTION,
    RESHAPE_CALLS,
    RESHAPE_DIM_ARGS,
    SHAPE_KEEPING,
    STORAGE,
    counterpart_of_dotted,
    is_kv_tensor_name,
    kv_side,
    value_counterpart,
)
from linter.settings import Settings
from linter.plan.screen_facts import _call_base, _DEFINITIONS, _dotted, _names_in, _seen_through, _tail, _tensor_root, Facts, walk


def _kv101(facts: Facts, settings: Settings) -> bool:
    """A K tensor cut along some axis whose V partner, in the same function, is read whole
    and never rebound to a resized tensor (what ``_value_source`` needs to name it)."""
    extra = settings.extra_pairs
    if not _kv101_anywhere(facts, extra):
        return False
    callables = settings.extra_attention_callables
    by_any_call = []
    for nodes in facts.scopes():
        paired = _kv101_scope(nodes, extra, callables)
        if paired is _KERNEL:
            return True
        if paired is _ANY_CALL:
            by_any_call.append(nodes)
    if not by_any_call:
        return False
    latent = _kv101_latent(facts.tree)
    return any(not any(id(node) in latent for node in nodes) for nodes in by_any_call)


# What pairs a cut K with its whole V in a scope (``_kv101_scope``): an attention kernel or
# hand-written attention, which the rule reads anywhere, or only a call of unknown signature,
# which it reads outside a latent pool's functions.
_KERNEL = "kernel"
_ANY_CALL = "any call"




def _kv101_latent(tree: ast.AST) -> set[int]:
    """The body statements of each function ``check_scope`` reads as a latent (MLA) cache
    pool's, where only attention kernels (and hand-written attention) pair a K with its V:
    among the enclosing classes and functions (the function itself included), one named for
    MLA and one for storage. The tree shows no more of them than the rule's excerpt (a method
    screened alone shows only its own name), so a function latent here is latent to the rule."""
    found: set[int] = set()
    todo: list[tuple[ast.AST, tuple[str, ...]]] = [(tree, ())]
    while todo:
        node, names = todo.pop()
        if isinstance(node, _DEFINITIONS):
            names = (*names, node.name)
            if type(node) is not ast.ClassDef and any(LATENT_ATTENTION.search(n) for n in names) and any(
                STORAGE.search(n) for n in names
            ):
                found.update(id(statement) for statement in node.body)
        # Definitions sit among statements only: in the bodies of compound ones.
        for field in _BLOCKS:
            todo.extend((child, names) for child in getattr(node, field, ()))
    return found


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _kv101_anywhere(facts: Facts, extra) -> bool:
    """The unit-wide check, cheap and run first: a K tensor cut, and its V partner's name."""
    tails = facts.names | facts.attrs
    bases: list[ast.expr] = [s.value for s in facts.subscripts if _cuts(s)]
    for call in facts.calls:
        func = call.func
        if _tail(func) in RESHAPE_CALLS:
            if isinstance(func, ast.Attribute):
                bases.append(func.value)
            positional = [a for a in call.args if type(a) is not ast.Starred]
            if positional:
                bases.append(positional[0])  # torch.narrow(k, ...)
    for base in bases:
        tail = _tail(_seen_through(base))
        if tail is None or kv_side(tail, extra) != "k" or not is_kv_tensor_name(tail, extra):
            continue
        if value_counterpart(tail, extra) in tails:
            return True
    return False


def _kv101_scope(nodes: list[ast.AST], extra, callables: Collection[str]) -> str | None:
    """KV101 in one scope: a K cut that may be on a token/head axis (``reshapes``' roles),
    whose bounds do not name the V side, whose partner is read whole (under shape-keeping
    steps only: ``v``, ``v.view(...)``, not ``v[:n]`` or ``v.shape``) and never resized in the
    scope (``_value_source`` needs both to name it), and one call (or hand-written attention's
    products) given both: the cut K, or a name bound from it, and that cut's own partner
    whole, or its alias (``_is_unmatched`` compares the value with the cut's partner); a call
    of unknown signature pairs them as ``_paired_argument`` does. ``_KERNEL``, ``_ANY_CALL``
    or None: what pairs them, a kernel preferred."""
    cuts: dict[int, str] = {}
    for node in nodes:
        if type(node) is ast.Subscript:
            found = _kv101_subscript_cut(node, extra)
        elif type(node) is ast.Call:
            found = _kv101_call_cut(node, extra)
        else:
            continue
        if found is not None:
            cuts[id(node)] = found
    if not cuts:
        return None
    live = (set(cuts.values()) & _read_whole(nodes)) - _resized_names(nodes)
    if not live:
        return None
    keys, values = _kv101_derived(nodes, cuts, live)

    def key_partners(arg: ast.expr) -> set[str]:
        # Hand-written attention's operands hold the key deeper (``k.transpose(-2, -1)``).
        found: set[str] = set()
        for n in walk(arg):
            if id(n) in cuts:
                found.add(cuts[id(n)])
            elif type(n) is ast.Name:
                found |= keys.get(n.id, set())
        return found

    def value_partners(arg: ast.expr) -> set[str]:
        name = _dotted(_strip_shape_keeping(arg))
        return set() if name is None else ({name} & live) | values.get(name, set())

    any_call = False
    products: list[ast.expr] = []
    softmax = False
    for node in nodes:
        if type(node) is ast.Call:
            attention = _kv101_attention_call(node, callables)
            if (attention or not any_call) and _kv101_paired(node, cuts, keys, value_partners, attention):
                if attention:
                    return _KERNEL
                any_call = True
            args = [a for a in node.args if not isinstance(a, ast.Starred)] + [kw.value for kw in node.keywords]
            tail = _tail(node.func)
            if tail == "softmax":
                softmax = True
            elif tail in ("matmul", "bmm", "einsum"):
                for a in args:
                    products.extend(a.elts if isinstance(a, (ast.List, ast.Tuple)) else (a,))
        elif type(node) is ast.BinOp and type(node.op) is ast.MatMult:
            products += (node.left, node.right)
    # Hand-written attention: scores with the cut K, a softmax, a product with its whole V.
    if softmax:
        partners = {partner for p in products for partner in key_partners(p)}
        if any(partners & value_partners(p) for p in products):
            return _KERNEL
    return _ANY_CALL if any_call else None


def _kv101_attention_call(call: ast.Call, callables: Collection[str]) -> bool:
    """``pairs.is_attention_call``: a kernel whose K and V arguments the rule knows."""
    tail = _tail(call.func)
    return tail is not None and (tail in ATTENTION_CALLABLES or tail in callables or _dotted(call.func) in callables)


def _kv101_paired(
    call: ast.Call, cuts: dict[int, str], keys: dict[str, set[str]], value_partners: Callable[[ast.expr], set[str]],
    attention: bool,
) -> bool:
    """Does ``call`` take an argument traced to a K cut and, as another argument, that cut's
    partner whole? An attention kernel's may be any two (over-approximating
    ``attention_kv_args``); in another call (``_paired_argument``) the partner must be nearer
    to the key than every argument surely named for it and surely no whole tensor: from
    ``f(q, k[:0], v[:0], out, k, v)`` the rule takes ``v[:0]`` as ``k[:0]``'s value, ``v``
    never, and ``v[:0]`` resolves to no name."""
    # libcst's arguments less ``*x`` and ``**x``, in the order written.
    args = [a for a in call.args if type(a) is not ast.Starred] + [kw.value for kw in call.keywords if kw.arg is not None]
    keyed = [(at, partners) for at, arg in enumerate(args) if (partners := _from_a_cut(arg, cuts, keys))]
    if not keyed:
        return False
    values = [value_partners(a) for a in args]
    for at, partners in keyed:
        for partner in partners:
            ranks = [(abs(i - at), i < at) for i, found in enumerate(values) if i != at and partner in found]
            if not ranks:
                continue
            if attention:
                return True
            tail = partner.rsplit(".", 1)[-1]
            nearest = min(ranks)
            if not any(
                (abs(i - at), i < at) < nearest for i, a in enumerate(args)
                if i != at and _tensor_root(a) == tail and _dotted(_strip_shape_keeping(a)) is None
            ):
                return True
    return False


def _strip_shape_keeping(node: ast.expr) -> ast.expr:
    """``reshapes.strip_shape_keeping``: ``v`` of ``v.contiguous().view(...)``."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in SHAPE_KEEPING:
        node = node.func.value
    return node


def _kv101_derived(
    nodes: list[ast.AST], cuts: dict[int, str], partners: set[str]
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(names bound from a K cut, names bound to a whole V partner), each with the partners
    it may stand for, through up to ``_MAX_HOPS`` assignments or loops, as ``_origin`` and
    ``_value_source`` follow them (``_bound_from_a_cut``); on the V side only plain names bound
    to the partner itself (under shape-keeping steps), or looping over it."""
    bindings: list[tuple[list[ast.expr], ast.expr, bool]] = []  # (targets, value, loop)
    for node in nodes:
        kind = type(node)
        if kind is ast.Assign:
            bindings.append((node.targets, node.value, False))
        elif kind is ast.AnnAssign and node.value is not None:
            bindings.append(([node.target], node.value, False))
        elif kind is ast.For or kind is ast.AsyncFor or kind is ast.comprehension:
            bindings.append(([node.target], node.iter, True))
    keys: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}

    def aliased(value: ast.expr) -> set[str]:
        name = _dotted(_strip_shape_keeping(value))
        return set() if name is None else ({name} & partners) | values.get(name, set())

    for _ in range(_MAX_HOPS + 1):
        grew = False
        for targets, value, loop in bindings:
            bound = list(_bound_from_a_cut(targets, value, loop, cuts, keys).items())
            grew |= _kv101_merge(keys, bound)
            if loop:
                # ``for v_i in [v] * n``: every pass the same V (``_repeated_item``); a ``zip``
                # binds each name to its own iterable (``scopes._zips_onto``).
                aliases = [
                    (name, aliased(item)) for name, iterable in _loop_bound(targets[0], value)
                    if (item := _repeated_item(iterable)) is not None
                ]
            else:
                aliases = [(t.id, aliased(v)) for t, v in _assigned_pairs(targets, value)]
            grew |= _kv101_merge(values, aliases)
        if not grew:
            break
    return keys, values


def _kv101_merge(names: dict[str, set[str]], bound: list[tuple[str, set[str]]]) -> bool:
    """Adds each name's partners to ``names``; did any partner come new?"""
    grew = False
    for name, partners in bound:
        if partners and not partners <= names.get(name, set()):
            names.setdefault(name, set()).update(partners)
            grew = True
    return grew


def _from_a_cut(expr: ast.expr, cuts: dict[int, str], keys: dict[str, set[str]]) -> set[str]:
    """The partners of the K cuts ``_origin`` may trace ``expr`` (a call's argument) to: under
    shape-keeping steps, a cut itself, a subscript of one or of a name bound from one (a
    piece), or a name bound from one. A cut anywhere else in it (``torch.cat([k[:n], x])``,
    ``f(k[:n])``) is no origin."""
    node = _strip_shape_keeping(expr)
    found = {cuts[id(node)]} if id(node) in cuts else set()
    if type(node) is ast.Subscript:
        node = _strip_shape_keeping(node.value)
        if id(node) in cuts:
            found.add(cuts[id(node)])
    if type(node) is ast.Name:
        found |= keys.get(node.id, set())
    return found


def _bound_from_a_cut(
    targets: list[ast.expr], value: ast.expr, loop: bool, cuts: dict[int, str], keys: dict[str, set[str]]
) -> dict[str, set[str]]:
    """The names one binding may bind to a K cut, with the cuts' partners, as ``scopes`` binds
    them and ``_origin`` follows them: a loop's name (or each name a ``zip`` binds) over a cut
    itself; a plain name assigned what ``_from_a_cut`` traces (``_assigned_pairs``); the names
    unpacking a cut itself, the pieces of a split (``scopes._splits_into``); anything else
    binds none."""
    found: dict[str, set[str]] = {}
    if loop:
        for name, iterable in _loop_bound(targets[0], value):
            if id(cut := _strip_shape_keeping(iterable)) in cuts:
                found.setdefault(name, set()).add(cuts[id(cut)])
        return found
    for target, bound in _assigned_pairs(targets, value):
        if partners := _from_a_cut(bound, cuts, keys):
            found.setdefault(target.id, set()).update(partners)
    if id(cut := _strip_shape_keeping(value)) in cuts:
        for e in (e for t in targets if type(t) in (ast.Tuple, ast.List) for e in t.elts if type(e) is ast.Name):
            found.setdefault(e.id, set()).add(cuts[id(cut)])
    return found


def _loop_bound(target: ast.expr, iterable: ast.expr) -> list[tuple[str, ast.expr]]:
    """(name, iterable) for each plain name a loop binds to an iterable of its own, as
    ``scopes._Walker._bind_loop_target`` binds them: a lone name to the loop's iterable, the
    names of ``for a, b in zip(xs, ys)`` each to its own."""
    if type(target) is ast.Name:
        return [(target.id, iterable)]
    if (
        type(target) in (ast.Tuple, ast.List) and type(iterable) is ast.Call and _tail(iterable.func) == "zip"
        and len(target.elts) == len(iterable.args) and not iterable.keywords
        and not any(type(e) is ast.Starred for e in (*target.elts, *iterable.args))
    ):
        return [(e.id, a) for e, a in zip(target.elts, iterable.args) if type(e) is ast.Name]
    return []


def _repeated_item(iterable: ast.expr) -> ast.expr | None:
    """``rule._repeated_item``: ``v`` in ``[v] * n``, ``(v,) * n`` or
    ``itertools.repeat(v, n)``, one object every pass."""
    if type(iterable) is ast.BinOp and type(iterable.op) is ast.Mult:
        for side in (iterable.left, iterable.right):
            if type(side) in (ast.List, ast.Tuple) and len(side.elts) == 1 and type(side.elts[0]) is not ast.Starred:
                return side.elts[0]
        return None
    if type(iterable) is ast.Call and _dotted(iterable.func) == "itertools.repeat" and iterable.args:
        first = iterable.args[0]
        return None if type(first) is ast.Starred else first
    return None


def _assigned_pairs(targets: list[ast.expr], value: ast.expr) -> list[tuple[ast.Name, ast.expr]]:
    """(name, value) of each plain name an assignment binds to a value of its own, as
    ``scopes._Walker.assign`` binds them: ``a = b = x`` binds both to ``x``, ``a, b = x, y``
    each to its element; other unpacking binds no value."""
    if (
        len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
        and len(targets[0].elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in (*targets[0].elts, *value.elts))
    ):
        return [(t, v) for t, v in zip(targets[0].elts, value.elts) if type(t) is ast.Name]
    return [(t, value) for t in targets if type(t) is ast.Name]


# How many bindings ``rule`` follows back from an argument (``_MAX_HOPS``).
_MAX_HOPS = 4


def _kv101_partner(base: str | None, bounds: ast.AST, extra) -> str | None:
    """The V partner of a K tensor cut at ``base`` with ``bounds``, unless the bounds name a
    V-side identifier (``k[:, :v.shape[1]]`` trims K to V: the rule lets it be)."""
    if base is None or not is_kv_tensor_name(base, extra) or kv_side(base.rsplit(".", 1)[-1], extra) != "k":
        return None
    if not any(isinstance(n, _KEYWORD_SPELLED) for n in walk(bounds)) and any(
        kv_side(n, extra) == "v" for n in _names_in(bounds)
    ):
        return None
    return counterpart_of_dotted(base, extra)


# Expressions spelled with a keyword (``a if c else b``, ``x in xs``, ``not x``): the rule
# reads identifiers in the bounds' text with whitespace removed, where a name next to such a
# keyword runs into it (``v_len if c`` -> ``v_lenifc``), so a V-side name there may go unseen.
_KEYWORD_SPELLED = (
    ast.IfExp, ast.BoolOp, ast.Compare, ast.Not, ast.Lambda, ast.comprehension, ast.Await, ast.Yield, ast.YieldFrom,
)


def _kv101_subscript_cut(node: ast.Subscript, extra) -> str | None:
    """The partner of a subscript ``reshapes._subscript_reshape`` reads as a cut with an axis
    other than the last (-1, after ``...``): the only axis that is a head dim at every rank."""
    base = _dotted(node.value)
    if base is None:
        base = _dotted(_seen_through(node.value)) if _seen_through(node.value) is not node.value else None
    if base is None:
        return None
    index = node.slice
    # ``k[a, b]`` has one element per axis; ``k[(a, b)]`` (the tuple written in parentheses,
    # so it starts before its first element) is one index, as libcst reads it.
    if isinstance(index, ast.Tuple) and index.elts and (index.col_offset, index.lineno) == (index.elts[0].col_offset, index.elts[0].lineno):
        elements = index.elts
    else:
        elements = [index]
    ellipsis_at = next((i for i, e in enumerate(elements) if isinstance(e, ast.Constant) and e.value is Ellipsis), None)
    consuming = [i for i, e in enumerate(elements) if i != ellipsis_at and not (isinstance(e, ast.Constant) and e.value is None)]
    for position, i in enumerate(consuming):
        e = elements[i]
        if isinstance(e, ast.Slice):
            if e.lower is None and e.upper is None and e.step is None:
                continue
        elif int_value(e) is not None or "layer" in (_dotted(e) or "").lower():
            continue  # ``kv[0]`` unpacks a stacked cache, ``cache[layer]`` picks a layer
        if ellipsis_at is not None and i > ellipsis_at and position == len(consuming) - 1:
            continue  # axis -1
        return _kv101_partner(base, index, extra)
    return None


def _kv101_call_cut(call: ast.Call, extra) -> str | None:
    """The partner of a call ``reshapes._call_reshape`` reads as a cut whose axis is a
    literal other than -1 (an unplaceable axis is ambiguous, and the rule stays silent)."""
    func = call.func
    tail = _tail(func)
    if tail not in RESHAPE_CALLS:
        return None
    found = _call_base(call)
    if found is None:
        return None
    base, shift = found
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if tail not in AXISLESS_RESHAPES:
        position, default = RESHAPE_DIM_ARGS[tail]
        dim = next((kw.value for kw in call.keywords if kw.arg == "dim"), None)
        if dim is None and len(positional) > position + shift:
            dim = positional[position + shift]
        axis = default if dim is None else int_value(dim)
        if axis is None or axis == -1:
            return None
    return _kv101_partner(base, call, extra)


# ``rule._RESIZING_CALLS``: a V bound to one of these may already match.
_RESIZING_CALLS = RESHAPE_CALLS | {"cat", "concat", "concatenate", "stack", "pad", "gather", "roll", "repeat_kv"}


def _read_whole(nodes: list[ast.AST]) -> set[str]:
    """The dotted names the scope reads as whole tensors: not subscripted, not an attribute's
    owner (``v.shape``), except under shape-keeping calls (``v.view(...)`` is still ``v``
    to ``strip_shape_keeping``). ``nodes`` come parents first."""
    covered: set[int] = set()
    transparent: set[int] = set()
    whole: set[str] = set()
    for node in nodes:
        kind = type(node)
        if kind is ast.Subscript:
            covered.add(id(node.value))
        elif kind is ast.Call:
            func = node.func
            if type(func) is ast.Attribute and func.attr in SHAPE_KEEPING:
                (covered if id(node) in covered else transparent).add(id(func.value))
        elif kind is ast.Attribute:
            if id(node.value) not in transparent:
                covered.add(id(node.value))
            if id(node) not in covered and type(node.ctx) is ast.Load and (name := _dotted(node)) is not None:
                whole.add(name)
        elif kind is ast.Name:
            if id(node) not in covered and type(node.ctx) is ast.Load:
                whole.add(node.id)
    return whole


def _resized_names(nodes: list[ast.AST]) -> set[str]:
    """Names the scope binds (``name = value``, or one element of ``a, b = x, y``) to a value
    holding a subscript of a named tensor or a resizing call: ``_resized_anywhere``."""
    bound: list[tuple[ast.Name, ast.expr]] = []
    for node in nodes:
        if type(node) is ast.Assign:
            bound += _assigned_pairs(node.targets, node.value)
        elif type(node) is ast.AnnAssign and node.value is not None:
            bound += _assigned_pairs([node.target], node.value)
    return {name.id for name, value in bound if _resizes(value)}


def _resizes(value: ast.expr) -> bool:
    todo = [value]
    while todo:
        node = todo.pop()
        if type(node) is ast.Lambda:
            todo.append(node.body)  # the scope walker reads a lambda's body, not its defaults
            continue
        if type(node) is ast.Call and _tail(node.func) in _RESIZING_CALLS:
            return True
        if type(node) is ast.Subscript:
            inner = node.value
            while type(inner) is ast.Subscript:
                inner = inner.value
            if _dotted(_seen_through(inner)) is not None:
                return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def _cuts(node: ast.Subscript) -> bool:
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for e in elements:
        if isinstance(e, ast.Slice):
            if e.lower is not None or e.upper is not None or e.step is not None:
                return True
        elif not (isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis or type(e.value) is int)):
            return True
    return False

SCREEN = _kv101
