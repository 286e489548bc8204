"""``ast`` screens for the rules whose facts lie in different top-level definitions of a file
(or in another file): KV105 (a helper and its caller), KV207 (a base class and its subclass),
KV208 (a pool class and the function that builds it), KV209 (a viewing helper and its caller).

The text pre-filter cannot cut such a file into units, so before these screens every file
their text conditions admitted went whole through libcst (on vllm: 105 files for KV208, 70
for KV105). Each screen reads the module's standard-library tree once and over-approximates
its rule as the other screens do (``ast_screens``): it may say yes for code without
findings, never no for code with one. Its yes is the lines where its rule may report (a
call, a class); the runner sends libcst the top-level definitions holding them, with every
definition they name, in place. A file whose module-wide rules all fail their screens goes
on to the per-definition plan of its other rules.

``TEXT_SCREENS`` ask the same of the text (and of the modules it imports, read as text)
before the file is parsed at all: most files the text conditions admit call an imported
helper or pool whose module cannot make a finding.
"""

from __future__ import annotations

import ast
import re
import warnings
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import TypeVar

from linter.ast_screens import _UNREAD, _builds_linear, _dotted, _flat, _kv201_size, _names_in, _seen_through, _self_attr, _tail, walk
from linter.code_only import code_only
from linter.model.module_files import absolute_module_file, module_file, read_once
from linter.model.twins import is_value_head_dim
from linter.model.names import RESHAPE_CALLS, SAME_TENSOR_METHODS, SEE_THROUGH, SHAPE_KEEPING, Role, is_kv_tensor_name, key_counterpart, kv_side, name_role, value_counterpart
from linter.prefilter import (
    TOP_LEVEL_CLASS,
    code_head_dim_callees,
    cut_returning_defs,
    from_imports,
    head_dim_callees,
    identifier_set,
    kv105_helpers,
    kv209_facts,
    top_level_starts,
    view_returning_defs,
)
from linter.prefilter.kv207 import _redeclaring_class, class_spans, plain_bases_of
from linter.prefilter.lines import _LONE_CR
from linter.prefilter.words import _compiled
from linter.segments import bound_name, top_level_segments
from linter.settings import Settings

_C = TypeVar("_C")

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


# KV207 -----------------------------------------------------------------------------------


def _direct_self_attrs(cls: ast.ClassDef) -> set[str]:
    """Attributes the class surely defines: its methods, its class-level names, and
    ``self.X`` assigned by a statement directly in a method's body (the rule's model sees
    these and more, so a twin found here is one it finds too)."""
    found = set()
    for statement in cls.body:
        if isinstance(statement, _FUNCTIONS):
            found.add(statement.name)
            for inner in statement.body:
                if isinstance(inner, (ast.Assign, ast.AnnAssign)) and inner.value is not None:
                    targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                    found.update(a for t in _flat(targets) if (a := _self_attr(t)) is not None)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            found.update(t.id for t in _flat(targets) if isinstance(t, ast.Name))
    return found


def _lonely_twins(cls: ast.ClassDef, extra) -> set[str]:
    """The twins of the K/V projections a method of ``cls`` assigns a ``*Linear`` after
    calling its parent's ``__init__``, where the class does not define the twin itself."""
    defined: set[str] | None = None
    found: set[str] = set()
    for method in cls.body:
        if not isinstance(method, _FUNCTIONS):
            continue
        # The assignments first: most methods build no projection, and need no second walk.
        lonely = []
        for node in walk(method):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None or not _builds_linear(node.value):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in _flat(targets):
                attr = _self_attr(target)
                side = kv_side(attr, extra) if attr is not None else None
                if side is not None and (twin := (value_counterpart if side == "k" else key_counterpart)(attr, extra)) is not None:
                    lonely.append(twin)
        if not lonely or not any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
            for n in _own_nodes(method)
        ):
            continue
        if defined is None:
            defined = _direct_self_attrs(cls)
        found.update(twin for twin in lonely if twin not in defined)
    return found


def kv207(tree: ast.AST, settings: Settings, path: str) -> frozenset[int]:
    """A top-level class with a base it can inherit a projection from (a class of the module
    or a name imported by ``from ... import``: the rule reads no other) that calls its
    parent's ``__init__`` and assigns one side of a K/V projection pair a ``*Linear`` without
    the other, where the twin is named in a class of the module it derives from, or (a base
    read from another file of the tree) in any class of the module or that file: the rule
    finds the inherited twin among those classes only. The lines of such classes."""
    classes = _top_classes(tree)
    imported: dict[str, list[tuple[ast.ImportFrom, str]]] | None = None
    in_classes: set[str] | None = None
    extra = settings.extra_pairs
    found: set[int] = set()
    for same_name in classes.values():
        for cls in same_name:
            bases = [d for b in cls.bases if (d := _dotted(b)) is not None]
            if not bases or not (twins := _lonely_twins(cls, extra)):
                continue
            if imported is None:
                imported = _imports(tree)
            if not any(b in classes or b in imported for b in bases):
                continue
            local, outside = _ancestry(cls, classes)
            files = [
                target for b in outside for statement, _ in imported.get(b, ())
                if (target := _imported_file(statement, path)) is not None
            ]
            if not files:
                # No base is read from another file: the twin is inherited only from a class
                # of the module that ``cls`` derives from (diffusers' ``AttentionModuleMixin``,
                # a package outside the tree, lends the rule nothing).
                if any(not twins.isdisjoint(_names_in(base)) for base in local) and not _declared_alike(cls, local, extra):
                    found.add(cls.lineno)
                continue
            # An imported base's own bases are looked up among the module's classes too (by
            # name, as ``hierarchy.ancestors`` does): any class of the module may lend the twin.
            if in_classes is None:
                in_classes = {n for c in classes.values() for k in c for n in _names_in(k)}
            if not twins.isdisjoint(in_classes) or any(
                not twins.isdisjoint(read_once(target, identifier_set, frozenset())) for target in files
            ):
                found.add(cls.lineno)
    return frozenset(found)


def _declared_alike(cls: ast.ClassDef, local: list[ast.ClassDef], extra) -> bool:
    """Is every K/V projection ``cls`` declares declared with one output size, the size of
    every declaration of its twin in ``local`` (the module's classes it derives from)? The
    rule compares the two through one resolver (``hierarchy.resolver``): equal trees resolve
    alike, so they name the same head counts and it has nothing to report. A size it may read
    otherwise (unpacked arguments, a layer this reading does not find) answers no."""
    theirs = _projection_sizes(local)
    for attr, sizes in _projection_sizes([cls]).items():
        side = kv_side(attr, extra)
        twin = (value_counterpart if side == "k" else key_counterpart)(attr, extra) if side else None
        if twin is None:
            continue
        every = sizes | theirs.get(twin, set())
        if len(every) != 1 or None in every or _UNREAD in every:
            return False
    return True


def _projection_sizes(classes: list[ast.ClassDef]) -> dict[str, set[str | None]]:
    """``self.X`` -> the output sizes (trees, dumped) of every ``*Linear`` assigned to it in
    ``classes``, as ``ast_screens._kv201_size`` reads the layer (``model.classes.output_size``)."""
    found: dict[str, set[str | None]] = {}
    for cls in classes:
        for node in walk(cls):
            if type(node) is not ast.Assign and (type(node) is not ast.AnnAssign or node.value is None):
                continue
            if not _builds_linear(node.value):
                continue
            size = _kv201_size(node.value)
            dumped = size if size is None or isinstance(size, str) else ast.dump(size)
            for target in _flat(node.targets if type(node) is ast.Assign else [node.target]):
                if (attr := _self_attr(target)) is not None:
                    found.setdefault(attr, set()).add(dumped)
    return found


def _ancestry(cls: ast.ClassDef, classes: dict[str, list[ast.ClassDef]]) -> tuple[list[ast.ClassDef], set[str]]:
    """The module's classes ``cls`` derives from and the base names that name none of them
    (``_along_bases``)."""
    return _along_bases(_dotted_bases(cls), classes, _dotted_bases, {cls.name})


def _dotted_bases(cls: ast.ClassDef) -> list[str]:
    return [d for b in cls.bases if (d := _dotted(b)) is not None]


def _along_bases(
    bases: list[str], classes: dict[str, list[_C]], bases_of: Callable[[_C], list[str]], seen: set[str]
) -> tuple[list[_C], set[str]]:
    """Every class of ``classes`` (by name) bound to one of ``bases``, then to one of theirs
    (``bases_of``), and so on, each name once (none of ``seen``); and the names along the way
    that name no class of ``classes``."""
    local: list[_C] = []
    outside: set[str] = set()
    todo = list(bases)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in classes:
            outside.add(name)
            continue
        for base in classes[name]:
            local.append(base)
            todo.extend(bases_of(base))
    return local, outside


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


def _top_level_class_texts(text: str) -> Iterator[str]:
    """The text of each top-level class, from its ``class`` line to the next top-level
    definition (the module's statements between count with it)."""
    starts = [m.start() for m in top_level_starts(text)]
    for match in TOP_LEVEL_CLASS.finditer(text):
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


# KV209 -----------------------------------------------------------------------------------

_VIEW_TAILS = frozenset({"view", "reshape", "unflatten", "rearrange"})


def _may_return_a_view(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Has ``fn`` a view call, and can each of its returns be one (``KV209._summarize``): its
    first parameter viewed, through names and axis-keeping steps (``.transpose(1, 2)``)?"""
    own = list(_own_nodes(fn))
    returns = [n for n in own if isinstance(n, ast.Return)]
    if not returns or not any(isinstance(n, ast.Call) and _tail(n.func) in _VIEW_TAILS for n in own):
        return False
    # What each name is assigned: a name is read through its last binding before its use
    # (``t = t.view(s); t = t.permute(...)``); any binding stands for that one here, and a
    # positional parameter may be read before any of its own.
    bound: dict[str, list[ast.expr]] = {}
    for node in own:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in _flat(node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
    args = fn.args
    parameters = frozenset(a.arg for a in (*args.posonlyargs, *args.args))
    return all(_may_be_a_view(statement.value, bound, parameters, _NAME_STEPS) for statement in returns)


# How many names ``KV209._returned_view`` and ``_is_parameter`` follow, each.
_NAME_STEPS = 8


def _may_be_a_view(value: ast.expr | None, bound: dict[str, list[ast.expr]], parameters: frozenset[str], steps: int) -> bool:
    """Can ``value`` be a view of the parameter (``KV209._returned_view``): after axis-keeping
    steps, a view call of what may be the parameter, or a name bound to such a value?"""
    value = _seen_through(value)
    if isinstance(value, ast.Call) and _tail(value.func) in _VIEW_TAILS:
        return _may_be_the_parameter(_viewed(value), bound, parameters, _NAME_STEPS)
    if isinstance(value, ast.Name) and steps:
        return any(_may_be_a_view(v, bound, parameters, steps - 1) for v in bound.get(value.id, ()))
    return False


def _may_be_the_parameter(
    value: ast.expr | None, bound: dict[str, list[ast.expr]], parameters: frozenset[str], steps: int
) -> bool:
    """Can ``value`` be the parameter as passed (``KV209._is_parameter``): after axis-keeping
    steps, a parameter or a name never bound, or a name bound to such a value? Never another
    view."""
    value = _seen_through(value)
    if not isinstance(value, ast.Name):
        return value is None  # a view call of nothing the rule could read: unsure, so yes
    if value.id in parameters or value.id not in bound:
        return True
    return bool(steps) and any(_may_be_the_parameter(v, bound, parameters, steps - 1) for v in bound[value.id])


def _viewed(call: ast.Call) -> ast.expr | None:
    """What the view ``call`` views: the receiver of a method (``x.view(...)``), or the first
    argument of a function (``rearrange(x, ...)``; ``torch.reshape(x, ...)`` reads as a method
    of ``torch``, a name); None for a function called without one."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.value
    return call.args[0] if call.args else None


def _first_root(node: ast.expr) -> str | None:
    """``rules.kv209.first_root``: the root of a name chain passed first."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr if _dotted(node.value) is not None else None
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            func = node.func
            node = func.value if isinstance(func, ast.Attribute) and func.attr in SAME_TENSOR_METHODS else func
        else:
            return None


def _viewed_names(tree: ast.AST) -> set[str]:
    """Every name spelled in the receiver of a view, reshape, unflatten or rearrange call, or
    in the target it is assigned to: a superset of what KV202 reads a view as about."""
    found: set[str] = set()
    for node in walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            if any(isinstance(n, ast.Call) and _tail(n.func) in _VIEW_TAILS for n in walk(node.value)):
                found |= _names_in(node.targets[0])
        elif isinstance(node, ast.Call) and _tail(node.func) in _VIEW_TAILS:
            if isinstance(node.func, ast.Attribute):
                found |= _names_in(node.func.value)
            if node.args:
                found |= _names_in(node.args[0])
    return found


def kv209(tree: ast.AST, settings: Settings, path: str) -> frozenset[int]:
    """A call with a K (V) name chain first, of a function of the file that may return a view
    (``name(...)``, ``self.name(...)``) or of one imported from a module of the tree that
    may; and the twin passed first to such a call with other arguments (the same helper
    with the same arguments views both alike), or viewed inline, in the same function (KV202
    compares the views of one scope). The lines of the calls through such a helper in the
    functions where some is (none: no finding)."""
    extra = settings.extra_pairs
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    calls: list[tuple[str, bool, str, str, ast.Call]] = []  # (callee, plain name?, root, side, call)
    imported: dict[str, list[tuple[ast.ImportFrom, str]]] = {}  # ``_imports``, in the same walk
    for node in walk(tree):
        if isinstance(node, _FUNCTIONS):
            functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, []).append((node, alias.name))
        elif isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
            func = node.func
            if isinstance(func, ast.Name):
                callee = func.id
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
                callee = func.attr
            else:
                continue
            root = _first_root(node.args[0])
            side = kv_side(root, extra) if root is not None else None
            if side is not None:
                calls.append((callee, isinstance(func, ast.Name), root, side, node))
    if not calls:
        return frozenset()
    # Only the callees of such calls are read (a model file has hundreds of functions).
    viewing: dict[str, bool] = {}
    passed: list[tuple[str, str, str, int, ast.Call]] = []  # (root, side, the call less its first argument, line, call)
    for callee, plain, root, side, node in calls:
        if callee not in viewing:
            viewing[callee] = any(_may_return_a_view(fn) for fn in functions.get(callee, ()))
        helper = viewing[callee]
        if not helper and plain:
            helper = any(
                _may_return_a_view(fn)
                for statement, real in imported.get(callee, ())
                for fn in _imported_tops(statement, path).functions(real)
            )
        if helper:
            rest = ast.dump(ast.Call(node.func, node.args[1:], node.keywords))
            passed.append((root, side, rest, node.lineno, node))
    if not passed:
        return frozenset()
    # KV202's scopes: a view is compared with the views of its own function only (code
    # outside every function, with the module's). Each call is read with the outermost
    # function whose body holds it, a superset of its own; the module's calls with the file.
    bodies = sorted(
        [((fn.body[0].lineno, fn.body[0].col_offset), (fn.end_lineno, fn.end_col_offset), fn)
         for same_name in functions.values() for fn in same_name],
        key=lambda body: body[0],
    )
    scopes: dict[int, ast.AST] = {}
    for root, side, rest, line, node in passed:
        scopes[id(node)] = next((fn for start, end, fn in bodies if start <= (node.lineno, node.col_offset) <= end), tree)
    viewed: dict[int, set[str]] = {}
    matched: set[int] = set()  # the scopes where some call's twin is viewed otherwise
    for root, side, rest, _, node in passed:
        twin = (value_counterpart if side == "k" else key_counterpart)(root, extra)
        scope = scopes[id(node)]
        if twin is None or id(scope) in matched:
            continue
        if id(scope) not in viewed:
            viewed[id(scope)] = _viewed_names(scope)
        if twin in viewed[id(scope)] or any(
            other == twin and other_rest != rest and scopes[id(n)] is scope for other, _, other_rest, _, n in passed
        ):
            matched.add(id(scope))
    return frozenset(line for *_, line, node in passed if id(scopes[id(node)]) in matched)


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
        for region in _top_level_class_texts(text)
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


def kv209_text(text: str, settings: Settings, path: str) -> bool:
    """``kv209`` asked of the text, before the file is parsed: the text condition asked again
    with, of the helpers ``from`` imports bind, only those whose module (read as text) has a
    ``def`` of that name that may return a view."""
    facts = kv209_facts(text, settings)
    if facts is None:
        return False
    bound: dict[str, list[tuple[int, list[str], str]]] = {}
    for level, parts, real, name in from_imports(text):
        if name in facts.imported:
            bound.setdefault(name, []).append((level, parts, real))
    viewing = {name for name in facts.imported if name not in bound}  # an import the text cannot read
    for name, sources in bound.items():
        for level, parts, real in sources:
            target = _module_at(path, level, parts)
            if target is not None and read_once(target, _ViewReturning, _NO_VIEWS).may(real):
                viewing.add(name)
                break
    return facts.holds(viewing)


class _ViewReturning:
    """Which functions of a module's text may return a view, asked name by name (a helpers
    module is imported by many files, each asking for a few of its functions)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._known: dict[str, bool] = {}

    def may(self, name: str) -> bool:
        if name not in self._known:
            self._known[name] = bool(view_returning_defs(self._text, {name}))
        return self._known[name]


_NO_VIEWS = _ViewReturning("")


# Screens of a module rule that read the text alone (and the modules it imports), asked before
# the file is parsed: where one says no, its rule needs no ``ast`` tree of the file.
def kv207_text(text: str, settings: Settings, path: str) -> bool:
    """``kv207`` asked of the text, before the file is parsed: the text condition's class
    (``prefilter.kv207``) whose twin is named by a class of the module it derives from (read
    along the plain bases of the module's classes, as ``_ancestry`` reads them), or with a base
    along the way that a ``from ... import`` binds to a file of the tree (``kv207`` then asks
    more of that file and the module's classes)."""
    if "\r" in text and _LONE_CR.search(text):
        return True  # old Mac line ends: the classes are not read line by line
    code = code_only(text)
    classes = class_spans(code)
    imports: dict[str, list[tuple[int, list[str]]]] | None = None

    def lends(plain: list[str], twins: set[str]) -> bool:
        nonlocal imports
        local, outside = _along_bases(plain, classes, lambda span: plain_bases_of(code, *span), set())
        if any(not twins.isdisjoint(identifier_set(code[start:end])) for start, end in local):
            return True
        if not outside:
            return False
        if imports is None:
            imports = {}
            for level, parts, _, bound in from_imports(text):
                imports.setdefault(bound, []).append((level, parts))
        return any(_module_at(path, level, parts) is not None for name in outside for level, parts in imports.get(name, ()))

    return _redeclaring_class(code, settings.extra_pairs, lends=lends)


TEXT_SCREENS = {"KV105": kv105_text, "KV207": kv207_text, "KV208": kv208_text, "KV209": kv209_text}


SCREENS = {"KV105": kv105, "KV207": kv207, "KV208": kv208, "KV209": kv209}
