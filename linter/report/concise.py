"""``path:row:col: CODE message``, one line per finding, then a summary."""

from __future__ import annotations

from typing import TextIO

from linter.report import Outcome
from linter.report.summary import summary


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    for f in outcome.findings:
        out.write(f"{outcome.where(f.path, f.span.row, f.span.column)}: {f.code} {f.message}\n")
    if not outcome.quiet:
        out.write(summary(outcome) + "\n")
