"""One batched pass of the rules over a libcst tree, in libcst's order, without libcst's cost.

libcst's own ``visit`` rebuilds every node it passes (``_visit_and_replace_children`` calls
each class's constructor, which validates it) and announces every field of every node to the
visitor, whitespace included. The rules only read the tree, so that work is thrown away:
measured on the definitions kvlint parses in vllm, sglang and transformers, it was as much
again as the parse (1.0 s of 2.2 s on sglang, 1.6-2.4 s of 2.8-3.6 s on transformers), and
this walk calls the same methods on the same nodes in the same order in a quarter of that.

The order of a class's children is learnt from libcst itself, once per class: its
``_visit_and_replace_children`` is run with a visitor that records the fields it announces
and descends nowhere. Whitespace, comments, brackets, commas and operators (``TRIVIA``) hold
nothing but more of the same, so the walk skips them unless a rule visits their class.

``tests/linter/test_traversal.py`` compares every call with libcst's ``visit_batched`` on
kvlint's own sources. A rule that declares metadata or visits an attribute
(``visit_Call_func``) gets libcst's pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields

import libcst as cst
from libcst import MaybeSentinel
from libcst._nodes import expression as _expression

Method = Callable[[cst.CSTNode], object]

# Classes whose nodes hold only whitespace, comments and other trivia (checked by the test).
_TRIVIA_MODULES = frozenset({"libcst._nodes.whitespace", "libcst._nodes.op"})
_TRIVIA_CLASSES = frozenset({
    _expression.LeftParen, _expression.RightParen, _expression.LeftSquareBracket,
    _expression.RightSquareBracket, _expression.LeftCurlyBrace, _expression.RightCurlyBrace,
    _expression.Asynchronous,
})


def is_trivia(cls: type) -> bool:
    return cls.__module__ in _TRIVIA_MODULES or cls in _TRIVIA_CLASSES


# Per node class, the fields libcst visits, in its order.
_FIELDS: dict[type, tuple[str, ...]] = {}
# A class that visits a field only when it is not None (``FormattedStringExpression``'s
# ``format_spec``): those fields, and the order for each pattern of which of them are None.
_SHAPED: dict[type, tuple[tuple[str, ...], dict[tuple[bool, ...], tuple[str, ...]]]] = {}


class _FieldRecorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.fields.append(attribute)


def _recorded(node: cst.CSTNode) -> tuple[str, ...]:
    recorder = _FieldRecorder()
    node._visit_and_replace_children(recorder)
    return tuple(dict.fromkeys(recorder.fields))


def _fields_of(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields libcst visits on ``node``, in its order (``_FIELDS`` had no answer)."""
    cls = node.__class__
    shaped = _SHAPED.get(cls)
    if shaped is not None:
        watched, orders = shaped
        key = tuple(getattr(node, name) is None for name in watched)
        found = orders.get(key)
        if found is None:
            found = orders[key] = _recorded(node)
        return found
    found = _recorded(node)
    # A field left out while None may be visited when it is not: learn per pattern.
    watched = tuple(f.name for f in fields(cls) if f.name not in found and getattr(node, f.name) is None)
    if watched:
        _SHAPED[cls] = (watched, {(True,) * len(watched): found})
    else:
        _FIELDS[cls] = found
    return found


class _Leave:
    """On the walk's stack: call ``methods`` on ``node``, its children done."""

    __slots__ = ("methods", "node")

    def __init__(self, node: cst.CSTNode, methods: Sequence[Method]) -> None:
        self.node = node
        self.methods = methods


def visit_batched(wrapper: cst.MetadataWrapper, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """Run ``visitors`` over ``wrapper.module`` as ``wrapper.visit_batched`` does."""
    methods: dict[str, list[Method]] = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            methods.setdefault(name, []).append(method)
    # libcst's class names have no "_": one after the prefix names an attribute.
    if any(visitor.get_inherited_dependencies() for visitor in visitors) or any(
        "_" in name.split("_", 1)[1] for name in methods
    ):
        wrapper.visit_batched(visitors)
        return
    _walk(wrapper.module, methods)


def _walk(module: cst.Module, methods: dict[str, list[Method]]) -> None:
    # Per class: its visit methods, its leave methods, and whether to skip its nodes whole.
    plan: dict[type, tuple[Sequence[Method], Sequence[Method], bool]] = {}
    known = _FIELDS
    absent = MaybeSentinel.DEFAULT
    stack: list[cst.CSTNode | _Leave] = [module]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        cls = node.__class__
        if cls is _Leave:
            for method in node.methods:  # type: ignore[union-attr]
                method(node.node)  # type: ignore[union-attr]
            continue
        entry = plan.get(cls)
        if entry is None:
            name = cls.__name__
            visits, leaves = methods.get(f"visit_{name}", ()), methods.get(f"leave_{name}", ())
            entry = plan[cls] = (visits, leaves, is_trivia(cls) and not visits and not leaves)
        visits, leaves, skip = entry
        if skip:
            continue
        for method in visits:
            method(node)  # type: ignore[arg-type]
        if leaves:
            push(_Leave(node, leaves))  # type: ignore[arg-type]
        order = known.get(cls)
        if order is None:
            order = _fields_of(node)  # type: ignore[arg-type]
        children: list[cst.CSTNode] = []
        for field in order:
            value = getattr(node, field)
            if value is None or value is absent:
                continue
            kind = value.__class__
            if kind is tuple or kind is list:
                children.extend(value)
            else:
                children.append(value)
        children.reverse()
        stack.extend(children)
