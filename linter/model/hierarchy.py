"""The classes of one module by name, so a subclass sees the projections it inherits from a
base defined in the same file (transformers' modular files redeclare one projection of a pair
and inherit the other), and what the module imports from other modules of its own tree: their
classes (bases, pools) and top-level functions (helpers). Every other file read is stamped
(``linter.dependencies``) so a cached result does not outlive an edit of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from linter.model.cache import cached
from linter.model.classes import ClassModel, Projection, class_model
from linter.model.functions import function_model
from linter.model.module_files import absolute_module_file, module_file, read_once

_STORE: dict = {}


def module_classes(module: cst.Module) -> dict[str, ClassModel]:
    """Top-level classes by name; a name bound twice keeps neither (which one a subclass
    names depends on order and control flow)."""
    return cached(_STORE, module, lambda: _build(module))


def _build(module: cst.Module) -> dict[str, ClassModel]:
    found: dict[str, ClassModel | None] = {}
    for statement in module.body:
        if isinstance(statement, cst.ClassDef):
            name = statement.name.value
            found[name] = None if name in found else class_model(statement)
    return {name: model for name, model in found.items() if model is not None}


def ancestors(model: ClassModel, classes: dict[str, ClassModel]) -> Iterator[ClassModel]:
    """The module's own classes ``model`` inherits from, nearest first (depth first along the
    bases in order, each once)."""
    seen = {model.name}
    stack = [b for b in reversed(model.bases) if b in classes]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        base = classes[name]
        yield base
        stack.extend(b for b in reversed(base.bases) if b in classes and b not in seen)


def inherited_projection(model: ClassModel, attr: str, classes: dict[str, ClassModel]) -> tuple[ClassModel, Projection] | None:
    """The nearest ancestor's ``attr`` projection, when ``model`` itself declares none."""
    if model.defines(attr):
        return None
    for base in ancestors(model, classes):
        if attr in base.projections:
            return base, base.projections[attr]
        if base.defines(attr):
            return None  # set to something that is no ``*Linear`` layer: unknown
    return None


def calls_parent_init(method: cst.FunctionDef) -> bool:
    """``super().__init__(...)`` or ``Base.__init__(self, ...)``: the inherited layers exist."""
    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__"
        for call in function_model(method).calls
    )


def resolver(*scopes: tuple[ClassModel, cst.FunctionDef]):
    """Resolve ``name``/``self.name`` to its single assignment in the given (class, method)
    pairs, first pair first."""
    tables = []
    for model, method in scopes:
        local: dict[str, list[cst.BaseExpression]] = {}
        for assignment in function_model(method).assignments:
            if assignment.position is None:
                local.setdefault(assignment.name, []).append(assignment.value)
        tables.append((local, model.attrs))

    def resolve(node: cst.BaseExpression) -> cst.BaseExpression | None:
        for local, attrs in tables:
            if isinstance(node, cst.Name):
                values = local.get(node.value)
            elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
                values = attrs.get(node.attr.value)
            else:
                return None
            if values:
                return values[0] if len(values) == 1 else None
        return None

    return resolve


def imported_classes(module: cst.Module, path: str, names: set[str], absolute: bool = False) -> dict[str, ClassModel]:
    """The classes among ``names`` that ``module`` (at ``path``) imports by a relative
    ``from .x import Name`` at its top level (with ``absolute``, also ``from pkg.x import
    Name`` anywhere in the file, ``pkg`` being the package ``path`` belongs to), read from the
    imported file when it exists (``_Classes``: each class parsed alone). A file that cannot
    be read or parsed contributes nothing."""
    found: dict[str, ClassModel] = {}
    for small in _imports(module, absolute):
        if isinstance(small.names, cst.ImportStar) or not (small.relative or absolute):
            continue
        wanted = {
            alias.name.value: (alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else alias.name.value)
            for alias in small.names if isinstance(alias.name, cst.Name)
        }
        wanted = {real: local for real, local in wanted.items() if local in names}
        if not wanted:
            continue
        if small.relative:
            target = module_file(path, len(small.relative), _parts(small.module))
        else:
            target = absolute_module_file(path, _parts(small.module))
        classes = _classes_at(target)
        for real, local in wanted.items():
            model = classes.get(real)
            if model is not None:
                found[local] = model
    return found


def import_sources(module: cst.Module, path: str, absolute: bool = False) -> dict[str, tuple[str, str]]:
    """Local name -> (file, name there) for every name ``module`` (at ``path``) imports by a
    relative ``from .x import name`` at its top level (with ``absolute``, also by ``from
    pkg.x import name`` anywhere, ``pkg`` being the package ``path`` belongs to), when that
    file exists. A name imported twice from different places keeps neither."""
    found: dict[str, tuple[str, str] | None] = {}
    for small in _imports(module, absolute):
        if isinstance(small.names, cst.ImportStar) or not (small.relative or absolute):
            continue
        target = (module_file(path, len(small.relative), _parts(small.module)) if small.relative
                  else absolute_module_file(path, _parts(small.module)))
        if target is None:
            continue
        for alias in small.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else alias.name.value
            source = (target, alias.name.value)
            found[local] = source if found.get(local, source) == source else None
    return {local: source for local, source in found.items() if source is not None}


_DEF_NAME = re.compile(r"\f*(?:async[ \t]+)?def[ \t]+(\w+)")


def function_at(path: str, name: str) -> cst.FunctionDef | None:
    """The top-level ``def name`` of the file at ``path``, parsed alone (a helper's module can
    be large; only its own statement is parsed). None when the file cannot be read, defines no
    such function at its top level, or defines it more than once."""
    index = read_once(path, _function_index, None)
    if index is None:
        return None
    lines, ranges, parsed = index
    if name not in parsed:
        parsed[name] = _parse_function(lines, ranges.get(name, []), name)
    return parsed[name]


def _function_index(text: str):
    """The file's lines, the line ranges of each top-level function name's definitions, and
    the functions parsed so far (filled by ``function_at``)."""
    return (*_definitions(text), {})


def _definitions(text: str) -> tuple[list[str], dict[str, list[tuple[int, int]]]]:
    from linter.plan.code_only import code_only
    from linter.plan.segments import top_level_segments

    lines = text.split("\n")
    ranges: dict[str, list[tuple[int, int]]] = {}
    for segment in top_level_segments(code_only(text)):
        if segment.kind != "def":
            continue
        for line in lines[segment.start:segment.end]:
            match = _DEF_NAME.match(line)
            if match:
                ranges.setdefault(match.group(1), []).append((segment.start, segment.end))
                break
    return lines, ranges


def _parse_function(lines: list[str], ranges: list[tuple[int, int]], name: str) -> cst.FunctionDef | None:
    if len(ranges) != 1:
        return None
    start, end = ranges[0]
    try:
        parsed = cst.parse_module("\n".join(lines[start:end]) + "\n")
    except (cst.ParserSyntaxError, RecursionError):
        return None
    defs = [s for s in parsed.body if isinstance(s, cst.FunctionDef)]
    return defs[0] if len(defs) == 1 and defs[0].name.value == name else None


def _imports(node: cst.CSTNode, anywhere: bool):
    """``from ... import ...`` statements: top-level ones, or (``anywhere``) also inside
    functions and classes (pools are often imported where they are built)."""
    body = getattr(node, "body", ())
    if isinstance(body, cst.BaseSuite):
        body = getattr(body, "body", ())
    for statement in body if isinstance(body, (list, tuple)) else ():
        if isinstance(statement, cst.SimpleStatementLine):
            yield from (s for s in statement.body if isinstance(s, cst.ImportFrom))
        elif anywhere and isinstance(statement, cst.BaseCompoundStatement):
            yield from _imports(statement, anywhere)
            for extra in (getattr(statement, "orelse", None), *getattr(statement, "handlers", ()),
                          getattr(statement, "finalbody", None)):
                if extra is not None:
                    yield from _imports(extra, anywhere)


def _parts(dotted: cst.Attribute | cst.Name | None) -> list[str]:
    """``a.b.c`` -> ["a", "b", "c"]; [] for None."""
    parts: list[str] = []
    node = dotted
    while isinstance(node, cst.Attribute):
        parts.insert(0, node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.insert(0, node.value)
    return parts


def _classes_at(path: str | None) -> _Classes:
    return _NO_CLASSES if path is None else read_once(path, _Classes, _NO_CLASSES)


class _Classes:
    """A module's top-level classes by name (``module_classes``'s reading), each parsed when
    its name is first asked for: a file asks for one or two bases of a module, and parsing the
    whole module (transformers' modular files import from modeling files of thousands of
    lines, one of them a second of libcst) cost more than the rule's own pass. Each class is
    parsed alone; where one does not parse alone, or a ``class`` line binds a name the
    segments missed, the whole module is parsed (nothing where that fails too), as the
    ``ast`` screens read the same file (``plan.module_facts._Tops``)."""

    def __init__(self, text: str = "") -> None:
        from linter.plan.code_only import code_only
        from linter.plan.lines import _LONE_CR
        from linter.plan.segments import bound_name, top_level_segments

        self._text = text
        # Old Mac line ends: the whole module is read (``code_only`` counts "\n" only).
        self._cut = bool(text) and _LONE_CR.search(text) is None
        self._spans: dict[str, list[tuple[int, int]]] = {}
        for segment in top_level_segments(code_only(text)) if self._cut else ():
            name = bound_name(segment) if segment.kind == "class" else None
            if name is not None:
                self._spans.setdefault(name, []).append((segment.start, segment.end))
        self._found: dict[str, ClassModel | None] = {}
        self._whole: dict[str, ClassModel] | None = None

    def get(self, name: str) -> ClassModel | None:
        if name not in self._found:
            self._found[name] = self._read(name)
        return self._found[name]

    def _read(self, name: str) -> ClassModel | None:
        spans = self._spans.get(name, [])
        if self._cut and len(spans) > 1:
            return None  # bound twice: ``module_classes`` keeps neither
        if self._cut and not spans and not re.search(_TOP_CLASS.format(re.escape(name)), self._text):
            return None
        if self._cut and spans:
            start, end = spans[0]
            try:
                parsed = cst.parse_module("\n".join(self._text.split("\n")[start:end]) + "\n")
            except (cst.ParserSyntaxError, RecursionError):
                parsed = None
            if parsed is not None and len(parsed.body) == 1 and isinstance(parsed.body[0], cst.ClassDef) and parsed.body[0].name.value == name:
                return class_model(parsed.body[0])
        # A class that does not parse alone: the module as a whole says.
        if self._whole is None:
            try:
                self._whole = _build(cst.parse_module(self._text))
            except (cst.ParserSyntaxError, RecursionError):
                self._whole = {}
        return self._whole.get(name)


_NO_CLASSES = _Classes()
# A top-level ``class`` line of a name (``format``ted with it): a name the segments did not
# find bound but that such a line binds (the segments misread) sends the whole module.
_TOP_CLASS = r"(?m)^\f*class[ \t]+{}(?!\w)"
