"""The shape every rule has: docs for ``kvlint rule CODE``, its own examples, and detection.

A rule is a libcst ``BatchableCSTVisitor`` so the engine runs all rules in one traversal
(``MetadataWrapper.visit_batched``). Like Fixit 2, each rule carries VALID and INVALID code
examples and the test suite runs every rule against its own examples.
"""

from __future__ import annotations

import ast
from bisect import bisect_left

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import ClassVar

import libcst as cst
from libcst.metadata import CodeRange

from linter.finding import Finding, Fix, Related, Span
from linter.model.names import RESHAPE_CALLS
from linter.model.pairs import dotted_name
from linter.model.reshapes import reshape_of
from linter.model.scopes import Scope
from linter.settings import Settings
from linter.plan.triggers import Trigger


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
    # The file's row (1-based) of each line of the module's text where the runner parsed only
    # some of the file's lines (``position`` gives the file's rows already); None: the
    # module's lines are the file's.
    rows: tuple[int, ...] | None = None
    # The module's text where the runner has it, so a rule that reads the stdlib ``ast`` tree
    # does not regenerate the text from libcst.
    text: str | None = None

    def python_tree(self, module: cst.Module) -> tuple[ast.Module, list[str]] | None:
        """The stdlib ``ast`` tree of ``module`` and its text's lines; None where it does not parse."""
        text = self.text if self.text is not None else module.code
        try:
            return ast.parse(text), text.split("\n")
        except (SyntaxError, ValueError, RecursionError):
            return None

    def line_of(self, row: int) -> int:
        """The 0-based line of the module's text that holds the file's row ``row``."""
        return row - 1 if self.rows is None else bisect_left(self.rows, row)

    def row_of(self, line: int) -> int:
        """The file's row of 1-based ``line`` of the module's text (past the last kept line,
        the rows run on from it)."""
        rows = self.rows
        if not rows:
            return line
        return rows[line - 1] if line <= len(rows) else rows[-1] + line - len(rows)


@dataclass(frozen=True)
class Mirror:
    """What a fix claims when it repeats the key's operation on the value: the engine checks the
    claim before the fix may be ``safe`` (applied by ``--fix`` without asking).

    ``expression`` is what the fix makes the value (``v[:n]``, ``v.chunk(n)``); it is evaluated
    at walk order ``written_at`` (the key's line for an inserted statement, the call itself for
    an inline argument) and the value is used by the call at ``used_at``.
    """

    scope: Scope
    value: cst.BaseExpression
    expression: str
    written_at: int
    used_at: int
    # The call is a known attention kernel, which reads K and V as tensors of the same tokens.
    # Any other callee may take a V that is unused or None (a latent pool's ``cache_v``).
    kernel: bool
    # Written into the call beside the key's own inline operation (``f(q, k[s:e], v[s:e])``):
    # the names it shares with that operation are read in the same place, comprehension
    # variables included.
    beside_key: bool = False


# Calls that change how many tokens or heads a tensor holds (besides RESHAPE_CALLS).
_RESIZING = RESHAPE_CALLS | {"cat", "concat", "concatenate", "stack", "pad", "gather", "roll", "repeat_kv"}
_CONSTANTS = frozenset({"None", "True", "False"})


def mirror_is_proven(mirror: Mirror) -> bool:
    """Is the mirrored fix sure to repeat the key's operation on the very tensor passed as V?

    Only when the value is a plain name that nothing in the function cuts, gathers, pads or
    rebinds (inline call arguments included: ``f(q, k[:0], v[:0], out, k, v)`` has already
    operated on ``v``), the call is an attention kernel, and every free name of the mirrored
    expression is bound where the fix writes it and not rebound before the value is used.
    """
    scope, value = mirror.scope, mirror.value
    if not mirror.kernel or not isinstance(value, cst.Name) or _operated_on(scope, value.value):
        return False
    names = free_names(mirror.expression)
    if names is None or value.value not in names:
        return False
    return all(
        name in scope.bindings
        and (scope.visible_at(name, mirror.written_at) or (mirror.beside_key and name != value.value))
        and not scope.rebound_between(name, mirror.written_at, mirror.used_at)
        for name in names
    )


def _operated_on(scope: Scope, name: str) -> bool:
    """Does any token/head operation, resizing call or rebinding touch ``name`` in the scope?"""
    if any(access.base == name and not access.quiet for access in scope.accesses):
        return True
    for site in scope.calls:
        if site.quiet:
            continue
        reshape = reshape_of(site.node)
        if reshape is not None and reshape.base == name:
            return True
        if site.tail in _RESIZING and any(_mentions(arg.value, name) for arg in site.node.args):
            return True
    for binding in scope.bindings.get(name, ()):
        if binding.kind in ("param", "assign") and not any(
            True for _ in scope.accesses_within(binding.value_orders)
        ) and not any(c.tail in _RESIZING for c in scope.calls_within(binding.value_orders)):
            continue  # a parameter, or ``v = self.v_proj(x).transpose(1, 2)``: no token/head change
        return True
    return False


def _mentions(expr: cst.BaseExpression, name: str) -> bool:
    if dotted_name(expr) == name:
        return True
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_mentions(element.value, name) for element in expr.elements)
    return False


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``x.attr``: x is a free name, attr is not
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # ``f(dim=d)``: d is, dim is not
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in _CONSTANTS:
            self.found.add(node.value)


def free_names(expression: str) -> set[str] | None:
    """The names ``expression`` reads, or None when it is no plain expression (a lambda or a
    comprehension binds names of its own)."""
    try:
        node = cst.parse_expression(expression)
    except cst.ParserSyntaxError:
        return None
    if any(True for _ in _find(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.NamedExpr))):
        return None
    visitor = _Names()
    node.visit(visitor)
    return visitor.found


def _find(node: cst.CSTNode, kinds: tuple[type, ...]):
    if isinstance(node, kinds):
        yield node
    for child in node.children:
        yield from _find(child, kinds)


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
    # The words a file must hold for this rule to report on it (``linter.plan.triggers``); None:
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

    def ast_span(self, node, lines: list[str]) -> Span:
        """The file's span of a stdlib ``ast`` node parsed from the module's text ``lines``."""
        found = Span.of_ast(node, lines)
        return Span(self.context.row_of(found.row), found.column, self.context.row_of(found.end_row), found.end_column)

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        suggestion: str,
        related: Sequence[tuple[cst.CSTNode, str]] = (),
        fix: Fix | None = None,
        mirror: Mirror | None = None,
    ) -> None:
        """Record a finding. A ``safe`` fix stays safe only with a ``mirror`` claim the engine
        can prove (``mirror_is_proven``); any other fix is offered as ``unsafe``, applied only
        with ``--unsafe-fixes``, whatever the rule asked for."""
        if fix is not None and fix.applicability == "safe" and (mirror is None or not mirror_is_proven(mirror)):
            fix = replace(fix, applicability="unsafe")
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
        return doc_page(cls, "python")


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


def doc_page(rule, language: str) -> str:
    """A rule's page: the same sections for code rules and checkpoint rules, examples fenced as
    ``language``."""
    from linter.rules import preview_codes

    preview = (
        f"This is a preview rule: it runs with `--preview` (or `preview = true`), or when "
        f"selected by its code (`--select {rule.code}`).\n\n" if rule.code in preview_codes() else ""
    )
    return (
        f"# {rule.code} {rule.name}\n\n{rule.summary}\n\n{preview}"
        f"## What it does\n{rule.what}\n\n"
        f"## Why is this bad?\n{rule.why}\n\n"
        f"## Example\n```{language}\n{rule.bad.rstrip()}\n```\n\n"
        f"## Use instead\n```{language}\n{rule.good.rstrip()}\n```\n\n"
        f"## Fix\n{rule.fix_text}\n"
    )
