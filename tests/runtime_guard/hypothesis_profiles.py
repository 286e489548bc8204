"""Hypothesis settings for the guard's property tests, and the case counts they report.

The profiles are applied per test (not loaded globally), so the linter's property tests keep
their own settings. CI sets nothing and gets ``kvguard-ci``; ``KVGUARD_HYPOTHESIS_PROFILE=
kvguard-thorough`` runs many more cases locally. At the end of a session the number of cases each
property ran is printed, so the counts can be quoted.
"""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # tensor construction time varies on a loaded CI box
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    "database": None,  # no example database files written into the tree
}
settings.register_profile("kvguard-ci", max_examples=150, **_COMMON)
settings.register_profile("kvguard-thorough", max_examples=3000, **_COMMON)

PROFILE = settings.get_profile(os.environ.get("KVGUARD_HYPOTHESIS_PROFILE", "kvguard-ci"))

CASES: Counter = Counter()  # (property, detail) -> cases run


def count(prop: str, detail: str = "") -> None:
    CASES[(prop, detail)] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not CASES:
        return
    terminalreporter.section("kvlint runtime guard property cases")
    totals: Counter = Counter()
    for (prop, _), n in CASES.items():
        totals[prop] += n
    for prop in sorted(totals):
        details = ", ".join(f"{detail} {n}" for (p, detail), n in sorted(CASES.items()) if p == prop and detail)
        terminalreporter.write_line(f"{prop}: {totals[prop]} cases" + (f" ({details})" if details else ""))
