"""``path:row:col: CODE [*] message``, one line per finding, then a summary (ruff's ``concise``).

``[*]`` marks a finding ``--fix`` can fix and ``(warning)`` a warning (KV408), as in ``full``.
With colour (a terminal, ``--color always`` or ``FORCE_COLOR``) the path is bold, the
separators cyan and the code red (yellow for a warning), as ruff colours them.
"""

from __future__ import annotations

from typing import TextIO

from linter.report import Outcome
from linter.report.full import header
from linter.report.summary import summary


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    if not color:
        for f in outcome.findings:
            out.write(f"{outcome.where(f.path, f.span.row, f.span.column)}: {header(f, outcome)[0]} {f.message}\n")
        if not outcome.quiet:
            out.write(summary(outcome) + "\n")
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, force_terminal=True, highlight=False, soft_wrap=True, emoji=False, markup=False)
    for f in outcome.findings:
        path, *place = outcome.where(f.path, f.span.row, f.span.column).rsplit(":", 2)
        line = Text()
        line.append(path, style="bold")
        for part in place:
            line.append(":", style="cyan")
            line.append(part)
        line.append(":", style="cyan")
        code, style = header(f, outcome)
        line.append(" ")
        line.append(code, style=style)
        line.append(f" {f.message}")
        console.print(line)
    if not outcome.quiet:
        console.print(Text(summary(outcome), style="bold"))
