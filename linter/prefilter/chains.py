"""Method chains read from reduced source text (``code_only``), for the pre-filter.

``k.transpose(1, 2).view(b, s, h, d)`` is one chain: a root name, then calls, subscripts and
attributes. The pre-filter asks whether a name starts (or is assigned) a chain that reaches a
given attribute, the way ``tensor_roots.tensor_root`` and KV202 read the same code from the
syntax tree. Brackets are skipped by counting, which is only sound where no string or comment
stands in the way: on raw text (``raw=True``) a quote or ``#`` met on the way makes the answer
"maybe" (True), so the answer can be wrong only towards parsing more.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator

from linter.prefilter.words import _CALL_BRACKET, word_spans

_BRACKET = re.compile(r"[()\[\]{}]")
# Whitespace, and backslash line continuations.
_SPACE = re.compile(r"(?:\s|\\\r?\n)*")
_NAME = re.compile(r"[^\W\d]\w*")
_ASSIGN = re.compile(r"\s*=(?!=)")


_UNREADABLE = re.compile(r"[\"'#]")


def _after_group(text: str, start: int, raw: bool) -> int | None:
    """The offset just after the bracket group opening at ``start`` (the end of text if unclosed);
    None when ``raw`` and a string or comment in it may hide a bracket."""
    end = len(text)
    depth = 0
    for match in _BRACKET.finditer(text, start):
        depth += 1 if match.group() in "([{" else -1
        if depth == 0:
            end = match.end()
            break
    if raw and _UNREADABLE.search(text, start, end):
        return None
    return end


def bracket_groups(
    text: str, words: Iterable[str], raw: bool, opener: re.Pattern[str] = _CALL_BRACKET
) -> Iterator[tuple[int, int, int, int | None]]:
    """For each whole-word occurrence of ``words`` that ``opener`` follows (a call's bracket,
    past blanks and comments, unless told otherwise): its start and end, the offset just inside
    the bracket, and the offset just after the group closes (the end of the text if it never
    does; None where ``raw`` and a string or comment in it may hide the close)."""
    for at, end in word_spans(text, words):
        bracket = opener.match(text, end)
        if bracket is not None:
            yield at, end, bracket.end(), _after_group(text, bracket.end() - 1, raw)


def _chain_reaches(text: str, i: int, targets: Collection[str], passes: Collection[str] | None, raw: bool) -> bool:
    """Does the chain continuing at ``i`` reach ``.target``?

    Calls and subscripts are stepped over, and so is a closing parenthesis (``(k).view``; it
    also lets ``f(k).view`` through, which only costs a parse); an attribute in ``targets``
    ends the search with yes, one in ``passes`` (None: any attribute) lets the chain go on, any
    other ends it with no.
    """
    n = len(text)
    while True:
        i = _SPACE.match(text, i).end()
        if i >= n:
            return False
        char = text[i]
        if char in "([":
            after = _after_group(text, i, raw)
            if after is None:
                return True
            i = after
            continue
        if raw and char in "\"'#":
            return True
        if char == ")":
            i += 1
            continue
        if char != ".":
            return False
        name = _NAME.match(text, _SPACE.match(text, i + 1).end())
        if name is None:
            return False
        if name.group() in targets:
            return True
        if passes is not None and name.group() not in passes:
            return False
        i = name.end()


def root_reaches(text: str, name: str, targets: Collection[str], passes: Collection[str], raw: bool = False) -> bool:
    """Is some chain rooted at identifier ``name`` continued through ``passes`` to ``.target``?"""
    for _, end in word_spans(text, (name,)):
        if _chain_reaches(text, end, targets, passes, raw):
            return True
    return False


def assigned_reaches(text: str, name: str, targets: Collection[str], raw: bool = False) -> bool:
    """Is ``name`` (or ``x.name``) assigned a value whose outer chain names one of ``targets``?

    ``k = x.view(...)``, ``k = torch.reshape(x, ...)`` and ``k = rearrange(x, ...)`` all do.
    """
    for _, end in word_spans(text, (name,)):
        assign = _ASSIGN.match(text, end)
        if assign is None:
            continue
        i = _SPACE.match(text, assign.end()).end()
        if raw and i < len(text) and text[i] in "\"'#":
            return True
        if i < len(text) and text[i] in "([{":
            after = _after_group(text, i, raw)
            reached = after is None or _chain_reaches(text, after, targets, None, raw)
        else:
            head = _NAME.match(text, i)
            if head is None:
                continue
            reached = head.group() in targets or _chain_reaches(text, head.end(), targets, None, raw)
        if reached:
            return True
    return False
