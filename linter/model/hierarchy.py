"""The classes of one module by name, so a subclass sees the projections it inherits from a
base defined in the same file (transformers' modular files redeclare one projection of a pair
and inherit the other).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.cache import cached
from linter.model.classes import ClassModel, Projection, class_model
from linter.model.functions import function_model

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
