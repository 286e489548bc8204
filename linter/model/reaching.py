"""Reaching definitions within one block: a value computed, then replaced by one built from its
key twin alone (``v = self.v_proj(x)`` ... ``v = k.clone()``)."""

from __future__ import annotations

import ast
from typing import NamedTuple

from linter.model.ast_reading import blocks, chain_root, root_word
from linter.model.names import key_counterpart, kv_side
from linter.model.ast_walk import walk


class Rebuilt(NamedTuple):
    value: ast.expr   # the expression that rebuilds the value from its key
    defined: int      # the line the dropped value was computed on
    name: str         # the value's name
    key: str          # its key twin


def rebuilt_from_key(function: ast.AST, pairs) -> list[Rebuilt]:
    """``v = k.clone()`` after ``v = self.v_proj(x)``, in one block: the computed V is dropped."""
    found: list[Rebuilt] = []
    for body in blocks(function):
        defined: dict[str, int] = {}
        for statement in body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
                name = statement.targets[0].id
                key = key_source(statement.value, name, pairs)
                if key is not None and name in defined:
                    found.append(Rebuilt(statement.value, defined[name], name, key))
                if not (isinstance(statement.value, ast.Constant) and statement.value.value is None):
                    defined[name] = statement.lineno
                else:
                    defined.pop(name, None)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                continue
            else:
                # A block or a loop may rebind the name in ways this straight-line reading misses.
                for node in walk(statement):
                    if node.__class__ is ast.Name and isinstance(node.ctx, ast.Store):
                        defined.pop(node.id, None)
    return found


def rebuilds(statement: ast.stmt, pairs) -> bool:
    """Is ``statement`` a V name assigned from its K twin alone (``v = k.clone()``)?"""
    return (
        isinstance(statement, ast.Assign) and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and key_source(statement.value, statement.targets[0].id, pairs) is not None
    )


def key_source(value: ast.expr, name: str, pairs) -> str | None:
    """The K twin of V-side ``name`` when ``value`` is built from it alone: a call chain or cut
    rooted at the twin that never reads ``name``."""
    if kv_side(name, pairs) != "v":
        return None
    key = key_counterpart(name, pairs)
    if key is None or not isinstance(value, (ast.Call, ast.Subscript)):
        return None
    if root_word(value) != key or chain_root(value) is None:
        return None
    if any(n.__class__ is ast.Name and n.id == name for n in walk(value)):
        return None
    return key


class Unset(NamedTuple):
    key: ast.Assign   # the K name's assignment on every path
    value: str        # its V twin, set only on some paths
    set_at: int       # the line of the V twin's conditional assignment
    read_at: int      # the line that reads both


def unset_value_twins(function: ast.AST, pairs) -> list[Unset]:
    """``new_k = k`` on every path beside ``new_v = ...`` set in one branch of an ``if``
    alone, both read after it at the function's top level (``return o, new_k, new_v``): on
    the other path the V twin is unbound (or stale) where the K twin is fresh. Only plain
    assignments count; a read under a test (``v if c else None``) or in a nested block may
    share the branch's condition, and is not asked about."""
    if not any(s.__class__ is ast.If for s in function.body):
        return []
    found: list[Unset] = []
    keys: dict[str, ast.Assign] = {}     # K names assigned at the top level, so far
    values: set[str] = set()             # V names bound on every path, so far
    partial: dict[str, int] = {}         # V names assigned in some branches only
    bound = {a.arg for a in walk(function.args) if a.__class__ is ast.arg}
    for statement in function.body:
        if partial and keys:
            read = _plain_reads(statement)
            for name in read:
                key = key_counterpart(name, pairs) if name in partial else None
                if key in keys and key in read and name not in values and name not in bound:
                    found.append(Unset(keys[key], name, partial[name], statement.lineno))
                    values.add(name)  # once per V name
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            if kv_side(name, pairs) == "k":
                keys[name] = statement
            values.add(name)
        elif isinstance(statement, ast.If):
            assigned = _assigned(statement, pairs)
            if assigned:
                always = _always(statement)
                for name, line in assigned.items():
                    if always is _EVERY or name in always:
                        values.add(name)
                    elif name not in values:
                        partial.setdefault(name, line)
        else:
            values.update(n.id for n in walk(statement) if n.__class__ is ast.Name and not isinstance(n.ctx, ast.Load))
    return found


class Overwritten(NamedTuple):
    value: ast.Assign   # the top-level assignment that overwrites the V name
    set_at: int         # the line of the branch's assignment it throws away
    key: str            # the K twin assigned beside it


def overwritten_value_twins(function: ast.AST, pairs) -> list[Overwritten]:
    """``new_v = ...`` set in a branch of an ``if`` (its K twin not), then ``new_v = v``
    beside ``new_k = k`` after the ``if``, before anything reads ``new_v``: the line copied
    from its K twin throws the branch's value away on every path."""
    found: list[Overwritten] = []
    body = function.body
    for i, statement in enumerate(body):
        if statement.__class__ is not ast.If:
            continue
        assigned = _assigned(statement, pairs)
        stored = {n.id for n in walk(statement) if n.__class__ is ast.Name and not isinstance(n.ctx, ast.Load)}
        for name, line in assigned.items():
            key = key_counterpart(name, pairs)
            if key is None or key in stored:
                continue
            later = _next_touch(body[i + 1:], name)
            if later is None or not _plain_assignment(later, name):
                continue
            near = body[max(0, body.index(later) - 3):body.index(later) + 4]
            if any(_plain_assignment(s, key) and _mirrors(s.value, later.value, pairs) for s in near):
                found.append(Overwritten(later, line, key))
    return found


def _next_touch(statements: list[ast.stmt], name: str) -> ast.stmt | None:
    """The first statement that reads or binds ``name``."""
    for statement in statements:
        if any(n.__class__ is ast.Name and n.id == name for n in walk(statement)):
            return statement
    return None


def _plain_assignment(statement: ast.stmt, name: str) -> bool:
    """``name = value``, with a value that does not read ``name``."""
    return (statement.__class__ is ast.Assign and len(statement.targets) == 1
            and statement.targets[0].__class__ is ast.Name and statement.targets[0].id == name
            and not any(n.__class__ is ast.Name and n.id == name for n in walk(statement.value)))


def _mirrors(key_value: ast.expr, value: ast.expr, pairs) -> bool:
    """The V value is the K value with its K names renamed: ``v`` for ``k``."""
    k_names = [n.id for n in walk(key_value) if n.__class__ is ast.Name]
    v_names = [n.id for n in walk(value) if n.__class__ is ast.Name]
    if len(k_names) != len(v_names) or ast.dump(key_value.__class__()) != ast.dump(value.__class__()):
        return False
    return any(kv_side(k, pairs) == "k" for k in k_names) and all(
        k == v or (kv_side(k, pairs) == "k" and key_counterpart(v, pairs) == k) for k, v in zip(k_names, v_names))


def _plain_reads(statement: ast.stmt) -> set[str]:
    """The names a top-level statement reads outside tests, lambdas and comprehensions."""
    if not isinstance(statement, (ast.Return, ast.Assign, ast.Expr)) or statement.value is None:
        return set()
    names: set[str] = set()
    todo = [statement.value]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if node.__class__ is ast.Name:
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _assigned(statement: ast.stmt, pairs) -> dict[str, int]:
    """V-side names given a plain assignment anywhere under ``statement``, with the first line."""
    found: dict[str, int] = {}
    for node in walk(statement):
        if node.__class__ is ast.Assign and len(node.targets) == 1 and node.targets[0].__class__ is ast.Name:
            name = node.targets[0].id
            if name not in found and kv_side(name, pairs) == "v":
                found[name] = node.lineno
    return found


# Every name: what a statement that never goes on (``return``, ``raise``) binds on the paths
# that go on after it.
_EVERY = frozenset({"*"})


def _always(statement: ast.stmt) -> frozenset[str]:
    """The names bound on every path through ``statement`` that goes on after it."""
    kind = statement.__class__
    if kind in (ast.Return, ast.Raise, ast.Continue, ast.Break, ast.Try):
        return _EVERY  # no path goes on (a ``try``'s handlers and exits are not read here)
    if kind is ast.If:
        body, orelse = _block_always(statement.body), _block_always(statement.orelse)
        if body is _EVERY:
            return orelse
        return body if orelse is _EVERY else body & orelse
    if kind in (ast.For, ast.AsyncFor, ast.While):
        return frozenset()  # the loop may not run
    if kind in (ast.With, ast.AsyncWith):
        return _block_always(statement.body)
    if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        return frozenset({statement.name})
    return frozenset(n.id for n in walk(statement) if n.__class__ is ast.Name and not isinstance(n.ctx, ast.Load))


def _block_always(body: list[ast.stmt]) -> frozenset[str]:
    names: set[str] = set()
    for statement in body:
        bound = _always(statement)
        if bound is _EVERY:
            return _EVERY
        names |= bound
    return frozenset(names)
