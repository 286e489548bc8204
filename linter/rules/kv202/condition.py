"""KV202 needs a view/reshape/unflatten/rearrange call and paired names.
"""

from __future__ import annotations

from linter.model.names import value_counterpart
from linter.plan.file import _File
from linter.plan.vocabulary import _VIEW_CALLS


def _kv202(f: _File) -> bool:
    # The K view's statement names the K tensor (receiver root or assignment target), the V
    # view's statement the V one.
    if not f.has_any(_VIEW_CALLS):
        return False
    extra = f.settings.extra_pairs
    return any(
        f.viewed(k) and f.viewed(value_counterpart(k, extra) or k) for k in f.pairs_near(_VIEW_CALLS)
    )


CONDITION = _kv202
