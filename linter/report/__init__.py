"""Output formats. Each module renders one ``Outcome`` to a text stream.

File problems (``E999``/``EKV...``, see ``linter.diagnostics``) go to stderr as
``path:row: CODE message`` lines in every format, and the machine-readable formats carry them as
well: ``json`` as entries with that code, ``fix: null`` and ``url: null`` (ruff does the same
for syntax errors, with its own code), ``sarif`` as tool execution notifications, ``github`` as
``::error`` annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from linter.diagnostics import FileProblem
from linter.finding import Finding
from linter.rules.base import Rule


@dataclass
class Outcome:
    findings: list[Finding]
    problems: list[FileProblem] = field(default_factory=list)
    # Source text of files with findings, for code frames and fingerprints.
    texts: dict[str, str] = field(default_factory=dict)
    # Findings that --fix removed, for the summary line.
    fixed: int = 0


Renderer = Callable[[Outcome, TextIO, bool], None]


def is_fixable(rule: type[Rule]) -> bool:
    """A rule offers fixes when one of its own INVALID examples shows the fixed code."""
    return any(example.expected_fix is not None for example in rule.INVALID)


def renderers() -> dict[str, Renderer]:
    from linter.report import concise, full, github, json_format, sarif

    return {
        "full": full.render,
        "concise": concise.render,
        "json": json_format.render,
        "sarif": sarif.render,
        "github": github.render,
    }


FORMATS = ("full", "concise", "json", "sarif", "github")
