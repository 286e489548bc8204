"""Shows the real-package tier's own result line in the main run's summary."""

from __future__ import annotations

from typing import Any

from tests.real_npu_tier.test_real_npu_tier import RESULT


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if "line" in RESULT:
        terminalreporter.write_sep("-", "real torch_npu tier (.venv-npu, tests/real_npu)")
        terminalreporter.write_line(RESULT["line"])
