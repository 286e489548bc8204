"""The units libcst parses of a file the text plan let through: the planned definitions the
``ast`` screens of their live rules let through (``_screened_units``; a class cut to its header
and the methods that pass), a file planned whole cut down to the definitions a finding can lie
in (``_cut_of_whole``), the definitions a module rule's screen names with every definition they
name (``_module_seeds``, ``_definitions_holding``), and those units in place among the module's
own statements (``_in_place``)."""

from __future__ import annotations

import ast
import warnings
from bisect import bisect_right
from itertools import repeat
from typing import TYPE_CHECKING

from linter.plan.code_only import code_only
from linter.plan.lines import _LONE_CR
from linter.plan.segments import Segment, bound_name, top_level_segments
from linter.plan.text_plan import ParsePlan
from linter.plan.words import identifier_set

if TYPE_CHECKING:
    from linter.runner import Job


def _in_place(
    text: str, units: list[tuple[int, int]], segments: list[Segment] | None = None, keep_rows: bool = False,
) -> tuple[str, tuple[int, ...] | None]:
    """The lines of ``units`` and of the module's own statements (imports, assignments,
    ``if``/``try`` blocks) of ``text``, in order, and the file's row (1-based) of each: the
    rules see each kept definition among the module's names, and the engine places their
    findings on the file's own rows (``engine.lint_module``'s ``rows``), so positions and
    fixes are the file's without parsing the definitions no rule can report in. The lines
    left out are whole top-level definitions: dropping them, rather than leaving them empty,
    spares libcst a node per line (a third of its parse and half of its position pass on
    transformers' files). With ``keep_rows``, for a rule that places its findings by the
    module's own lines, every other line is left empty instead, and the rows are None.
    ``segments``: the text's ``top_level_segments`` where the caller has them."""
    lines = text.split("\n")
    kept = bytearray(len(lines))
    for start, end in units:
        kept[start:end] = b"\1" * (end - start)
    for segment in segments if segments is not None else top_level_segments(code_only(text)):
        if not segment.definition:
            kept[segment.start:segment.end] = b"\1" * (segment.end - segment.start)
    if keep_rows:
        return "\n".join(line if keep else "" for line, keep in zip(lines, kept)), None
    rows = tuple(row for row, keep in enumerate(kept, 1) if keep)
    return "\n".join(lines[row - 1] for row in rows) + "\n", rows


def _cut_of_whole(
    text: str, python: ast.Module | SyntaxError, job: Job, live: frozenset[str | None], path: str
) -> str | None:
    """For a file planned whole (the module's own statements meet a rule's condition),
    ``text`` with every top-level definition no finding of the ``live`` rules can lie in
    reduced to its header and ``...``, lines kept; None when the file cannot be cut
    (CPython cannot read it, or its statements and segments disagree).

    A rule whose unit is a definition reasons inside one function or class, or in the
    module's scope: a definition its screen passes alone is kept whole, and the module's
    statements and every header stay. A rule whose unit is a class reads the module and its
    functions as one more: those are kept whole when its screen passes them as one, with the
    classes its screen passes alone. A module-wide rule keeps the definitions its screen names
    and every definition those name.
    """
    from linter.plan.screens import reporting
    from linter.plan.text_plan import own_unit

    if not isinstance(python, ast.Module) or _LONE_CR.search(text):
        return None  # the segments count lines by "\n" only
    segments = top_level_segments(code_only(text))
    starts = [segment.start for segment in segments]
    held: list[list[ast.stmt]] = [[] for _ in segments]
    for statement in python.body:
        held[bisect_right(starts, _first_line(statement) - 1) - 1].append(statement)
    definitions = []
    for segment, statements in zip(segments, held):
        if segment.definition:
            if len(statements) != 1 or not isinstance(statements[0], (*_FUNCTIONS, ast.ClassDef)):
                return None
            definitions.append((segment, statements[0]))
    lines = text.split("\n")
    source = (lines, 0)
    units = {code: own_unit(code) for code in live}
    by_definition = frozenset(code for code, unit in units.items() if unit == "definition")
    by_class = frozenset(code for code, unit in units.items() if unit == "class")
    kept: set[int] = set()  # first lines of the definitions kept whole
    # A class-unit rule's other unit: the module's statements and its functions, as one.
    functions_too = bool(by_class) and bool(reporting(
        ast.Module(body=[s for s in python.body if not isinstance(s, ast.ClassDef)], type_ignores=[]),
        by_class, job.settings, source,
    ))
    for segment, d in definitions:
        alone = ast.Module(body=[d], type_ignores=[])
        if (
            (functions_too and not isinstance(d, ast.ClassDef))
            or (by_definition and reporting(alone, by_definition, job.settings, source))
            or (by_class and reporting(alone, by_class, job.settings, source))
        ):
            kept.add(segment.start)
    module = frozenset(code for code, unit in units.items() if unit is None)
    if module and (seeds := _module_seeds(python, job, module, path)):
        kept.update(start for start, _ in _definitions_holding(segments, frozenset().union(*seeds.values())))
    for segment, d in definitions:
        if segment.start in kept:
            continue
        body = d.body[0].lineno - 1  # 0-based
        indent = lines[body][:len(lines[body]) - len(lines[body].lstrip())] if body < len(lines) else ""
        if body <= d.lineno - 1 or not indent:
            continue  # ``def f(): return x`` on one line: kept whole
        lines[body] = indent + "..."
        for i in range(body + 1, segment.end):
            lines[i] = ""
    return "\n".join(lines)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _module_seeds(python: ast.Module, job: Job, rules: frozenset[str | None], path: str) -> dict[str, frozenset[int]]:
    """The lines where each of the module-wide ``rules`` may report, by its ``ast`` screen
    (``module_screens.SCREENS``); a rule whose screen names none is left out."""
    from linter.plan.module_screens import SCREENS

    found = {code: SCREENS[code](python, job.settings, path) for code in rules if code in SCREENS}
    return {code: lines for code, lines in found.items() if lines}


def _definitions_holding(segments: list[Segment], lines: frozenset[int]) -> list[tuple[int, int]]:
    """The line ranges of the top-level definitions among ``segments`` (a file's
    ``top_level_segments``) holding ``lines`` (1-based), and of every
    top-level definition their code names, directly or through the module's statements
    (``Alias = Base``), and so on: a module rule reads a helper, a base class or a pool by
    its name."""
    named: dict[str, list[Segment]] = {}  # a name -> the definitions binding it, the statements naming it
    for segment in segments:
        if segment.definition:
            bound = bound_name(segment)
            if bound is not None:
                named.setdefault(bound, []).append(segment)
        else:
            for name in identifier_set(segment.text):
                named.setdefault(name, []).append(segment)
    todo = [s for s in segments if s.definition and any(s.start < line <= s.end for line in lines)]
    kept, seen = set(todo), set()
    while todo:
        for name in identifier_set(todo.pop().text) - seen:
            seen.add(name)
            for segment in named.get(name, ()):
                if segment not in kept:
                    kept.add(segment)
                    todo.append(segment)
    return [(s.start, s.end) for s in kept if s.definition]



def _text_screened(rules: frozenset[str | None], text: str, job: Job, path: str) -> frozenset[str | None]:
    """``rules`` less the module rules whose text screen says no: they need no ``ast`` tree
    of the file."""
    if not rules:
        return rules
    from linter.plan.module_screens import TEXT_SCREENS

    return frozenset(code for code in rules if code not in TEXT_SCREENS or TEXT_SCREENS[code](text, job.settings, path))


def _reporting(
    python: ast.Module | SyntaxError, job: Job, rules: frozenset[str | None], path: str, text: str
) -> frozenset[str | None]:
    """The ``rules`` whose ``ast`` screens let ``text`` through to libcst (all of them where
    CPython cannot read it)."""
    if isinstance(python, SyntaxError):
        return rules  # CPython cannot read it; libcst gives the verdict
    from linter.plan.screens import reporting
    from linter.plan.module_screens import SCREENS

    module = rules & SCREENS.keys()
    passing = frozenset(code for code in module if SCREENS[code](python, job.settings, path))
    return passing | reporting(python, rules - module, job.settings, (text.split("\n"), 0))


def _screened_units(
    text: str, plan: ParsePlan, job: Job, python: ast.Module | SyntaxError | None = None
) -> tuple[list[tuple[int, int]], bool, frozenset[str | None]]:
    """The line ranges of the planned definitions that the ``ast`` screens of their own live
    rules let through, whether CPython parsed every one of them, and the rules that may still
    report on them.

    Each definition is parsed alone (a top-level definition is a module by itself), or taken
    from ``python``, the whole file's tree, where a module screen already built it; one
    CPython cannot parse alone is kept whole, and the excerpt's own checks decide. A class
    whose live rules all reason within one function (``METHOD_SCOPED``) is cut further: its
    header and the methods a screen lets through, nothing else.
    """
    if not plan.ranges:
        return [], True, frozenset()  # most files: nothing to split the text for
    from linter.plan.screens import METHOD_SCOPED, reporting

    lines = text.split("\n")
    whole = python.body if isinstance(python, ast.Module) else None
    kept = []
    parsed = True
    live: set[str | None] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like are not ours to report
        for (start, end), rules, members in zip(plan.ranges, plan.range_rules, plan.range_members or repeat(None)):
            # Line numbers of ``tree`` count from ``offset + 1``.
            statements = [s for s in whole if start < _first_line(s) <= end] if whole is not None else None
            if statements:
                tree, offset, members = ast.Module(body=statements, type_ignores=[]), 0, None
            else:
                try:
                    tree, offset = ast.parse(_class_text(lines, start, end, members)), start
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    kept.append((start, end))
                    live.update(rules)
                    parsed = False
                    continue
            rules = reporting(tree, rules, job.settings, (lines, offset))
            if not rules:
                continue
            live.update(rules)
            cls = tree.body[-1] if tree.body else None
            if isinstance(cls, ast.ClassDef) and len(tree.body) == 1 and rules <= METHOD_SCOPED:
                kept.extend(_screened_methods(cls, start, end, (lines, offset), rules, job, members and members[0]))
            else:
                kept.append((start, end))
    return kept, parsed, frozenset(live)


def _class_text(lines: list[str], start: int, end: int, members: tuple[int, tuple[tuple[int, int], ...]] | None) -> str:
    """Lines ``start``-``end`` of ``lines``; of a class the plan read member by member
    (``ParsePlan.range_members``), its header and the planned members only, every other line
    of its body left empty, so the tree's line numbers stay the file's."""
    if members is None:
        return "\n".join(lines[start:end])
    body, planned = members
    kept = bytearray(end - body)
    for first, stop in planned:
        kept[first - body:stop - body] = b"\1" * (stop - first)
    return "\n".join([*lines[start:body], *(line if kept[i] else "" for i, line in enumerate(lines[body:end]))])


def _screened_methods(
    cls: ast.ClassDef, start: int, end: int, source: tuple[list[str], int], rules: frozenset[str | None], job: Job,
    body: int | None = None,
) -> list[tuple[int, int]]:
    """``cls`` (lines ``start``-``end``; ``source``: the file's lines, and the offset its line
    numbers count from, plus one): its header and the methods (or nested classes) of its body
    that a screen of ``rules`` lets through, as absolute line ranges; the whole class where it
    cannot be cut. ``body``: where the body starts, when ``cls`` holds only some of its
    statements (``_class_text``)."""
    from linter.plan.screens import may_report

    offset = source[1]
    first = _first_line(cls.body[0])
    if first <= cls.lineno:
        return [(start, end)]  # ``class A: ...`` on one line
    header_end = offset + first - 1 if body is None else body
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    kept = [s for s in cls.body if isinstance(s, definitions) and may_report(s, rules, job.settings, source)]
    # The rest of the body (attributes, ``if``/``try`` blocks that may hold methods) is kept
    # when the screens pass it as one: findings there can pair statements with each other.
    rest = [s for s in cls.body if not isinstance(s, definitions)]
    if rest and may_report(ast.Module(body=rest, type_ignores=[]), rules, job.settings, source):
        kept.extend(rest)
    if not kept:
        return []
    kept.sort(key=_first_line)
    return [(start, header_end), *((offset + _first_line(s) - 1, offset + s.end_lineno) for s in kept)]


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(statement.lineno, *(d.lineno for d in decorators)) if decorators else statement.lineno
