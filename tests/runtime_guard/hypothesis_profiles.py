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
FACTS: Counter = Counter()  # (property, fact) -> amount, e.g. calls made under load


def count(prop: str, detail: str = "") -> None:
    CASES[(prop, detail)] += 1


def note(prop: str, fact: str, amount: int) -> None:
    FACTS[(prop, fact)] += amount


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not CASES and not FACTS:
        return
    terminalreporter.section("kvlint runtime guard property cases")
    verbose = config.option.verbose > 0
    totals: Counter = Counter()
    for (prop, _), n in CASES.items():
        totals[prop] += n
    for prop in sorted({p for p, _ in CASES} | {p for p, _ in FACTS}):
        details = [f"{detail} {n}" for (p, detail), n in sorted(CASES.items()) if p == prop and detail]
        details += [f"{fact} {n}" for (p, fact), n in sorted(FACTS.items()) if p == prop]
        cases = f": {totals[prop]} cases" if prop in totals else ":"
        if verbose:
            terminalreporter.write_line(f"{prop}{cases}" + (f" ({', '.join(details)})" if details else ""))
        else:
            # One line per property; the per-kind breakdown (dozens of entries) only with -v.
            kinds = f" over {len(details)} kinds" if len(details) > 1 else (f" ({details[0]})" if details else "")
            terminalreporter.write_line(f"{prop}{cases}{kinds}")
    if not verbose:
        terminalreporter.write_line("(-v lists the cases per kind)")
