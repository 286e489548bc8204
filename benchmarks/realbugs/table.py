"""Verdicts per case and the printed table: pure functions of the findings' rows."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.realbugs.manifest import Case

NEAR = 3   # a finding this many lines or fewer from a bug line finds the bug


@dataclass(frozen=True)
class Result:
    case: Case
    buggy_rows: tuple[int, ...] = ()     # rows of kvlint's findings on the buggy file
    fixed_rows: tuple[int, ...] = ()     # and on the fixed file
    error: str | None = None             # why the case could not be run


def found(case: Case, rows: tuple[int, ...]) -> bool:
    return any(abs(row - line) <= NEAR for row in rows for line in case.lines)


def false_alarms_on_fixed(result: Result) -> tuple[int, ...]:
    """The fixed file's findings, less those at a line the manifest records as still buggy there."""
    known = result.case.still_buggy_in_fixed
    return tuple(row for row in result.fixed_rows if not any(abs(row - line) <= NEAR for line in known))


def verdict(result: Result) -> str:
    if result.error is not None:
        return "not run"
    if false_alarms_on_fixed(result):
        return "false alarm on fixed"
    return "found" if found(result.case, result.buggy_rows) else "missed"


def _recall(results: list[Result]) -> str:
    run = [r for r in results if r.error is None]
    hits = sum(found(r.case, r.buggy_rows) for r in run)
    share = f"{100 * hits / len(run):.0f}%" if run else "-"
    return f"{hits}/{len(run)} ({share})"


def render(results: list[Result]) -> str:
    head = ("case", "project", "class", "split", "found", "fixed findings", "verdict")
    body = [(r.case.id, r.case.project, r.case.kind, r.case.split,
             "-" if r.error else ("yes" if found(r.case, r.buggy_rows) else "no"),
             "-" if r.error else str(len(false_alarms_on_fixed(r))), verdict(r)) for r in results]
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (head, *body)]
    lines.append("")
    for split in ("dev", "measure"):
        part = [r for r in results if r.case.split == split]
        if part:
            lines.append(f"recall {split}: {_recall(part)}")
    lines.append(f"recall all: {_recall(results)}")
    run = [r for r in results if r.error is None]
    lines.append(f"findings on fixed files: {sum(len(false_alarms_on_fixed(r)) for r in run)}"
                 f" (and {sum(len(r.fixed_rows) - len(false_alarms_on_fixed(r)) for r in run)} at bugs the fix left)")
    errors = [r for r in results if r.error is not None]
    if errors:
        lines.append(f"not run: {len(errors)} (reasons above the table)")
    return "\n".join(lines)
