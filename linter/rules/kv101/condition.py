"""KV101 needs attention context (an attention word, an attention callable, a K/V projection
name, or ``softmax`` for hand-written attention) and a K tensor name that is subscripted,
reshaped or followed by an axis-moving step (``k.transpose(1, 2)[...]``).
"""

from __future__ import annotations

from linter.model.names import is_kv_tensor_name
from linter.plan.file import _File


def _kv101(f: _File) -> bool:
    extra = f.settings.extra_pairs
    return f.attention_context() and any(is_kv_tensor_name(k, extra) and f.reshaped(k) for k in f.k_names)


CONDITION = _kv101
