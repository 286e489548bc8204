"""KV212 needs a K/V tensor made longer by the cache (a concatenation, ``cat``/``concat``, or a
cache's ``update``) and a length name (``len``/``length`` in it: the query's and the KV
length); ``model.extended_kv`` reads the rest on the tree."""

from __future__ import annotations

from linter.plan.file import _File


def _kv212(f: _File) -> bool:
    names = f.lower_names
    if "len" not in names:
        return False
    return "cat" in names or "update" in names


CONDITION = _kv212
