"""GitHub Actions workflow commands: one ``::error`` annotation per finding or file problem."""

from __future__ import annotations

from typing import TextIO

from linter.report import Outcome


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    for p in outcome.problems:
        out.write(f"::error file={_property(p.path)},line={p.row},col={p.column},title={_property(f'kvlint ({p.code})')}::{_data(p.message)}\n")
    for f in outcome.findings:
        s = f.span
        message = f"{f.message}\n{f.suggestion}"
        out.write(
            f"::error file={_property(f.path)},line={s.row},col={s.column},endLine={s.end_row},"
            f"endColumn={s.end_column},title={_property(f'kvlint ({f.code})')}::{_data(message)}\n"
        )
