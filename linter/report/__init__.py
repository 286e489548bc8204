"""Output formats. Each module renders one ``Outcome`` to a text stream.

File problems (``E999``/``EKV...``, see ``linter.diagnostics``) go to stderr as
``path:row: CODE message`` lines in every format, and the machine-readable formats carry them as
well: ``json`` as entries with that code, ``fix: null`` and ``url: null`` (ruff does the same
for syntax errors, with its own code), ``sarif`` as tool execution notifications, ``github`` as
``::error`` annotations.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, TextIO

from linter.diagnostics import FileProblem
from linter.finding import Finding

if TYPE_CHECKING:
    from linter.rules.base import Rule


@dataclass
class Outcome:
    findings: list[Finding]
    problems: list[FileProblem] = field(default_factory=list)
    # Source text of files with findings, for code frames and fingerprints.
    texts: dict[str, str] = field(default_factory=dict)
    # Findings that --fix removed, for the summary line.
    fixed: int = 0
    # Notebooks: path -> (first row, cell number) per code cell (see linter.notebook).
    cells: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # -q: findings only, no summary line.
    quiet: bool = False
    # --unsafe-fixes: unsafe fixes count as fixable ([*], the summary's hint), as in ruff.
    unsafe_fixes: bool = False
    # The configuration's rule-docs-url (SARIF helpUri); None: the repository's, if known.
    rule_docs_url: str | None = None

    def applies(self, finding: Finding) -> bool:
        """Would ``--fix`` (with this run's ``--unsafe-fixes``) fix ``finding``?"""
        return finding.fix is not None and (finding.fix.applicability == "safe" or self.unsafe_fixes)

    def cell_of(self, path: str, row: int) -> tuple[int | None, int]:
        """(cell number, row in the cell) for a notebook's row; (None, row) for a Python file."""
        starts = self.cells.get(path)
        if starts is None:
            return None, row
        from linter.notebook import locate

        return locate(starts, row)

    def where(self, path: str, row: int, column: int) -> str:
        """``path:row:col``, or ruff's ``path:cell N:row:col`` inside a notebook."""
        cell, row = self.cell_of(path, row)
        return f"{path}:{row}:{column}" if cell is None else f"{path}:cell {cell}:{row}:{column}"


Renderer = Callable[[Outcome, TextIO, bool], None]


@cache
def warning_codes() -> frozenset[str]:
    """Rules whose findings are warnings: reported, but the exit status is unchanged unless
    ``--warnings-as-errors`` (a rule says so with ``severity = "warning"``). Only checkpoint
    rules can say so: a code rule's finding is attention computed on the wrong K/V, and reading
    them would import libcst into runs that check only models."""
    from linter.checkpoint import checkpoint_rules

    return frozenset(r.code for r in checkpoint_rules() if r.severity == "warning")


def severity(code: str) -> str:
    """``"warning"`` or ``"error"``, for a rule code or a file problem code (``WKV...``)."""
    return "warning" if code.startswith("W") or code in warning_codes() else "error"


def is_fixable(rule: type[Rule]) -> bool:
    """A rule offers fixes when one of its own INVALID examples shows the fixed code."""
    return any(example.expected_fix is not None for example in rule.INVALID)


# Format name -> module; imported on use, so a run pays only for the format it prints.
_MODULES = {"full": "full", "concise": "concise", "json": "json_format", "sarif": "sarif", "github": "github"}
FORMATS = tuple(_MODULES)


def renderer(name: str) -> Renderer:
    return importlib.import_module(f"{__name__}.{_MODULES[name]}").render
