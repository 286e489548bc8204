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

from linter.plan.words import _CALL_BRACKET, word_spans

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


def cut_reading(text: str, name: str, passes: Collection[str], raw: bool) -> frozenset[str]:
    """What the chains rooted at identifier ``name`` reach past steps in ``passes`` (calls of
    axis-moving methods: ``k.transpose(1, 2)``), as the screens read a cut after
    ``screen_facts._seen_through``: ``"[cut"`` for a subscript that cuts (``_cuts``),
    ``"[slices"`` for one of slices only (``_only_slices``), the name of every attribute
    reached (``view``, ``narrow``), ``","`` where a chain that took a step may end an
    argument (``narrow(k.float(), ...)``), and ``"?"`` where ``raw`` text may hide what
    follows behind a string or comment. A subscript ends a chain: ``k[0][:n]`` is no cut of
    ``k``."""
    found: set[str] = set()
    n = len(text)
    for _, end in word_spans(text, (name,)):
        i, steps = end, 0
        while True:
            i = _SPACE.match(text, i).end()
            if i >= n:
                break
            char = text[i]
            if char == "[":
                after = _after_group(text, i, raw)
                if after is None or text[after - 1] != "]":
                    found.add("?")  # unclosed, or a string or comment may hide the close
                else:
                    found.update(_subscript_reading(text[i + 1:after - 1]))
                break
            if char == ".":
                attribute = _NAME.match(text, _SPACE.match(text, i + 1).end())
                if attribute is None:
                    break
                found.add(attribute.group())
                bracket = _SPACE.match(text, attribute.end()).end()
                if attribute.group() not in passes or bracket >= n or text[bracket] != "(":
                    break
                after = _after_group(text, bracket, raw)
                if after is None:
                    found.add("?")
                    break
                i, steps = after, steps + 1
                continue
            if char == ")":
                # ``(k)[:n]`` is ``k[:n]``; ``f(k)[0]`` is read alike, which only costs a parse.
                if steps:
                    found.add(",")
                i += 1
                continue
            if char == "," and steps:
                found.add(",")
            elif raw and char in "\"'#":
                found.add("?")
            break
    return frozenset(found)


# Subscript elements that cut nothing (``_cuts``): a non-negative int literal, None, Ellipsis.
_UNCUT_ELEMENT = re.compile(r"(?:[0-9][0-9_]*|0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|None|\.\.\.)")
_EMPTY_SLICE = re.compile(r"::?")
_STRUCTURE = re.compile(r"[()\[\]{},:\"']")


def _subscript_reading(content: str) -> set[str]:
    """``"[cut"`` and/or ``"[slices"`` for the text between a subscript's brackets, read
    element by element (top-level commas): a slice has a top-level colon (a lambda's reads as
    one too, which only adds); a quote (an f-string's field may keep one) reads as both."""
    if "'" in content or '"' in content:
        return {"[cut", "[slices"}
    elements, depth, start, colon = [], 0, 0, False
    for match in _STRUCTURE.finditer(content):
        char = match.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and char == ":":
            colon = True
        elif depth == 0 and char == ",":
            elements.append(("".join(content[start:match.start()].split()), colon))
            start, colon = match.end(), False
    last = "".join(content[start:].split())
    if last or not elements:
        elements.append((last, colon))
    cut, only_slices = False, True
    for element, is_slice in elements:
        if is_slice:
            cut = cut or _EMPTY_SLICE.fullmatch(element) is None
        elif element in ("None", "..."):
            continue
        else:
            only_slices = False
            cut = cut or _UNCUT_ELEMENT.fullmatch(element) is None
    found = {"[cut"} if cut else set()
    if only_slices:
        found.add("[slices")
    return found
