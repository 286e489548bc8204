"""``# noqa`` comments: ``# noqa`` (every code), ``# noqa: KV101`` or ``# noqa: KV101,KV202``.

Comments are found with the tokenize module, so ``"# noqa"`` inside a string suppresses nothing.
Text after the codes is a free-form reason: ``# noqa: KV101 - V is trimmed by the caller``.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable

from linter.finding import Finding

_NOQA = re.compile(r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)

# Row -> suppressed codes; None means every code (a blanket noqa comment).
NoqaMap = dict[int, "frozenset[str] | None"]


def noqa_map(text: str) -> NoqaMap:
    if "noqa" not in text.lower():
        return {}
    found: NoqaMap = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            match = _NOQA.search(tok.string)
            if match is None:
                continue
            codes = match.group("codes")
            found[tok.start[0]] = None if codes is None else frozenset(c.upper() for c in _CODE.findall(codes))
    except (tokenize.TokenError, SyntaxError):
        # The parser accepted the file, so this is tokenize being stricter (e.g. an unterminated
        # construct at EOF); comments seen up to here still count.
        pass
    return found


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
