"""Where a KV head count is looked up by name, and the lookups that can only give the query's.

Code that serves many model families reads the KV head count off a configuration by name:
``getattr(config, "num_key_value_heads", n)``, ``hasattr(config, ...)``, ``"..." in config``, a
loop over candidate names. Three shapes of such a lookup give the query head count to K/V
caches on every grouped-query model:

- a chain of tests that asks for the query head count before the KV head count: every
  configuration that has a KV head count has a query head count too, so the KV branch is never
  taken (``if hasattr(c, "num_attention_heads"): ... elif hasattr(c, "num_key_value_heads")``);
- a loop over candidate KV head count names whose body never reads the loop variable and reads
  one constant name on every pass instead;
- the KV head count looked up on another object than the one the query head count (and the
  model's other sizes) are read from, with the query head count as its fallback: where that
  other object lacks the name, the fallback always wins.

Read on stdlib ``ast`` trees, so the rule and its screen ask one code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from linter.model.ast_reading import dotted
from linter.model.ast_walk import walk
from linter.model.names import Role, name_role

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class LookupFault:
    node: ast.AST
    message: str
    suggestion: str


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _role(name: str | None) -> Role | None:
    if name is None:
        return None
    role = name_role(name)
    return role if role in (Role.Q_HEADS, Role.KV_HEADS) else None


def probe(node: ast.AST) -> tuple[str, str, ast.AST] | None:
    """(object, name, node) of a test or read of an attribute by its name:
    ``hasattr(config, "n")``, ``getattr(config, "n", d)``, ``"n" in config``,
    ``config.get("n")``; the object as a dotted name."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("hasattr", "getattr") and len(node.args) >= 2:
            obj, name = dotted(node.args[0]), _string(node.args[1])
            if obj is not None and name is not None:
                return obj, name, node
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            obj, name = dotted(func.value), _string(node.args[0])
            if obj is not None and name is not None:
                return obj, name, node
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
        obj, name = dotted(node.comparators[0]), _string(node.left)
        if obj is not None and name is not None:
            return obj, name, node
    return None


def _test_probe(test: ast.AST) -> tuple[str, str, ast.AST] | None:
    """The probe an ``if`` test makes, alone or as the first operand of ``and``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        test = test.values[0]
    return probe(test)


def _query_first_chains(function: ast.AST) -> Iterator[LookupFault]:
    """``if hasattr(c, "num_attention_heads"): ... elif hasattr(c, "num_key_value_heads"):``."""
    elifs = {id(n.orelse[0]) for n in walk(function) if isinstance(n, ast.If) and len(n.orelse) == 1
             and isinstance(n.orelse[0], ast.If)}
    for node in walk(function):
        if not isinstance(node, ast.If) or id(node) in elifs:
            continue
        seen: list[tuple[str, str, ast.AST]] = []
        link: ast.AST | None = node
        while isinstance(link, ast.If):
            found = _test_probe(link.test)
            if found is not None:
                seen.append(found)
            link = link.orelse[0] if len(link.orelse) == 1 else None
        yield from _query_before_kv(seen, "test")


def _query_before_kv(probes: list[tuple[str, str, ast.AST]], how: str) -> Iterator[LookupFault]:
    for i, (obj, name, node) in enumerate(probes):
        if _role(name) is not Role.Q_HEADS:
            continue
        later = next((n for o, n, _ in probes[i + 1:] if o == obj and _role(n) is Role.KV_HEADS), None)
        if later is None:
            return
        yield LookupFault(
            node,
            (f"`{obj}` is asked" if obj else "the loop tries") + f" for `{name}`, the query head count, before `{later}`, the KV head count: "
            f"every configuration with a KV head count has a query head count too, so the KV {how} is never "
            "reached and grouped-query models get the query's count",
            f"look up `{later}` first and fall back to `{name}` only where it is missing",
        )
        return


def _candidate_names(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        names = [_string(e) for e in node.elts]
        return None if None in names else names
    return None


def _loops(function: ast.AST, lists: dict[str, list[str]]) -> Iterator[LookupFault]:
    """A loop over candidate head count names: one that ignores its variable, and one that
    tries the query's name before the KV's."""
    for node in walk(function):
        if not isinstance(node, ast.For) or not isinstance(node.target, ast.Name):
            continue
        names = _candidate_names(node.iter)
        if names is None and isinstance(node.iter, ast.Name):
            names = lists.get(node.iter.id)
        if not names or not any(_role(n) is Role.KV_HEADS for n in names):
            continue
        var = node.target.id
        body = [n for statement in node.body for n in walk(statement)]
        if any(isinstance(n, ast.Name) and n.id == var for n in body):
            if any(isinstance(n, (ast.Break, ast.Return)) for n in body):
                # The first name found wins: the query's before the KV's shadows it.
                yield from _query_before_kv([("", n, node) for n in names], "name")
            continue
        constant = next((p for n in body if (p := probe(n)) is not None), None)
        if constant is not None:
            obj, name, at = constant
            yield LookupFault(
                at,
                f"the loop tries the KV head count names {names} but never reads `{var}`: every pass reads "
                f"`{name}` on `{obj}`" + (", the query head count" if _role(name) is Role.Q_HEADS else ""),
                f"read `{var}` in the loop (`getattr({obj}, {var}, None)`)",
            )


def _objects_read_for(function: ast.AST, role: Role) -> dict[str, ast.AST]:
    """The objects a head count of ``role`` is read on: ``config.num_attention_heads``, a
    probe, or a helper given the object and the name (``get_attr(config, "n_head")``)."""
    found: dict[str, ast.AST] = {}
    for node in walk(function):
        if isinstance(node, ast.Attribute) and _role(node.attr) is role:
            obj = dotted(node.value)
            if obj is not None and obj != "self":
                found.setdefault(obj, node)
        elif isinstance(node, ast.Call):
            hit = probe(node)
            if hit is None:
                strings = [_string(a) for a in node.args]
                objects = [dotted(a) for a in node.args if not isinstance(a, ast.Constant)]
                if len(objects) == 1 and objects[0] is not None and any(_role(s) is role for s in strings):
                    hit = (objects[0], next(s for s in strings if _role(s) is role), node)
            if hit is not None and _role(hit[1]) is role:
                found.setdefault(hit[0], hit[2])
        elif isinstance(node, ast.Compare):
            hit = probe(node)
            if hit is not None and _role(hit[1]) is role:
                found.setdefault(hit[0], hit[2])
    return found


def _falls_back_to_query(function: ast.AST) -> bool:
    """Some KV head count is assigned from a query head count alone (the fallback)."""
    for node in walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            tail = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else None
            reads = [n.attr if isinstance(n, ast.Attribute) else n.id for n in walk(node.value)
                     if isinstance(n, (ast.Attribute, ast.Name))]
            if _role(tail) is Role.KV_HEADS and reads and all(_role(r) is not Role.KV_HEADS for r in reads) \
                    and any(_role(r) is Role.Q_HEADS for r in reads):
                return True
    return False


def _other_object(function: ast.AST) -> Iterator[LookupFault]:
    """The KV head count looked up on one object, the query's read on another, the query's
    count the fallback."""
    kv_objects = _objects_read_for(function, Role.KV_HEADS)
    q_objects = _objects_read_for(function, Role.Q_HEADS)
    if not kv_objects or not q_objects or not _falls_back_to_query(function):
        return
    probed = sorted(((hit[0], hit[2]) for node in walk(function) if (hit := probe(node)) is not None
                     and hit[0] in kv_objects and _role(hit[1]) is Role.KV_HEADS), key=lambda p: (p[1].lineno, p[1].col_offset))
    for obj, node in probed:
        if obj in q_objects or any(o == obj or o.startswith(obj + ".") or obj.startswith(o + ".") for o in q_objects):
            continue
        other = sorted(q_objects)[0]
        yield LookupFault(
            node,
            f"the KV head count is looked up on `{obj}`, while the query head count is read on `{other}` and "
            f"the KV count falls back to it: where `{obj}` lacks the name, every model gets the query's count",
            f"look the KV head count up on `{other}`, where the query head count comes from",
        )
        return


def _string_lists(function: ast.AST) -> dict[str, list[str]]:
    lists: dict[str, list[str]] = {}
    for node in walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names = _candidate_names(node.value)
            if names:
                lists[node.targets[0].id] = names
    return lists


def _functions(tree: ast.AST) -> Iterator[ast.AST]:
    for node in walk(tree):
        if isinstance(node, _FUNCTIONS):
            yield node


def lookup_faults(tree: ast.AST) -> list[LookupFault]:
    """Every KV head count lookup of ``tree`` that can only give the query's count."""
    found: list[LookupFault] = []
    if not any(n.__class__ is ast.Constant and _role(_string(n)) is Role.KV_HEADS for n in walk(tree)):
        return found  # every lookup reported names a KV head count in a string
    for function in _functions(tree):
        found.extend(_query_first_chains(function))
        found.extend(_loops(function, _string_lists(function)))
        found.extend(_other_object(function))
    unique: dict[tuple[int, int], LookupFault] = {}
    for fault in found:
        unique.setdefault((fault.node.lineno, fault.node.col_offset), fault)
    return sorted(unique.values(), key=lambda f: (f.node.lineno, f.node.col_offset))
