"""KV204's ``ast`` screen: can this unit's tree hold a finding of KV204? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.ast_sizes import int_value
from linter.model.names import (
    kv_side,
)
from linter.settings import Settings
from linter.plan.screen_facts import _kv_projections, _projection_call, _SHAPE_METHODS, Facts, walk


def _kv204(facts: Facts, settings: Settings) -> bool:
    """A K/V ``*Linear`` projection, a parameter defaulting to None (the optional cross-attention
    input), a shape read and a view or reshape; and a function projecting states that may be
    that input (``_may_differ``: the optional parameter itself, or a name chosen between it
    and another by ``a if c else b``) through a K/V projection (``flows.projected``)."""
    extra = settings.extra_pairs
    return (
        facts.none_default and not facts.attrs.isdisjoint(_SHAPE_METHODS)
        and not facts.attrs.isdisjoint(("shape", "size")) and bool(_kv_projections(facts, extra))
        and any(_kv204_function(fn, extra) for fn in facts.functions)
    )


def _kv204_function(fn: ast.FunctionDef | ast.AsyncFunctionDef, extra) -> bool:
    """A view of a K/V projection of states that may be the optional input, with a shape name
    carrying the length of another tensor (not a K/V-side one): ``_shaped``, ``_may_differ``."""
    optional = _none_defaults(fn.args)
    if not optional:
        return False
    bound: dict[str, list[tuple[ast.expr, int | None, int | None]]] = {}
    chosen: set[str] = set()  # names bound to ``a if c else b`` with an optional branch
    views: list[ast.Call] = []
    for node in walk(fn):
        kind = type(node)
        if kind is ast.Call:
            if type(node.func) is ast.Attribute and node.func.attr in _SHAPE_METHODS:
                views.append(node)
        elif (kind is ast.Assign or kind is ast.AnnAssign) and node.value is not None:
            value = node.value
            targets = node.targets if kind is ast.Assign else [node.target]
            for target in targets:
                _kv204_bind(target, value, bound)
            # ``current = enc if enc is not None else hidden``, alone or an element of a tuple.
            if any(
                type(v) is ast.IfExp and any(type(b) is ast.Name and b.id in optional for b in (v.body, v.orelse))
                for v in (value, *(value.elts if isinstance(value, (ast.Tuple, ast.List)) else ()))
            ):
                chosen.update(n.id for t in targets for n in walk(t) if type(n) is ast.Name)
    # The states each view's receiver may project come from the bindings alone: the lengths
    # the names carry (a fixpoint over every binding, the screen's dear part) are read only
    # for a function with a view of a projection of the optional input.
    views = [(call, states) for call in views if (states := _kv204_states(call.func.value, bound, extra, 0) & (optional | chosen))]
    if not views:
        return False
    lengths: dict[str, set[str]] = {}
    for _ in range(8):  # names carrying lengths through names: a few hops
        grew = False
        for name, bindings in bound.items():
            found = set().union(*(_kv204_lengths(v, p, w, lengths) for v, p, w in bindings))
            if not found <= lengths.get(name, set()):
                lengths.setdefault(name, set()).update(found)
                grew = True
        if not grew:
            break
    for call, states in views:
        carried = {t for a in (*call.args, *(kw.value for kw in call.keywords)) for n in walk(a) if type(n) is ast.Name for t in lengths.get(n.id, ())}
        if any(t not in states or len(states) > 1 for t in carried if kv_side(t, extra) is None):
            return True
    return False


def _kv204_bind(target: ast.expr, value: ast.expr, bound: dict) -> None:
    """Record ``model.functions``' assignments: (value, position, width) of each plain name;
    ``b, s, h = x.shape`` gives each its position among three."""
    if type(target) is ast.Name:
        bound.setdefault(target.id, []).append((value, None, None))
    elif isinstance(target, (ast.Tuple, ast.List)):
        elements = target.elts
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements) and not any(
            type(e) is ast.Starred for e in (*value.elts, *elements)
        ):
            for element, item in zip(elements, value.elts):
                _kv204_bind(element, item, bound)
        elif all(type(e) is ast.Name for e in elements):
            for i, element in enumerate(elements):
                bound.setdefault(element.id, []).append((value, i, len(elements)))
        else:
            # Nested or starred unpacking: read as if each name took the whole value.
            for n in walk(target):
                if type(n) is ast.Name:
                    bound.setdefault(n.id, []).append((value, None, None))


def _kv204_lengths(value: ast.AST, position: int | None, width: int | None, lengths: dict[str, set[str]]) -> set[str]:
    """``_length_sources``: the tensors whose token length ``value`` carries."""
    read = _kv204_shape_read(value)
    if read is not None:
        tensor, index = read
        if not index:
            keeps = position is None or (position == 1 and width == 3)
        elif position is not None or len(index) != 1:
            keeps = False
        else:
            element = index[0]
            keeps = type(element) is ast.Slice or int_value(element) == 1 or type(element) is ast.Tuple
        return {tensor} if keeps else set()
    if type(value) is ast.Subscript and type(value.value) is ast.Name and value.value.id in lengths:
        # ``input_shape[0]`` is the batch; the index itself may read a length too (where the
        # rule has not yet seen the name carry one and reads the children).
        own = set() if int_value(value.slice) == 0 else lengths[value.value.id]
        return own | _kv204_lengths(value.slice, None, None, lengths)
    if type(value) is ast.Name:
        return lengths.get(value.id, set())
    found: set[str] = set()
    for child in ast.iter_child_nodes(value):
        found |= _kv204_lengths(child, None, None, lengths)
    return found


def _kv204_shape_read(node: ast.AST) -> tuple[str, list[ast.AST]] | None:
    """``_shape_read``: (``x``, index) for ``x.shape``, ``x.shape[...]``, ``x.size(...)``,
    ``x.size()[...]``."""
    if type(node) is ast.Subscript:
        inner = _kv204_shape_read(node.value)
        if inner is None or inner[1]:
            return None
        index = node.slice
        return inner[0], list(index.elts) if type(index) is ast.Tuple and len(index.elts) != 1 else [index]
    if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "size":
        tensor, index = node.func.value, [*node.args, *(kw.value for kw in node.keywords)]
    elif type(node) is ast.Attribute and node.attr == "shape":
        tensor, index = node.value, []
    else:
        return None
    return (tensor.id, index) if type(tensor) is ast.Name else None


def _kv204_states(receiver: ast.expr, bound: dict, extra, depth: int) -> set[str]:
    """The states a view's receiver may be a K/V projection of (``flows.projected``):
    ``self.k_proj(x)`` itself, or a name bound to one."""
    if type(receiver) is ast.Name:
        if depth > 6:
            return set()
        # An unpacked name (``v, _ = self.v_proj(x)``) is no simple binding: ``binding_before``
        # gives none.
        return set().union(*(
            _kv204_states(v, bound, extra, depth + 1) for v, position, _ in bound.get(receiver.id, ()) if position is None
        ))
    found = _projection_call(receiver, extra)
    return set() if found is None else {found[1]}


def _none_defaults(args: ast.arguments) -> set[str]:
    """The parameters defaulting to None (``model.functions``' ``optional``)."""
    positional = [*args.posonlyargs, *args.args]
    pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    return {a.arg for a, d in pairs if type(d) is ast.Constant and d.value is None}

SCREEN = _kv204
