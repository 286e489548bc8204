"""A progress bar on stderr while files are checked, for runs that take a while on a terminal.

It appears only once checking has run for ``DELAY`` seconds (a quick run stays silent), only on
a terminal, and only for the human formats: a pipe, a CI log or a machine format (json, sarif,
github) never gets cursor codes mixed into it. The bar is transient: it is erased when checking
ends, before the report is printed. rich is imported only when the bar is shown.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

DELAY = 1.0  # seconds of checking before the bar appears
HUMAN_FORMATS = ("full", "concise")


def wanted(stream: TextIO, fmt: str, quiet: bool) -> bool:
    """Should a run writing ``fmt`` show a bar on ``stream``?"""
    import os

    if quiet or fmt not in HUMAN_FORMATS or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


class Bar:
    """Counts checked files; draws the bar once ``delay`` has passed with files still to check."""

    def __init__(self, total: int, stream: TextIO, delay: float | None = None) -> None:
        self.total = total
        self.stream = stream
        self.delay = DELAY if delay is None else delay
        self.done = 0
        self._started = time.monotonic()
        self._progress: Any = None
        self._task: Any = None

    def advance(self) -> None:
        self.done += 1
        if self._progress is None:
            if self.done >= self.total or time.monotonic() - self._started < self.delay:
                return
            self._show()
        self._progress.update(self._task, completed=self.done)

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self.stream, force_terminal=True, highlight=False, emoji=False, markup=False)
        self._progress = Progress(
            TextColumn("Checking"), BarColumn(), MofNCompleteColumn(), TextColumn("files"), TimeElapsedColumn(),
            console=console, transient=True,
        )
        self._task = self._progress.add_task("check", total=self.total, completed=self.done)
        self._progress.start()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
