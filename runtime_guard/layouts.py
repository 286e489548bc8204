"""Where tokens, heads and head dims live in each input_layout."""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import NamedTuple


class Layout(NamedTuple):
    name: str
    rank: int
    token_axes: tuple  # batch/sequence axes, batch first when there is one
    head_axis: int | None  # None: heads are folded into a hidden axis H = N * D
    dim_axis: int
    packed: bool  # TND/NTD: tokens of all sequences on one axis, lengths cumulative
    tokens: Callable  # shape -> its token axes as a tuple, (batch, seq) or (tokens,)


def _layout(name: str, rank: int, token_axes: tuple, head_axis: int | None, dim_axis: int, packed: bool) -> Layout:
    tokens = itemgetter(*token_axes) if len(token_axes) > 1 else (lambda shape, axis=token_axes[0]: (shape[axis],))
    return Layout(name, rank, token_axes, head_axis, dim_axis, packed, tokens)


LAYOUTS = {
    layout.name: layout
    for layout in (
        _layout("TND", 3, (0,), 1, 2, True),
        _layout("NTD", 3, (1,), 0, 2, True),
        _layout("BSND", 4, (0, 1), 2, 3, False),
        _layout("BNSD", 4, (0, 2), 1, 3, False),
        _layout("BSH", 3, (0, 1), None, 2, False),
        _layout("SBH", 3, (1, 0), None, 2, False),
    )
}


def input_layout(declared: str) -> Layout | None:
    """Compound layouts such as ``BNSD_BSND`` name the input first and the output second."""
    return LAYOUTS.get(declared.partition("_")[0])
