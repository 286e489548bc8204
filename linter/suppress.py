"""``# noqa`` comments: ``# noqa`` (every code), ``# noqa: KV101`` or ``# noqa: KV101,KV202``.

Comments are found with the tokenize module, so ``"# noqa"`` inside a string suppresses nothing.
Text after the codes is a free-form reason: ``# noqa: KV101 - V is trimmed by the caller``.

A malformed directive suppresses nothing and earns a warning, as in ruff: ``# noqa KV101`` (no
colon: flake8 and ruff read it as a blanket ``# noqa`` or not at all, and neither is what its
author meant), an empty ``# noqa:``, and ``# noqa: KV`` (no code). Read as a blanket noqa, each
would silently hide every finding on its line.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from linter.diagnostics import FileProblem
from linter.finding import Finding

# ``noqa`` as a word, then what follows it up to the end of the comment.
_NOQA = re.compile(r"#\s*noqa(?![\w-])(?P<rest>.*)", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
# The codes after the colon: code-like words separated by commas or spaces; what follows the
# last of them is the reason.
_CODES = re.compile(r"\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)(?![\w])", re.IGNORECASE)
_EXAMPLE = "(e.g. `# noqa: KV101, KV202`)"

# Row -> suppressed codes; None means every code (a blanket noqa comment).
NoqaMap = dict[int, "frozenset[str] | None"]


@dataclass(frozen=True)
class Directive:
    row: int
    codes: frozenset[str] | None  # None: a blanket ``# noqa``
    error: str | None = None  # why a malformed directive suppresses nothing


def parse_directive(comment: str, row: int = 1) -> Directive | None:
    """The ``# noqa`` directive in one comment token, or None if it holds none."""
    match = _NOQA.search(comment)
    if match is None:
        return None
    rest = match.group("rest")
    stripped = rest.lstrip()
    if not stripped or stripped.startswith("#"):
        return Directive(row, None)
    if not stripped.startswith(":"):
        if rest[:1].isspace():
            return Directive(row, frozenset(), f"expected `:` followed by a comma-separated list of codes {_EXAMPLE}")
        return Directive(row, None)  # ``# noqa.`` and the like: a blanket noqa with punctuation
    after = stripped[1:]
    if not after.strip() or after.lstrip().startswith("#"):
        return Directive(row, frozenset(), f"expected a comma-separated list of codes after `:` {_EXAMPLE}")
    codes = _CODES.match(after)
    if codes is None:
        word = after.split()[0].rstrip(",")
        return Directive(row, frozenset(), f"expected a code of letters followed by digits, not `{word}` {_EXAMPLE}")
    return Directive(row, frozenset(c.upper() for c in _CODE.findall(codes.group("codes"))))


def directives(text: str) -> dict[int, Directive]:
    if "noqa" not in text.lower():
        return {}
    found: dict[int, Directive] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            directive = parse_directive(tok.string, tok.start[0])
            if directive is not None:
                found[tok.start[0]] = directive
    except (tokenize.TokenError, SyntaxError):
        # The parser accepted the file, so this is tokenize being stricter (e.g. an unterminated
        # construct at EOF); comments seen up to here still count.
        pass
    return found


def noqa_map(text: str) -> NoqaMap:
    """The well-formed directives: row -> codes (None for a blanket noqa)."""
    return {row: d.codes for row, d in directives(text).items() if d.error is None}


def is_suppressed(finding: Finding, noqa: NoqaMap) -> bool:
    row = finding.noqa_row if finding.noqa_row is not None else finding.span.row
    if row not in noqa:
        return False
    codes = noqa[row]
    return codes is None or finding.code in codes


def unsuppressed(findings: Iterable[Finding], text: str) -> list[Finding]:
    findings = list(findings)
    if not findings:
        return findings
    noqa = noqa_map(text)
    return [f for f in findings if not is_suppressed(f, noqa)]


def invalid_directives(findings: Iterable[Finding], text: str, path: str) -> list[FileProblem]:
    """A warning for each malformed ``# noqa`` on a line that carries a finding: the finding is
    shown, and this says why the comment did not hide it. (Only lines with findings are read:
    kvlint does not tokenize the many files it never parses.)"""
    rows = {f.noqa_row if f.noqa_row is not None else f.span.row for f in findings}
    if not rows:
        return []
    return [
        FileProblem(path, "WKV001", f"invalid `# noqa` directive, which suppresses nothing: {d.error}", row)
        for row, d in sorted(directives(text).items()) if d.error is not None and row in rows
    ]
