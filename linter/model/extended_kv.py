"""K or V shaped with the query's length after the cache made them longer.

Before the cache, the new keys and values have as many tokens as the query
(``key_states.view(bsz, q_len, ...)`` is right there). Once the past is concatenated in front
(``K = torch.cat([past_key_value[0], K], dim=2)``, ``k, v = cache.update(k, v, ...)``) they have
the KV length, and a later view, reshape or expand with the query's length (``q_len``,
``tgt_len``) fails, or with a matching element count silently scrambles tokens, exactly when
decoding with a cache. The evidence that the function knows the difference is a KV length bound
in it (``kv_seq_len``, ``k_len``). Read on the standard library's tree, by the rule and its
screen alike.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from linter.model.ast_walk import walk
from linter.model.names import kv_side
from linter.model.size_roles import kv_length_name, length_name

_QUERY_PARTS = frozenset({"q", "query", "queries", "tgt"})
_CONCATS = frozenset({"cat", "concat", "concatenate"})
# Cache methods that return the keys or values with the past in front.
_CACHE_UPDATES = frozenset({"update"})
_SHAPERS = frozenset({"view", "reshape", "expand"})
EXTENDERS = _CONCATS | _CACHE_UPDATES
_SCOPE_ENDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class LengthFault:
    node: ast.expr      # the query length given as a size
    tensor: str         # the K/V name shaped
    method: str         # view, reshape, expand
    length: str         # the query length's name
    extended_line: int  # where the cache made the tensor longer
    kv_length: str      # a KV length bound in the function


def query_length(name: str) -> bool:
    """``q_len``, ``query_length``, ``tgt_len``: the query's own length."""
    return length_name(name) and not kv_length_name(name) and bool(_QUERY_PARTS & set(name.lower().split("_")))


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, _SCOPE_ENDS))


def _bound_names(function: ast.AST, nodes: list[ast.AST]) -> set[str]:
    names = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _root(node: ast.expr) -> str | None:
    """``K`` of ``K[:, :, None, :, :]``, ``K.transpose(1, 2)``."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None


def _callee_tail(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


def _extensions(nodes: list[ast.AST], pairs) -> list[tuple[int, str, bool]]:
    """(line, K/V name, extended?) for each binding of a K/V name, in line order: extended
    where the past is concatenated in or a cache update returns it, kept where the new value
    reads the name itself (``K = K.transpose(1, 2)``), reset otherwise."""
    found = []
    for node in nodes:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and kv_side(target.id, pairs) is not None:
            if (isinstance(value, ast.Call) and _callee_tail(value) in _CONCATS and value.args
                    and isinstance(value.args[0], (ast.List, ast.Tuple)) and len(value.args[0].elts) > 1
                    and any(_root(e) == target.id for e in value.args[0].elts[1:])):
                found.append((node.lineno, target.id, True))
            elif target.id not in _names(value):
                found.append((node.lineno, target.id, False))
        elif (isinstance(target, ast.Tuple) and isinstance(value, ast.Call) and _callee_tail(value) in _CACHE_UPDATES):
            read = _names(value)
            for element in target.elts:
                if isinstance(element, ast.Name) and kv_side(element.id, pairs) is not None and element.id in read:
                    found.append((node.lineno, element.id, True))
    return sorted(found)


def query_length_shapes(tree: ast.AST, pairs: Iterable[tuple[str, str]] = ()) -> list[LengthFault]:
    faults: list[LengthFault] = []
    # Most trees extend nothing: one walk for the extending calls before any function is read.
    if not any(isinstance(n, ast.Call) and _callee_tail(n) in EXTENDERS for n in walk(tree)):
        return faults
    for function in walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = list(_own_nodes(function))
        bound = _bound_names(function, nodes)
        kv_lengths = sorted(n for n in bound if kv_length_name(n))
        query_lengths = {n for n in bound if query_length(n)}
        if not kv_lengths or not query_lengths:
            continue
        bindings = _extensions(nodes, pairs)
        if not any(extended for _, _, extended in bindings):
            continue
        for call in nodes:
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _SHAPERS):
                continue
            tensor = _root(call.func.value)
            if tensor is None:
                continue
            # The binding of ``tensor`` that reaches this call by line order (the call's own
            # statement binds after it reads).
            last = [(line, extended) for line, name, extended in bindings if name == tensor and line < call.lineno]
            if not last or not last[-1][1]:
                continue
            for argument in call.args:
                if isinstance(argument, ast.Name) and argument.id in query_lengths:
                    faults.append(LengthFault(argument, tensor, call.func.attr, argument.id, last[-1][0], kv_lengths[0]))
    return faults
