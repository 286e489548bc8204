"""A small identity-keyed cache: rules of one traversal ask for the same node's model in turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import libcst as cst

M = TypeVar("M")

_SIZE = 64


def cached(store: dict[int, tuple[cst.CSTNode, object]], node: cst.CSTNode, build: Callable[[], M]) -> M:
    hit = store.get(id(node))
    # The node is kept in the entry so its id cannot be reused while the entry lives.
    if hit is not None and hit[0] is node:
        return hit[1]  # type: ignore[return-value]
    model = build()
    if len(store) >= _SIZE:
        store.pop(next(iter(store)))
    store[id(node)] = (node, model)
    return model
