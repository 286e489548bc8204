"""KV209 needs a K (or V) name passed first as the root of a name chain (after it only
subscripts, calls and same-tensor methods: ``self.k_proj(x)``, ``k.transpose(1, 2)``) to a
function the file defines (any depth, ``name(`` or ``self.name(``) with a view word in it and
whose every ``return`` may be a view call or a name assigned one, after axis-keeping steps (a
nested ``def``/``class``, tabs or unbalanced brackets: unsure, so yes), or by its plain name to
one a ``from x import`` names; and its twin passed first to such a call too, the two calls
differing past the first argument (equal texts from the end of the argument to the closing
bracket mean equal arguments; a quote or comment there: unequal), or named in a statement with
a view word (where the screen's viewed names all are).
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from bisect import bisect_right

from linter.plan.code_only import code_only
from linter.model.names import SAME_TENSOR_METHODS, SEE_THROUGH, value_counterpart
from linter.plan.facts import _recalled, _remembered
from linter.plan.file import _File
from linter.plan.imports import _from_imported
from linter.plan.lines import _DEFINITION_LINE, _LONE_CR
from linter.plan.statements import _NESTED_SCOPE, _RETURN_WORD, own_statements
from linter.plan.vocabulary import _VIEW_CALLS
from linter.plan.words import _GAP, _compiled, identifier_set, word_first, word_spans
from linter.settings import Settings


def _kv209(f: _File) -> bool:
    facts = _remembered("KV209", f, _kv209_facts(f))
    return facts is not None and facts.holds(facts.imported)


def kv209_facts(text: str, settings: Settings) -> _Kv209Facts | None:
    """What ``_kv209`` read of ``text``: its verdict asked again with fewer imported helpers
    (``screen.kv209_text``)."""
    return _recalled("KV209", text, settings, _kv209_facts)


@dataclass(frozen=True)
class _Kv209Facts:
    """The K/V names passed first to calls, the calls' helpers the file defines, and the
    names ``from`` imports bind that such calls call by their plain name."""

    f: _File
    keys: frozenset[str]
    twins: dict[str, str]
    passed: dict[str, set[tuple[str, bool, object]]]
    helpers: set[str]
    imported: frozenset[str]

    def holds(self, imported: Collection[str]) -> bool:
        """Is the condition met with only ``imported`` of the imported names as helpers?"""
        helpers, keys, twins = self.helpers, self.keys, self.twins
        # K/V name -> the helper calls it is passed first to (each as its rest).
        through = {}
        for name, called in self.passed.items():
            rests = {rest for callee, by_name, rest in called if callee in helpers or (by_name and callee in imported)}
            if rests:
                through[name] = rests
        if any(k in through and twins[k] in through and len(through[k] | through[twins[k]]) > 1 for k in keys):
            # Both through helpers, in two calls that differ beyond their first argument (the
            # same helper with the same arguments views both alike).
            return True
        if not through:
            return False
        # One through a helper, the other viewed: named in a statement with a view word.
        wanted = frozenset({twins[k] for k in keys if k in through} | {k for k in keys if twins[k] in through})
        viewed = _named_with_a_view(self.f.code, wanted)
        return any(
            (k in through and twins[k] in viewed) or (twins[k] in through and k in viewed)
            for k in keys
        )


def _kv209_facts(f: _File) -> _Kv209Facts | None:
    # A call whose first argument is a name chain ending in a K (or V) of a pair, of a
    # function the file defines whose every ``return`` may be a view (read from its body,
    # ``_view_returning_defs``), or, called by its plain name, of a name a ``from x import``
    # binds (read from its module); the twin passed first to such a call too, or viewed. The
    # rest (the helper's arguments) is left to the module screen (``screen.kv209``),
    # an imported helper's body to its text screen (``screen.kv209_text``).
    keys = f.k_names
    if not keys:
        return None
    if "\r" in f.text and _LONE_CR.search(f.text):
        # Old Mac line ends: the reading below goes by "\n" (the identifiers stay the same).
        f = _File(f.text.replace("\r\n", "\n").replace("\r", "\n"), f.settings, f.reduced)
    extra = f.settings.extra_pairs
    twins = {k: value_counterpart(k, extra) or k for k in keys}
    text = f.text
    # K/V name -> (callee, called by its plain name?, the call less its first argument)
    passed: dict[str, set[tuple[str, bool, object]]] = {}
    for name in {*keys, *twins.values()}:
        # Each whole-word occurrence of the name (substring search), then what stands before
        # it: a bracket, a dot, or the start of a line the call's bracket may have opened
        # before.
        for start, end in word_spans(text, (name,)):
            i = start
            while i and text[i - 1] in " \t":
                i -= 1
            if not i or text[i - 1] not in "(.\n":
                continue
            if text[i - 1] == "\n":
                # First on its line: only after a line that can leave a call's bracket open
                # (one ending in ``(``, a chain's ``.`` or a continuation, a comment, a blank
                # line).
                previous = text[text.rfind("\n", 0, i - 1) + 1:i - 1].rstrip()
                if previous and previous[-1] not in "(.\\" and "#" not in previous:
                    continue
            after = _first_root_end(text, end)
            if after is None:
                continue
            callee = _BEFORE_ARGUMENT.search(text, _call_head_start(text, start), start)
            if callee is not None:
                # The call less its first argument, as the screen compares two: the callee and
                # the text from the end of the name's chain to the call's closing bracket (equal
                # texts close the same number of brackets, so they hold the same further
                # arguments); where a quote or comment may hide a bracket, this occurrence's own.
                close = _bracket_end(text, callee.end(3)) if after >= 0 else None
                rest = (callee.group(1), callee.group(2), text[after:close]) if close is not None else start
                passed.setdefault(name, set()).add((callee.group(2), callee.group(1) is None, rest))
    if not passed:
        return None
    callees = {callee for called in passed.values() for callee, _, _ in called}
    helpers = _view_returning_defs(f, callees)
    plain = {callee for called in passed.values() for callee, by_name, _ in called if by_name} - helpers
    imported = plain & _from_imported(text) if plain and "import" in text else frozenset()
    if not helpers and not imported:
        return None
    return _Kv209Facts(f, frozenset(keys), twins, passed, helpers, frozenset(imported))


# What stands before a call's first argument: ``name(`` or ``self.name(``/``cls.name(`` (no
# other receiver; group 1 is the receiver), brackets, and a chain of names (``self.k_proj``);
# group 2 is the callee, group 3 the call's bracket.
_BEFORE_ARGUMENT = re.compile(
    rf"(?<![\w.])(?:(self|cls){_GAP}\.{_GAP})?(\w++){_GAP}(\(){_GAP}(?:\({_GAP})*(?:\w++{_GAP}\.{_GAP})*\Z"
)


def _call_head_start(text: str, end: int) -> int:
    """Where ``_BEFORE_ARGUMENT`` ending at ``end`` may start at the earliest: 200 characters
    back, or just after the last character there it cannot hold. Without a comment in the
    window it holds only names, dots, brackets, backslashes and white space; a character of
    another script may be a letter or a space to ``re``, so the whole window is searched
    then. The search from the start tries every position up to ``end``: a third of this
    condition's time before the window was cut (sglang)."""
    start = max(0, end - 200)
    window = text[start:end]
    if "#" in window:
        return start
    rest = window.rstrip(_CALL_HEAD_CHARS)
    if rest and not rest[-1].isascii():
        return start
    return start + len(rest)


# Names, dots, brackets, backslashes and ASCII white space (as ``re`` reads ``\s``).
_CALL_HEAD_CHARS = string.ascii_letters + string.digits + "_.(\\ \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _first_root_end(text: str, at: int) -> int | None:
    """Can the name ending at ``at`` be the root ``screen._first_root`` reads in a
    first argument? After it may come only subscripts, calls and same-tensor method calls
    (``k[0]``, ``k_proj(x)``, ``k.transpose(1, 2).contiguous()``), then the argument's end
    (``,`` or ``)``); an attribute (``k.shape``), another method (``k.new_zeros(...)``) or an
    operator makes the root another name or none. Where that end is, or -1 when unsure (a
    bracket with a quote or a comment in it); None when it cannot be."""
    while True:
        after = _AFTER_ROOT.match(text, at)
        if after is None:
            return None
        if after.group(1):
            return after.start(1)
        if after.group(2) is not None and (after.group(2) not in SAME_TENSOR_METHODS or not after.group(3)):
            return None  # an attribute or another method: the root is another name
        at = _bracket_end(text, after.end())
        if at is None:
            return -1


# What may follow a first argument's root: its end, a bracket (group 4), or a method called
# (group 2, group 3 its bracket).
_AFTER_ROOT = re.compile(rf"{_GAP}(?:([,)])|\.{_GAP}(\w+)({_GAP}\()?|([\[(]))")


def _bracket_end(text: str, start: int) -> int | None:
    """Just past the bracket closing the one opened before ``start``, counting brackets in
    the raw text; None when a quote or a comment may hide one, or none closes."""
    depth = 1
    for part in _BRACKET_OR_TEXT.finditer(text, start):
        char = part.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if not depth:
                return part.end()
        else:
            return None
    return None


_BRACKET_OR_TEXT = re.compile(r"""[()\[\]{}'"#]""")


@lru_cache(maxsize=4)
def _named_with_a_view(code: str, wanted: frozenset[str]) -> frozenset[str]:
    """Those of ``wanted`` named in a statement of ``code`` (reduced by ``code_only``) with a
    view word in it: every name ``screen._viewed_names`` finds (the names in a view's
    receiver, its first argument, or the target it is assigned to) is in the view's statement.

    Statements are read from each ``def`` or ``class`` line (every such line of code starts a
    statement, outside any bracket) to the next, in the stretches naming one of ``wanted``;
    where their brackets do not balance, the whole stretch counts as one statement. The
    stretches are found from the names' side (substring search, each hit's stretch by its
    offset; a name never crosses a line start, where stretches begin): a pattern of the names
    was compiled for the file alone, and searched for in every stretch with a view word."""
    found: set[str] = set()
    if not wanted or _VIEW_WORD.search(code) is None:
        return frozenset()
    cuts = [0, *(m.end() for m in _DEFINITION_LINE.finditer(code)), len(code)]
    for i in sorted({bisect_right(cuts, at) - 1 for at, _ in word_spans(code, wanted)}):
        a, b = cuts[i], cuts[i + 1]
        if _VIEW_WORD.search(code, a, b) is None:
            continue
        stretch = code[a:b]
        # Brackets inside an f-string's kept fields are text (``f"{d[')']}"``): neutral.
        neutral = _STRING_BRACKETS.sub(_blank_brackets, stretch) if '"' in stretch else stretch
        spans = _statement_spans(neutral)
        if spans is None:
            found |= identifier_set(stretch)
            continue
        for start, end in spans:
            if _VIEW_WORD.search(stretch, start, end) is not None:
                found |= identifier_set(stretch[start:end])
    return frozenset(found & wanted)


_STRING_BRACKETS = re.compile(r'"[^"\n]*"|\'[^\'\n]*\'')


def _blank_brackets(match: re.Match[str]) -> str:
    return match.group().translate(_NO_BRACKETS)


_NO_BRACKETS = str.maketrans("()[]{}", "      ")


def _statement_spans(text: str) -> list[tuple[int, int]] | None:
    """The spans of ``text``'s logical lines and simple statements (cut at every newline or
    ``;`` outside brackets and line continuations); None when the brackets do not balance."""
    found, depth, start = [], 0, 0
    for part in _STATEMENT_PARTS.finditer(text):
        char = part.group()[0]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif char in "\n;" and not depth:
            found.append((start, part.start()))
            start = part.end()
    if depth:
        return None
    found.append((start, len(text)))
    return found


def view_returning_defs(text: str, names: set[str]) -> set[str]:
    """Those of ``names`` that the module ``text`` defines by a ``def`` that may return a view
    (``_view_returning_defs``)."""
    return _view_returning_defs(_File(text, _DEFAULT_SETTINGS), names)


_DEFAULT_SETTINGS = Settings()


def _view_returning_defs(f: _File, names: set[str]) -> set[str]:
    """Those of ``names`` the file defines (at any depth) by a ``def`` that may return a view
    as ``screen._may_return_a_view`` reads one, less its look at what each view
    views: a view word in it, at least one ``return``, and every ``return`` a view call or a
    name, after axis-keeping steps
    (``.transpose(1, 2).contiguous()``), a returned name assigned such a value somewhere in
    the body. A body whose reading is unsure (a nested ``def`` or ``class``, brackets that do
    not balance, tab indents) counts as one that may.

    Each body is read reduced to code (``code_only``), from its ``def`` line to the next
    ``def`` or ``class`` line indented no deeper (the body ends there at the latest); when
    that line turns out to lie in a string, or the decorators must be read, the whole file is
    reduced instead."""
    text = f.text
    if "def" not in text:
        return set()
    definitions = _definitions_by_name(text)
    found = set()
    for name in names & definitions.keys():
        verdicts = []
        for definition in definitions[name]:
            line = text.rfind("\n", 0, definition.start()) + 1
            prefix = text[line:definition.start()]
            if prefix.strip() not in ("", "async"):
                continue  # not a statement's start: no definition
            if "\t" in prefix or "\f" in prefix:
                verdicts.append(True)
                break
            indent = len(prefix) - len(prefix.lstrip(" "))
            stop = _compiled(rf"\n[ \t]{{0,{indent}}}(?:(?:async[ \t]+)?def|class)\b").search(text, definition.end())
            # To the end of the stop's line: a stop read as code is where the body ends.
            end = -1 if stop is None else text.find("\n", stop.end())
            end = len(text) if end < 0 else end
            verdict = _returns_a_view(code_only(text[line:end]), 0, definition.end() - line, text, stop is None, False)
            verdicts.append(verdict)
            if verdict:
                break
        if True in verdicts:
            found.add(name)
        elif None in verdicts:
            code = f.code
            for definition in _definitions_by_name(code).get(name, ()):
                line = code.rfind("\n", 0, definition.start()) + 1
                if code[line:definition.start()].strip() in ("", "async") and _returns_a_view(code, line, definition.end(), text, True, True):
                    found.add(name)
                    break
    return found


def _returns_a_view(code: str, line: int, header: int, raw: str, complete: bool, whole: bool) -> bool | None:
    """Can the ``def`` starting its line at ``line`` of ``code`` (reduced by ``code_only``),
    its name ending at ``header``, return a view (see ``_view_returning_defs``)? Yes when
    unsure; None when ``code`` is not all of the file (``whole``) and the rest must be read:
    the body may run past its end (not ``complete``), or only the decorators above can have
    the view. ``raw`` is the file's text."""
    prefix = code[line:header]
    if "\t" in prefix or "\f" in prefix:
        return True
    end = _body_end(code, line, len(prefix) - len(prefix.lstrip(" ")), raw)
    if end is None:
        return True
    if end == len(code) and not complete:
        return None
    body = code[header:end]
    if _NESTED_SCOPE.search(body):
        # A nested function's or class's returns and names are not this one's.
        body = own_statements(body)
        if body is None:
            return True
    if "return" not in body:
        return False
    statements = _statements(body)
    if statements is None:
        return True
    returns, names = 0, set()
    for statement in statements:
        at = _RETURN_WORD.search(statement)
        if at is None:
            continue
        returns += 1
        kind = _view_or_name(statement[at.end():])
        if kind is None:
            return False  # a return that is no view: the helper's result cannot be one
        if kind is not _VIEWED:
            names.add(kind)
    if not returns or not all(_bound_to_a_view_or_name(statements, name) for name in names):
        return False
    # A view call among the function's own nodes: its body, parameters and decorators.
    if _VIEW_WORD.search(code, line, end) is not None:
        return True
    if not whole:
        return None
    return _VIEW_WORD.search(code, _decorators_start(code, line), line) is not None


_DEF_GAP = r"(?:[ \t]|\\\r?\n)+"
_DEF_NAME = re.compile(rf"def{_DEF_GAP}(\w+)")


def _definitions_by_name(text: str) -> dict[str, list[re.Match[str]]]:
    """Each ``def NAME`` match of ``text`` (perhaps inside a string: the caller checks), by
    name: one scan, where a pattern per name was compiled for names most files alone use."""
    found: dict[str, list[re.Match[str]]] = {}
    for match in _DEF_NAME.finditer(text):
        found.setdefault(match.group(1), []).append(match)
    return found
_VIEWED = "<view>"


# ``.transpose`` ending a call's callee (``x.transpose(1, 2)`` less its arguments).
_SEE_THROUGH_SUFFIX = re.compile(rf"\.\s*(?:{'|'.join(sorted(SEE_THROUGH))})\Z")
_TRAILING_NAME = re.compile(r"(\w+)[ \t]*\Z")
# Brackets, line continuations, statement ends; a quoted field of an f-string (the reduced
# text keeps those, and their strings may hold brackets) is skipped whole.
_STATEMENT_PARTS = re.compile(r"[()\[\]{}]|'[^'\n]*'|\\\r?\n|[\n;]")
# An assignment's ``=``: not part of ``==``, ``!=``, ``<=``, ``>=``, ``:=`` or an augmented one.
_ASSIGN_PARTS = re.compile(r"[()\[\]{}]|'[^'\n]*'|(?<![=!<>+\-*/%&|^@:~])=(?!=)")


def _body_end(code: str, line: int, indent: int, raw: str) -> int | None:
    """Where the body of the definition whose line starts at ``line`` (indented by ``indent``
    spaces) ends: the first line after it, outside brackets and continuations, indented no
    deeper; None when unsure.

    The reduced text leaves each multi-line string's last line indented by one space and
    starting with ``"``: such a line continues its statement, unless the file (``raw``, its
    text: every line of code indented by one space is one there too) has lines of code
    indented by one space (then unsure)."""
    depth, continued, first, n = 0, False, True, len(code)
    i = line
    while i < n:
        j = code.find("\n", i)
        j = n if j < 0 else j
        row = code[i:j]
        if not first and not depth and not continued:
            content = row.lstrip(" ")
            if content.strip():
                if content[0] in "\t\f":
                    return None  # a tab or form feed in an indent
                margin = len(row) - len(content)
                if margin <= indent:
                    if margin != 1 or content[0] != '"':
                        return i
                    if _has_one_space_code(raw):
                        return None
        first = False
        if "'" in row:
            row = _QUOTED_FIELD.sub("", row)
        depth += row.count("(") + row.count("[") + row.count("{") - row.count(")") - row.count("]") - row.count("}")
        if depth < 0:
            return None
        continued = row.rstrip().endswith("\\")
        i = j + 1
    return n if not depth else None


@lru_cache(maxsize=4)
def _has_one_space_code(code: str) -> bool:
    """Has ``code`` a line indented by one space that starts with no quote?"""
    return code.startswith(" ") and code[1:2] not in (" ", "\t", "\n", '"') or _ONE_SPACE_CODE.search(code) is not None


_ONE_SPACE_CODE = re.compile(r"\n [^ \t\r\n\"]")
_QUOTED_FIELD = re.compile(r"'[^'\n]*'")


def _statements(body: str) -> list[str] | None:
    """``body`` (reduced text) cut into its logical lines and simple statements
    (``_statement_spans``); None when the brackets do not balance."""
    spans = _statement_spans(body)
    return None if spans is None else [body[start:end] for start, end in spans]


def _view_or_name(expression: str) -> str | None:
    """What ``screen._may_be_a_view`` reads in the expression ``expression`` (reduced
    text, one logical line), less its look at what a view views: ``_VIEWED`` for what may be
    a view call, the name for a plain name, None for what surely is neither. Axis-keeping
    steps at its end are read through."""
    value = (_CONTINUATION.sub(" ", expression) if "\\" in expression else expression).strip()
    if "'" in value or ('"' in value and _BRACKET_IN_STRING.search(value)):
        return _VIEWED  # an f-string's field with a string or a format in it: brackets as text
    while True:
        if value.isidentifier():
            return value
        if not value.endswith(")"):
            return None  # a subscript, a literal, an operation, an attribute
        opening = _matching_open(value)
        if opening is None:
            return _VIEWED
        head = value[:opening].rstrip()
        if not head:
            value = value[1:-1].strip()  # parentheses around it
            continue
        called = _TRAILING_NAME.search(head)
        if called is None:
            return _VIEWED  # ``(x.view)(s)``, ``f(a)(b)``: unsure
        if called.group(1) in _VIEW_CALLS:
            return _VIEWED
        step = _SEE_THROUGH_SUFFIX.search(head)
        if step is None:
            return None  # a call of another function or method
        value = head[:step.start()].rstrip()


_CONTINUATION = re.compile(r"\\\r?\n")
_BRACKET_IN_STRING = re.compile(r'"[^"\n]*[()\[\]{}][^"\n]*"')


def _matching_open(value: str) -> int | None:
    """Where the bracket closed by the last character of ``value`` opens."""
    depth = 0
    for i in range(len(value) - 1, -1, -1):
        char = value[i]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            depth -= 1
            if not depth:
                return i
    return None


def _bound_to_a_view_or_name(statements: list[str], name: str) -> bool:
    """Does some statement assign ``name`` (among its targets: ``name = ...``, ``a, name =
    ...``, ``name: T = ...``) a value that may be a view or is a name?"""
    word = _compiled(rf"{word_first((name,))}(?!\w)")
    for statement in statements:
        if name not in statement or "=" not in statement or not word.search(statement):
            continue
        cuts, depth = [], 0
        for part in _ASSIGN_PARTS.finditer(statement):
            char = part.group()[0]
            if char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
            elif char == "=" and not depth:
                cuts.append(part.start())
        if not cuts:
            continue
        if word.search(statement, 0, cuts[-1]) and _view_or_name(statement[cuts[-1] + 1:]) is not None:
            return True
    return False


def _decorators_start(code: str, line: int) -> int:
    """Where the decorators of the definition whose line starts at ``line`` begin (``line``
    when it has none): the lines above it that start with ``@``, lie inside the brackets of
    one or continue one, blank lines among them."""
    start, balance = line, 0
    while start:
        above = code.rfind("\n", 0, start - 1) + 1
        row = code[above:start - 1]
        stripped = row.strip()
        if stripped:
            balance += row.count(")") + row.count("]") + row.count("}") - row.count("(") - row.count("[") - row.count("{")
            before = above - 1  # the newline ending the line before, which may continue this one
            while before > 0 and code[before - 1] in " \t\r":
                before -= 1
            joined = before > 0 and code[before - 1] == "\\"
            if balance < 0 or (not balance and not stripped.startswith("@") and not joined):
                break
        start = above
    return start


_VIEW_WORD = re.compile(word_first(_VIEW_CALLS))


CONDITION = _kv209
