"""docs/cli.md documents every option of `kvlint check` and every configuration key, and its
table of ruff's `check` options names each option the installed ruff has."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from linter.cli import build_parser
from linter.config import _KEYS

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "cli.md").read_text()


def _check_parser():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sub.choices["check"]


def test_every_check_option_is_documented():
    options = [o for action in _check_parser()._actions for o in action.option_strings if o not in ("-h", "--help")]
    assert len(options) > 30
    missing = [o for o in options if f"`{o}" not in DOC and f"/ `{o}" not in DOC]
    assert not missing, f"undocumented in docs/cli.md: {missing}"


def test_every_configuration_key_is_documented():
    missing = [key for key in sorted(_KEYS) if f"`{key}`" not in DOC]
    assert not missing, f"undocumented keys: {missing}"


def _ruff_check_options() -> set[str]:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    run = subprocess.run([ruff, "check", "--help"], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        pytest.skip("ruff is not installed")
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]+)", run.stdout, re.MULTILINE)) - {"--help"}


def test_the_ruff_table_names_every_ruff_check_option():
    table = DOC[DOC.index("### ruff's `check` options and kvlint"):DOC.index("### Configuration")]
    missing = sorted(o for o in _ruff_check_options() if f"`{o}" not in table and f"/{o}`" not in table)
    assert not missing, f"ruff check options missing from the table: {missing}"
