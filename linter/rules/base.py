"""The shape every rule has: docs for ``kvlint rule CODE``, its own examples, and detection.

A rule is a libcst ``BatchableCSTVisitor`` so the engine runs all rules in one traversal
(``MetadataWrapper.visit_batched``). Like Fixit 2, each rule carries VALID and INVALID code
examples and the test suite runs every rule against its own examples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import libcst as cst
from libcst.metadata import CodeRange

from linter.finding import Finding, Fix, Related, Span
from linter.settings import Settings
from linter.triggers import Trigger


@dataclass(frozen=True)
class Example:
    code: str
    # For INVALID examples: the 1-based line the finding must be reported on.
    line: int | None = None
    # For INVALID examples with a fix: the source after applying it.
    expected_fix: str | None = None


@dataclass(frozen=True)
class RuleContext:
    path: str
    settings: Settings
    # Where a node sits. Resolved lazily by the engine: most parsed files have no finding, and
    # libcst's position pass costs more than the parse itself.
    position: Callable[[cst.CSTNode], CodeRange]


class Rule(cst.BatchableCSTVisitor):
    code: ClassVar[str]  # "KV101"
    name: ClassVar[str]  # "key-only-reshape"
    summary: ClassVar[str]  # one line for `kvlint rules`
    # ruff-style documentation, printed by `kvlint rule CODE` and rendered into docs/rules/.
    what: ClassVar[str]
    why: ClassVar[str]
    bad: ClassVar[str]
    good: ClassVar[str]
    fix_text: ClassVar[str]
    # The words a file must hold for this rule to report on it (``linter.triggers``); None:
    # every file. Written as a literal ``trigger = Trigger(...)``: it is read from the source.
    trigger: ClassVar[Trigger | None] = None

    VALID: ClassVar[Sequence[Example]] = ()
    INVALID: ClassVar[Sequence[Example]] = ()

    def __init__(self, context: RuleContext) -> None:
        super().__init__()
        self.context = context
        self.findings: list[Finding] = []

    def get_visitors(self) -> dict[str, Callable]:
        # libcst finds visitor methods with inspect.getmembers on every instance, which cost more
        # than linting a small file; the names depend only on the class.
        return {name: getattr(self, name) for name in _visitor_names(type(self))}

    @property
    def extra_pairs(self) -> tuple[tuple[str, str], ...]:
        return self.context.settings.extra_pairs

    @property
    def extra_callables(self) -> tuple[str, ...]:
        return self.context.settings.extra_attention_callables

    def span(self, node: cst.CSTNode) -> Span:
        rng = self.context.position(node)
        # libcst columns are 0-based; ours are 1-based like ruff's.
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        suggestion: str,
        related: Sequence[tuple[cst.CSTNode, str]] = (),
        fix: Fix | None = None,
    ) -> None:
        span = self.span(node)
        self.findings.append(
            Finding(
                code=self.code,
                message=message,
                path=self.context.path,
                span=span,
                suggestion=suggestion,
                related=tuple(Related(self.span(n), text) for n, text in related),
                fix=fix,
                noqa_row=span.row,
            )
        )

    @classmethod
    def doc_text(cls) -> str:
        """Plain-text documentation, identical for `kvlint rule` and docs/rules/CODE.md."""
        return (
            f"# {cls.code} {cls.name}\n\n{cls.summary}\n\n"
            f"## What it does\n{cls.what}\n\n"
            f"## Why is this bad?\n{cls.why}\n\n"
            f"## Example\n```python\n{cls.bad.rstrip()}\n```\n\n"
            f"## Use instead\n```python\n{cls.good.rstrip()}\n```\n\n"
            f"## Fix\n{cls.fix_text}\n"
        )


@cache
def _visitor_names(cls: type[Rule]) -> tuple[str, ...]:
    """The ``visit_*``/``leave_*`` methods of ``cls`` that are not libcst's empty stubs.

    Only our own classes in the MRO can define real ones; libcst's visitor bases hold a no-op
    stub for every node type, thousands of names not worth looking at.
    """
    names = {
        name for klass in cls.__mro__ if not klass.__module__.startswith("libcst")
        for name in vars(klass) if name.startswith(("visit_", "leave_"))
    }
    return tuple(sorted(
        name for name in names
        if callable(getattr(cls, name)) and not getattr(getattr(cls, name), "_is_no_op", False)
    ))
