"""Prove, from the text alone, that (part of) a file cannot produce a finding, so libcst never
parses it.

Each rule gets a necessary condition derived from what its detection needs before it can
report. ``parse_plan`` applies them in rising cost: plain substring tests on the raw text, the
conditions on the raw text, the conditions again on the text reduced to code (``code_only``:
no comments, no plain string contents; once a K/V pair was asked for, which needs it, the
conditions read only that), and last per top-level statement (``segments``): a rule
whose findings all come from facts inside one function or class (one class, for KV203), or
from the rest of the module, can only report inside a definition whose own code meets its
condition, or in the rest when that does. A class whose live rules each reason within one
method (``BY_METHOD``) is read further, member by member (``_members``): only the methods, and
the rest of its body as one group, whose own code meets a condition under the class's header
are parsed by the ``ast`` screens. The parser then sees only those definitions, or the
whole file when the rest of the module is involved or a rule is one this module does not know
(where the rest is involved, the runner still reduces every definition the ``ast`` screens
stop to its header: ``runner._cut_of_whole``, with ``own_unit``).

Every condition over-approximates: identifiers are collected from the whole text, and
"followed by ``[``" tolerates any whitespace or line continuation in between, so a condition
can be true for code without findings but never false for code with findings.
``tests/linter/test_fast_path_equivalence.py`` and the benchmark compare the result with the
slow path (every file parsed).

The conditions, one per rule in its folder (``linter/rules/kvNNN/condition.py``), each module's docstring saying
what its rule needs; every pair rule needs a K-side name and its V counterpart
(``model.pairs.value_counterpart``, with the configured extra pairs) both present in code: a pair that
meets only in comments and strings passes no trigger (the rules read names of code). They read a file's
text through ``file._File`` (facts computed once and shared) and the text primitives of
``words`` (identifiers, word patterns), ``lines`` (definition lines, top-level definitions),
``statements`` (statement ends, brackets), ``chains`` (method chains), ``imports`` (``from`` imports), ``vocabulary`` (words
more than one rule looks for) and ``facts`` (what a module rule's condition found, kept for its
text screen).

KV105, KV207, KV208 and KV209 reason across top-level definitions (a helper and its caller, a
base and its subclass, a pool and its builder, a viewing helper and its caller) or files, so
they have no own unit: a file their conditions admit is left to their ``module_screens``,
asked of the text and the modules it imports first (``module_screens.TEXT_SCREENS``), then of
the file's whole ``ast`` tree. A screen that says yes names the lines where its rule may report,
and libcst reads the top-level definitions holding them, with every definition those name,
beside the other rules' units; otherwise the other rules' units stand.

The rest of the module (what lies outside the units) holds the units' header lines, a class's
without its ``class`` keyword: its body is its own unit, so a condition that asks for a class
is not met by the rest for a top-level class's sake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from linter.plan.file import _File
from linter.plan.lines import _LONE_CR
from linter.plan.segments import _DEFINITION_LINE, Segment, header, open_brackets, top_level_segments
from linter.plan.triggers import Scanner, Trigger
from linter.rules import conditions, rule_triggers, units
from linter.settings import Settings

if TYPE_CHECKING:
    from linter.rules.base import Rule


__all__ = ["BY_METHOD", "NOTHING", "ParsePlan", "excerpt", "own_unit", "parse_plan"]


def _always(_: _File) -> bool:
    return True


_CONDITIONS: dict[str, Callable[[_File], bool]] = conditions()


def _is_definition(segment: Segment) -> bool:
    return segment.definition


def _is_class(segment: Segment) -> bool:
    return segment.kind == "class"


# For each known condition, the top-level statements that hold all the facts any one of its
# findings rests on; the rest of the file is the module's part. KV101-KV202 reason inside one
# function or class scope (or the module scope); KV203 pairs a split with a KV head count
# anywhere in one class, or anywhere outside classes (the module and its functions).
_OWN_UNIT: dict[Callable[[_File], bool], Callable[[Segment], bool]] = {
    _CONDITIONS[code]: _is_class if unit == "class" else _is_definition
    for code, unit in units().items() if unit != "module"
}


@dataclass(frozen=True)
class ParsePlan:
    """What libcst must parse of one file: all of it, some top-level definitions, or nothing."""

    whole: bool
    ranges: tuple[tuple[int, int], ...] = ()  # (first line, end line), 0-based, when not whole
    # The rules that may still report (kvlint's codes; None stands for a rule of unknown
    # conditions): the ``ast`` screen runs only theirs.
    rules: frozenset[str | None] = frozenset()
    # Per range, the rules whose condition held in that definition alone.
    range_rules: tuple[frozenset[str | None], ...] = ()
    # Live rules whose facts lie in different definitions (KV105, KV207, KV208, KV209): their
    # ``module_screens`` name the definitions they may report in; ``ranges`` stand for the
    # other rules.
    module_rules: frozenset[str | None] = frozenset()
    # Per range, for a class whose live rules each reason within one method (``BY_METHOD``):
    # (the first line of its body, the line ranges of the members of its body whose own code,
    # under the class's header, meets a condition); None for a range read whole. The ``ast``
    # screens need parse only those members.
    range_members: tuple[tuple[int, tuple[tuple[int, int], ...]] | None, ...] = ()

    @property
    def needed(self) -> bool:
        return self.whole or bool(self.ranges) or bool(self.module_rules)

    def excerpt(self, text: str) -> str:
        """The planned definitions of ``text``, joined: valid Python when the cut was right."""
        return excerpt(text, self.ranges)


def excerpt(text: str, ranges: Iterable[tuple[int, int]]) -> str:
    """The lines of ``ranges`` (0-based, end excluded) of ``text``, joined."""
    lines = text.split("\n")
    return "\n".join("\n".join(lines[start:end]) for start, end in ranges) + "\n"


NOTHING = ParsePlan(False)


def parse_plan(text: str, rules: Iterable[str | type[Rule]], settings: Settings) -> ParsePlan:
    """What of ``text`` must be parsed for ``rules`` (kvlint's own by code, or Rule classes) to
    report everything they would on all of it."""
    known = _known(tuple(rules), settings.extra_attention_callables)
    raw = _File(text, settings)
    lone_cr = "\r" in text and _LONE_CR.search(text) is not None
    reduced: _File | None = None

    def paired() -> bool:
        # A K/V pair in code: every pair rule reads names of code, so a ``key`` and a
        # ``value`` that meet only in comments and docstrings (dictionary code) are no
        # evidence: from here on the conditions read the code. The trigger words are looked
        # for among all the text's identifiers, a string's too: a rule reads
        # ``getattr(config, "num_attention_heads")``. Old Mac line ends keep the raw text:
        # code_only counts lines by "\n" only.
        nonlocal reduced
        if not raw.k_names:
            return False
        if lone_cr:
            return True
        reduced = _File(raw.code, settings, reduced=True, source=text, whole=True)
        return bool(reduced.k_names)

    passing = known.scanner.passing(text, paired, raw.joined_identifiers, lambda: raw.lower_names)
    if not passing:
        return NOTHING
    conditions = list(dict.fromkeys(known.conditions[code] for code in passing))
    # The module rules' conditions read the code alone where it is at hand (a pair was asked
    # for): an occurrence in a docstring or comment is no call, no helper and no view.
    first = reduced or raw
    module_live = [c for c in conditions if c not in _OWN_UNIT and c(first)]
    unit_conditions = [c for c in conditions if c in _OWN_UNIT]
    if reduced is not None:
        # A pair was asked for: each per-definition condition is asked of the code once.
        live = [c for c in unit_conditions if c(reduced)]
        if not module_live and not live:
            return NOTHING
    else:
        # The raw text settles most files without a pair (reducing it costs more than
        # asking). Once one per-definition condition holds, the rest are asked of the
        # reduced text only: each is asked there anyway, and one that holds on the reduced
        # text alone only makes the plan larger.
        if not module_live and not any(c(raw) for c in unit_conditions):
            return NOTHING
        if lone_cr:
            # Old Mac line ends: code_only and segments count lines by "\n" only.
            return ParsePlan(True, rules=frozenset(_CODES.get(c) for c in [*module_live, *unit_conditions] if c(raw)))
        reduced = _File(raw.code, settings, reduced=True, source=text, whole=True)
        live = [c for c in unit_conditions if c(reduced)]
    module_rules = frozenset(_CODES.get(c) for c in module_live)
    code = raw.code
    if not live:
        return ParsePlan(False, rules=module_rules, module_rules=module_rules) if module_rules else NOTHING
    codes = frozenset(_CODES.get(c) for c in live) | module_rules
    segments = top_level_segments(code)
    rests: dict[Callable[[Segment], bool], _File] = {}
    for condition in live:
        own = _OWN_UNIT[condition]
        if own not in rests:
            # What lies outside the units, plus the names the units bind there.
            rest = "\n".join(_binding(s) if own(s) else s.text for s in segments)
            rests[own] = _File(rest, settings, reduced=True)
        if condition(rests[own]):
            return ParsePlan(True, rules=codes, module_rules=module_rules)
    ranges, unit_rules, unit_members = [], [], []
    raw_lines: list[str] = []
    for segment in segments:
        relevant = [c for c in live if _OWN_UNIT[c](segment)]
        if relevant:
            raw_lines = raw_lines or text.split("\n")
            # Its raw text beside its code: a condition may read what a string names
            # (``getattr(config, "num_key_value_heads")``).
            unit = _File(segment.text, settings, reduced=True, source="\n".join(raw_lines[segment.start:segment.end]))
            held = [c for c in relevant if c(unit)]
            if not held:
                continue
            members = None
            if segment.kind == "class" and _BY_METHOD.issuperset(held):
                raw_lines = raw_lines or text.split("\n")
                members = _members(segment, raw_lines, held, settings)
            if members is not None and not members[1]:
                continue  # no method meets a condition alone: no finding in the class
            ranges.append((segment.start, segment.end))
            unit_rules.append(frozenset(_CODES.get(c) for c in held))
            unit_members.append(members)
    return ParsePlan(False, tuple(ranges), codes, tuple(unit_rules), module_rules, tuple(unit_members))


_CODES = {condition: code for code, condition in _CONDITIONS.items()}

# The rules whose every finding lies in one function (or in a class body's other statements
# together), the enclosing classes' names aside (``scopes.Scope.enclosing``): a class is read
# member by member for them (``screens.METHOD_SCOPED``, the same rules: ``UNIT = "method"``).
_BY_METHOD = frozenset(_CONDITIONS[code] for code, unit in units().items() if unit == "method")
BY_METHOD = frozenset(_CODES[c] for c in _BY_METHOD)


def _members(
    segment: Segment, raw: list[str], conditions: list[Callable[[_File], bool]], settings: Settings
) -> tuple[int, tuple[tuple[int, int], ...]] | None:
    """The first line of the class ``segment``'s body and the line ranges of the members of
    that body (its methods and nested classes with their decorators, and its other statements
    as one group) whose own code, read under the class's header (the enclosing class's name
    is attention context), meets one of ``conditions`` (``raw``: the file's lines); None when
    the body cannot be read member by member (on the header's line, or indented with tabs or
    form feeds)."""
    text = segment.text
    head = _DEFINITION_LINE.search(text)
    if head is None or "\t" in text or "\f" in text:
        return None
    header_end = _header_end(text, head.start())
    if header_end is None or not text[head.start():header_end].rstrip().endswith(":"):
        return None
    header = text[:header_end + 1]
    lines = text[header_end + 1:].split("\n")
    first = segment.start + header.count("\n")
    # The body's indentation is its first statement's, read in the file's own text (the reduced
    # text blanks a docstring's first line and starts its last with one space).
    statement = next((line for line in raw[first:segment.end] if line.strip() and not line.lstrip().startswith("#")), "")
    indent = len(statement) - len(statement.lstrip(" "))
    if not indent or statement[indent] in "\t\f":
        return None
    # The body dedented, a line indented less (inside brackets, a string's end) kept off
    # column 0, so that its members are the top-level statements of the result.
    dedented = "\n".join(
        line[indent:] if line.startswith(" " * indent) else (" " + line.lstrip(" ") if line.strip() else "")
        for line in lines
    )
    kept: list[tuple[int, int]] = []
    rest: list[Segment] = []
    for member in top_level_segments(dedented):
        if not member.definition:
            rest.append(member)
        elif _meets(header, lines, [member], conditions, settings):
            kept.append((first + member.start, first + member.end))
    if rest and _meets(header, lines, rest, conditions, settings):
        kept.extend((first + m.start, first + m.end) for m in rest)
    return first, tuple(sorted(kept))


def _header_end(text: str, start: int) -> int | None:
    """The newline ending the ``class`` header that starts at ``start``: the first after which
    its brackets are closed and no backslash continues it (None: none does)."""
    depth = 0
    while (newline := text.find("\n", start)) >= 0:
        depth += open_brackets(text, start, newline)
        if depth <= 0 and not text[start:newline].rstrip().endswith("\\"):
            return newline
        start = newline + 1
    return None


def _meets(header: str, lines: list[str], members: list[Segment], conditions: list[Callable[[_File], bool]], settings: Settings) -> bool:
    unit = _File(header + "\n".join("\n".join(lines[m.start:m.end]) for m in members), settings, reduced=True)
    return any(condition(unit) for condition in conditions)


def own_unit(code: str | None) -> str | None:
    """Where all the facts of one finding of rule ``code`` lie: in one top-level
    ``"definition"``, in one ``"class"`` (the module and its functions being one more), or,
    for a module-wide rule or one this module does not know, None."""
    own = _OWN_UNIT.get(_CONDITIONS.get(code))  # type: ignore[arg-type]
    return None if own is None else ("class" if own is _is_class else "definition")


def _binding(segment: Segment) -> str:
    """What a unit leaves in the module's scope: its header line (the name it binds, a
    function's defaults, a class's bases), less a class's ``class`` keyword: every condition
    that asks for a class wants one whose body is in the text, and a top-level class's body
    is in its own unit."""
    line = header(segment)
    return line.replace("class", "     ", 1) if segment.kind == "class" else line


@dataclass(frozen=True)
class _Known:
    """The rules of one run, keyed by what the scanner reports: their trigger and condition."""

    scanner: Scanner
    conditions: dict[str | int, Callable[[_File], bool]]


@cache
def _known(rules: tuple[str | type[Rule], ...], extra_callables: tuple[str, ...]) -> _Known:
    # Only kvlint's own rules have known triggers and conditions; any other rule (a test's)
    # always runs, keyed by its position.
    triggers = rule_triggers()
    keyed: dict[str | int, Trigger | None] = {}
    conditions: dict[str | int, Callable[[_File], bool]] = {}
    for i, rule in enumerate(rules):
        code = rule if isinstance(rule, str) else (rule.code if rule.__module__.startswith("linter.rules.") else None)
        key = i if code is None else code
        keyed[key] = triggers.get(code) if code is not None else None
        conditions[key] = _CONDITIONS.get(code, _always) if code is not None else _always
    return _Known(Scanner(keyed, extra_callables), conditions)
