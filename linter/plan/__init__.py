"""The fast path's planning: what of a file libcst must parse, and for which rules.

A file passes these stages (``docs/architecture.md``):

1. The text plan (``text_plan.parse_plan``): each rule's trigger words (``triggers``), then its
   text condition (``linter/rules/kvNNN/condition.py``) on the raw text, on the code alone
   (``code_only``) and per top-level statement (``segments``): nothing, some definitions, or
   the whole file.
2. The module rules' text screens (``module_screens.TEXT_SCREENS``), then CPython's ``ast``
   tree (``python_tree``) and the screens (``screens``, ``module_screens``; each rule's in its
   folder, ``screen.py``): the units whose own code a live rule's screen lets through
   (``units``).
3. The parses this module hands the runner (``parses``), cheapest first: an excerpt of the
   units, the units in place among the module's statements, and last the whole file.

The runner parses each with libcst and runs the rules that may still report on it; a parse
that fails (the cut was wrong) or finds something in an excerpt sends the next one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

# Aliased: the package's ``code_only`` and ``python_tree`` are the modules of those names.
from linter.plan.code_only import code_only as _code_only
from linter.plan.python_tree import PARSED
from linter.plan.python_tree import python_tree as _python_tree
from linter.plan.segments import top_level_segments

if TYPE_CHECKING:
    from linter.runner import Job

# At most this many lines outside the planned definitions: libcst parses the definitions in
# place at once instead of as an excerpt first (which, on a finding, is parsed in place again).
_IN_PLACE_FIRST = 50
# The rules that place their findings by the module's own lines (KV107 reads CPython's tree of
# the module's text), not through the engine's positions, and rules of unknown ways (None): a
# parse they may report on keeps every row of the file, the lines left out empty.
_OWN_ROWS: frozenset[str | None] = frozenset({"KV107", None})


@dataclass(frozen=True)
class Parse:
    """One text for libcst to parse, and the rules to run on it."""

    text: str
    # The codes of the rules that may report (None stands for the rules of unknown
    # conditions); None: every rule of the job.
    rules: frozenset[str | None] | None
    # CPython's verdict on ``text`` where known (``PARSED``: it parsed, the tree not at hand).
    python: ast.Module | SyntaxError | None
    # An excerpt of the planned definitions: no finding there settles the file (nothing to
    # report); a finding, or a parse that fails, sends the next parse.
    probe: bool = False
    # The whole file: its verdict, a syntax error included, is the file's.
    last: bool = False
    # The file's row (1-based) of each line of ``text`` where it holds only some of the file's
    # lines (``units._in_place``); None: the file's own rows.
    rows: tuple[int, ...] | None = None


def parses(text: str, path: str, job: Job) -> Iterator[Parse]:
    """What libcst parses of ``text``, in order: the runner takes the first that parses (but a
    ``probe`` with findings) as the file's answer. Lazy: the next parse is planned only when
    the runner asks for it. Raises ``python_tree.Unlintable`` for a file libcst must not read."""
    # Imported here, not at the top: the text plan imports every rule's text condition, and a
    # condition imports the plan's helpers (``linter.plan.file``), so a condition imported on its
    # own would otherwise meet this package half-initialised.
    from linter.plan.text_plan import excerpt, parse_plan
    from linter.plan.units import (
        _cut_of_whole,
        _definitions_holding,
        _in_place,
        _module_seeds,
        _reporting,
        _screened_units,
        _text_screened,
    )

    if not job.prefilter:
        yield Parse(text, None, None, last=True)
        return
    python: ast.Module | SyntaxError | None = None
    plan = parse_plan(text, job.rules, job.settings)
    module_rules = _text_screened(plan.module_rules, text, job, path)
    if plan.whole:
        python = _python_tree(text, path)
        live = _reporting(python, job, plan.rules - (plan.module_rules - module_rules), path, text)
        # The module's scope holds a candidate: it goes to libcst with the definitions whose
        # own code the screens let through; every other definition keeps only its header.
        cut = _cut_of_whole(text, python, job, live, path) if live and None not in live else None
        if cut is not None:
            yield Parse(cut, live, PARSED)
    # A module-wide rule's screen reads the whole file's tree and names the lines where its
    # rule may report: their top-level definitions go to libcst in place, with every
    # definition they name (a helper, a base class, a pool) and the planned units.
    elif module_rules and (None in module_rules or isinstance(python := _python_tree(text, path), SyntaxError)):
        # A rule of unknown conditions (no screen names its lines), or a file CPython
        # cannot read: the whole file.
        python = _python_tree(text, path) if python is None else python
        live = _reporting(python, job, module_rules, path, text) | _reporting(python, job, plan.rules - plan.module_rules, path, text)
    elif module_rules and (seeds := _module_seeds(python, job, module_rules, path)):
        units, _, live = _screened_units(text, plan, job, python)
        segments = top_level_segments(_code_only(text))
        units = [*units, *_definitions_holding(segments, frozenset().union(*seeds.values()))]
        kept, rows = _in_place(text, units, segments, keep_rows=not _OWN_ROWS.isdisjoint(live | seeds.keys()))
        yield Parse(kept, live | seeds.keys(), PARSED, rows=rows)
        # The cut was wrong: the whole file gives the verdict.
        live = seeds.keys() | _reporting(python, job, plan.rules - plan.module_rules, path, text)
    else:
        units, parsed, live = _screened_units(text, plan, job, python)
        if not units:
            return
        if text.count("\n") + 1 - sum(end - start for start, end in units) <= _IN_PLACE_FIRST:
            # The definitions are nearly the whole file: parsing them in place costs about
            # what the excerpt does, and a finding there (a small file under edit is the
            # likely case) then needs no second parse.
            python = _python_tree(text, path) if python is None else python
        else:
            yield Parse(excerpt(text, units), live, PARSED if parsed else None, probe=True)
        # A finding: reported from the definitions in place, once CPython has read the
        # whole file (a syntax error anywhere in it is reported instead, by libcst's verdict
        # on the whole file, as before).
        if python is None:
            python = _python_tree(text, path)
        if not isinstance(python, SyntaxError):
            kept, rows = _in_place(text, units, keep_rows=not _OWN_ROWS.isdisjoint(live))
            yield Parse(kept, live, PARSED, rows=rows)
    if live:
        yield Parse(text, live, python, last=True)
