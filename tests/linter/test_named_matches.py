"""``words.named_matches`` with one pattern for every file finds what a pattern with the
file's own names written in (an alternation) finds, match for match: KV208's condition reads
head-dim keyword arguments through it."""

from __future__ import annotations

import random
import re

from linter.plan.words import _GAP, named_matches
from linter.rules.kv208.condition import _KEYWORD_ARGUMENT

# Pieces of code around keyword arguments: comments holding brackets, commas and keywords of
# their own, comparisons, longer names that start with a keyword, line continuations.
_PIECES = [
    "f(", "g (", ")", ",", " ", "\n", "\\\n", "# note (head_dim=1,\n", "#,\n", "=", "==", " = ",
    "head_dim", "head_dim_v", "v_head_dim", "head_dimx", "x", "kv", "1", "é", "[", "]",
]
_KEYWORDS = ("head_dim", "v_head_dim", "kv")


def _written_in(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"[(,]{_GAP}(?:{'|'.join(map(re.escape, sorted(names)))}){_GAP}=(?!=)")


def test_keyword_arguments_are_found_where_the_alternation_finds_them() -> None:
    rng = random.Random(208)
    found_some = 0
    for _ in range(3000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 24)))
        names = tuple(rng.sample(_KEYWORDS, rng.randint(1, len(_KEYWORDS))))
        expected = [m.span() for m in _written_in(names).finditer(text)]
        assert [m.span() for m in named_matches(_KEYWORD_ARGUMENT, text, names)] == expected, (text, names)
        found_some += bool(expected)
    assert found_some > 300  # the texts do hold keyword arguments


def test_a_comment_inside_a_match_of_another_name_is_still_searched() -> None:
    # At ``f(`` the gap runs through the comment to ``other=``: no keyword there, so the
    # search goes on inside the comment, as the alternation's does.
    text = "f(  # see (head_dim=3)\n  other=2)"
    assert [m.start() for m in named_matches(_KEYWORD_ARGUMENT, text, {"head_dim"})] == [text.index("(head")]
