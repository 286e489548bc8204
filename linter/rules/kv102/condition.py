"""KV102 needs attention context (as KV101, ``kv101``: an attention word, an attention callable,
a K/V projection name, or ``softmax`` for hand-written attention) and both sides of a pair, a K
tensor name and its V twin, each subscripted, reshaped or followed by an axis-moving step
(``k.transpose(1, 2)[...]``), or cut by split/chunk/tensor_split/narrow.
"""

from __future__ import annotations

from linter.model.names import is_kv_tensor_name, value_counterpart
from linter.plan.file import _File


def _kv102(f: _File) -> bool:
    extra = f.settings.extra_pairs
    return f.attention_context() and any(
        is_kv_tensor_name(k, extra) and f.cut(k) and f.cut(value_counterpart(k, extra) or k)
        for k in f.k_names
    )


CONDITION = _kv102
