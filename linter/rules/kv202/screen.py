"""KV202's ``ast`` screen: can this unit's tree hold a finding of KV202? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Iterator
from linter.model.ast_sizes import Aliases, heads_mismatch
from linter.model.names import (
    is_query_name,
    kv_side,
    value_counterpart,
)
from linter.settings import Settings
from linter.plan.screen_facts import _dotted, _push_children, _SHAPE_METHODS, _tensor_root, Facts


def _sequence(args: list[ast.expr], keywords: list[ast.keyword]) -> list[ast.expr] | None:
    if keywords or any(isinstance(a, ast.Starred) for a in args):
        return None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        elements = args[0].elts
        return None if any(isinstance(e, ast.Starred) for e in elements) else list(elements)
    return args


def _kv202_view(call: ast.Call) -> tuple[tuple, dict[str, ast.expr], ast.expr] | None:
    """(form, axis -> size, receiver) of a call KV202 reads as a view, as the rule does."""
    func, args = call.func, list(call.args)
    full = _dotted(func)
    tail = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if tail is None:
        return None
    if full in ("rearrange", "einops.rearrange"):
        if len(args) < 2 or not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
            return None
        sizes = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
        return (("rearrange", args[1].value), sizes, args[0]) if sizes else None
    if full in ("torch.reshape", "torch.unflatten"):
        if not args:
            return None  # a keyword-only call: no receiver the rule can read
        receiver, args = args[0], args[1:]
    elif isinstance(func, ast.Attribute) and tail in (*_SHAPE_METHODS, "unflatten"):
        receiver = func.value
    else:
        return None
    if tail == "unflatten":
        if len(args) + len(call.keywords) != 2 or len(args) < 1:
            return None
        shape = _sequence(args[1:], call.keywords)
        form: tuple = ("unflatten", ast.dump(args[0]), len(shape or ()))
        minimum = 2
    else:
        shape = _sequence(args, call.keywords)
        form = ("shape", len(shape or ()))
        minimum = 3
    if shape is None or len(shape) < minimum:
        return None
    return form, {str(i): size for i, size in enumerate(shape)}, receiver


def _kv202(facts: Facts, settings: Settings) -> bool:
    """A K view and a V view of one form in one scope whose sizes name different head counts
    at some axis (``ast_sizes.heads_mismatch``, names resolved through the scope's single
    assignments), read as the rule reads them. The rule also wants every V view it pairs with
    a K view to differ; one is enough here.

    Asked first of the whole unit's calls and assignments (read in the facts' one walk),
    without the sizes: every scope's views are among the unit's, so a unit with no pair of
    views anywhere needs no walk of its scopes (most units the condition lets through)."""
    extra = settings.extra_pairs
    if not any(True for _ in _kv202_pairs(_kv202_views(facts.assigns, facts.calls, extra), extra)):
        return False
    for nodes in _kv202_scopes(facts.tree):
        aliases = Aliases()
        assigns, calls = [], []
        for node in nodes:
            kind = type(node)
            if kind is ast.Assign:
                assigns.append(node)
                if len(node.targets) == 1:
                    aliases.record(node.targets[0], node.value)
            elif kind is ast.Call:
                calls.append(node)
        for (_, k_sizes, _), (_, v_sizes, _) in _kv202_pairs(_kv202_views(assigns, calls, extra), extra):
            if any(
                axis in v_sizes and heads_mismatch(size, v_sizes[axis], resolve=aliases.resolve)
                for axis, size in k_sizes.items()
            ):
                return True
    return False


_View = tuple[tuple, dict[str, ast.expr], set[str]]


def _kv202_views(assigns: list[ast.Assign], calls: list[ast.Call], extra) -> list[_View]:
    """(form, axis -> size, the K/V names it is about) of each of ``calls`` KV202 reads as a
    view of a K/V tensor: its receiver's root, or the target of the assignment whose method
    chain it is."""
    chains: dict[int, str] = {}  # a call of a K/V-named assignment's method chain -> its target
    for node in assigns:
        if len(node.targets) == 1:
            target = node.targets[0]
            name = _tensor_root(target) if type(target) in (ast.Name, ast.Attribute) else None
            if name is not None and kv_side(name, extra):
                value = node.value
                while type(value) is ast.Call:
                    chains[id(value)] = name
                    if type(value.func) is not ast.Attribute:
                        break
                    value = value.func.value
    views = []
    for call in calls:
        view = _kv202_view(call)
        if view is None:
            continue
        form, sizes, receiver = view
        root = _tensor_root(receiver)
        ids = {root} if root is not None and kv_side(root, extra) else set()
        if id(call) in chains and not is_query_name(root):
            ids.add(chains[id(call)])
        if ids:
            views.append((form, sizes, ids))
    return views


def _kv202_pairs(views: list[_View], extra) -> Iterator[tuple[_View, _View]]:
    """Each (K view, V view) of one form about a K name and its V partner."""
    for k_view in views:
        k_form, _, k_ids = k_view
        partners = {value_counterpart(i, extra) for i in k_ids} - {None}
        if not partners or any(kv_side(i, extra) != "k" for i in k_ids):
            continue
        for v_view in views:
            if v_view[0] == k_form and v_view[2] & partners:
                yield k_view, v_view


def _kv202_scopes(tree: ast.AST) -> list[list[ast.AST]]:
    """The nodes of each scope KV202 checks on its own: the module, and each function with its
    decorators, parameters and annotations (the rule opens a function's scope before visiting
    any of them). Classes, lambdas and comprehensions belong to the scope around them."""
    found = []
    todo = [tree]
    while todo:
        root = todo.pop()
        nodes: list[ast.AST] = []
        stack = [root]
        while stack:
            current = stack.pop()
            if current is None:
                continue
            kind = current.__class__
            if (kind is ast.FunctionDef or kind is ast.AsyncFunctionDef) and current is not root:
                todo.append(current)
                continue
            nodes.append(current)
            _push_children(current, kind, stack)
        found.append(nodes)
    return found

SCREEN = _kv202
