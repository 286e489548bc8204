"""``# noqa`` comments: ``# noqa`` (every code), ``# noqa: KV101`` or ``# noqa: KV101,KV202``.

Comments are found with the tokenize module, so ``"# noqa"`` inside a string suppresses nothing.
Text after the codes is a free-form reason: ``# noqa: KV101 - V is trimmed by the caller``.

A whole file is exempt with a comment of its own, anywhere in it, as ruff's ``# ruff: noqa``:
``# kvlint: noqa`` (every code) or ``# kvlint: noqa: KV101, KV202``. ruff's own spelling with
codes, ``# ruff: noqa: KV101``, exempts the file from the KV codes it names (``lint.external =
["KV"]`` keeps ruff from flagging them); a blanket ``# ruff: noqa`` is ruff's opt-out and leaves
kvlint on.

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
# A file-level exemption: ``# kvlint: noqa`` or ``# ruff: noqa``, then the same tail.
_FILE_NOQA = re.compile(r"#\s*(?P<tool>kvlint|ruff)\s*:\s*noqa(?![\w-])(?P<rest>.*)", re.IGNORECASE)
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
    return _parse_rest(match.group("rest"), row)


def parse_file_directive(comment: str, row: int = 1) -> Directive | None:
    """The file-level exemption in one comment token (``# kvlint: noqa[: codes]``, or ruff's
    ``# ruff: noqa: codes``), or None if it holds none that kvlint follows."""
    match = _FILE_NOQA.match(comment)
    if match is None:
        return None
    directive = _parse_rest(match.group("rest"), row)
    if match.group("tool").lower() == "ruff" and (directive.codes is None or directive.error is not None):
        return None  # ruff's blanket opt-out is about ruff's rules; a malformed one is ruff's to report
    return directive


def _parse_rest(rest: str, row: int) -> Directive:
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
    """Line directives by row."""
    return _all_directives(text)[0]


def file_directives(text: str) -> dict[int, Directive]:
    """File-level exemptions by the row they are written on."""
    return _all_directives(text)[1]


def _all_directives(text: str) -> tuple[dict[int, Directive], dict[int, Directive]]:
    if "noqa" not in text.lower():
        return {}, {}
    lines: dict[int, Directive] = {}
    files: dict[int, Directive] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            exemption = parse_file_directive(tok.string, tok.start[0])
            if exemption is not None:
                files[tok.start[0]] = exemption
                continue
            directive = parse_directive(tok.string, tok.start[0])
            if directive is not None:
                lines[tok.start[0]] = directive
    except (tokenize.TokenError, SyntaxError):
        # The parser accepted the file, so this is tokenize being stricter (e.g. an unterminated
        # construct at EOF); comments seen up to here still count.
        pass
    return lines, files


def exempt_codes(text: str) -> frozenset[str] | None:
    """The codes the file's well-formed exemptions name; None when one exempts every code."""
    codes: set[str] = set()
    for d in file_directives(text).values():
        if d.error is not None:
            continue
        if d.codes is None:
            return None
        codes |= d.codes
    return frozenset(codes)


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
    exempt = exempt_codes(text)
    if exempt is None:
        return []
    noqa = noqa_map(text)
    return [f for f in findings if f.code not in exempt and not is_suppressed(f, noqa)]


def invalid_directives(findings: Iterable[Finding], text: str, path: str) -> list[FileProblem]:
    """A warning for each malformed ``# noqa`` on a line that carries a finding: the finding is
    shown, and this says why the comment did not hide it. (Only lines with findings are read:
    kvlint does not tokenize the many files it never parses.)"""
    rows = {f.noqa_row if f.noqa_row is not None else f.span.row for f in findings}
    if not rows:
        return []
    lines, files = _all_directives(text)
    # A malformed file exemption is reported wherever it sits: it was meant for the whole file.
    return sorted([
        FileProblem(path, "WKV001", f"invalid `# noqa` directive, which suppresses nothing: {d.error}", row)
        for row, d in lines.items() if d.error is not None and row in rows
    ] + [
        FileProblem(path, "WKV001", f"invalid file-level `# kvlint: noqa` directive, which exempts nothing: {d.error}", row)
        for row, d in files.items() if d.error is not None
    ], key=lambda p: p.row)
