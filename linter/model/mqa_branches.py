"""Branches that run only without multi-query or grouped-query attention.

``if self.multi_query_attention: ... else: ...`` and ``if not use_gqa:``: in the arm where the
test says MQA/GQA is off, K and V hold as many heads as the query, so a K/V shape written with
the query head count is right there.
"""

from __future__ import annotations

import re

import libcst as cst

from linter.model.pairs import dotted_name
from linter.model.walk import children

# Flags that say K/V heads are shared: ``multi_query_attention``, ``use_mqa``, ``is_gqa``.
_SHARED_HEADS_FLAG = re.compile(r"multi_query|(?:^|_)[mg]qa(?:_|$)|grouped_query", re.IGNORECASE)
# Counts that a flag-like name may carry (``num_multi_query_groups``): a size, not a switch.
_COUNT = re.compile(r"(?:^|_)(?:num|n|groups?|count|heads?|size)(?:_|$)", re.IGNORECASE)


def _flag(test: cst.BaseExpression) -> bool | None:
    """True for a test that holds when MQA/GQA is on (``self.multi_query_attention``), False
    for one that holds when it is off (``not use_gqa``), None for anything else."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _flag(test.expression)
        return None if inner is None else not inner
    name = dotted_name(test)
    if name is None:
        return None
    tail = name.rsplit(".", 1)[-1]
    if _SHARED_HEADS_FLAG.search(tail) and not _COUNT.search(tail):
        return True
    return None


def heads_shared_off_calls(node: cst.CSTNode) -> set[int]:
    """The ids of the calls below ``node`` that run only where a test says MQA/GQA is off."""
    found: set[int] = set()
    _walk(node, False, found)
    return found


def _walk(node: cst.CSTNode, off: bool, found: set[int]) -> None:
    if isinstance(node, cst.Call) and off:
        found.add(id(node))
    if isinstance(node, cst.If):
        on = _flag(node.test)
        _walk(node.test, off, found)
        _walk(node.body, off or on is False, found)
        if node.orelse is not None:
            _walk(node.orelse, off or on is True, found)
        return
    for child in children(node):
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            _walk(child, off, found)
