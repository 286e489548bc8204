"""Where tokens, heads and head dims live in each input_layout."""

from __future__ import annotations

from operator import itemgetter
from typing import Callable, NamedTuple


class Layout(NamedTuple):
    name: str
    rank: int
    token_axes: tuple  # batch/sequence axes, batch first when there is one
    head_axis: int | None  # None: heads are folded into a hidden axis H = N * D
    dim_axis: int
    packed: bool  # TND/NTD: tokens of all sequences on one axis, lengths cumulative

    @property
    def tokens(self) -> Callable:
        """shape -> its token axes as a tuple (batch, seq) or (tokens,)."""
        return _TOKEN_GETTERS[self.token_axes]


LAYOUTS = {
    layout.name: layout
    for layout in (
        Layout("TND", 3, (0,), 1, 2, True),
        Layout("NTD", 3, (1,), 0, 2, True),
        Layout("BSND", 4, (0, 1), 2, 3, False),
        Layout("BNSD", 4, (0, 2), 1, 3, False),
        Layout("BSH", 3, (0, 1), None, 2, False),
        Layout("SBH", 3, (1, 0), None, 2, False),
    )
}


_TOKEN_GETTERS = {axes: (itemgetter(*axes) if len(axes) > 1 else (lambda shape, a=axes[0]: (shape[a],))) for axes in ((0,), (1,), (0, 1), (0, 2), (1, 0))}


def input_layout(declared: str) -> Layout | None:
    """Compound layouts such as ``BNSD_BSND`` name the input first and the output second."""
    return LAYOUTS.get(declared.partition("_")[0])
