"""The progress bar: drawn on a terminal once checking takes a while, never on a pipe or in a
machine format. The delay is set to 0 here so a test's small tree counts as a long run."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from linter.report import progress
from tests.linter.test_cli import BUGGY, CLEAN

ROOT = Path(__file__).resolve().parents[2]
# kvlint in a fresh process with the bar's delay at 0; stdout gets the report.
RUN = "import sys\nfrom linter.report import progress\nprogress.DELAY = 0\nfrom linter.cli import main\nsys.exit(main(sys.argv[1:]))"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for i in range(6):
        (tmp_path / f"clean{i}.py").write_text(CLEAN)
    (tmp_path / "buggy.py").write_text(BUGGY)
    return tmp_path


def _run(tree: Path, *args: str, terminal: bool) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) with stderr on a pseudo-terminal or a pipe."""
    command = [sys.executable, "-c", RUN, "check", "--no-cache", "--jobs", "1", *args, "."]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    if not terminal:
        proc = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=follower, text=True)
        os.close(follower)
        out = proc.stdout.read()
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closes with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_bar_counting_the_files(tree):
    code, out, err = _run(tree, "--format", "concise", terminal=True)
    assert code == 1 and "Checking" in err and "7/7" in err and "files" in err
    # The report itself is unchanged by the bar.
    assert out.splitlines()[0].startswith("buggy.py:4:46: KV101")


def test_a_pipe_gets_no_bar(tree):
    code, out, err = _run(tree, "--format", "concise", terminal=False)
    assert code == 1 and err == "" and "\x1b[" not in out


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_a_machine_format_gets_no_bar_even_on_a_terminal(tree, fmt):
    code, out, err = _run(tree, "--format", fmt, terminal=True)
    assert code == 1 and "Checking" not in err and "\x1b[" not in err


def test_quiet_gets_no_bar(tree):
    _, _, err = _run(tree, "-q", terminal=True)
    assert "Checking" not in err


def test_a_quick_run_draws_nothing(tmp_path):
    class Terminal:
        written = ""

        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            self.written += text
            return len(text)

        def flush(self) -> None:
            pass

    stream = Terminal()
    assert progress.wanted(stream, "full", quiet=False)
    bar = progress.Bar(3, stream, delay=60)
    for _ in range(3):
        bar.advance()
    bar.close()
    assert stream.written == ""
