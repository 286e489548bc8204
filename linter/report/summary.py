"""The closing line of the human formats."""

from __future__ import annotations

from linter.report import Outcome, severity


def summary(outcome: Outcome) -> str:
    errors = sum(1 for f in outcome.findings if severity(f.code) == "error")
    # A warning is a finding of a warning rule (KV408) or a malformed `# noqa` (WKV001): reported,
    # but neither fails the run nor means a file went unchecked.
    warnings = len(outcome.findings) - errors + sum(1 for p in outcome.problems if p.warning)
    fixed = f"Fixed {outcome.fixed} finding{'s' * (outcome.fixed != 1)}. " if outcome.fixed else ""
    unchecked = _unchecked(outcome)
    if not errors and not warnings:
        return f"{fixed}All checks passed!" if not unchecked else f"{fixed}No findings; {unchecked}."
    counts = [f"{errors} finding{'s' * (errors != 1)}"] if errors else []
    if warnings:
        counts.append(f"{warnings} warning{'s' * (warnings != 1)}")
    fixable = sum(1 for f in outcome.findings if outcome.applies(f))
    unsafe = sum(1 for f in outcome.findings if f.fix is not None and not outcome.applies(f))
    hints = []
    if fixable:
        hints.append(f"{fixable} fixable with --fix")
    if unsafe:
        hints.append(f"{unsafe} more with --unsafe-fixes")
    hint = f" ({', '.join(hints)})" if hints else ""
    also = f"; {unchecked}" if unchecked else ""
    return f"{fixed}Found {' and '.join(counts)}{hint}{also}."


def _unchecked(outcome: Outcome) -> str:
    files = len({p.path for p in outcome.problems if not p.warning})
    if not files:
        return ""
    return f"{files} file{' was' if files == 1 else 's were'} not checked (see the errors above)"
