"""SARIF 2.1.0 for GitHub code scanning.

``tool.driver.rules`` carries every rule's metadata and its full documentation as help; each
result has the K side as its location and the V side (and any other related line) as
``relatedLocations``. ``partialFingerprints`` hold the baseline key (code, path and the
normalised flagged text, plus an occurrence count), so an alert survives line moves the same
way a baseline entry does. Paths are relative to ``%SRCROOT%`` (the working directory), as
code scanning expects. File problems become tool execution notifications.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import TextIO

import linter
from linter.baseline import finding_key
from linter.checkpoint import documented_rules
from linter.diagnostics import FileProblem
from linter.finding import Finding, Span
from linter.report import Outcome, is_fixable

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    relative = os.path.relpath(os.path.abspath(path))
    return Path(relative).as_posix()


def _location(path: str, span: Span) -> dict:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": _uri(path), "uriBaseId": "%SRCROOT%"},
            "region": {
                "startLine": span.row, "startColumn": span.column,
                "endLine": span.end_row, "endColumn": span.end_column,
            },
        }
    }


def _rule(rule) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.what},
        "help": {"text": rule.doc_text(), "markdown": rule.doc_text()},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["correctness", "kv-consistency"], "fixable": is_fixable(rule)},
    }


def _result(finding: Finding, index: dict[str, int], fingerprint: str) -> dict:
    result = {
        "ruleId": finding.code,
        "level": "error",
        "message": {"text": f"{finding.message}\n{finding.suggestion}"},
        "locations": [_location(finding.path, finding.span)],
        "partialFingerprints": {"kvlintFindingHash/v1": fingerprint},
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.related:
        result["relatedLocations"] = [
            {"id": i, **_location(finding.path, r.span), "message": {"text": r.message}}
            for i, r in enumerate(finding.related)
        ]
    return result


def _notification(problem: FileProblem) -> dict:
    where = Span(problem.row, problem.column, problem.row, problem.column)
    return {
        "level": "error",
        "message": {"text": f"{problem.code} {problem.message}"},
        "descriptor": {"id": problem.code},
        "locations": [_location(problem.path, where)],
    }


def document(outcome: Outcome) -> dict:
    rules = documented_rules()
    index = {rule.code: i for i, rule in enumerate(rules)}
    seen: Counter[tuple[str, str, str]] = Counter()
    results = []
    base = Path.cwd()
    for finding in outcome.findings:
        key = finding_key(finding, outcome.texts.get(finding.path), base)
        seen[key] += 1
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:32]
        results.append(_result(finding, index, f"{digest}:{seen[key]}"))
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kvlint",
                "version": linter.__version__,
                "semanticVersion": linter.__version__,
                "rules": [_rule(rule) for rule in rules],
            }},
            "invocations": [{
                "executionSuccessful": not outcome.problems,
                "toolExecutionNotifications": [_notification(p) for p in outcome.problems],
            }],
            "results": results,
        }],
    }


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    json.dump(document(outcome), out, indent=2)
    out.write("\n")
