"""Children of a libcst node, fast.

libcst's ``node.children`` rebuilds the node through a visitor to find them, which costs more
than the rules' own work; the models walk the dataclass fields instead and skip those that hold
only whitespace and punctuation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

_SKIPPED = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
    "footer", "trailing_whitespace", "newline", "operator", "equal", "colon", "star",
    "lbracket", "rbracket", "lbrace", "rbrace", "dot", "whitespace_before", "whitespace_after",
})
_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind)
            if f.name not in _SKIPPED and not f.name.startswith("whitespace")
        )
        _FIELDS[kind] = names
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item
