"""Source text reduced to its code: comments dropped, plain string literals emptied.

The pre-filter asks its questions of this text, so an identifier, a ``def`` or a bracket inside
a docstring or a comment no longer counts as code. The line count is kept (a string spanning n
lines leaves n newlines), so line numbers in the reduced text are line numbers in the file;
lines end at "\n" (the pre-filter parses a file with lone "\r" line ends whole).

An f-string keeps only its replacement fields (``{k.shape}``): they are code a rule may read;
its literal text goes like any string's. Nothing in a plain string literal is evidence for any
rule's pre-filter condition (see ``text_plan``).
"""

from __future__ import annotations

import re

# Unrolled loops (``[^"\\]*(?:\\.[^"\\]*)*``) so long strings are consumed without backtracking;
# an unterminated string runs to the end of its line (or of the text, for triple quotes).
_BODY = re.compile(
    r"""
      \"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:\"\"\"|\Z)
    | '''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)
    | "[^"\\\n]*(?:\\(?:\r\n|.)[^"\\\n]*)*(?:"|$)
    | '[^'\\\n]*(?:\\(?:\r\n|.)[^'\\\n]*)*(?:'|$)
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)
# Where a comment or a string can start. A pattern that starts with a character class lets
# ``re`` skip to the next candidate in a tight loop; one that starts with the prefix letters
# (``rb"..."``) stops at every r, b, u and f of the text (twice as slow on sglang).
_START = re.compile(r"[#\"']")
_PREFIX_LETTERS = frozenset("rRbBuUfF")


try:
    from linter._code_only import reduced as _compiled_reduced
except ImportError:  # a build without a C compiler: the loop below answers alike
    _compiled_reduced = None


def code_only(text: str) -> str:
    """``text`` without comments and with every non-f string literal emptied, lines kept.

    The compiled helper (``linter/_code_only.c``) answers where the build made one: the same
    reading in C, each f-string still handed to ``_literal``."""
    if _compiled_reduced is not None:
        return _compiled_reduced(text, _literal)
    pieces = []
    copied = 0  # text[:copied] is in pieces
    search, body_at = _START.search, _BODY.match
    found = search(text)
    while found is not None:
        at = found.start()
        if text[at] == "#":
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            pieces.append(text[copied:at])
        else:
            # A string prefix is one or two letters right before the quote that start a word
            # (``rb"``, not the ``r`` of ``bar"``), and not inside what was replaced before.
            first = at
            while first > max(copied, at - 2) and text[first - 1] in _PREFIX_LETTERS:
                first -= 1
            while first < at and first > 0 and is_word_char(text[first - 1]):
                first += 1
            body = body_at(text, at)
            if body is None:
                # ``'\\`` ending the text: no literal, the quote stays as text.
                found = search(text, at + 1)
                continue
            end = body.end()
            pieces.append(text[copied:first])
            pieces.append(_literal(text[first:at], body.group()))
        copied = end
        found = search(text, end)
    pieces.append(text[copied:])
    return "".join(pieces)


def is_word_char(char: str) -> bool:
    """Is ``char`` one that ``\\w`` matches (a letter, digit or underscore in any script)?"""
    return char.isalnum() or char == "_"


def _literal(prefix: str, body: str) -> str:
    """What a string literal becomes: its f-string fields, its newlines."""
    kept = " ".join(_fields(body)) if "f" in prefix or "F" in prefix else ""
    lines = body.count("\n")
    # The code after a multi-line string continues its statement: indent it, so the line it
    # lands on can never look like a new column-0 statement.
    return f'"{kept}"' if not lines else "\n" * lines + f' "{kept}"'


def _fields(body: str) -> list[str]:
    """The replacement fields of an f-string body, newlines flattened (``{{`` is literal text).

    Outside a field only ``{`` matters, inside one only brackets and quotes: each is found by
    search, not by a step per character (f-strings are most of what the compiled reduction
    hands back to Python)."""
    fields = []
    depth = start = 0
    i, n = 0, len(body)
    while True:
        if depth == 0:
            i = body.find("{", i)
            if i < 0:
                return fields
            if body.startswith("{", i + 1):
                i += 2
                continue
            depth, start = 1, i + 1
            i += 1
            continue
        found = _FIELD_PART.search(body, i)
        if found is None:
            return fields
        i = found.start()
        char = body[i]
        if char in "'\"":
            # A string inside a field: its brackets are text (``{d[')']}``).
            end = body.find(char, i + 1)
            i = n if end == -1 else end
        elif char in "{[(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                fields.append(body[start:i].replace("\n", " "))
        i += 1


_FIELD_PART = re.compile(r"""[{}\[\]()'"]""")
