"""Apply fixes to source text (non-overlapping edits, last first, result must parse) and write
files atomically.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable

from linter.finding import Edit, Finding

# Python's own line ends; str.splitlines would also split on form feeds and \u2028, which the
# parser (and so every Span) does not count as line breaks.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _offsets(source: str) -> list[int]:
    starts = [0]
    for match in _LINE.finditer(source):
        starts.append(match.end())
    return starts


def has_applicable_fix(findings: Iterable[Finding], unsafe: bool = False) -> bool:
    return any(f.fix is not None and (unsafe or f.fix.applicability == "safe") for f in findings)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader (or a crash) sees the old or the new file.

    The temporary file lives in the same directory (``os.replace`` is atomic only within one
    file system), is fsynced before the rename, and takes the original's permission bits.
    """
    import tempfile  # imported on use: most runs write nothing

    target = os.path.realpath(path)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=f".{os.path.basename(target)}.", suffix=".kvlint-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _offset(starts: list[int], row: int, column: int) -> int:
    return starts[row - 1] + column - 1


def apply_fixes(source: str, findings: Iterable[Finding], unsafe: bool = False) -> str:
    """Return ``source`` with every applicable fix applied.

    A fix whose edits overlap an earlier accepted fix is skipped (the next run picks it up),
    and if the result does not parse the source is returned unchanged.
    """
    starts = _offsets(source)
    chosen: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []
    for finding in findings:
        fix = finding.fix
        if fix is None or (fix.applicability != "safe" and not unsafe):
            continue
        ranges = [_edit_range(starts, edit) for edit in fix.edits]
        if any(_overlaps(a, b) for a in ranges for b in taken):
            continue
        taken.extend(ranges)
        chosen.extend((lo, hi, edit.content) for (lo, hi), edit in zip(ranges, fix.edits))
    fixed = source
    for lo, hi, content in sorted(chosen, reverse=True):
        fixed = fixed[:lo] + content + fixed[hi:]
    if fixed == source:
        return source
    # Imported here: a run with nothing to fix (and --fix's callers) never needs libcst.
    import libcst as cst

    try:
        cst.parse_module(fixed)
    except cst.ParserSyntaxError:
        return source
    return fixed


def _edit_range(starts: list[int], edit: Edit) -> tuple[int, int]:
    span = edit.span
    return _offset(starts, span.row, span.column), _offset(starts, span.end_row, span.end_column)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] or a == b
