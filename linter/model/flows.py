"""Where a tensor in a method comes from: the class's own K/V projection applied to some states.

``self.k_proj(current).view(...)`` and ``k = self.k_proj(current)`` ... ``k.view(...)`` both view
the output of ``self.k_proj`` applied to ``current``. Only the last simple binding before the
use counts: ``k = repeat_kv(k)`` in between means the view is no longer of the projection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from linter.model.classes import ClassModel
from linter.model.functions import FunctionModel
from linter.model.names import key_counterpart, kv_side, value_counterpart


@dataclass(frozen=True)
class Projected:
    attr: str  # the projection attribute: ``k_proj``
    states: str  # the name it was applied to: ``current_states``


def projected(receiver: cst.BaseExpression, order: int, model: FunctionModel, owner: ClassModel,
              extra_pairs: Iterable[tuple[str, str]] = ()) -> Projected | None:
    """The K/V projection output ``receiver`` (used at ``order``) is, when it is one."""
    if isinstance(receiver, cst.Name):
        bound = model.binding_before(receiver.value, order)
        return None if bound is None else projected(bound.value, bound.order, model, owner, extra_pairs)
    if not isinstance(receiver, cst.Call):
        return None
    func = receiver.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return None
    attr = func.attr.value
    pairs = tuple(extra_pairs)
    if attr not in owner.projections or kv_side(attr, pairs) is None:
        return None
    if value_counterpart(attr, pairs) is not None and key_counterpart(attr, pairs) is not None:
        return None  # ``query_key_value``: a fused projection, both sides at once
    if len(receiver.args) != 1 or not isinstance(receiver.args[0].value, cst.Name):
        return None
    return Projected(attr, receiver.args[0].value.value)
