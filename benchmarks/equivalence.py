"""The fast path (pre-filter on) against the slow path (every file parsed and visited)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from linter import runner
from linter.config import CliOptions, load_settings
from linter.rules import all_rules
from linter.settings import Settings


def default_settings() -> Settings:
    """What ``kvlint check`` uses with no config and no options: every rule."""
    return load_settings(None, CliOptions(None, [], []), [r.code for r in all_rules()])


def findings(paths: Sequence[str], *, prefilter: bool, jobs: int, settings: Settings | None = None) -> list:
    """Every finding and file problem for ``paths``, as comparable tuples."""
    job = replace(runner.job_for(settings or default_settings()), prefilter=prefilter)
    found = []
    for result in runner.check_paths(list(paths), job, jobs):
        found.extend((f.path, f.code, f.span, f.message) for f in result.findings)
    return sorted(found)


def differences(paths: Sequence[str], jobs: int, settings: Settings | None = None) -> tuple[list, list]:
    """(findings only the slow path reports, findings only the fast path reports)."""
    slow = findings(paths, prefilter=False, jobs=jobs, settings=settings)
    fast = findings(paths, prefilter=True, jobs=jobs, settings=settings)
    return sorted(set(slow) - set(fast)), sorted(set(fast) - set(slow))
