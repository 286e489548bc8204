"""Baselines: record today's findings, later report only the ones that are new.

A finding is identified by its code, its path (relative to the baseline file's directory, so
the check may run from anywhere) and the whitespace-normalised text of the line(s) it flags,
never by row numbers: adding or removing code above a finding does not make it new. Identical
keys are counted, so a second copy of a recorded bug is still reported.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from linter.files import source_lines
from linter.finding import Finding
from linter.fixes import write_atomic

_FORMAT = 1


class BaselineError(Exception):
    """A baseline file that cannot be read; the message is one line naming it."""


def flagged_text(finding: Finding, text: str | None) -> str:
    """The whitespace-normalised source of the rows a finding spans."""
    if text is None:
        return ""
    lines = source_lines(text)
    chosen = lines[finding.span.row - 1:finding.span.end_row]
    return " ".join(" ".join(chosen).split())


def finding_key(finding: Finding, text: str | None, base: Path) -> tuple[str, str, str]:
    path = Path(os.path.relpath(os.path.abspath(finding.path), base)).as_posix()
    return finding.code, path, flagged_text(finding, text)


def write_baseline(file: Path, findings: Iterable[tuple[Finding, str | None]]) -> int:
    counts = Counter(finding_key(f, text, _base(file)) for f, text in findings)
    entries = [
        {"code": code, "path": path, "text": text, "count": n}
        for (code, path, text), n in sorted(counts.items())
    ]
    payload = json.dumps({"kvlint-baseline": _FORMAT, "findings": entries}, indent=2) + "\n"
    file.parent.mkdir(parents=True, exist_ok=True)
    if file.exists():
        write_atomic(str(file), payload.encode())
    else:
        file.write_text(payload, encoding="utf-8")
    return sum(counts.values())


def new_findings(file: Path, findings: Sequence[tuple[Finding, str | None]]) -> list[Finding]:
    """The findings the baseline does not account for, in their original order."""
    remaining = _read(file)
    fresh = []
    for finding, text in findings:
        key = finding_key(finding, text, _base(file))
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            fresh.append(finding)
    return fresh


def _base(file: Path) -> Path:
    return file.resolve().parent


def _read(file: Path) -> Counter[tuple[str, str, str]]:
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
        if payload.get("kvlint-baseline") != _FORMAT:
            raise ValueError("not a kvlint baseline")
        return Counter({(e["code"], e["path"], e["text"]): int(e["count"]) for e in payload["findings"]})
    except OSError as exc:
        raise BaselineError(f"{file}: cannot read baseline: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BaselineError(f"{file}: not a kvlint baseline file ({exc}); write one with --write-baseline") from None
