"""The default human format, ruff's ``full``: each finding with a code frame of both sides of
the K/V pair.

    KV101 [*] message
     --> path:4:46
      |
    4 |     return torch_npu.npu_fusion_attention(q, k[:n], v, 8, "TND")
      |                                              ^^^^^ here
      |                                                     ^ V side: ...
      |
    help: <the suggestion>
    note: fix available with --fix: <what the fix does>

``[*]`` marks a finding ``--fix`` can fix (with ``--unsafe-fixes``, unsafe fixes too), as in
ruff; a warning (KV408) says ``(warning)`` after its code. A finding in a file with no source lines to show (a ``.safetensors`` header)
has no frame. Colour comes from rich when writing to a terminal; plain text otherwise or when
NO_COLOR is set (the caller decides and passes ``color``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from linter.files import source_lines
from linter.finding import Finding, Span
from linter.report import Outcome, severity
from linter.report.summary import summary

if TYPE_CHECKING:
    from rich.text import Text


def _frame_rows(finding: Finding) -> list[tuple[int, Span | None, str, str]]:
    """(row, span, label, style) for the K line and each related line, in row order."""
    marks: list[tuple[int, Span | None, str, str]] = [(finding.span.row, finding.span, "here", "bold red")]
    marks += [(r.span.row, r.span, r.message, "bold cyan") for r in finding.related]
    return sorted(marks, key=lambda m: (m[0], m[1].column if m[1] else 0))


def header(finding: Finding, outcome: Outcome) -> tuple[str, str]:
    """``KV101 [*]`` / ``KV408 (warning)``: the code and its marks, and the code's style."""
    marks = " [*]" if outcome.applies(finding) else ""
    if severity(finding.code) == "warning":
        return f"{finding.code}{marks} (warning)", "bold yellow"
    return f"{finding.code}{marks}", "bold red"


def _finding_text(finding: Finding, lines: list[str], outcome: Outcome) -> Text:
    from rich.text import Text

    code, code_style = header(finding, outcome)
    text = Text()
    text.append(code, style=code_style)
    text.append(f" {finding.message}\n")
    marks = [m for m in _frame_rows(finding) if 0 < m[0] <= len(lines)]
    # Rows as the reader counts them: inside its cell, for a notebook.
    shown_row = {m[0]: outcome.cell_of(finding.path, m[0])[1] for m in marks}
    width = len(str(max(shown_row.values(), default=finding.span.row)))
    gutter = " " * width + " |"
    text.append(" " * width + "--> ", style="blue")
    text.append(outcome.where(finding.path, finding.span.row, finding.span.column) + "\n")
    if marks:
        text.append(gutter + "\n", style="blue")
    shown: set[int] = set()
    for row, span, label, style in marks:
        if row not in shown:
            text.append(f"{shown_row[row]:>{width}} |", style="blue")
            text.append(f" {lines[row - 1].expandtabs(4).rstrip()}\n")
            shown.add(row)
        if span is not None:
            line = lines[row - 1]
            start = len(line[:span.column - 1].expandtabs(4))
            end_col = span.end_column if span.end_row == span.row else len(line) + 1
            length = max(1, len(line[:end_col - 1].expandtabs(4)) - start)
            text.append(gutter, style="blue")
            text.append(" " + " " * start)
            text.append("^" * length + f" {label}\n", style=style)
    if marks:
        text.append(gutter + "\n", style="blue")
    text.append("help: ", style="bold")
    text.append(finding.suggestion + "\n")
    if finding.fix is not None:
        how = "--fix" if finding.fix.applicability == "safe" else "--unsafe-fixes"
        text.append("note: ", style="bold")
        text.append(f"fix available with {how}: ", style="bold green")
        text.append(finding.fix.message + "\n")
    return text


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    if not outcome.findings and not color:
        # rich costs as much to import as a clean file costs to check.
        if not outcome.quiet:
            out.write(summary(outcome) + "\n")
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(
        file=out, force_terminal=color, no_color=not color, color_system="auto" if color else None,
        highlight=False, soft_wrap=True, emoji=False, markup=False,
    )
    for finding in outcome.findings:
        lines = source_lines(outcome.texts.get(finding.path, ""))
        console.print(_finding_text(finding, lines, outcome))
    if not outcome.quiet:
        console.print(Text(summary(outcome), style="bold"))
