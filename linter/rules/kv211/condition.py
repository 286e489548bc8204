"""KV211 needs a floor division (``//``): the KV head count divided by the shard count. The
screen reads its operands."""

from __future__ import annotations

from linter.plan.file import _File


def _kv211(f: _File) -> bool:
    return "//" in f.text


CONDITION = _kv211
