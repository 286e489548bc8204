"""Where an imported module's file lies, from the importing file's path, and what is read from
it: what KV105, KV207, KV208 and KV209 read a helper, a base class or a pool from, and what their
``ast`` screens read it from too (so both see the same file). No libcst here: the screens run
before anything is parsed with it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

from linter import dependencies


def module_file(path: str, level: int, parts: list[str], must_exist: bool = True) -> str | None:
    """The file of ``from <level dots><parts> import ...`` written in ``path``; every candidate
    looked for and absent is noted as a dependency (its creation must invalidate a cached
    result)."""
    if not path or path.startswith("<") or (must_exist and not os.path.isfile(path)) or not parts:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    for _ in range(level - 1):
        directory = os.path.dirname(directory)
    base = os.path.join(directory, *parts)
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
        dependencies.stamp(candidate)
    return None


def absolute_module_file(path: str, parts: list[str]) -> str | None:
    """``pkg.mem_cache.pool`` -> the file, when ``path`` lies inside a package named ``pkg``
    (found by climbing the directories that hold an ``__init__.py``)."""
    if not path or path.startswith("<") or not os.path.isfile(path) or not parts:
        return None
    top = None
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        top = directory
        directory = os.path.dirname(directory)
    if top is None or parts[0] != os.path.basename(top):
        return None
    return module_file(os.path.join(os.path.dirname(top), "x.py"), 1, parts, must_exist=False)


# (path, what was built from it) -> (the file's mtime, the result): a pool or helper module is
# imported by many files of a tree, and read once per process while it is unchanged.
_READ: dict[tuple[str, Callable], tuple[int, object]] = {}


def read_once(path: str, build: Callable[[str], T], unreadable: T) -> T:
    """``build`` applied to the text of the file at ``path``, computed once per process while
    the file keeps its mtime; ``unreadable`` when it cannot be read or decoded. ``build``
    handles its own parse errors. The file is a dependency of the lint in progress either way."""
    dependencies.stamp(path)
    try:
        mtime = os.stat(path).st_mtime_ns
        hit = _READ.get((path, build))
        if hit is not None and hit[0] == mtime:
            return hit[1]
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return unreadable
    value = build(text)
    _READ[(path, build)] = (mtime, value)
    return value
