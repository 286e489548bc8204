"""The closing line of the human formats."""

from __future__ import annotations

from linter.report import Outcome


def summary(outcome: Outcome) -> str:
    n = len(outcome.findings)
    fixed = f"Fixed {outcome.fixed} finding{'s' * (outcome.fixed != 1)}. " if outcome.fixed else ""
    unchecked = _unchecked(outcome)
    if n == 0:
        return f"{fixed}All checks passed!" if not outcome.problems else f"{fixed}No findings; {unchecked}."
    fixable = sum(1 for f in outcome.findings if f.fix is not None and f.fix.applicability == "safe")
    unsafe = sum(1 for f in outcome.findings if f.fix is not None and f.fix.applicability == "unsafe")
    hints = []
    if fixable:
        hints.append(f"{fixable} fixable with --fix")
    if unsafe:
        hints.append(f"{unsafe} more with --unsafe-fixes")
    hint = f" ({', '.join(hints)})" if hints else ""
    also = f"; {unchecked}" if outcome.problems else ""
    return f"{fixed}Found {n} finding{'s' * (n != 1)}{hint}{also}."


def _unchecked(outcome: Outcome) -> str:
    files = len({p.path for p in outcome.problems})
    return f"{files} file{' was' if files == 1 else 's were'} not checked (see the errors above)"
