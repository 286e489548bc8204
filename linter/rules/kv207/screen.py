"""KV207's module screens: the lines of a file's ``ast`` tree where KV207 may report
(``MODULE_SCREEN``), and whether the text (with the modules it imports) can hold a finding at
all (``TEXT_SCREEN``). Both over-approximate the rule (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Callable
from typing import TypeVar
from linter.plan.code_only import code_only
from linter.model.module_files import read_once
from linter.model.names import key_counterpart, kv_side, value_counterpart
from linter.plan.imports import from_imports
from linter.plan.words import identifier_set
from linter.rules.kv207.condition import _redeclaring_class, class_spans, plain_bases_of
from linter.plan.lines import _LONE_CR
from linter.settings import Settings
from linter.plan.screen_facts import _builds_linear, _dotted, _flat, _kv201_size, _names_in, _self_attr, _UNREAD, walk
from linter.plan.module_facts import _FUNCTIONS, _imported_file, _imports, _module_at, _own_nodes, _top_classes


_C = TypeVar("_C")


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
    ``classes``, as ``screen_facts._kv201_size`` reads the layer (``model.classes.output_size``)."""
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


# Screens of a module rule that read the text alone (and the modules it imports), asked before
# the file is parsed: where one says no, its rule needs no ``ast`` tree of the file.
def kv207_text(text: str, settings: Settings, path: str) -> bool:
    """``kv207`` asked of the text, before the file is parsed: the text condition's class
    (``condition``) whose twin is named by a class of the module it derives from (read
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

MODULE_SCREEN = kv207
TEXT_SCREEN = kv207_text
