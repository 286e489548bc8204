"""Source text reduced to its code: comments dropped, plain string literals emptied.

The pre-filter asks its questions of this text, so an identifier, a ``def`` or a bracket inside
a docstring or a comment no longer counts as code. The line count is kept (a string spanning n
lines leaves n newlines), so line numbers in the reduced text are line numbers in the file;
lines end at "\n" (the pre-filter parses a file with lone "\r" line ends whole).

An f-string keeps only its replacement fields (``{k.shape}``): they are code a rule may read;
its literal text goes like any string's. Nothing in a plain string literal is evidence for any
rule's pre-filter condition (see ``prefilter``).
"""

from __future__ import annotations

import re

# Unrolled loops (``[^"\\]*(?:\\.[^"\\]*)*``) so long strings are consumed without backtracking;
# an unterminated string runs to the end of its line (or of the text, for triple quotes).
# The leading lookahead lets ``re`` reject most positions on one character test (3x faster on
# vllm's files than trying every alternative at every position).
_LITERAL = re.compile(
    r"""
    (?=[\#"'rRbBuUfF])
    (?:
    \#[^\n]*
    | (?P<prefix>(?<!\w)[rRbBuUfF]{1,2})?
      (?P<body>
          \"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:\"\"\"|\Z)
        | '''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)
        | "[^"\\\n]*(?:\\(?:\r\n|.)[^"\\\n]*)*(?:"|$)
        | '[^'\\\n]*(?:\\(?:\r\n|.)[^'\\\n]*)*(?:'|$)
      )
    )
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)


def code_only(text: str) -> str:
    """``text`` without comments and with every non-f string literal emptied, lines kept."""
    return _LITERAL.sub(_reduce, text)


def _reduce(match: re.Match[str]) -> str:
    body = match.group("body")
    if body is None:
        return ""  # a comment
    prefix = match.group("prefix") or ""
    kept = " ".join(_fields(body)) if "f" in prefix or "F" in prefix else ""
    lines = body.count("\n")
    # The code after a multi-line string continues its statement: indent it, so the line it
    # lands on can never look like a new column-0 statement.
    return f'"{kept}"' if not lines else "\n" * lines + f' "{kept}"'


def _fields(body: str) -> list[str]:
    """The replacement fields of an f-string body, newlines flattened (``{{`` is literal text)."""
    fields = []
    depth = start = 0
    i, n = 0, len(body)
    while i < n:
        char = body[i]
        if depth == 0:
            if char == "{":
                if body.startswith("{", i + 1):
                    i += 2
                    continue
                depth, start = 1, i + 1
        elif char in "'\"":
            # A string inside a field: its brackets are text (``{d[')']}``).
            end = body.find(char, i + 1)
            i = n if end == -1 else end
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
            if depth == 0:
                fields.append(body[start:i].replace("\n", " "))
        i += 1
    return fields
