"""KV204 needs a class, a ``*Linear`` constructor, a view/reshape call, a shape or size read, a
``None`` (the screen's parameter defaulting to None: the optional cross-attention input), and
paired names.
"""

from __future__ import annotations

from linter.plan.file import _File


def _kv204(f: _File) -> bool:
    # A class's ``*Linear`` K/V projection, viewed or reshaped with a shape read off a tensor.
    return (
        "class" in f.text and "Linear" in f.text and "None" in f.text and ("shape" in f.text or "size" in f.text)
        and f.has_any(("view", "reshape")) and f.has_class() and bool(f.k_names)
    )


CONDITION = _kv204
