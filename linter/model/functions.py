"""One function body read once: what its parameters are and what each statement does with
K/V-side names, in source order (nested functions and classes are left to their own model).

"Before" is pre-order position in the walk, ignoring control flow: right for the straight-line
code attention layers are written in, and all a linter can afford.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from linter.model.cache import cached
from linter.model.walk import children
from linter.model.pairs import dotted_name


@dataclass(frozen=True)
class Assignment:
    order: int
    target: cst.BaseExpression  # a Name or Attribute (one simple target)
    name: str  # its dotted text: ``v``, ``self.v_cache``
    value: cst.BaseExpression
    # For ``a, b = value``: this target's position in the unpacked tuple, else None.
    position: int | None = None


@dataclass(frozen=True)
class Store:
    """``base[...] = value``: a write through a subscript."""

    order: int
    node: cst.Subscript
    base: str  # dotted text of the subscripted object
    value: cst.BaseExpression


@dataclass
class FunctionModel:
    node: cst.FunctionDef
    params: tuple[str, ...]
    # Parameters that default to None: inputs that may be absent (``encoder_hidden_states=None``).
    optional: frozenset[str] = frozenset()
    assignments: list[Assignment] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)
    returns: list[cst.Return] = field(default_factory=list)
    # Every Name read and every attribute name read (``self.v_proj`` reads ``self`` and
    # ``v_proj``): the order of each first read.
    first_read: dict[str, int] = field(default_factory=dict)
    calls: list[cst.Call] = field(default_factory=list)
    call_orders: list[int] = field(default_factory=list)  # parallel to ``calls``

    def mentions(self, name: str) -> bool:
        return name in self.first_read

    def read_before(self, name: str, order: int) -> bool:
        first = self.first_read.get(name)
        return first is not None and first < order

    def calls_in_order(self) -> Iterator[tuple[int, cst.Call]]:
        return zip(self.call_orders, self.calls)

    def binding_before(self, name: str, order: int) -> Assignment | None:
        """The last simple assignment of ``name`` before ``order``; None when there is none
        or the last binding before it was an unpacking."""
        found = None
        for a in self.assignments:
            if a.order >= order:
                break
            if a.name == name:
                found = a
        return found if found is not None and found.position is None else None


_STORE: dict = {}


def function_model(node: cst.FunctionDef) -> FunctionModel:
    return cached(_STORE, node, lambda: _build(node))


def _build(node: cst.FunctionDef) -> FunctionModel:
    params = list(params_of(node.params))
    optional = frozenset(
        p.name.value for p in params if isinstance(p.default, cst.Name) and p.default.value == "None"
    )
    model = FunctionModel(node, tuple(p.name.value for p in params), optional)
    _Walker(model).walk(node.body)
    return model


def params_of(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star


class _Walker:
    def __init__(self, model: FunctionModel) -> None:
        self.model = model
        self.order = 0

    def tick(self) -> int:
        self.order += 1
        return self.order

    def read(self, name: str) -> None:
        self.model.first_read.setdefault(name, self.tick())

    def walk(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            # Decorators and defaults run here; the body is another model's.
            for decorator in getattr(node, "decorators", ()):
                self.walk(decorator)
            return
        if isinstance(node, cst.Assign):
            self.walk(node.value)
            for target in node.targets:
                self.target(target.target, node.value if len(node.targets) == 1 else None)
            return
        if isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.walk(node.value)
            self.target(node.target, node.value)
            return
        if isinstance(node, cst.AugAssign):
            self.walk(node.value)
            self.walk(node.target)
            return
        if isinstance(node, cst.Name):
            self.read(node.value)
            return
        if isinstance(node, cst.Attribute):
            self.walk(node.value)
            self.read(node.attr.value)
            return
        if isinstance(node, cst.Return):
            self.model.returns.append(node)
        elif isinstance(node, cst.Call):
            self.model.calls.append(node)
            self.model.call_orders.append(self.tick())
        for child in children(node):
            self.walk(child)

    def target(self, target: cst.BaseExpression, value: cst.BaseExpression | None,
               position: int | None = None) -> None:
        if isinstance(target, (cst.Name, cst.Attribute)):
            if isinstance(target, cst.Attribute):
                self.walk(target.value)
            name = dotted_name(target)
            if name is not None and value is not None:
                self.model.assignments.append(Assignment(self.tick(), target, name, value, position))
            return
        if isinstance(target, cst.Subscript):
            base = dotted_name(target.value)
            self.walk(target.value)
            for element in target.slice:
                self.walk(element)
            if base is not None and value is not None:
                self.model.stores.append(Store(self.tick(), target, base, value))
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            # ``bsz, q_len, _ = x.size()``: each name remembers where it came from; a literal
            # tuple on the right pairs element by element.
            pairs = (
                isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements))
            )
            for i, element in enumerate(target.elements):
                if pairs:
                    self.target(element.value, value.elements[i].value)
                elif isinstance(element, cst.StarredElement):
                    self.target(element.value, None)
                else:
                    self.target(element.value, value, i)
            return
        if isinstance(target, cst.StarredElement):
            self.target(target.value, None)
            return
        self.walk(target)
