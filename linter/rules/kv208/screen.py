"""KV208's module screens: the lines of a file's ``ast`` tree where KV208 may report
(``MODULE_SCREEN``), and whether the text (with the modules it imports) can hold a finding at
all (``TEXT_SCREEN``). Both over-approximate the rule (``linter.plan.screens``)."""

from __future__ import annotations
import ast
import re
from bisect import bisect_right
from collections.abc import Collection, Iterator
from linter.plan.code_only import code_only
from linter.model.module_files import read_once
from linter.model.twins import is_value_head_dim
from linter.model.names import Role, name_role
from linter.plan.imports import from_imports
from linter.plan.lines import TOP_LEVEL_CLASS, top_level_starts
from linter.plan.words import identifier_set
from linter.rules.kv208.condition import code_head_dim_callees, head_dim_callees
from linter.settings import Settings
from linter.plan.screen_facts import _names_in, walk
from linter.plan.module_facts import _FUNCTIONS, _imported_file, _imported_tops, _imports, _module_at, _NO_TOPS, _top_classes, _Tops


# KV208 -----------------------------------------------------------------------------------


def _leaves_out_a_value_dim(cls: ast.ClassDef, call: ast.Call) -> bool:
    """Does some ``__init__`` of ``cls`` take exactly one optional value head dim that
    ``call`` passes neither by keyword nor by position?"""
    return any(
        param not in {k.arg for k in call.keywords} and len(call.args) <= index
        for index, param in _optional_value_dims(cls)
    )


def _optional_value_dims(cls: ast.ClassDef) -> Iterator[tuple[int, str]]:
    """(position after ``self``, name) of the one optional value head dim of each
    ``__init__`` of ``cls`` that takes exactly one."""
    for init in cls.body:
        if not (isinstance(init, _FUNCTIONS) and init.name == "__init__"):
            continue
        args = init.args
        positional = [*args.posonlyargs, *args.args]
        defaulted = {a.arg for a in positional[len(positional) - len(args.defaults):]} if args.defaults else set()
        defaulted.update(a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
        params = [a.arg for a in (*positional, *args.kwonlyargs, args.vararg, args.kwarg) if a][1:]
        optional = [(i, p) for i, p in enumerate(params) if p in defaulted and is_value_head_dim(p)]
        if len(optional) == 1:
            yield optional[0]


def kv208(tree: ast.AST, settings: Settings, path: str) -> frozenset[int]:
    """A call passing a head dim by keyword, from a function that reads a value head dim, of
    a module class whose ``__init__`` leaves an optional value head dim out, or of a class
    imported from a module of the tree that may define it with a value head dim. The lines of
    such calls."""
    candidates, functions = [], []
    for node in walk(tree):
        if isinstance(node, _FUNCTIONS):
            functions.append(node)
        elif _builds_with_a_head_dim(node):
            candidates.append(node)
    if not candidates:
        return frozenset()
    classes = _top_classes(tree)
    imported: dict[str, list[tuple[ast.ImportFrom, str]]] | None = None
    found: set[int] = set()
    for fn in functions:
        # By lines: a call in a lambda or a nested class body is the enclosing function's (the
        # rule tracks ``def`` only); one in a nested ``def`` counts for both, which only widens.
        calls = [c for c in candidates if fn.lineno <= c.lineno <= fn.end_lineno]
        if not calls or not any(is_value_head_dim(n) for n in _names_in(fn)):
            continue
        for call in calls:
            name = call.func.id
            if name in classes:
                if any(_leaves_out_a_value_dim(cls, call) for cls in classes[name]):
                    found.add(call.lineno)
                    continue
                if len(classes[name]) == 1:
                    continue  # the rule reads that class; a name bound twice it looks up by import
            if imported is None:
                imported = _imports(tree)
            for statement, real in imported.get(name, ()):
                target = _imported_file(statement, path)
                # The module is parsed only when its text has the class and a value head dim.
                if target is None or real not in read_once(target, _classes_with_a_value_dim, frozenset()):
                    continue
                if any(_leaves_out_a_value_dim(cls, call) for cls in _imported_tops(statement, path).classes(real)):
                    found.add(call.lineno)
                    break
    return frozenset(found)




def _classes_with_a_value_dim(text: str) -> frozenset[str]:
    """A module's top-level class names, when a value head dim is named in it at all."""
    if not any(is_value_head_dim(n) for n in identifier_set(text)):
        return frozenset()
    return frozenset(TOP_LEVEL_CLASS.findall(text))


def _may_take_an_optional_value_dim(region: str) -> bool:
    """Can the class whose text ``region`` is take an optional value head dim, as
    ``_optional_value_dims`` reads one: a parameter of a ``def __init__`` in it named as a value
    head dim, with a default? Read from the code (``code_only``), each parameter up to a comma
    outside brackets; a list whose bracket never closes is read to the end."""
    code = code_only(region)
    for match in _INIT.finditer(code):
        depth, name, defaulted = 0, None, False
        for piece in _PARAMETER_PIECE.finditer(code, match.end()):
            token = piece.group()
            if token in "([{":
                depth += 1
            elif token in ")]}":
                depth -= 1
                if depth < 0:
                    break
            elif depth == 0:
                if token == ",":
                    name, defaulted = None, False
                elif token == "=":
                    defaulted = True
                elif name is None:
                    name = token
            if defaulted and name is not None and is_value_head_dim(name):
                return True
    return False


_INIT = re.compile(r"def[ \t]+__init__[ \t]*\(")
# What a parameter list is read by: brackets, commas, ``=`` (not ``==``) and names.
_PARAMETER_PIECE = re.compile(r"[()\[\]{},]|(?<![=!<>])=(?!=)|[^\W\d]\w*")


def _top_level_class_texts(text: str, named: Collection[str]) -> Iterator[str]:
    """The text of each top-level class of one of the ``named``, from its ``class`` line to
    the next top-level definition (the module's statements between count with it). A class
    line in column 0 starts a top-level definition, so each text holds its own class alone:
    the other classes need not be cut out (most files call none of theirs with a head dim)."""
    starts: list[int] | None = None
    for match in TOP_LEVEL_CLASS.finditer(text):
        if match.group(1) not in named:
            continue
        if starts is None:
            starts = [m.start() for m in top_level_starts(text)]
        index = bisect_right(starts, match.start())
        yield text[match.start():starts[index] if index < len(starts) else len(text)]


def _builds_with_a_head_dim(node: ast.AST) -> bool:
    """``Pool(..., head_dim=...)``: a call of a plain name passing a head dim by keyword,
    without star arguments."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and any(k.arg is not None and name_role(k.arg) is Role.HEAD_DIM for k in node.keywords)
        and all(k.arg is not None for k in node.keywords)
        and not any(isinstance(a, ast.Starred) for a in node.args)
    )


def kv208_text(text: str, settings: Settings, path: str) -> bool:
    """``kv208`` asked of the text, before the file is parsed: a call with a head-dim keyword
    in a definition that names a value head dim, of a top-level class of the module or of a
    name a ``from ... import`` binds to a class that its module (read as ``kv208`` reads it)
    may define with a value head dim. A callee the text cannot tell passes."""
    callees = head_dim_callees(text, settings)
    if "" in callees:
        callees = code_head_dim_callees(text, settings)
        if "" in callees:
            return True
    if not callees:
        return False
    if any(
        callees & _classes_with_a_value_dim(region) and _may_take_an_optional_value_dim(region)
        for region in _top_level_class_texts(text, callees)
    ):
        return True
    for level, parts, real, bound in from_imports(text):
        if bound not in callees:
            continue
        target = _module_at(path, level, parts)
        if target is None or real not in read_once(target, _classes_with_a_value_dim, frozenset()):
            continue
        # The class must take one optional value head dim for any call to leave it out.
        if any(next(_optional_value_dims(cls), None) for cls in read_once(target, _Tops, _NO_TOPS).classes(real)):
            return True
    return False

MODULE_SCREEN = kv208
TEXT_SCREEN = kv208_text
