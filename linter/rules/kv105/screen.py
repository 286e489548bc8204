"""KV105's module screens: the lines of a file's ``ast`` tree where KV105 may report
(``MODULE_SCREEN``), and whether the text (with the modules it imports) can hold a finding at
all (``TEXT_SCREEN``). Both over-approximate the rule (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.module_files import read_once
from linter.model.names import RESHAPE_CALLS, SEE_THROUGH, SHAPE_KEEPING, is_kv_tensor_name, kv_side, value_counterpart
from linter.plan.imports import from_imports
from linter.rules.kv105.condition import cut_returning_defs, kv105_helpers
from linter.settings import Settings
from linter.plan.screen_facts import _dotted, _flat, _names_in, _tail, walk
from linter.plan.module_facts import _FUNCTIONS, _imported_file, _imports, _module_at, _NO_TOPS, _own_nodes, _Tops


def _imported_helper_may_cut(statement: ast.ImportFrom, real: str, path: str) -> bool:
    """Can the function ``real`` that ``statement`` imports cut its first parameter
    (``hierarchy.function_at``)?"""
    return _helper_in_may_cut(_imported_file(statement, path), real)


def _helper_in_may_cut(target: str | None, real: str) -> bool:
    """Can the top-level function ``real`` of the module file ``target`` cut its first
    parameter? The module's text is read first: it is parsed only when it has a top-level
    ``def real`` whose every return can be a cut."""
    if target is None or real not in read_once(target, _cut_returning_names, frozenset()):
        return False
    return any(_may_cut_a_parameter(fn) for fn in read_once(target, _Tops, _NO_TOPS).functions(real))


def _cut_returning_names(text: str) -> frozenset[str]:
    return frozenset(cut_returning_defs(text))


# KV105 -----------------------------------------------------------------------------------


def _cut_base(value: ast.expr) -> str | None:
    """The name ``reshapes.reshape_of`` would take as the base of the cut ``value`` (after
    ``strip_shape_keeping``), when it is a plain name; None when ``value`` is no cut of one."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in SHAPE_KEEPING:
        value = value.func.value
    if isinstance(value, ast.Subscript):
        inner = value.value
        while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr in SEE_THROUGH:
            inner = inner.func.value
        return inner.id if isinstance(inner, ast.Name) else None
    if isinstance(value, ast.Call) and _tail(value.func) in RESHAPE_CALLS:
        func = value.func
        if isinstance(func, ast.Attribute) and _dotted(func.value) not in (None, "torch", "torch.Tensor", "Tensor"):
            return func.value.id if isinstance(func.value, ast.Name) else None
        first = value.args[0] if value.args and not isinstance(value.args[0], ast.Starred) else None
        return first.id if isinstance(first, ast.Name) else None
    return None


def _may_cut_a_parameter(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Can every ``return`` of ``fn`` be a cut of a positional parameter, directly or through
    a name assigned before (``KeyCutByHelper._cut_parameter``, less the axis)?"""
    positional = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)}
    if not positional:
        return False
    returns, assigned = [], {}
    for node in _own_nodes(fn):
        if isinstance(node, ast.Return):
            returns.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in _flat(targets):
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    if not returns:
        return False
    for statement in returns:
        value = statement.value
        if value is None:
            return False
        values = [value, *assigned.get(value.id, ())] if isinstance(value, ast.Name) else [value]
        if not any(_cut_base(v) in positional for v in values):
            return False
    return True


def kv105(tree: ast.AST, settings: Settings, path: str) -> frozenset[int]:
    """A top-level helper that may cut a parameter, called with a K tensor (a dotted name)
    whose V twin is named in the file; or a helper imported from a module of the tree that
    may cut its first parameter, called with a K-side name first.

    A helper is judged only once a call passes it a key: most of a module's functions never
    are. The lines of such calls (none: no finding)."""
    extra = settings.extra_pairs
    defined: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for statement in getattr(tree, "body", ()):
        if isinstance(statement, _FUNCTIONS):
            defined.setdefault(statement.name, []).append(statement)
    helper: dict[str, bool] = {}  # per top-level name: may it cut a parameter?
    imported: dict[str, list[tuple[ast.ImportFrom, str]]] | None = None
    cutting: dict[str, bool] = {}  # per imported name: may it cut its first parameter?
    spelled: set[str] | None = None
    found: set[int] = set()
    for node in walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        keys = [
            (i, tail) for i, argument in enumerate((*node.args, *(k.value for k in node.keywords)))
            if _dotted(argument) is not None and kv_side(tail := _tail(argument), extra) == "k"
        ]
        if not keys:
            continue
        name = node.func.id
        if name in defined and name not in helper:
            helper[name] = any(_may_cut_a_parameter(fn) for fn in defined[name])
        if helper.get(name):
            tails = [tail for _, tail in keys if is_kv_tensor_name(tail, extra)]
        else:
            # An imported helper is read only for a K-side name passed first.
            if keys[0][0] != 0 or not node.args:
                continue
            if imported is None:
                imported = _imports(tree)
            if name not in cutting:
                cutting[name] = any(_imported_helper_may_cut(statement, real, path) for statement, real in imported.get(name, ()))
            if not cutting[name]:
                continue
            tails = [keys[0][1]]
        for tail in tails:
            if spelled is None:
                spelled = _names_in(tree) | {a.arg for a in walk(tree) if isinstance(a, ast.arg)}
            if value_counterpart(tail, extra) in spelled:
                found.add(node.lineno)
                break
    return frozenset(found)


def kv105_text(text: str, settings: Settings, path: str) -> bool:
    """``kv105`` asked of the text, before the file is parsed: a helper the module defines
    called on a key (left to ``kv105``), or a name a ``from ... import`` binds, called with a
    key first, to a function that its module (read as ``kv105`` reads it) may cut with."""
    helpers = kv105_helpers(text, settings)
    if "" in helpers:
        return True
    bound = {}
    for level, parts, real, name in from_imports(text):
        if name in helpers:
            bound.setdefault(name, []).append((level, parts, real))
    if not helpers <= bound.keys():
        return True  # an import the text cannot read
    return any(
        _helper_in_may_cut(_module_at(path, level, parts), real)
        for sources in bound.values() for level, parts, real in sources
    )

MODULE_SCREEN = kv105
TEXT_SCREEN = kv105_text
