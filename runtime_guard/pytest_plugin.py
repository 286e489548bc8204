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

        runtime_guard.install(mode)
        config._kvguard_mode = mode


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    mode = getattr(config, "_kvguard_mode", None)
    if mode != "warn":
        return
    import runtime_guard

    rows = runtime_guard.summary()
    terminalreporter.section("kvlint runtime guard")
    if not rows:
        terminalreporter.write_line("no K/V consistency violations")
        return
    terminalreporter.write_line(f"{'count':>5}  op / check / first call site")
    for op, check, count, site in rows:
        terminalreporter.write_line(f"{count:5d}  {op} / {check} / {site}")


def pytest_unconfigure(config: Any) -> None:
    if getattr(config, "_kvguard_mode", None):
        import runtime_guard

        runtime_guard.uninstall()
