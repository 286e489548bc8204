"""Statements and brackets as more than one rule's condition reads them: where a statement of
text reduced to code ends (``_statement_end``), the bracket pattern, the ``return`` and
nested ``def``/``class`` words of a function's body, and that body less its nested
definitions (``own_statements``).
"""

from __future__ import annotations

import re

from linter.plan.words import word_first


_BRACKET = re.compile(r"[()\[\]{}]")


_BRACKET_OR_COMMA = re.compile(r"[()\[\]{},]")


def top_level_parts(text: str, start: int, stop: int) -> list[tuple[int, int]]:
    """``text[start:stop]`` cut at its commas outside brackets, as (start, stop) offsets (none
    for empty text): a call's arguments, a literal's elements, a class's bases."""
    parts, depth, begun = [], 0, start
    for match in _BRACKET_OR_COMMA.finditer(text, start, stop):
        char = match.group()
        if char == ",":
            if depth == 0:
                parts.append((begun, match.start()))
                begun = match.end()
        elif char in "([{":
            depth += 1
        else:
            depth -= 1
    if begun < stop or parts:
        parts.append((begun, stop))
    return parts


_STRING_LEFT = re.compile(r'"[^"\n]*"')


def _statement_end(code: str, start: int, end: int) -> int | None:
    """Where the statement of reduced text that starts at ``start`` ends: the end of the first
    line after which its brackets are closed and no backslash continues it (a multi-line
    string's rest, indented by ``code_only`` on a later line, continues it too); None when the
    brackets do not add up."""
    return _statement_extent(code, start, end)[0]


def _statement_extent(code: str, start: int, end: int) -> tuple[int | None, int]:
    """``_statement_end``'s answer, and where it was None the newline after which the
    brackets closed more than they opened (else -1)."""
    depth = 0
    at = start
    while True:
        newline = code.find("\n", at, end)
        stop = end if newline < 0 else newline
        line = code[at:stop]
        counted = _STRING_LEFT.sub("", line) if '"' in line else line
        depth += (
            counted.count("(") + counted.count("[") + counted.count("{")
            - counted.count(")") - counted.count("]") - counted.count("}")
        )
        if newline < 0:
            return end, -1
        if depth < 0:
            return None, newline
        at = newline + 1
        if depth or line.rstrip().endswith("\\"):
            continue
        # Past blank lines, a line starting ' "' is the rest of a multi-line string.
        following = at
        while following < end and code[following] in " \t\r\n" and not code.startswith(' "', following):
            following += 1
        if not code.startswith(' "', following) or code.rfind("\n", 0, following) + 1 != following:
            return newline, -1
        at = following


_NESTED_SCOPE = re.compile(rf"{word_first(('def', 'class'))}(?!\w)")
_RETURN_WORD = re.compile(rf"{word_first(('return',))}(?!\w)")


# A line that starts a nested definition (``own_statements``): group 1 its indentation. In
# code-only text no string holds one, and no bracket can.
_NESTED_HEADER = re.compile(r"\n( *)(?:async[ \t]+)?(?:def|class)(?!\w)")


def own_statements(body: str) -> str | None:
    """``body`` (reduced text: a function's, from its name on) less its nested definitions,
    as ``module_facts._own_nodes`` leaves them out: each nested ``def`` or ``class``
    statement and every statement after it indented deeper. The statements of a nested
    definition are read whole (``_statement_end``), so a bracket or backslash continuation,
    or the rest of a multi-line string on a later line, is no dedent. None when a tab or form
    feed makes indentation more than a count of spaces, or the brackets do not add up."""
    if "\t" in body or "\f" in body:
        return None
    kept = []
    at, end = 0, len(body)
    while (header := _NESTED_HEADER.search(body, at)) is not None:
        kept.append(body[at:header.start()])
        indent = len(header.group(1))
        # Past the definition: its statements, up to one indented no deeper.
        at = header.start() + 1
        while at < end:
            stop = _statement_end(body, at, end)
            if stop is None:
                return None
            statement = body[at:stop]
            text = statement.lstrip(" ")
            if text.strip() and len(statement) - len(text) <= indent and at > header.start() + 1:
                break
            at = stop + 1
        at -= 1  # the newline before the statement that ends the definition
    kept.append(body[at:])
    return "".join(kept)
