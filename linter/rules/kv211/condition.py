"""KV211 needs a floor division by a shard count: ``//`` followed by a dotted name (or call)
with a shard word in it (``tp_size``, ``world_size``, ``tensor_parallel_size``,
``self.process_group.size()``: ``model.shards.shard_count`` and ``group_size_call`` accept no
name without one). The KV head count it divides may sit in a string key
(``cfg["num_key_value_heads"]``), which code-only text blanks, so the condition reads the divisor
alone."""

from __future__ import annotations

import re

from linter.plan.file import _File

_DIVISOR = re.compile(r"//[\s(\\]*([\w.]+)")
_SHARD_WORDS = ("tp", "mp", "world", "parallel", "size", "degree")


def _kv211(f: _File) -> bool:
    text = f.text
    if "//" not in text:
        return False
    for match in _DIVISOR.finditer(text):
        divisor = match.group(1).lower()
        if any(word in divisor for word in _SHARD_WORDS):
            return True
    return False


CONDITION = _kv211
