"""The ``ast`` screens: a second look, on the standard library's syntax tree, at what the text
pre-filter let through.

The runner parses each planned top-level definition (or a whole file, when module-level code
is involved) with ``ast``, which builds its tree in C, about ten times faster than libcst. A
screen asks of that tree whether a rule can report at all; libcst then parses only the
definitions some live rule's screen lets through (classes live for the method-scoped rules
only: their header and the methods that pass), and nothing when none does. libcst stays the
pass that reports and fixes.

Each rule's screen lives in its folder (``linter/rules/kvNNN/screen.py``, ``SCREEN``).
A screen must over-approximate its rule exactly as the pre-filter conditions do: it may say yes
for code without findings, never no for code with one. A rule without a screen always passes.
Screens read ``Facts``, one walk of the tree whose scope is the whole unit (a fact of any
method counts for all), and follow their rule's own model as far as it is cheap: KV101,
KV102 and KV103 look at one function's scope at a time (``Facts.scopes``), as the rules do;
KV101 needs its cut K and whole V in one call; KV201 compares the projections' output sizes,
KV204 the lengths its views carry, KV205 its view's shape elements. KV102 and KV103 compare
their sites as text, K names swapped to V, as the rules do, when the runner hands over the
lines the tree was parsed from (``source``); without them they keep the wider answer.
``tests/linter/test_ast_screens.py`` holds each sharpened screen to shapes its rule reports
and look-alikes it does not; ``tests/linter/test_fast_path_equivalence.py`` and the
benchmark compare the fast path (text pre-filter, screens, libcst) with parsing and visiting
every file.
"""

from __future__ import annotations

import ast
from collections.abc import Collection

from linter.plan.screen_facts import Facts, Screen, Source
from linter.rules import screens, units
from linter.settings import Settings

SCREENS: dict[str, Screen] = screens()

# Rules whose findings in a method rest on that method and the names enclosing it only
# (``UNIT = "method"``; ``model.scopes.ScopeTracking``: a class body is no scope of theirs; KV202
# keeps one scope per function; KV106 reads one assignment and the tests around it), so a class
# can be cut down to its header, the methods their screens let through, and its other
# statements when their screens let those through together.
METHOD_SCOPED: frozenset[str | None] = frozenset(code for code, unit in units().items() if unit == "method")


def may_report(tree: ast.AST, rules: Collection[str | None], settings: Settings, source: Source | None = None) -> bool:
    """Can any of ``rules`` (codes; None: a rule without known conditions) report on ``tree``
    (parsed from ``source``, where given)?"""
    if any(code not in SCREENS for code in rules):
        return True  # no walk at all when some live rule has no screen
    facts = Facts(tree, source)
    return any(SCREENS[code](facts, settings) for code in rules)


def reporting(
    tree: ast.AST, rules: Collection[str | None], settings: Settings, source: Source | None = None
) -> frozenset[str | None]:
    """The ``rules`` that may report on ``tree``: those without a screen, and those whose
    screen lets it through. With ``source``, the text ``tree`` was parsed from, a screen that
    compares code as text (KV102, KV103) can say more."""
    facts = Facts(tree, source) if any(code in SCREENS for code in rules) else None
    return frozenset(code for code in rules if code not in SCREENS or SCREENS[code](facts, settings))
