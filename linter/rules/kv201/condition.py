"""KV201 needs a class, a ``*Linear`` constructor, and paired names.
"""

from __future__ import annotations

from linter.plan.file import _File


def _kv201(f: _File) -> bool:
    # Both projections are declared by a statement that calls a ``*Linear`` class.
    if "class" not in f.text or "Linear" not in f.text or not f.has_class():
        return False
    linears = frozenset(w for w in f.names_containing("Linear") if w.endswith("Linear"))
    return bool(linears) and bool(f.pairs_near(linears))


CONDITION = _kv201
