"""SARIF 2.1.0 for GitHub code scanning.

``tool.driver.rules`` carries every rule's metadata and its full documentation as help; each
result has the K side as its location and the V side (and any other related line) as
``relatedLocations``. ``partialFingerprints`` hold the baseline key (code, path and the
normalised flagged text, plus an occurrence count), so an alert survives line moves the same
way a baseline entry does. Paths are relative to ``%SRCROOT%``, the repository root (the
nearest directory holding ``.git`` above the working directory, else the working directory),
which ``originalUriBaseIds`` gives as an absolute ``file://`` URI; so a run from a subdirectory
still points code scanning at the right files. A file outside that root gets an absolute
``file://`` URI. File problems become tool execution notifications.

Each rule's ``helpUri`` links to its hosted page, where code scanning's readers can open it: the
configuration's ``rule-docs-url`` with the code filled in, else the repository named in the
installed distribution's ``[project.urls]`` (``Repository``) at ``blob/main/docs/rules/CODE.md``,
GitHub's path. Without either there is no ``helpUri``, never a ``file://`` path of the machine
that ran kvlint; the rule's full page is in ``help`` either way.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from functools import cache
from pathlib import Path
from typing import TextIO

import linter
from linter.baseline import finding_key
from linter.checkpoint import documented_rules
from linter.diagnostics import FileProblem
from linter.finding import Finding, Span
from linter.report import Outcome, is_fixable, severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def source_root(start: Path | None = None) -> Path:
    """The repository root code scanning resolves ``%SRCROOT%`` against."""
    directory = (start or Path.cwd()).resolve()
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return directory


def _artifact(path: str, root: Path) -> dict:
    absolute = Path(os.path.abspath(path))
    try:
        return {"uri": absolute.relative_to(root).as_posix(), "uriBaseId": "%SRCROOT%"}
    except ValueError:
        return {"uri": absolute.as_uri()}


def _location(path: str, span: Span, root: Path) -> dict:
    return {
        "physicalLocation": {
            "artifactLocation": _artifact(path, root),
            "region": {
                "startLine": span.row, "startColumn": span.column,
                "endLine": span.end_row, "endColumn": span.end_column,
            },
        }
    }


@cache
def repository_url() -> str | None:
    """The https URL of kvlint's repository from its installed metadata, if it names one."""
    from importlib import metadata

    try:
        entries = metadata.distribution("kvlint-npu").metadata.get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("repository", "source", "source code") and url.strip().startswith("https://"):
            return url.strip().rstrip("/")
    return None


def help_uri(code: str, template: str | None) -> str | None:
    if template is not None:
        return template.replace("{code}", code)
    repository = repository_url()
    return f"{repository}/blob/main/docs/rules/{code}.md" if repository else None


def _rule(rule, docs_url: str | None) -> dict:
    url = help_uri(rule.code, docs_url)
    return {
        **({"helpUri": url} if url else {}),
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.what},
        "help": {"text": rule.doc_text(), "markdown": rule.doc_text()},
        "defaultConfiguration": {"level": severity(rule.code)},
        "properties": {"tags": ["correctness", "kv-consistency"], "fixable": is_fixable(rule)},
    }


def _result(finding: Finding, index: dict[str, int], fingerprint: str, root: Path, outcome: Outcome) -> dict:
    cell, row = outcome.cell_of(finding.path, finding.span.row)
    where = f" (notebook cell {cell}, line {row})" if cell is not None else ""
    result = {
        "ruleId": finding.code,
        "level": severity(finding.code),
        "message": {"text": f"{finding.message}{where}\n{finding.suggestion}"},
        "locations": [_location(finding.path, finding.span, root)],
        "partialFingerprints": {"kvlintFindingHash/v1": fingerprint},
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.related:
        result["relatedLocations"] = [
            {"id": i, **_location(finding.path, r.span, root), "message": {"text": r.message}}
            for i, r in enumerate(finding.related)
        ]
    return result


def _notification(problem: FileProblem, root: Path) -> dict:
    where = Span(problem.row, problem.column, problem.row, problem.column)
    return {
        "level": severity(problem.code),
        "message": {"text": f"{problem.code} {problem.message}"},
        "descriptor": {"id": problem.code},
        "locations": [_location(problem.path, where, root)],
    }


def document(outcome: Outcome) -> dict:
    rules = documented_rules()
    index = {rule.code: i for i, rule in enumerate(rules)}
    seen: Counter[tuple[str, str, str]] = Counter()
    results = []
    # Fingerprints name paths from the root too, so they do not depend on where kvlint ran.
    root = source_root()
    for finding in outcome.findings:
        key = finding_key(finding, outcome.texts.get(finding.path), root)
        seen[key] += 1
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:32]
        results.append(_result(finding, index, f"{digest}:{seen[key]}", root, outcome))
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kvlint",
                "version": linter.__version__,
                "semanticVersion": linter.__version__,
                "rules": [_rule(rule, outcome.rule_docs_url) for rule in rules],
            }},
            "invocations": [{
                "executionSuccessful": not any(not p.warning for p in outcome.problems),
                "toolExecutionNotifications": [_notification(p, root) for p in outcome.problems],
            }],
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
            "results": results,
        }],
    }


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    json.dump(document(outcome), out, indent=2)
    out.write("\n")
