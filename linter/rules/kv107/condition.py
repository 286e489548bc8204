"""KV107 needs a K-side name and its V twin in the statements of function bodies: every broken
twin pairs a K statement with a V statement of one function that renames its K names (a kept K
name counts only where its V counterpart exists), so both sides of some pair stand in code
outside the functions' headers; or, for a V statement turned into a second copy of its K
twin, a K name twice in the bodies whose V counterpart stands anywhere. A header's parameters
(``def attend(q, k, v)``, the binding the rest of a module keeps of each definition) are no
statement. The ``ast`` screen
(``screen._kv107``) then runs the rule's own model.
"""

from __future__ import annotations

import re

from linter.model.names import TWIN_ATTENTION_WORDS
from linter.plan.file import _File
from linter.plan.words import identifier_lines

_DEF = re.compile(r"\bdef\s+\w+\s*\(")
# What follows a header's parameters: an optional return annotation, then its colon.
_HEADER_END = re.compile(r"[ \t\\\n]*(?:->[^:\n]*)?:")


def _kv107(f: _File) -> bool:
    if not f.k_names or "def" not in f.text:
        return False
    lower = f.lower_names
    if not any(word in lower for word in TWIN_ATTENTION_WORDS):
        return False  # ``key`` and ``value`` of a mapping: no attention word in any name
    text = f.text
    if not f.reduced:
        return True  # a string or comment may hide where a header's brackets close
    kept: list[str] = []
    at = 0
    for match in _DEF.finditer(text):
        if match.start() < at:
            continue
        end = _closing(text, match.end())
        if end is None or not _HEADER_END.match(text, end):
            return True  # brackets this reading cannot pair: keep the file
        kept.append(text[at:match.start()])
        at = end
    if not kept:
        return False  # no function: no statement of one
    kept.append(text[at:])
    bodies = "".join(kept)
    if f.pairs_among(identifier_lines(bodies)):
        return True
    # A V statement turned into a second copy of its K twin names the K side twice in the
    # bodies, its V counterpart anywhere (a parameter, the class).
    return any(len(re.findall(rf"\b{re.escape(k)}\b", bodies)) >= 2 for k in f.k_names)


_BRACKET = re.compile(r"[()\[\]{}]")


def _closing(text: str, start: int) -> int | None:
    """The offset after the bracket that closes the one opened just before ``start``."""
    depth = 1
    for match in _BRACKET.finditer(text, start):
        if match.group() in "([{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return match.end()
    return None
CONDITION = _kv107
