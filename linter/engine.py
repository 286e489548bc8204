"""Parse once, run the selected rules in one traversal, return their findings."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

try:  # libcst's own code generation state; a libcst without it takes the public route below
    from libcst.metadata.position_provider import PositionProvidingCodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    PositionProvidingCodegenState = None

from linter.finding import Finding
from linter.rules import all_rules
from linter.rules.base import Rule, RuleContext
from linter.settings import Settings
from linter.model.traversal import visit_batched


class SourceError(Exception):
    """A file kvlint cannot lint (parse error, bad encoding, ...); message is user-facing."""

    def __init__(self, path: str, message: str, row: int | None = None) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        self.row = row


class _Ranges:
    """Where ``PositionProvidingCodegenState`` records each node's range (the one attribute of
    a metadata provider it writes)."""

    __slots__ = ("_computed",)

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


def positions(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    """``PositionProvider``'s ranges of every node of ``module``, from its own code generation
    run directly: resolved through ``MetadataWrapper``, the same ranges cost twice as much
    (the wrapper also walks the whole tree once more for the batchable providers, of which
    there are none). Both are libcst internals: where they moved, ``MetadataWrapper`` gives the
    same ranges."""
    if PositionProvidingCodegenState is not None:
        ranges = _Ranges()
        try:
            module._codegen(PositionProvidingCodegenState(
                default_indent=module.default_indent, default_newline=module.default_newline, provider=ranges,
            ))
        except (AttributeError, TypeError):
            pass
        else:
            return ranges._computed
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return dict(wrapper.resolve(PositionProvider))


class _LazyPositions:
    """Node -> CodeRange, computed for the whole module on the first finding only; with
    ``rows``, the file's row of each line of the module's text, on the file's rows."""

    def __init__(self, module: cst.Module, rows: tuple[int, ...] | None = None) -> None:
        self._module = module
        self._ranges: dict[cst.CSTNode, CodeRange] | None = None
        self._rows = rows

    def __call__(self, node: cst.CSTNode) -> CodeRange:
        if self._ranges is None:
            self._ranges = positions(self._module)
        found = self._ranges[node]
        if self._rows is None:
            return found
        return CodeRange(
            CodePosition(self._row(found.start.line), found.start.column),
            CodePosition(self._row(found.end.line), found.end.column),
        )

    def _row(self, line: int) -> int:
        rows = self._rows
        # Past the last kept line (the module's end), the rows run on from it.
        return rows[line - 1] if line <= len(rows) else rows[-1] + line - len(rows) if rows else line


def selected_rules(codes: Iterable[str] | None = None) -> list[type[Rule]]:
    wanted = None if codes is None else set(codes)
    return [rule for rule in all_rules() if wanted is None or rule.code in wanted]


def lint_module(
    module: cst.Module, path: str, settings: Settings, rules: Iterable[type[Rule]],
    rows: tuple[int, ...] | None = None, text: str | None = None,
) -> list[Finding]:
    """The findings of ``rules`` on ``module``; ``rows``: the file's row of each line of the
    module's text, where it holds only some of the file's lines; ``text``: the module's text,
    where the caller has it."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = RuleContext(path=path, settings=settings, position=_LazyPositions(module, rows), rows=rows,
                          text=text)
    visitors = [rule(context) for rule in rules]
    if not visitors:
        return []
    visit_batched(wrapper, visitors)
    findings = [finding for visitor in visitors for finding in visitor.findings]
    return sorted(findings, key=lambda f: f.sort_key)


def lint_source(
    source: str, path: str = "<string>", settings: Settings | None = None,
    codes: Iterable[str] | None = None,
) -> list[Finding]:
    """Lint one file's text. Raises SourceError when the text is not valid Python."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise SourceError(path, f"syntax error: {exc.message}", exc.raw_line) from None
    return lint_module(module, path, settings or Settings(), selected_rules(codes))
