"""The other files a lint of one file read (a base class's module, a pool's module), so that a
cached result is reused only while they are unchanged too.

Rules that follow imports (KV207, KV208) call :func:`stamp` for every file they read; the runner
collects the stamps while it lints one file and stores them with the cache entry. A stamp is the
file's size and mtime: an edit of the other file invalidates the entry, as an edit of the file
itself does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

Stamp = tuple[str, int, int]  # (absolute path, size, mtime in ns); size -1: the file was absent

_reads: list[set[Stamp]] = []


def stamp_of(path: str) -> Stamp:
    path = os.path.abspath(path)
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, 0)
    return (path, st.st_size, st.st_mtime_ns)


def stamp(path: str) -> None:
    """Note that the file being linted depends on ``path`` (read, or looked for and absent)."""
    if _reads:
        _reads[-1].add(stamp_of(path))


@contextmanager
def collect() -> Iterator[set[Stamp]]:
    """The stamps noted while the body runs (one file's lint)."""
    reads: set[Stamp] = set()
    _reads.append(reads)
    try:
        yield reads
    finally:
        _reads.pop()


def unchanged(stamps: list) -> bool:
    return all(stamp_of(path) == (path, size, mtime) for path, size, mtime in stamps)
