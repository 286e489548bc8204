"""KV205 needs a class, a ``*Linear`` constructor, a view/reshape call and a head-count name (any
case).
"""

from __future__ import annotations

from linter.prefilter.file import _File


def _kv205(f: _File) -> bool:
    # A class's ``*Linear`` projection viewed with a query head count (its name has "head", in
    # any case).
    return (
        "class" in f.text and "Linear" in f.text and "head" in f.lower and f.has_any(("view", "reshape"))
        and f.has_class()
    )
