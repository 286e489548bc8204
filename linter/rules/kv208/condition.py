"""KV208 needs a head-dim keyword argument (``(head_dim=`` or ``, head_dim=``) of a call of a
top-level class or of a name a ``from x import`` binds, and a value head-dim name (any case) in
the same top-level definition, its decorators included.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from linter.plan.code_only import code_only
from linter.model.twins import is_value_head_dim
from linter.model.names import Role, name_role
from linter.plan.facts import _recalled, _remembered
from linter.plan.file import _File
from linter.plan.imports import _from_imported
from linter.plan.lines import TOP_LEVEL_CLASS, top_level_starts
from linter.plan.statements import _BRACKET
from linter.plan.vocabulary import _HEAD_DIM_PARTS
from linter.plan.words import _GAP, named_matches, word_spans
from linter.settings import Settings


def _kv208(f: _File) -> bool:
    # A head-dim keyword argument of a call of a plain name (``Pool(..., head_dim=...)``, not
    # a ``def``'s parameter default) and a value head-dim name (it has "dim" or "size" in it,
    # any case) in one top-level definition: the call and the read lie in one function (the
    # screen's ``kv208``). The pool's class may be in another top-level definition or file:
    # no own unit.
    callees = _kv208_callees(f)
    if "" in callees:
        return True
    if not callees:
        return False
    known = set(TOP_LEVEL_CLASS.findall(f.text)) | (_from_imported(f.text) if "import" in f.text else set())
    return not callees.isdisjoint(known)


def head_dim_callees(text: str, settings: Settings) -> set[str]:
    """The plain names called with a head-dim keyword in a top-level definition that names a
    value head dim: the classes KV208 may read; ``""`` stands for a call whose callee the text
    cannot tell."""
    return _recalled("KV208", text, settings, _head_dim_callees)


def code_head_dim_callees(text: str, settings: Settings) -> set[str]:
    """``head_dim_callees`` read on ``text`` reduced to code, where no string or comment can
    hide a bracket: dearer, for the files whose raw text left a callee untold."""
    return _head_dim_callees(_File(code_only(text), settings, reduced=True))


def _kv208_callees(f: _File) -> set[str]:
    return _remembered("KV208", f, _head_dim_callees(f))


def _head_dim_callees(f: _File) -> set[str]:
    text = f.text
    if "=" not in text:
        return set()
    values = [n for n in f.names_containing("dim", True) | f.names_containing("size", True) if is_value_head_dim(n)]
    if not values:
        return set()
    named = set().union(*(f.names_containing(part, True) for part in (*_HEAD_DIM_PARTS, "d_v", "dv")))
    keywords = sorted(n for n in named if name_role(n) is Role.HEAD_DIM)
    starts: list[int] | None = None
    reads: list[int] | None = None
    callees = set()
    if not keywords:
        return callees
    # One scan for every keyword (a bracket or comma first lets ``re`` skip ahead).
    keyword_set = frozenset(keywords)
    brackets = _Brackets(text) if f.reduced else None
    for keyword in named_matches(_KEYWORD_ARGUMENT, text, keyword_set):
        callee = _plain_callee(text, keyword.start(), brackets)
        if callee is None or callee in callees:
            continue
        if starts is None:
            starts = [m.start() for m in top_level_starts(text)]
            # Where a value head-dim name is read (by substring search: a pattern of the names
            # would be compiled for this file alone).
            reads = sorted(at for at, _ in word_spans(text, values))
        first, end = _top_level_region(text, starts, keyword.start())
        index = bisect_left(reads, first)  # type: ignore[arg-type]
        if index < len(reads) and reads[index] < end:  # type: ignore[arg-type]
            callees.add(callee)
    return callees


# ``(name=`` or ``, name=`` (not ``==``), the name whole: ``named_matches`` keeps the keywords.
_KEYWORD_ARGUMENT = re.compile(rf"[(,]{_GAP}(\w++){_GAP}=(?!=)")


try:
    from linter._code_only import bracket_opener as _compiled_opener
    from linter._code_only import brackets_balanced as _compiled_balanced
except ImportError:  # a build without a C compiler: the lists below answer alike
    _compiled_opener = _compiled_balanced = None


class _Brackets:
    """The brackets of code-only text (every bracket in sight), each with the depth after it.

    The compiled helpers (``linter/_code_only.c``) answer where the build made them: one pass
    in C for the balance, and a read back from the offset asked about for its opener (the
    lists below took half of KV208's condition time on vllm)."""

    def __init__(self, code: str) -> None:
        self.code = code
        if _compiled_balanced is not None:
            self.balanced = _compiled_balanced(code)
            return
        self.offsets: list[int] = []
        self.depths: list[int] = []
        depth = 0
        for bracket in _BRACKET.finditer(code):
            depth += 1 if bracket.group() in "([{" else -1
            self.offsets.append(bracket.start())
            self.depths.append(depth)
        # Brackets that do not add up (``code_only`` misread a string): nothing can be told.
        self.balanced = depth == 0 and min(self.depths, default=0) >= 0

    def opener(self, at: int) -> int | None:
        """The offset of the innermost bracket open just after ``at``; None outside every
        bracket."""
        if _compiled_opener is not None:
            return _compiled_opener(self.code, at)
        index = bisect_right(self.offsets, at) - 1
        depth = self.depths[index] if index >= 0 else 0
        if depth <= 0:
            return None
        # The bracket that opened this depth: the last one after which it was reached, going up.
        while index > 0 and not (self.depths[index] == depth and self.depths[index - 1] < depth):
            index -= 1
        return self.offsets[index]


def _plain_callee(text: str, at: int, brackets: _Brackets | None = None) -> str | None:
    """The plain name called with the argument list whose ``(`` or ``,`` is at ``at``; None
    for a ``def``'s parameters and a call of anything else (``x.Pool(``); ``""`` where it
    cannot be told (a string or comment may hide the bracket, unless ``brackets`` are those
    of ``text`` reduced to code)."""
    if brackets is not None:
        if not brackets.balanced:
            return ""
        opener = brackets.opener(at)
        # Outside every bracket: a name assigned (``n, head_dim = x.shape``).
        return None if opener is None else _callee_of(text, opener, at, code=True)
    depth = 0
    for bracket in reversed(list(_BRACKET.finditer(text, max(0, at - _CALL_REACH), at + 1))):
        if bracket.group() in ")]}":
            depth += 1
        elif depth:
            depth -= 1
        else:
            return _callee_of(text, bracket.start(), at, code=False)
    return ""


def _callee_of(text: str, opener: int, at: int, code: bool) -> str | None:
    line = text.rfind("\n", 0, opener) + 1
    if not code and any(c in text[line:at] for c in "#'\""):
        return ""
    if text[opener] != "(":
        return None  # a lambda's parameters in a list or dict display
    before = _CALLEE.search(text, line, opener)
    if before is None:
        return None if text[line:opener].strip() else ""  # the callee may be on the line before
    return None if before.group(1) else before.group(2)


# The name called by the bracket this ends at (group 2); group 1 when it is a ``def``,
# ``class`` or an attribute rather than a plain name.
_CALLEE = re.compile(r"(?:(def[ \t]+|class[ \t]+|\.[ \t]*)|(?<![\w.]))([^\W\d]\w*)[ \t]*\Z")
_CALL_REACH = 4000


def _top_level_region(text: str, starts: list[int], at: int) -> tuple[int, int]:
    """The span of the top-level definition around offset ``at`` (from its decorators to the
    next top-level line of ``_TOP_LEVEL_START``; the module's head before the first)."""
    index = bisect_right(starts, at)
    end = starts[index] if index < len(starts) else len(text)
    index -= 1
    while index > 0 and text[starts[index - 1]] == "@":
        index -= 1
    return (starts[index] if index >= 0 else 0), end


CONDITION = _kv208
