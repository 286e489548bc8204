"""What a rule reports: a finding, the other side of its K/V pair, and an optional fix.

Rows and columns are 1-based, as in ruff's JSON output, so reporters never convert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True, order=True)
class Span:
    row: int
    column: int
    end_row: int
    end_column: int

    @classmethod
    def of_ast(cls, node, lines: list[str]) -> "Span":
        """The span of a stdlib ``ast`` node (1-based lines, UTF-8 byte columns) in ``lines``, the
        text it was parsed from, in characters."""
        return cls(node.lineno, _column(lines, node.lineno, node.col_offset) + 1,
                   node.end_lineno, _column(lines, node.end_lineno, node.end_col_offset) + 1)


def _column(lines: list[str], line: int, offset: int) -> int:
    """The character column of UTF-8 byte ``offset`` in 1-based ``line``."""
    if not 0 < line <= len(lines):
        return offset
    text = lines[line - 1]
    if text.isascii():
        return offset
    return len(text.encode()[:offset].decode(errors="replace"))


@dataclass(frozen=True)
class Edit:
    """Replace the text in ``span`` with ``content`` (an empty span inserts)."""

    span: Span
    content: str


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    # "safe" fixes are applied by --fix; "unsafe" ones only with --unsafe-fixes.
    applicability: Applicability = "safe"


@dataclass(frozen=True)
class Related:
    """The other line of a K/V pair (usually the V side), shown next to the finding."""

    span: Span
    message: str


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    path: str
    span: Span
    suggestion: str
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    # The line whose ``# noqa`` suppresses this finding (the K line unless a rule says otherwise).
    noqa_row: int | None = field(default=None)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.span.row, self.span.column, self.code)
