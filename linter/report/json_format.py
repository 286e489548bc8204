"""ruff's JSON output schema, so tools that read ``ruff --output-format json`` read ours.

An array of objects with ``cell`` (always null), ``code``, ``end_location{row,column}``,
``filename``, ``fix`` (null or ``{applicability, message, edits:[{content, location,
end_location}]}``), ``location{row,column}``, ``message``, ``name``, ``noqa_row``, ``severity``
and ``url`` (null: kvlint has no hosted rule pages; ``kvlint rule CODE`` prints them).
"""

from __future__ import annotations

import json
import os
from typing import TextIO

from linter.checkpoint import documented_rules
from linter.diagnostics import FileProblem
from linter.finding import Finding, Span
from linter.report import Outcome


def _location(row: int, column: int) -> dict:
    return {"column": column, "row": row}


def _start(span: Span) -> dict:
    return _location(span.row, span.column)


def _end(span: Span) -> dict:
    return _location(span.end_row, span.end_column)


def finding_object(finding: Finding) -> dict:
    fix = finding.fix
    rule = next((r for r in documented_rules() if r.code == finding.code), None)
    return {
        "cell": None,
        "code": finding.code,
        "end_location": _end(finding.span),
        "filename": os.path.abspath(finding.path),
        "fix": None if fix is None else {
            "applicability": fix.applicability,
            "edits": [
                {"content": e.content, "end_location": _end(e.span), "location": _start(e.span)}
                for e in fix.edits
            ],
            "message": fix.message,
        },
        "location": _start(finding.span),
        "message": finding.message,
        "name": rule.name if rule is not None else finding.code,
        "noqa_row": finding.noqa_row,
        "severity": "error",
        "url": None,
    }


def problem_object(problem: FileProblem) -> dict:
    where = _location(problem.row, problem.column)
    return {
        "cell": None,
        "code": problem.code,
        "end_location": where,
        "filename": os.path.abspath(problem.path),
        "fix": None,
        "location": where,
        "message": problem.message,
        "name": problem.name,
        "noqa_row": None,
        "severity": "error",
        "url": None,
    }


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    objects = [problem_object(p) for p in outcome.problems] + [finding_object(f) for f in outcome.findings]
    json.dump(objects, out, indent=2)
    out.write("\n")
