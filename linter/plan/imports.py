"""``from x import ...`` statements found in text: the names they bind (``_from_imported``, asked
by the conditions of KV105, KV207, KV208 and KV209) and each one's module and names
(``from_imports``, for the module screens).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from linter.plan.words import _IDENTIFIER


# ``from x import ...`` anywhere (after ``try:`` or ``;`` too, ``from.x``, ``from .import``):
# group 1 the leading dots, 2 the module, 3 what it imports, a bracketed list (its comments
# may hold a ``)``) or the rest of the line and the lines its continuations join. Literal
# first: ``re`` jumps from one ``from`` to the next. The list and the line are read in runs
# (``[^)#]*+``), not a character at a time through an alternation (a third less time).
_FROM_IMPORT = re.compile(
    r"from(?<![\w.]from)(?=[ \t.\\])(?:[ \t]|\\\r?\n)*(?=[\w.])(\.*)([\w.]*)(?:[ \t]|\\\r?\n)*import(?!\w)[ \t]*"
    r"(\([^)#]*+(?:#[^\n]*+(?![^\n])[^)#]*+)*+\)|[^\n\\]*+(?:\\(?:\r?\n|.)[^\n\\]*+)*+)"
)
_COMMENT = re.compile(r"#[^\n]*")
_ALIAS = re.compile(r"(\w+)(?:\s+as\s+(\w+))?")


def from_imports(text: str) -> Iterator[tuple[int, list[str], str, str]]:
    """(level, module parts, imported name, the name it binds) of each ``from`` import of
    ``text`` that ``_FROM_IMPORT`` finds."""
    for match in _FROM_IMPORT.finditer(text):
        names = _COMMENT.sub("", match.group(3)).strip("() \t\r\n\\")
        parts = match.group(2).split(".") if match.group(2) else []
        for item in names.replace("\\", " ").split(","):
            alias = _ALIAS.fullmatch(item.strip())
            if alias is not None:
                yield len(match.group(1)), parts, alias.group(1), alias.group(2) or alias.group(1)


@lru_cache(maxsize=4)
def _from_imported(text: str) -> frozenset[str]:
    """Every identifier a ``from x import ...`` statement names (aliases included), and more:
    the statement is looked for in strings and comments too. Asked by several conditions of
    the same text: computed once."""
    return frozenset(name for match in _FROM_IMPORT.finditer(text) for name in _IDENTIFIER.findall(match.group(3)))
