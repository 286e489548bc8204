"""KV104's ``ast`` screen: can this unit's tree hold a finding of KV104? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Iterator
from linter.model.names import (
    is_kv_tensor_name,
    key_counterpart,
    kv_side,
    value_counterpart,
)
from linter.settings import Settings
from linter.plan.screen_facts import _dotted, _flat, _is_kv_tensor, _self_attr, _tail, _tensor_root, Facts, walk


_WRITES = {"copy_": 0, "index_copy_": 2, "index_copy": 2}


def _kv104(facts: Facts, settings: Settings) -> bool:
    """Each of KV104's five findings, less its "the twin exists and is unused" evidence."""
    extra = settings.extra_pairs
    for node in facts.returns:
        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            first, second = node.value.elts
            name = _dotted(first)
            if name is not None and _dotted(second) == name and _is_kv_tensor(first, "k", extra):
                return True  # return k_cache, k_cache
    for call in facts.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _WRITES:
            index = _WRITES[func.attr]
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            if index < len(positional) and _kv104_crossed(func.value, positional[index], extra):
                return True  # k_cache.copy_(v)
    for targets, value in facts.assignments:
        values = [value, *(value.elts if isinstance(value, (ast.Tuple, ast.List)) else ())]
        for target in targets:
            if isinstance(target, ast.Subscript) and any(_kv104_crossed(target.value, v, extra) for v in values):
                return True  # k_cache[slots] = v
    # A V-side name: the target, the value parameter, or the method's name.
    names = facts.params | _assigned_tails(facts) | {fn.name for fn in facts.functions}
    if not any(kv_side(n, extra) == "v" for n in names):
        return False
    # The rest needs its function: its parameters, its name, its own assignments. Each
    # function's assignments are among the unit's, so one that may count anywhere is asked
    # for first (walking every function cost this screen most of its time).
    if not any(kv_side(fn.name, extra) == "v" for fn in facts.functions) and not any(
        _kv104_may_count(target, value, extra) for targets, value in facts.assignments for target in targets
    ):
        return False
    return any(_kv104_function(fn, extra) for fn in facts.functions)


def _kv104_crossed(base: ast.expr, value: ast.expr, extra) -> bool:
    """Can writing ``value`` into ``base`` be KV104's crossed write (``_crossed_writes``): a
    V-side tensor into a K-side one whose V twin is another tensor? ``k_input[..., :r] =
    v_input``, MLA's key built from its own value twin, is none."""
    if not (
        _is_kv_tensor(base, "k", extra) and isinstance(value, (ast.Name, ast.Attribute))
        and _is_kv_tensor(value, "v", extra)
    ):
        return False
    twin = value_counterpart(_tail(base), extra)
    return twin is not None and twin != _tail(value)


def _kv104_may_count(target: ast.expr, value: ast.expr, extra) -> bool:
    """Can ``target = value`` be what ``_kv104_function`` reports, in some function (its
    conditions less the function's parameters)?"""
    tail = _tail(target)
    if tail is None:
        return False
    if (
        isinstance(target, ast.Name) and isinstance(value, (ast.Call, ast.Subscript))
        and is_kv_tensor_name(tail, extra) and (key := key_counterpart(tail, extra)) is not None
        and _tensor_root(value) == key
    ):
        return True
    if kv_side(tail, extra) != "v":
        return False
    for call in walk(value):
        if isinstance(call, ast.Call):
            callee = _dotted(call.func)
            if callee is None or callee.count(".") > 1 or ("." in callee and not callee.startswith("self.")):
                continue
            k_name = callee.rsplit(".", 1)[-1]
            if kv_side(k_name, extra) == "k" and (twin := value_counterpart(k_name, extra)) is not None and twin != tail:
                return True
    return False


def _assigned_tails(facts: Facts) -> set[str]:
    return {tail for targets, _ in facts.assignments for t in targets if (tail := _tail(t)) is not None}


def _kv104_function(fn: ast.FunctionDef | ast.AsyncFunctionDef, extra) -> bool:
    args = fn.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    if kv_side(fn.name, extra) == "v" and any(
        (attr := _kv104_reached(site)) is not None and _kv104_key_with_twin(attr, extra)
        for site in _kv104_sites(fn)
    ):
        return True  # a value-side method reaching self.k_*
    for node in walk(fn):
        if isinstance(node, ast.Assign):
            # ``a = b = x`` binds nothing in the model; reading each target over-approximates.
            bound = [b for target in node.targets for b in _kv104_bindings(target, node.value)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bound = list(_kv104_bindings(node.target, node.value))
        else:
            continue
        for target, value in bound:
            tail = _tail(target)
            if (
                isinstance(target, ast.Name) and tail in params and isinstance(value, (ast.Call, ast.Subscript))
                and is_kv_tensor_name(tail, extra) and key_counterpart(tail, extra) in params
                and _tensor_root(value) == key_counterpart(tail, extra)
            ):
                return True  # value = key.view(...) over the value parameter
            if tail is None or kv_side(tail, extra) != "v":
                continue
            for call in walk(value):
                if not isinstance(call, ast.Call):
                    continue
                callee = _dotted(call.func)
                if callee is None or callee.count(".") > 1 or ("." in callee and not callee.startswith("self.")):
                    continue
                k_name = callee.rsplit(".", 1)[-1]
                if kv_side(k_name, extra) != "k":
                    continue
                twin = value_counterpart(k_name, extra)
                if twin is None or twin == tail or ("." not in callee and twin not in params):
                    continue
                return True  # v = self.k_proj(x)
    return False


def _kv104_bindings(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """The (name, value) bindings of ``target = value`` that ``FunctionModel`` records with no
    unpacking position, the only ones ``_twin_calls`` and ``_dead_value_parameter`` read: a
    name or attribute takes the value; a tuple or list takes a literal tuple or list of its
    length element by element (``q, k, v = self.q(x), self.k(x), self.v(x)``), and otherwise
    binds its names by position (none here) while a nested tuple reads the whole value again."""
    if isinstance(target, (ast.Name, ast.Attribute)):
        yield target, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if (
            isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in (*value.elts, *target.elts))
        ):
            for element, part in zip(target.elts, value.elts):
                yield from _kv104_bindings(element, part)
        else:
            for element in target.elts:
                if isinstance(element, (ast.Tuple, ast.List)):
                    yield from _kv104_bindings(element, value)


def _kv104_sites(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    """What ``_value_method_on_key`` reads in a method: the returned values and the
    subscripts assigned to whose base is a dotted name (``FunctionModel`` records no other
    store: ``self.k_buffer[i][loc] = x`` is none)."""
    for node in walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            yield node.value
        elif isinstance(node, ast.Assign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from (t for t in _flat(targets) if isinstance(t, ast.Subscript) and _dotted(t.value) is not None)


def _kv104_reached(expr: ast.expr) -> str | None:
    """The ``X`` of the ``self.X`` that ``expr`` reaches through subscripts and method calls
    (``self.k_buffer[i]``, ``self.k_buffer.view(n)``), as ``_value_method_on_key`` walks to
    its root; ``self.get_key_buffer(i)`` reaches ``self`` itself, no attribute."""
    while isinstance(expr, (ast.Subscript, ast.Call)):
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return None
    return _self_attr(expr)


def _kv104_key_with_twin(attr: str, extra) -> bool:
    """A K-side tensor attribute with a V twin to name (``k_buffer``, ``v_buffer``)."""
    return (
        kv_side(attr, extra) == "k" and is_kv_tensor_name(attr, extra)
        and value_counterpart(attr, extra) is not None
    )

SCREEN = _kv104
