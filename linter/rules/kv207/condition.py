"""KV207 needs one top-level class (its code-only text, from its column-0 ``class`` line to the
next column-0 ``def`` or ``class`` line) with a base that is a plain name of a top-level class
of the file (with a K/V pair of names in it) or named by a ``from x import`` (the base read
from that module), a parent ``__init__`` call, a K/V-side ``self.`` target whose statement
holds a ``Linear``, and that target's twin not surely defined by the class itself. Surely
defined (read line by line, brackets and continuations followed): a method of that name, or
``self.twin = ...`` starting a line at the indentation of a method body's first statement. A
twin assigned only under ``if``/``for``/``with``/``try``, in an inner function or in a string,
and any class indented with tabs, count as not defined.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from linter.model.names import key_counterpart, kv_side, value_counterpart
from linter.plan.file import _File
from linter.plan.imports import _from_imported
from linter.plan.lines import _DEFINITION_LINE, _LONE_CR
from linter.plan.statements import _STRING_LEFT, _statement_end, top_level_parts
from linter.plan.words import _GAP


# ``self.X`` as an assignment target, alone or in a target list (``self.k, self.v = ...``,
# ``self.v: T = ...``); anything else (``self.v(``, ``self.v.w``, ``self.v[``) is no target
# ``module_screens`` reads.
_SELF_TARGET = re.compile(rf"self(?<![A-Za-z0-9_]self){_GAP}\.{_GAP}(\w+){_GAP}(?:=(?!=)|[:,)\]])")


def _kv207(f: _File) -> bool:
    # A ``*Linear`` assigned to a K/V-side ``self.`` attribute (the subclass's redeclaration,
    # ``self.v_proj`` or BERT's ``self.value``), then per top-level class
    # (``_redeclaring_class``): such an assignment with a parent ``__init__`` call, a base
    # that is a top-level class of the module (with a K/V pair named in the file) or imported
    # by ``from x import`` (read from that module), and the twin of the redeclared side not
    # surely defined by the class itself. The base and the subclass are apart: no own unit.
    text = f.text
    if "class" not in text or "Linear" not in text or "__init__" not in text:
        return False
    extra = hashable_pairs(f.settings.extra_pairs)
    if not _assigns_a_linear(text, extra):
        return False
    if "\r" in text and _LONE_CR.search(text):
        return True  # old Mac line ends: the classes are not read line by line
    return _redeclaring_class(f.code, extra, lambda: bool(f.k_names))


def _assigns_a_linear(text: str, extra) -> bool:
    """Is a K/V-side ``self.`` attribute written as a target (``self.v_proj =``, or in a
    target list: ``self.k_proj, self.v_proj =``) where a ``Linear`` follows before the next
    ``def`` or ``class`` line (a statement never crosses one)?"""
    for match in _SELF_TARGET.finditer(text):
        if _twin(match.group(1), extra) is None:
            continue
        after = _DEFINITION_LINE.search(text, match.end())
        if text.find("Linear", match.end(), after.start() if after else len(text)) >= 0:
            return True
    return False


# In the text reduced to code (``code_only``): a column-0 ``class`` line, and the column-0
# ``def``/``class`` line that ends a top-level class's text (``@`` lines are not cut at: a
# matrix product may continue a line with one).
# A form feed may stand before either (``\f`` resets the indentation).
_CLASS_LINE = re.compile(r"\n\f*(?=class\b)")
_FIRST_CLASS = re.compile(r"[\ufeff\f]*(?=class\b)")
_TOP_DEFINITION = re.compile(r"\n\f*(?=(?:async[ \t]+)?def\b|class\b)")


_CLASS_HEAD = re.compile(r"class[ \t]+\w+[ \t]*")
# A method's statement that surely assigns ``self.X`` (group 1), alone or annotated with a
# plain (subscripted) name: ``self.v_proj = ...``, ``self.v_proj: nn.Linear = ...``. Nothing
# inside brackets can start so, so a line starting so starts a statement.
_SELF_DIRECT = re.compile(r"self[ \t]*\.[ \t]*(\w+)[ \t]*(?::[ \t]*[\w.]+(?:\[[\w., \t]*\])?[ \t]*)?=(?!=)")
_DEF_HEAD = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)")


@lru_cache(maxsize=4096)
def _twin(attr: str, extra: tuple[tuple[str, str], ...]) -> str | None:
    """The other side of K/V-side ``attr`` (``v_proj`` for ``k_proj`` and back), or None."""
    side = kv_side(attr, extra)
    if side is None:
        return None
    return (value_counterpart if side == "k" else key_counterpart)(attr, extra)


def _redeclaring_class(
    code: str, extra, local_bases: Callable[[], bool] = lambda: True,
    lends: Callable[[list[str], set[str]], bool] | None = None,
) -> bool:
    """Can a top-level class of ``code`` (the text reduced by ``code_only``) pass
    ``screen.kv207``: a parent ``__init__`` call, a K/V-side ``self.`` target that a
    ``Linear`` follows in its statement whose twin the class does not surely define directly
    (``_surely_defined``), and a plain base named by a ``from x import`` or naming a
    top-level class (that one only when ``local_bases()``: the file names a K/V pair)?

    A class's text runs from its column-0 ``class`` line to the next column-0 ``def`` or
    ``class`` line; what follows the class there (other top-level statements) only adds to
    what is searched. The cheap tests go first, the bases before the twins (most classes
    derive from ``nn.Module`` alone); the file's identifiers (``local_bases``) are collected
    only for a class whose plain bases no import binds. ``lends(plain bases, twins)``, where given, has the last word on a class
    whose bases pass (``screen.kv207_text``: the file's path at hand)."""
    extra = hashable_pairs(extra)
    classes = class_spans(code)
    imported: frozenset[str] | None = None  # ``from x import``-ed names; None until needed
    local: set[str] | None = None  # the top-level class names, when a K/V pair is named
    for start, end in (span for spans in classes.values() for span in spans):
        if code.find("Linear", start, end) < 0 or not _calls_an_init(code, start, end):
            continue
        bases = _bases(code, start, end)
        if bases is None:
            continue
        plain = None
        if bases is not True:
            if imported is None:
                imported = _from_imported(code)  # continuation lines included
            plain = _plain_bases(bases)
            if imported.isdisjoint(plain):
                if local is None:
                    local = set(classes) - {""} if local_bases() else set()
                if local.isdisjoint(plain):
                    continue
        twins = _lonely_candidates(code, start, end, extra)
        if not twins:
            continue
        if twins <= _surely_defined(code[start:end]):
            continue
        if plain is not None and lends is not None and not lends(plain, twins):
            continue
        return True
    return False


def class_spans(code: str) -> dict[str, list[tuple[int, int]]]:
    """The top-level classes of ``code`` (reduced by ``code_only``) by name (``""`` for a header
    whose name is not on its line): each one's text, from its ``class`` keyword to the next
    column-0 ``def`` or ``class`` line, as offsets."""
    found: dict[str, list[tuple[int, int]]] = {}
    first = _FIRST_CLASS.match(code)
    starts = [first.end()] if first is not None else []
    starts.extend(m.end() for m in _CLASS_LINE.finditer(code))
    for start in starts:
        name = _CLASS_HEAD_NAME.match(code, start)
        after = _TOP_DEFINITION.search(code, start + 5)
        found.setdefault(name.group(1) if name else "", []).append((start, after.start() + 1 if after else len(code)))
    return found


def hashable_pairs(extra) -> tuple[tuple[str, str], ...]:
    """The configured extra pairs as a tuple of tuples: ``_twin`` caches by them."""
    return extra if extra.__class__ is tuple else tuple(map(tuple, extra))


def plain_bases_of(code: str, start: int, end: int) -> list[str]:
    """The plain names among the bases of the class whose text is ``code[start:end]``."""
    bases = _bases(code, start, end)
    return _plain_bases(bases) if isinstance(bases, str) else []


_CLASS_HEAD_NAME = re.compile(r"class[ \t]+(\w+)")


def _lonely_candidates(code: str, start: int, end: int, extra) -> set[str]:
    """The twins of the K/V-side ``self.`` targets between ``start`` and ``end`` that a
    ``Linear`` follows in their statement (before the next definition line)."""
    twins = set()
    for match in _SELF_TARGET.finditer(code, start, end):
        twin = _twin(match.group(1), extra)
        if twin is None or twin in twins:
            continue
        at = match.start()
        line = code.rfind("\n", 0, at) + 1
        if (line == at or code[line:at].isspace()) and _SELF_DIRECT.match(code, at):
            # ``self.X = ...`` starts its line, so a statement: its value ends where its
            # brackets close.
            stop = _statement_end(code, at, end)
        else:
            stop = None
        if stop is None:
            after = _DEFINITION_LINE.search(code, match.end(), end)
            stop = after.start() if after else end
        if code.find("Linear", match.end(), stop) >= 0:
            twins.add(twin)
    return twins


def _calls_an_init(code: str, start: int, end: int) -> bool:
    """Is some ``__init__`` between ``start`` and ``end`` an attribute (``super().__init__``,
    ``Base.__init__``), a dot before it past blanks and line continuations?"""
    at = code.find("__init__", start, end)
    while at >= 0:
        i = at
        while i > start and code[i - 1] in " \t\\\r\n":
            i -= 1
        if i > start and code[i - 1] == ".":
            return True
        at = code.find("__init__", at + 8, end)
    return False


def _bases(code: str, start: int, end: int) -> str | bool | None:
    """The text between the brackets of the header of the class at ``start``; None when it has
    no bases (``class A:``); True when the header is not read (``class A \\``)."""
    head = _CLASS_HEAD.match(code, start)
    if head is None:
        return True
    at = head.end()
    if at >= end or code[at] == ":":
        return None
    if code[at] != "(":
        return True
    depth = 0
    for i in range(at, end):
        char = code[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return code[at + 1:i]
    return True


def _plain_bases(bases: str) -> list[str]:
    """The bases (text between a class header's brackets) that are one plain name: the only
    ones ``screen.kv207`` looks up (not ``nn.Module``, ``Generic[T]``, keywords)."""
    plain = []
    for start, stop in top_level_parts(bases, 0, len(bases)):
        item = bases[start:stop].replace("\\", " ").strip()
        if item.isidentifier():
            plain.append(item)
    return plain


def _surely_defined(text: str) -> set[str]:
    """Names that the class whose reduced text is ``text`` surely defines directly, as
    ``screen._direct_self_attrs`` reads them: its methods, and ``self.X`` assigned by
    a statement directly in a method's body (``self.X = ...`` starting a line indented as
    the method's first statement). Class-level names are left out: a keyword argument on a
    line of its own looks like one.

    Read line by line with brackets counted (strings are emptied in the reduced text) and
    line continuations followed; a line that starts with a string (a docstring, or the code
    after a multi-line string) is skipped. When indentation is unclear (tabs, a form feed,
    a dedent to no open level, a one-line class body) fewer names come back, never more."""
    found: set[str] = set()
    depth = 0
    continued = False
    header = True  # in the class's header (its first logical line)
    in_def = False  # in the header of a method
    body = 0  # the class body's indentation, once seen
    method = -1  # the current method's body indentation; 0 before its first line, -1 outside
    for line in text.split("\n"):
        rest = line.lstrip(" ")
        if not rest or rest.isspace():
            continued = False
            continue
        if not (header or in_def or depth or continued) and rest[0] != '"':
            if rest[0] in "\t\f":
                return set()
            indent = len(line) - len(rest)
            if indent == 0:
                break  # the class is over: a top-level statement
            if not body:
                body = indent
            if indent < body:
                return set()
            if indent == body:
                method = -1
                head = _DEF_HEAD.match(rest)
                if head is not None:
                    found.add(head.group(1))
                    in_def = True
            elif method >= 0:
                if method == 0:
                    method = indent
                if indent == method:
                    target = _SELF_DIRECT.match(rest)
                    if target is not None:
                        found.add(target.group(1))
                elif indent < method:
                    method = -1
        counted = _STRING_LEFT.sub("", line) if '"' in line else line
        depth += (
            counted.count("(") + counted.count("[") + counted.count("{")
            - counted.count(")") - counted.count("]") - counted.count("}")
        )
        if depth < 0:
            return set()
        tail = line.rstrip()
        continued = tail.endswith("\\")
        if depth or continued:
            continue
        # A logical line ends here.
        if header:
            if not tail.endswith(":"):
                return set()  # a one-line body: no methods to read
            header = False
        elif in_def:
            in_def = False
            method = 0 if tail.endswith(":") else -1
    return found


CONDITION = _kv207
