"""Jupyter notebooks as Python text: the code cells in order, one after another, as ruff reads them.

Linting the cells together lets a K/V pair built in one cell and sliced in the next be seen, as
in the kernel that runs them. Findings keep rows of that joined text; ``cell_starts`` maps a row
back to its cell (numbered from 1 among all the notebook's cells, markdown included, as ruff
numbers them) and the row inside it. IPython magics and shell escapes (``%time``, ``!pip``,
``x?``) are not Python: those lines are turned into comments, so rows and the other lines stay
as written. Fixes are not written back into notebooks (the finding says what to change).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass

from linter.diagnostics import FileProblem
from linter.files import Unreadable

# A line IPython rewrites before Python sees it.
_MAGIC = re.compile(r"^\s*(?:[%!]|\?\??\w)|\?\??\s*$")


@dataclass(frozen=True)
class Converted:
    text: str
    # (first row of the cell in ``text``, cell number), in row order.
    cell_starts: tuple[tuple[int, int], ...]


def to_python(path: str, data: bytes) -> Converted:
    """The code cells of the notebook in ``data``; ``Unreadable`` (EKV002) when it is not one."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
        cells = document["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise Unreadable(FileProblem(path, "EKV002", f"not a Jupyter notebook (nbformat 4 JSON with a cells list): {exc}")) from None
    chunks: list[str] = []
    starts: list[tuple[int, int]] = []
    row = 1
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        lines = [("# " + line) if _MAGIC.search(line) else line for line in text.split("\n")]
        chunk = "\n".join(lines)
        if not chunk.endswith("\n"):
            chunk += "\n"
        starts.append((row, number))
        chunks.append(chunk)
        row += chunk.count("\n")
    return Converted("".join(chunks), tuple(starts))


def locate(cell_starts: tuple[tuple[int, int], ...], row: int) -> tuple[int, int]:
    """(cell number, row inside the cell) of ``row`` of the joined text."""
    i = bisect_right([start for start, _ in cell_starts], row) - 1
    if i < 0:
        return (cell_starts[0][1] if cell_starts else 1), row
    start, number = cell_starts[i]
    return number, row - start + 1
