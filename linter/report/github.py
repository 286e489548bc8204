"""GitHub Actions workflow commands: one ``::error`` annotation per finding or file problem
(``::warning`` for a warning rule such as KV408 and for WKV001)."""

from __future__ import annotations

from typing import TextIO

from linter.report import Outcome, severity


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(outcome: Outcome, out: TextIO, color: bool) -> None:
    for p in outcome.problems:
        out.write(f"::{severity(p.code)} file={_property(p.path)},line={p.row},col={p.column},title={_property(f'kvlint ({p.code})')}::{_data(p.message)}\n")
    for f in outcome.findings:
        s = f.span
        message = f"{f.message}\n{f.suggestion}"
        cell, row = outcome.cell_of(f.path, s.row)
        if cell is not None:
            # An annotation cannot point into a notebook cell: name the cell in the message.
            end_row = outcome.cell_of(f.path, s.end_row)[1]
            message = f"cell {cell}: {message}"
        else:
            end_row = s.end_row
        out.write(
            f"::{severity(f.code)} file={_property(f.path)},line={row},col={s.column},endLine={end_row},"
            f"endColumn={s.end_column},title={_property(f'kvlint ({f.code})')}::{_data(message)}\n"
        )
