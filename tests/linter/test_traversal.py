"""``linter.model.traversal`` calls what libcst's ``visit_batched`` calls, on the same nodes, in the
same order, and skips only subtrees that hold nothing but trivia."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import libcst as cst
import pytest

from linter.model import traversal
from linter.rules import all_rules

_ROOT = Path(__file__).resolve().parents[2]
_CLASSES = [c for c in vars(cst).values() if isinstance(c, type) and issubclass(c, cst.CSTNode)]

# Syntax the repository's own files may not use.
_EVERY_FORM = '''
from __future__ import annotations
from .x import (a as b, c)
from . import *
import os.path as p
@dec(1)
@other
async def f(a, /, b: int = 1, *args, c, d=2, **kw) -> "T":
    global g
    async with x as (y, z), w:
        async for i in aiter():
            await q
    x: list[int] = [i for i in range(3) if i if not i]
    y = {k: v for k, v in d.items()}
    z = {*s, 1}
    t = (yield)
    u = yield from g
    lam = lambda a, *b, c=1, **d: a if b else c
    s = f"{x!r:>{w}} {y=}" "tail" r'raw'
    del a[1:2:3], b.c
    assert x, "m"
    try:
        pass
    except* ValueError as e:
        raise E from e
    else:
        ...
    finally:
        return
    while x := next(it):
        break
    else:
        continue
    match p:
        case {"k": [1, *rest], **kw} | Point(x=0, y=_) if rest:
            pass
        case (a, b) as c:
            pass
    x += 1; y @= m; z **= -~+w
    return a < b <= c is not d not in e and f or not g
class C(Base, metaclass=M):
    nonlocal_x: int
    def m(self): return self.k[..., 0::2] @ self.v
'''


def _recorder() -> cst.BatchableCSTVisitor:
    """A visitor of every node class, logging each call."""
    namespace: dict[str, object] = {}
    for cls in _CLASSES:
        for event in ("visit", "leave"):
            def method(self, node, entry=(event, cls.__name__)):
                self.log.append((*entry, id(node)))

            # libcst finds a visitor's methods by their ``__name__``.
            method.__name__ = namespace_key = f"{event}_{cls.__name__}"
            namespace[namespace_key] = method

    def __init__(self) -> None:
        cst.BatchableCSTVisitor.__init__(self)
        self.log = []

    namespace["__init__"] = __init__
    return type("Recorder", (cst.BatchableCSTVisitor,), namespace)()


def _sources() -> list[str]:
    paths = sorted([*(_ROOT / "linter").rglob("*.py"), *(_ROOT / "tests").rglob("*.py"), *(_ROOT / "examples").rglob("*.py")])
    examples = [e.code for rule in all_rules() for e in (*rule.VALID, *rule.INVALID)]
    return [_EVERY_FORM, *examples, *(p.read_text(encoding="utf-8") for p in paths)]


@cache
def _trees() -> list[cst.Module]:
    return [cst.parse_module(text) for text in _sources()]


def test_every_call_is_libcsts_in_its_order() -> None:
    trees = _trees()
    assert len(trees) > 200
    for module in trees:
        theirs, ours = _recorder(), _recorder()
        cst.MetadataWrapper(module, unsafe_skip_copy=True).visit_batched([theirs])
        traversal.visit_batched(cst.MetadataWrapper(module, unsafe_skip_copy=True), [ours])
        assert theirs.log
        assert ours.log == theirs.log


class _TriviaHolds(cst.CSTVisitor):
    """Collects the classes of non-trivia nodes found under a trivia node."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.found: set[str] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        trivia = traversal.is_trivia(type(node))
        if self.depth and not trivia:
            self.found.add(type(node).__name__)
        self.depth += trivia
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.depth -= traversal.is_trivia(type(original_node))


def test_a_field_visited_only_when_set_is_learnt_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    # libcst visits an f-string's format spec only where there is one: the first expression
    # learnt from must not stand for the others.
    monkeypatch.setattr(traversal, "_FIELDS", {})
    monkeypatch.setattr(traversal, "_SHAPED", {})
    module = cst.parse_module('a = f"{x}"\nb = f"{y:>{w}}"\nc = f"{z}"\n')
    theirs, ours = _recorder(), _recorder()
    cst.MetadataWrapper(module, unsafe_skip_copy=True).visit_batched([theirs])
    traversal.visit_batched(cst.MetadataWrapper(module, unsafe_skip_copy=True), [ours])
    assert ("visit", "FormattedStringText", ) in {entry[:2] for entry in theirs.log}
    assert ours.log == theirs.log


def test_trivia_holds_only_trivia() -> None:
    for module in _trees():
        check = _TriviaHolds()
        module.visit(check)
        assert check.found == set()
    # The walk does skip something: commas, brackets and whitespace are trivia.
    assert all(traversal.is_trivia(c) for c in (cst.Comma, cst.LeftParen, cst.SimpleWhitespace, cst.Add, cst.Comment))
    assert not any(traversal.is_trivia(c) for c in (cst.Name, cst.Call, cst.Arg, cst.Attribute, cst.Subscript))


def test_a_rule_that_visits_trivia_sees_it() -> None:
    class Commas(cst.BatchableCSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def visit_Comma(self, node: cst.Comma) -> None:
            self.count += 1

    visitor = Commas()
    traversal.visit_batched(cst.MetadataWrapper(cst.parse_module("f(a, b, c)\nx = [1, 2]\n")), [visitor])
    assert visitor.count == 3


@pytest.mark.parametrize("declare", ["metadata", "attribute"])
def test_rules_it_cannot_serve_get_libcsts_pass(declare: str) -> None:
    calls = []

    class Rule(cst.BatchableCSTVisitor):
        if declare == "metadata":
            METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

            def visit_Name(self, node: cst.Name) -> None:
                calls.append(self.get_metadata(cst.metadata.PositionProvider, node).start.line)
        else:
            def visit_Call_func(self, node: cst.Call) -> None:
                calls.append(node.func.value)

    traversal.visit_batched(cst.MetadataWrapper(cst.parse_module("x = 1\nf(y)\n")), [Rule()])
    assert calls == ([1, 2, 2] if declare == "metadata" else ["f"])
