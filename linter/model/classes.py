"""One class read once: the ``self.X`` state its methods set, its methods and bases, and its
``*Linear`` projections with their output sizes.

A class's K/V twins are attribute pairs (``k_proj``/``v_proj``, ``k_cache``/``v_cache``,
``get_k_shape``/``get_v_shape``) that the class itself defines; a rule that says "the value twin
exists" asks this model, never the names in one statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from linter.model.cache import cached
from linter.model.walk import children
from linter.model.pairs import callee_tail, dotted_name

# Where a ``*Linear`` layer's output size sits: nn.Linear(in, out) and the tensor-parallel
# families (ColumnParallelLinear(input_size, output_size)) share index 1; LazyLinear infers
# its input and takes the output first.
_OUTPUT_KEYWORDS = frozenset({"out_features", "output_size", "out_dim", "output_dim", "out_size"})
_OUTPUT_INDEX = {"LazyLinear": 0}


@dataclass(frozen=True)
class Projection:
    attr: str
    call: cst.Call  # the ``*Linear(...)`` call
    size: cst.BaseExpression  # its output size
    method: cst.FunctionDef  # where it is declared (its local aliases live there)


@dataclass
class ClassModel:
    node: cst.ClassDef
    name: str
    bases: tuple[str, ...]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    # ``self.X = value`` in any method, and ``X = value`` in the class body: every value.
    attrs: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    projections: dict[str, Projection] = field(default_factory=dict)
    # The ``self.X`` attributes each method assigns, by method name.
    set_in: dict[str, set[str]] = field(default_factory=dict)

    def defines(self, name: str) -> bool:
        """An attribute or method of this class (not of its bases)."""
        return name in self.attrs or name in self.methods


_STORE: dict = {}


def class_model(node: cst.ClassDef) -> ClassModel:
    return cached(_STORE, node, lambda: _build(node))


def _build(node: cst.ClassDef) -> ClassModel:
    bases = tuple(name for arg in node.bases if (name := dotted_name(arg.value)) is not None)
    model = ClassModel(node, node.name.value, bases)
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for statement in body:
        if isinstance(statement, cst.FunctionDef):
            model.methods[statement.name.value] = statement
            _read_method(model, statement)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    for target in _targets(small):
                        if isinstance(target, cst.Name):
                            model.attrs.setdefault(target.value, []).append(small.value)
    return model


def _targets(node: cst.Assign | cst.AnnAssign) -> list[cst.BaseExpression]:
    if isinstance(node, cst.AnnAssign):
        return [node.target]
    return [t.target for t in node.targets]


def _read_method(model: ClassModel, method: cst.FunctionDef) -> None:
    for node in _assignments(method.body):
        for target, value in _flattened(_targets(node), node.value):
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                    and target.value.value == "self"):
                continue
            attr = target.attr.value
            model.attrs.setdefault(attr, []).append(value)
            model.set_in.setdefault(method.name.value, set()).add(attr)
            layer = linear_layer(value)
            size = output_size(layer) if layer is not None else None
            if size is not None:
                model.projections[attr] = Projection(attr, layer, size, method)


def _flattened(targets, value: cst.BaseExpression):
    """(target, value) pairs; ``self.a, self.b = x, y`` pairs element by element and
    ``self.a, self.b = f()`` gives each the whole value."""
    for target in targets:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                yield from zip(elements, (e.value for e in value.elements))
            else:
                yield from ((e, value) for e in elements)
        else:
            yield target, value


def _assignments(node: cst.CSTNode):
    """Assignments with a value in ``node``, not descending into nested definitions."""
    for child in children(node):
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(child, (cst.Assign, cst.AnnAssign)):
            if child.value is not None:
                yield child
            continue
        if isinstance(child, cst.BaseExpression):
            continue  # no statements inside expressions
        yield from _assignments(child)


def linear_layer(value: cst.BaseExpression) -> cst.Call | None:
    """The ``*Linear(...)`` call ``value`` builds: directly, as the layer branch of
    ``None if shared else nn.Linear(...)``, or as a wrapper's first argument
    (``weight_norm(nn.Linear(...))``)."""
    if isinstance(value, cst.IfExp):
        layers = [b for b in (value.body, value.orelse) if isinstance(b, cst.Call)]
        if len(layers) != 1:
            return None
        value = layers[0]
    if not isinstance(value, cst.Call):
        return None
    tail = callee_tail(value)
    if tail is not None and tail.endswith("Linear"):
        return value
    first = value.args[0].value if value.args and value.args[0].keyword is None else None
    if isinstance(first, cst.Call):
        inner = callee_tail(first)
        if inner is not None and inner.endswith("Linear"):
            return first
    return None


def output_size(call: cst.Call) -> cst.BaseExpression | None:
    tail = callee_tail(call)
    if tail is None:
        return None
    index = _OUTPUT_INDEX.get(tail, 1)
    positional = []
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            positional.append(arg.value)
        elif arg.keyword.value in _OUTPUT_KEYWORDS:
            return arg.value
    return positional[index] if index < len(positional) else None


class OwnerTracking:
    """Mixin for rules that judge a method against its class: ``enter_function()``, called at
    the top of ``visit_FunctionDef``, gives the innermost enclosing class's model when the
    function is its method (None for a nested function or a module-level one)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._owners: list[ClassModel | None] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._owners.append(class_model(node))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._owners.pop()

    def enter_function(self) -> ClassModel | None:
        owner = self._owners[-1] if self._owners else None
        self._owners.append(None)
        return owner

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._owners.pop()
