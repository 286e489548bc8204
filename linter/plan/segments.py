"""Cut reduced source text (``code_only``) into its top-level statements, by line.

A top-level statement starts on a column-0 line that is not inside brackets, not after a
backslash continuation, and not the ``else``/``elif``/``except``/``finally`` clause of the
statement before; decorators belong to the ``def``/``class`` they decorate. Comments and plain
strings are gone from the reduced text, so brackets and column-0 lines can be trusted (an
f-string with unbalanced brackets inside can still mislead the count: the runner falls back to
parsing the whole file whenever the pieces it joins do not parse).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A line starting in column 0; Python resets the column after leading form feeds.
_COLUMN_0 = re.compile(r"^\f*(?=[^\s)\]}])", re.MULTILINE)
_CLAUSE = re.compile(r"(?:else|elif|except|finally)\b")
_DEFINITION = re.compile(r"(?:(?:async\s+)?def|class)\b")
_DEFINITION_LINE = re.compile(r"^\f*(?:(?:async\s+)?def|class)\b[^\n]*", re.MULTILINE)


@dataclass(frozen=True)
class Segment:
    start: int  # first line, 0-based
    end: int  # one past the last line
    kind: str  # "def" or "class" (with its decorators), or "statement" for anything else
    text: str  # the segment's reduced text

    @property
    def definition(self) -> bool:
        return self.kind != "statement"


try:
    from linter._code_only import top_level_cuts as _compiled_cuts
except ImportError:  # a build without a C compiler: the reading below answers alike
    _compiled_cuts = None


def top_level_segments(code: str) -> list[Segment]:
    """The top-level statements of ``code`` in order; together they cover every line."""
    cuts = _compiled_cuts(code) if _compiled_cuts is not None else _top_level_cuts(code)
    if not cuts or cuts[0][0] != 0:
        cuts.insert(0, (0, 0, False))
    total = code.count("\n") + 1
    ends = [(offset, line) for offset, line, _ in cuts[1:]] + [(len(code), total)]
    segments = []
    for (offset, line, definition), (end, end_line) in zip(cuts, ends):
        text = code[offset:end]
        kind = "statement"
        if definition:
            kind = "class" if _header(text).startswith("class") else "def"
        segments.append(Segment(line, end_line, kind, text))
    return segments


def _top_level_cuts(code: str) -> list[tuple[int, int, bool]]:
    """(offset, line, is it a definition?) where each top-level statement of ``code`` starts
    on a column-0 line (``top_level_segments`` adds the text's start where none does). The
    compiled helper (``linter/_code_only.c``) reads the same in one pass where the build made
    one."""
    cuts: list[tuple[int, int, bool]] = []
    depth = line = counted = 0
    decorating = False
    for match in _COLUMN_0.finditer(code):
        start, first = match.start(), match.end()
        depth += open_brackets(code, counted, start)
        line += code.count("\n", counted, start)
        counted = start
        if depth > 0 or _continued(code, start) or _CLAUSE.match(code, first):
            continue
        decorator = code[first] == "@"
        definition = decorator or _DEFINITION.match(code, first) is not None
        if not (decorating and definition):
            cuts.append((start, line, definition))
        decorating = decorator
    return cuts


def open_brackets(code: str, start: int, end: int) -> int:
    """How many more brackets ``code[start:end]`` opens than it closes."""
    opened = code.count("(", start, end) + code.count("[", start, end) + code.count("{", start, end)
    closed = code.count(")", start, end) + code.count("]", start, end) + code.count("}", start, end)
    return opened - closed


def _continued(code: str, offset: int) -> bool:
    """Does the line before ``offset`` end with a backslash continuation?"""
    before = code[max(0, offset - 3):offset].rstrip("\r\n")
    return before.endswith("\\")


def header(segment: Segment) -> str:
    """A definition's ``def``/``class`` line: the name it binds in the module scope."""
    return _header(segment.text)


def _header(text: str) -> str:
    match = _DEFINITION_LINE.search(text)
    return "" if match is None else match.group(0)


def bound_name(segment: Segment) -> str | None:
    """The name a definition binds in the module scope (None for a statement, or a header
    this reading cannot name)."""
    bound = _BOUND_NAME.search(header(segment)) if segment.definition else None
    return None if bound is None else bound.group(1)


_BOUND_NAME = re.compile(r"(?:def|class)\s+(\w+)")
