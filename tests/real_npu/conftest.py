"""The real torch_npu tier: the guard against the real torch-npu 2.13.0 package over stub CANN libraries.

Outside .venv-npu (the main .venv runs the test double) nothing here is collected: the main
suite runs this tier through tests/real_npu_tier/, which says why when it cannot.
See README.md in this directory for the contract tests are written against.
"""

from __future__ import annotations

from tests.real_npu.environment import REAL

if not REAL:
    collect_ignore_glob = ["*"]
else:
    from tests.real_npu.harness import fresh_reporter, guard, unguarded, warn_guard  # noqa: F401 - fixtures
