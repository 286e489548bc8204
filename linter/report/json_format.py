"""ruff's JSON output schema, so tools that read ``ruff --output-format json`` read ours.

An array of objects with ``cell`` (always null), ``code``, ``end_location{row,column}``,
``filename``, ``fix`` (null or ``{applicability, message, edits:[{content, location,
end_location}]}``), ``location{row,column}``, ``message``, ``name``, ``noqa_row``, ``severity``
(``"error"``, or ``"warning"`` for a warning rule such as KV408 and for WKV001) and ``url`` (the rule's page installed with kvlint, a ``file://`` URI; ``kvlint rule CODE``
prints the same text). ``filename`` is absolute, or ``-`` for stdin read without
``--stdin-filename``, as in ruff. In a notebook ``cell`` is the cell number and rows count from
the cell's first line, as in ruff.
"""

from __future__ import annotations

import json
import os
from typing import TextIO

from linter.checkpoint import documented_rules
from linter.diagnostics import FileProblem
from linter.finding import Finding, Span
from linter.report import Outcome, severity
from linter.rule_docs import rule_url


def _location(row: int, column: int) -> dict:
    return {"column": column, "row": row}


def _filename(path: str) -> str:
    return path if path == "-" else os.path.abspath(path)


def finding_object(finding: Finding, outcome: Outcome | None = None) -> dict:
    fix = finding.fix
    rule = next((r for r in documented_rules() if r.code == finding.code), None)

    def row(n: int) -> int:
        return outcome.cell_of(finding.path, n)[1] if outcome is not None else n

    def start(span: Span) -> dict:
        return _location(row(span.row), span.column)

    def end(span: Span) -> dict:
        return _location(row(span.end_row), span.end_column)

    noqa = finding.noqa_row
    return {
        "cell": outcome.cell_of(finding.path, finding.span.row)[0] if outcome is not None else None,
        "code": finding.code,
        "end_location": end(finding.span),
        "filename": _filename(finding.path),
        "fix": None if fix is None else {
            "applicability": fix.applicability,
            "edits": [
                {"content": e.content, "end_location": end(e.span), "location": start(e.span)}
                for e in fix.edits
            ],
            "message": fix.message,
        },
        "location": start(finding.span),
        "message": finding.message,
        "name": rule.name if rule is not None else finding.code,
        "noqa_row": row(noqa) if noqa is not None else None,
        "severity": severity(finding.code),
        "url": rule_url(finding.code) if rule is not None else None,
    }


def problem_object(problem: FileProblem) -> dict:
    where = _location(problem.row, problem.column)
    return {
        "cell": None,
        "code": problem.code,
        "end_location": where,
        "filename": _filename(problem.path),
        "fix": None,
        "location": where,
        "message": problem.message,
        "name": problem.name,
        "noqa_row": None,
        "severity": severity(problem.code),
        "url": None,
    }


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    objects = [problem_object(p) for p in outcome.problems] + [finding_object(f, outcome) for f in outcome.findings]
    json.dump(objects, out, indent=2)
    out.write("\n")
