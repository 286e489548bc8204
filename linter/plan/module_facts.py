"""What the module screens (``linter.plan.module_screens``) share: a module's imports, its
top-level classes and functions, and those of the modules it imports, read once per file."""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator

from linter.plan.code_only import code_only
from linter.model.module_files import absolute_module_file, module_file, read_once
from linter.plan.lines import _LONE_CR
from linter.plan.words import _compiled
from linter.plan.segments import bound_name, top_level_segments

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body that are its own: nested functions and classes are another
    model's (``model.functions``), their decorators and defaults aside."""
    todo = _children(fn)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            todo.extend(_children(node))


def _children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes`` as a list, without its generators (as ``walk`` does)."""
    found = []
    for name in node._fields:
        value = getattr(node, name, None)
        if value.__class__ is list:
            found.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST) and name != "ctx":
            found.append(value)
    return found


def _imports(tree: ast.AST) -> dict[str, list[tuple[ast.ImportFrom, str]]]:
    """Local name -> every (``from ... import`` statement, imported name) binding it, anywhere
    in the file (an import is a statement: expressions are not searched)."""
    found: dict[str, list[tuple[ast.ImportFrom, str]]] = {}
    todo = list(getattr(tree, "body", ()))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found.setdefault(alias.asname or alias.name, []).append((node, alias.name))
            continue
        for field in _BODIES:
            for item in getattr(node, field, ()):
                if isinstance(item, ast.stmt):
                    todo.append(item)
                elif isinstance(item, (ast.ExceptHandler, ast.match_case)):
                    todo.extend(item.body)
    return found


# The fields of compound statements that hold statements.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _imported_file(statement: ast.ImportFrom, path: str) -> str | None:
    return _module_at(path, statement.level, statement.module.split(".") if statement.module else [])


def _module_at(path: str, level: int, parts: list[str]) -> str | None:
    """The file of the tree a ``from`` import in ``path`` reads (``level`` dots, then ``parts``)."""
    return module_file(path, level, parts) if level else absolute_module_file(path, parts)


def _imported_tops(statement: ast.ImportFrom, path: str) -> _Tops:
    """The top-level classes and functions of the module ``statement`` imports from, found as
    ``hierarchy.imported_classes`` and ``hierarchy.function_at`` find it; the file is a
    dependency of the result."""
    target = _imported_file(statement, path)
    return _NO_TOPS if target is None else read_once(target, _Tops, _NO_TOPS)


class _Tops:
    """A module's top-level classes and functions by name (``classes``, ``functions``), each
    parsed when its name is first asked for: a screen asks for one or two of a module's
    definitions, and parsing the whole module (a large one, imported by many files) cost
    vllm's screens more than their own reading. Each definition is parsed alone, padded to
    its own lines; where one does not parse alone, the whole module is parsed, as before
    (nothing where that fails too)."""

    def __init__(self, text: str = "") -> None:
        self._text = text
        # (a class?, name) -> the lines of the top-level definitions that bind it. Old Mac
        # line ends: none, the whole module is read (``code_only`` counts "\n" only).
        self._spans: dict[tuple[bool, str], list[tuple[int, int]]] = {}
        self._cut = bool(text) and _LONE_CR.search(text) is None
        for segment in top_level_segments(code_only(text)) if self._cut else ():
            name = bound_name(segment)
            if name is not None:
                self._spans.setdefault((segment.kind == "class", name), []).append((segment.start, segment.end))
        self._found: dict[tuple[bool, str], list] = {}
        self._whole: ast.Module | None = None

    def classes(self, name: str) -> list[ast.ClassDef]:
        return self._named(True, name)

    def functions(self, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        return self._named(False, name)

    def _named(self, is_class: bool, name: str) -> list:
        key = (is_class, name)
        found = self._found.get(key)
        if found is None:
            kinds = (ast.ClassDef,) if is_class else _FUNCTIONS
            spans = self._spans.get(key)
            binding = _TOP_CLASS if is_class else _TOP_FUNCTION
            found = [] if self._cut and (spans or not _compiled(binding.format(re.escape(name))).search(self._text)) else None
            for start, end in spans or ():
                tree = _parsed("\n" * start + "\n".join(self._text.split("\n")[start:end]))
                if tree is None:
                    found = None
                    break
                found.extend(s for s in tree.body if isinstance(s, kinds) and s.name == name)
            if found is None:
                # A definition that does not parse alone: the module as a whole says.
                if self._whole is None:
                    self._whole = _parsed(self._text) or ast.Module(body=[], type_ignores=[])
                found = [s for s in self._whole.body if isinstance(s, kinds) and s.name == name]
            self._found[key] = found
        return found


_NO_TOPS = _Tops()
# A top-level ``class`` or ``def`` line of a name (``format``ted with it): a name the segments
# did not find bound but that such a line binds (the segments misread) sends the whole module.
_TOP_CLASS = r"(?m)^\f*class[ \t]+{}(?!\w)"
_TOP_FUNCTION = r"(?m)^\f*(?:async[ \t]+)?def[ \t]+{}(?!\w)"


def _parsed(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _top_classes(tree: ast.AST) -> dict[str, list[ast.ClassDef]]:
    found: dict[str, list[ast.ClassDef]] = {}
    for statement in getattr(tree, "body", ()):
        if isinstance(statement, ast.ClassDef):
            found.setdefault(statement.name, []).append(statement)
    return found
