"""KV105 needs attention context, a paired K tensor name and either a top-level function whose
every return can be a cut, called in the file with a K tensor name among its arguments, or a
name from a ``from x import`` statement called with a K tensor name first and its result
assigned or passed on (the helper read from its module).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from linter.plan.code_only import code_only
from linter.model.names import RESHAPE_CALLS, SEE_THROUGH, SHAPE_KEEPING, is_kv_tensor_name
from linter.plan.facts import _recalled, _remembered
from linter.plan.file import _File
from linter.plan.imports import _from_imported
from linter.plan.lines import _DEFINITION, top_level_starts
from linter.plan.statements import _BRACKET, _NESTED_SCOPE, _RETURN_WORD, _statement_end, own_statements
from linter.plan.words import _CALL_BRACKET, _DOT, _GAP, _IDENTIFIER, _is_word_char, word_first, word_spans
from linter.settings import Settings


_BEFORE_A_DEF_NAME = re.compile(r"[ \t]*(?:async[ \t]+)?def[ \t]+")
# The dotted name that is an argument by itself (``trim(self.k, n)``, ``trim(x, n=k)``), and
# the one a call's bracket opens on (``trim(self.k.t(), n)`` gives ``self.k.t``), matched by
# one pattern for every file: the keys are the file's own, a pattern of them was compiled for
# it alone.
_ARGUMENT = re.compile(rf"[(,=]{_GAP}(?:\({_GAP})*((?:\w++{_GAP}\.{_GAP})*\w+)(?={_GAP}(?:\){_GAP})*[,)])")
_FIRST_ARGUMENT_CHAIN = re.compile(rf"\({_GAP}((?:\w++{_GAP}\.{_GAP})*\w+)")
_KEYWORD_EQUALS = re.compile(rf"{_GAP}=(?!=)")


def _kv105(f: _File) -> bool:
    return bool(_remembered("KV105", f, _kv105_helpers(f)))


def kv105_helpers(text: str, settings: Settings) -> set[str]:
    """The names ``from`` imports bind that ``text`` calls as KV105 helpers (a key first, the
    result used); ``""`` stands for a helper the file itself defines, or a callee the text
    cannot tell: the file's tree must be read."""
    return _recalled("KV105", text, settings, _kv105_helpers)


def _kv105_helpers(f: _File) -> set[str]:
    # Attention context, a K tensor name with its V twin, and a top-level function whose
    # returns can be a cut, or an imported one, called on a key. Which local helper it is and
    # what it returns is left to the module screen (``screen.kv105``), what an imported
    # one returns to its text screen (``screen.kv105_text``).
    if ("def" not in f.text and "import" not in f.text) or not f.attention_context():
        return set()
    extra = f.settings.extra_pairs
    keys = [k for k in f.k_names if is_kv_tensor_name(k, extra)]
    if not keys:
        return set()
    key_set = frozenset(keys)
    text = f.text
    # Top-level functions with a return that looks like a cut, called elsewhere; whether every
    # return can be one is asked only of those called on a key (it reads the whole body).
    helpers = [(name, start, end) for name, start, end in _cut_looking_defs(text) if text.count(name) >= 2]
    if helpers:
        called = _called_on_a_key(text, {name for name, _, _ in helpers}, key_set)
        if any(name in called and _every_return_may_cut(code_only(text[start:end])) for name, start, end in helpers):
            return {""}
    # An imported helper (read from its file) cuts only a key passed first, and its result is
    # assigned or passed on: ``k = trim(k, n)``, ``attn(q, trim(self.k, n), v)``. Found from
    # the key's side (a few names, so the pattern is reused across files), the callee read
    # back from the bracket.
    imported = _from_imported(text) if "import" in text else set()
    if not imported:
        return set()
    called = set()
    for call in _calls_on_a_key(text, keys):
        chain = call.group(1)
        parts = _DOT.split(chain) if "." in chain else (chain,)
        # A key anywhere in the chain, but not as a keyword's name (``f(k=x)``).
        if (parts[-1] not in key_set or _KEYWORD_EQUALS.match(text, call.end())) and key_set.isdisjoint(parts[:-1]):
            continue
        end = _blank_before(text, call.start())
        if end is None:
            return {""}  # a comment may stand between the callee and its bracket
        start = end
        while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        if text[start:end] in imported and _result_used(text, start):
            called.add(text[start:end])
    return called


def _called_on_a_key(text: str, helpers: set[str], key_set: frozenset[str]) -> set[str]:
    """The ``helpers`` called somewhere with a key among their arguments.

    A key counts as an argument by itself, a dotted name (``trim(self.k, n)``, ``trim(x,
    n=k)``), as ``screen.kv105`` reads it: ``trim(k.t(), n)`` passes no key. Each
    helper's name by substring search, its bracket matched where the name ends (the names are
    the file's own: a pattern of them would be compiled for this file alone). Brackets are
    counted in the raw text; where a quote or a comment lies before the close found, a string
    or comment may have ended it early, and the search runs on to the next definition line (a
    statement never crosses one).
    """
    called = set()
    for at, name_end in word_spans(text, helpers):
        name = text[at:name_end]
        if name in called:
            continue
        call = _CALL_BRACKET.match(text, name_end)
        if call is None:
            continue
        if at and (text[at - 1] == "." or _BEFORE_A_DEF_NAME.fullmatch(text, text.rfind("\n", 0, at) + 1, at)):
            continue  # a method, or the helper's own ``def`` line
        start = call.end()
        end = _group_end(text, start)
        if any(c in text[start:end] for c in "'\"#"):
            after = _DEFINITION.search(text, start)
            end = after.start() if after else len(text)
        inside = text[start:end]
        if any(k in inside for k in key_set) and any(
            _DOT.split(argument.group(1))[-1] in key_set
            for argument in _ARGUMENT.finditer(text, start - 1, min(end + 1, len(text)))
        ):
            called.add(name)
    return called


def _calls_on_a_key(text: str, keys: list[str]) -> list[re.Match[str]]:
    """``_FIRST_ARGUMENT_CHAIN`` at each bracket that may open on a chain holding a key.

    Found from the keys' side, each a few times in a file where brackets are many: the
    bracket is where the run of name, dot and blank characters before the key begins. A
    comment may hide it (``f(  # note`` on one line, the key on the next): where one may
    stand in between, or the run is long, every bracket of the text is matched instead.
    """
    brackets = set()
    for at, _ in word_spans(text, keys):
        low = max(0, at - _RUN_WINDOW)
        run = _CHAIN_RUN.match(text[low:at][::-1]).end()
        before = at - run - 1
        if run == at - low and low:
            return list(_FIRST_ARGUMENT_CHAIN.finditer(text))
        if "\n" in text[before + 1:at] and "#" in text[text.rfind("\n", 0, max(before, 0)) + 1:at]:
            return list(_FIRST_ARGUMENT_CHAIN.finditer(text))
        if before >= 0 and text[before] == "(":
            brackets.add(before)
    return [call for at in sorted(brackets) if (call := _FIRST_ARGUMENT_CHAIN.match(text, at))]


# The characters of a dotted name and the blanks around its parts, read backwards from a key.
_CHAIN_RUN = re.compile(r"[\w\s.\\]*")
_RUN_WINDOW = 256


def _blank_before(text: str, at: int) -> int | None:
    """Where the blanks and line continuations that end just before ``at`` begin; None when
    the line before may end with a comment (it has a ``#``)."""
    i = at
    while i and text[i - 1] in " \t\f\r\n\\":
        if text[i - 1] == "\n" and "#" in text[text.rfind("\n", 0, i - 1) + 1 : i - 1]:
            return None
        i -= 1
    return i


def _group_end(text: str, start: int) -> int:
    """Where the bracket group opened just before ``start`` closes (counting brackets in the
    text as it is), or the end of the text."""
    close = text.find(")", start)
    if close >= 0 and _OPENING.search(text, start, close) is None:
        return close  # nothing nested: the common ``trim(k, n)``
    depth = 1
    for bracket in _BRACKET.finditer(text, start):
        depth += 1 if bracket.group() in "([{" else -1
        if depth == 0:
            return bracket.start()
    return len(text)


def _result_used(text: str, at: int) -> bool:
    """Is the call starting at ``at`` assigned (``=``, not ``==``) or an argument or item
    (after ``(``, ``,`` or ``[``)? A comment that may end the line before counts as yes."""
    if at and text[at - 1] == ".":
        return False
    i = _blank_before(text, at)
    if i is None:
        return True
    if not i:
        return False
    return text[i - 1] in "(,[" or (text[i - 1] == "=" and (i == 1 or text[i - 2] not in "=!<>"))


_OPENING = re.compile(r"[(\[{]")


# A ``return`` line that can give a cut parameter: a subscript or a cutting call in it, a plain
# name, perhaps in parentheses (bound to a cut before), or an expression continued on the next lines; a comment may
# end the line.
_CUT_RETURN = re.compile(
    rf"^[ \t]+return\b(?:[^\n]*(?:\[|{word_first(tuple(RESHAPE_CALLS))})|(?:[ \t(]+\w+[ \t)]*|[^\n]*[(\\])[ \t]*(?:#[^\n]*)?$)",
    re.MULTILINE,
)


def cut_returning_defs(text: str) -> list[str]:
    """The top-level functions that can be KV105 helpers, whose every ``return`` can give a
    cut of a parameter (``screen._may_cut_a_parameter``): rotary and other helpers
    that build new tensors (``torch.cat(...)``, ``q_embed, k_embed``), allocate
    (``return torch.empty(...)``) or return nothing cannot. A body runs to the next top-level
    definition (a comment in column 0 does not end it)."""
    return [name for name, start, end in _cut_looking_defs(text) if _every_return_may_cut(code_only(text[start:end]))]


def _cut_looking_defs(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of each top-level function with a return that looks like a cut
    (``_a_return_may_cut``: one pattern, where most functions have none), its body from the
    end of its name to the next top-level definition."""
    starts = top_level_starts(text)
    found = []
    for here, after in zip(starts, [*starts[1:], None]):
        name = here.group(1)
        end = after.start() if after else len(text)
        if name and _a_return_may_cut(text, here.end(), end):
            found.append((name, here.end(), end))
    return found


def _a_return_may_cut(text: str, start: int, end: int) -> bool:
    """Does a ``return`` between ``start`` and ``end`` look like a cut (``_CUT_RETURN`` on its
    line), or follow something on its line (``def f(x): return x[0]``, ``if n: return x[:n]``),
    where the line is not read further?"""
    at = text.find("return", start, end)
    while at >= 0:
        after = at + 6
        if (not at or not _is_word_char(text[at - 1])) and (after == len(text) or not _is_word_char(text[after])):
            line = text.rfind("\n", 0, at) + 1
            if text[line:at].strip(" \t") or _CUT_RETURN.match(text, line):
                return True
        at = text.find("return", after, end)
    return False


def _every_return_may_cut(body: str) -> bool:
    """Can every ``return`` in ``body`` (code only, from the function's name on) be a cut of
    one of its parameters (``_may_cut``)? A returned name must be assigned such a cut.
    Returns of a nested function are that function's, not this one's: they are left out with
    its statements (``own_statements``; where those cannot be told, any return may be).
    """
    if _NESTED_SCOPE.search(body):
        body = own_statements(body)
        if body is None:
            return True
    returns = list(_RETURN_WORD.finditer(body))
    if not returns:
        return False
    parameters = _parameters(body)
    for match in returns:
        stop = _statement_end(body, match.end(), len(body))
        if stop is None:
            continue  # its brackets do not add up: it may be anything
        value = body[match.end():stop]
        name = _PLAIN_NAME.fullmatch(value)
        if name is None:
            if not _may_cut(value, parameters):
                return False
        elif name.group(1) in ("None", "True", "False") or not _assigned_a_cut(body, name.group(1), parameters):
            return False
    return True


def _parameters(body: str) -> frozenset[str]:
    """The names a function's parameter list may bind (every name right after its ``(`` or a
    comma: annotations and defaults hold more, which only makes the answer larger), from
    ``body`` (code only, from the function's name on)."""
    opening = body.find("(")
    if opening < 0:
        return frozenset()
    return frozenset(_PARAMETER.findall(body, opening, _group_end(body, opening + 1) + 1))


_PARAMETER = re.compile(rf"[(,]{_GAP}\**([^\W\d]\w*)")


def _may_cut(value: str, parameters: Collection[str]) -> bool:
    """Can ``value`` (code only) be a cut of one of ``parameters`` as
    ``screen._cut_base`` reads one: a parameter subscripted or followed by a method
    (``x[:n]``, ``x.transpose(1, 2)[0]``, ``x.narrow(1, 0, n)``), or first in a reshape call
    (``torch.narrow(x, 1, 0, n)``)? ``x.shape[1]`` and ``torch.cat([x, y])`` are not."""
    if "[" not in value and _CUT_WORD.search(value) is None:
        return False
    # The cut is the value itself, perhaps in parentheses: read on its surface, the text outside
    # every other bracket (``f(x[0])``, ``x[0] * y`` and ``a if c else x[0]`` are no cuts of x).
    surface = _surface(value, value[:len(value) - len(value.lstrip(" \t\n\\("))].count("("))
    surface = surface.split(";", 1)[0]  # a statement after it on the line
    if _OPERATOR.search(surface):
        return False
    for match in _IDENTIFIER.finditer(surface):
        start, end = match.span()
        name = match.group()
        if name in RESHAPE_CALLS:
            first = _FIRST_ARGUMENT.match(value, end)
            if first and first.group(1) in parameters:
                return True
        if name not in parameters or (start and (surface[start - 1] == "." or _is_word_char(surface[start - 1]))):
            continue
        after = _skip(value, end, " \t\n\\)")
        if after < len(value) and value[after] == "[":
            return True
        if after < len(value) and value[after] == ".":
            method = _IDENTIFIER.match(value, _skip(value, after + 1, " \t\n\\"))
            if method and method.group() in _CUT_METHODS:
                return True
    return False


def _surface(text: str, wrapped: int) -> str:
    """``text`` with what lies inside more than ``wrapped`` brackets blanked (the brackets
    that open and close at that depth kept)."""
    out, depth = list(text), 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
            if depth > wrapped + 1:
                out[i] = " "
        elif c in ")]}":
            depth -= 1
            if depth > wrapped:
                out[i] = " "
        elif depth > wrapped:
            out[i] = " "
    return "".join(out)


# An operator or keyword that makes a value something other than a cut (a ``BinOp``,
# ``Compare``, ``Tuple``, ``IfExp``, ``Await``...).
_OPERATOR = re.compile(r"[-+*/@%|&^<>=!,~]|(?<!\w)(?:if|and|or|not|is|in|await|lambda|yield)(?!\w)")
_FIRST_ARGUMENT = re.compile(rf"{_GAP}\({_GAP}(?:\({_GAP})*([^\W\d]\w*)(?!\w)")


def _skip(text: str, at: int, chars: str) -> int:
    while at < len(text) and text[at] in chars:
        at += 1
    return at


# A method after which a parameter may be cut: subscripted after see-through steps, or reshaped.
_CUT_METHODS = SEE_THROUGH | RESHAPE_CALLS | SHAPE_KEEPING


def _assigned_a_cut(body: str, name: str, parameters: Collection[str]) -> bool:
    """Is ``name`` a target of an assignment whose value may be a cut of one of
    ``parameters``? An ``=`` inside a bracket opened on its line before it is a keyword
    argument or a default (``f(v, n=1)``), no assignment (``module_screens`` reads
    assignment statements only)."""
    resume = 0  # past the ``=`` an occurrence reached: occurrences before it reach the same
    for at, end in word_spans(body, (name,)):
        if at < resume or (at and body[at - 1] == "."):
            continue
        equals = _TO_EQUALS.match(body, end)
        if equals is None:
            continue
        resume = equals.end()
        head = body[body.rfind("\n", 0, at) + 1:resume]
        if head.count("(") + head.count("[") + head.count("{") > head.count(")") + head.count("]") + head.count("}"):
            continue
        stop = _statement_end(body, resume, len(body))
        if stop is None or _may_cut(body[resume:stop], parameters):
            return True
    return False


# From a name to the ``=`` of its line (no ``==``).
_TO_EQUALS = re.compile(r"[^\n=]*=(?!=)")


# A name, perhaps in parentheses (``return (out)``), across lines.
_PLAIN_NAME = re.compile(r"[\s\\(]*([^\W\d]\w*)[\s\\)]*")
_CUT_WORD = re.compile(rf"{word_first(tuple(RESHAPE_CALLS))}(?!\w)")


CONDITION = _kv105
