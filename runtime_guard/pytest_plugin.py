"""pytest --kvguard=raise|warn: run the whole test session under the runtime guard.

Registered through the ``pytest11`` entry point; without the option it does nothing.
"""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    parser.getgroup("kvlint").addoption(
        "--kvguard",
        choices=("raise", "warn"),
        default=None,
        help="check every torch_npu attention / KV-cache call for K/V consistency (raise or warn)",
    )


def pytest_configure(config: Any) -> None:
    mode = config.getoption("kvguard", None)
    if mode:
        import runtime_guard
        from runtime_guard import reporting

        reporting.warn_instead = "--kvguard=warn"
        runtime_guard.install(mode)
        config._kvguard_mode = mode


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    mode = getattr(config, "_kvguard_mode", None)
    if mode != "warn":
        return
    from runtime_guard import patching
    from runtime_guard.reporting import format_summary

    reporter = patching.STATE.reporter
    terminalreporter.section("kvlint runtime guard")
    for line in format_summary(reporter.summary_rows() if reporter else [], reporter.not_judged_rows() if reporter else []).splitlines():
        terminalreporter.write_line(line)


def pytest_unconfigure(config: Any) -> None:
    if getattr(config, "_kvguard_mode", None):
        import runtime_guard
        from runtime_guard import reporting

        runtime_guard.uninstall()
        reporting.warn_instead = "KVGUARD=warn"
