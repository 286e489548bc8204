"""KV104 needs a paired K-side name that is called, subscripted, written in place, assigned to its
V twin, returned twice, or returned as ``self.`` attribute.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from linter.model.names import is_kv_tensor_name, kv_side, value_counterpart
from linter.plan.chains import bracket_groups
from linter.plan.file import _File
from linter.plan.statements import _statement_end
from linter.plan.words import _CALL_BRACKET, _GAP, _IDENTIFIER, word_spans
from linter.plan.segments import open_brackets


# In-place writes through a name (KV104).
_WRITTEN_BY = frozenset({"copy_", "index_copy", "index_copy_"})


# A ``return`` (no word character before it) and, looked ahead, as in ``return k, self.k``:
# group 1 the last part of the first element's dotted name, group 2 the second element's dotted
# name (dots, blanks and comments between). Looked ahead, so each ``return`` is tried even
# where an earlier one's pair runs past it.
_RETURNED_PAIR = re.compile(
    rf"return(?<!\wreturn)(?={_GAP}\(?{_GAP}(?:\w++{_GAP}\.{_GAP})*(\w++){_GAP},{_GAP}((?:\w++{_GAP}\.{_GAP})*\w+))"
)
_COMMENT = re.compile(r"#[^\n]*\n")


def _returned_twice(text: str, among: Collection[str] | None = None) -> set[str]:
    """The names (of ``among``, where given) some ``return`` gives as the last part of its
    first element and as a part of its second (``return k, k``, ``return self.k,
    k.view(...)``): one pass for every name."""
    return {
        match.group(1)
        for match in _RETURNED_PAIR.finditer(text)
        if (among is None or match.group(1) in among)
        and match.group(1) in _IDENTIFIER.findall(_COMMENT.sub(" ", match.group(2)))
    }


def _kv104(f: _File) -> bool:
    # A K-side name with its V twin present that is called (``self.k_proj(``), written through
    # (``k_cache[``, ``.copy_(``), assigned to its twin (``value = key.``) or returned twice.
    extra = f.settings.extra_pairs
    returned_twice: set[str] | None = None
    for k in f.k_names:
        if "(" in f.followers(k) and _call_assigned_to_a_value(f, k):
            return True
        if not is_kv_tensor_name(k, extra):
            continue
        v = value_counterpart(k, extra) or k
        if _assigned_through_a_subscript(f, k) or not f.followers(k).isdisjoint(_WRITTEN_BY) or k in f.assigned_names(v):
            return True
        if returned_twice is None:
            returned_twice = _returned_twice(f.text, f.k_names)
        if k in returned_twice:
            return True
        if k in f.returned_attributes:
            return True
    return False


def _call_assigned_to_a_value(f: _File, k: str) -> bool:
    """Can a call of ``k`` be (part of) the value of an assignment to a V-side target
    (``v = self.k_proj(x)``, ``self.v_cache = torch.empty(self.get_k_shape())``)?

    Yes when a V-side name followed by ``=`` stands before the call in its statement: on its
    line, or, in code-only text where a bracket still open since the chunk's start or a
    backslash says the statement began on an earlier line, from where it began. In raw text,
    any call (strings and comments may hide where the statement began).
    """
    text = f.text
    for at, end in word_spans(text, (k,)):
        if _CALL_BRACKET.match(text, end) is None:
            continue
        line = text.rfind("\n", 0, at) + 1
        head = text[line:at]
        equals = _last_assignment(head)
        if equals is not None and any(kv_side(n, f.settings.extra_pairs) == "v" for n in _IDENTIFIER.findall(head, 0, equals)):
            return True
        if not f.reduced or head.lstrip().startswith("@"):
            # Strings and comments may hide where the statement began; a line starting with
            # ``@`` may continue a matrix product rather than start a chunk.
            return True
        start = f.chunk_start(at)
        if open_brackets(text, start, line) > 0 or text[start:line].rstrip(" \t\r\n").endswith("\\"):
            # The statement began on an earlier line: its head, from where it began.
            begun = f.statement_start(at)
            if begun is None:
                return True
            head = text[begun:at]
            equals = _last_assignment(head)
            if equals is not None and any(kv_side(n, f.settings.extra_pairs) == "v" for n in _IDENTIFIER.findall(head, 0, equals)):
                return True
    return False


def _last_assignment(head: str) -> int | None:
    """The offset of the last ``=`` in ``head`` that is no comparison (an assignment, an
    augmented one, or a keyword argument such as ``value=``), or None."""
    at = head.rfind("=")
    while at >= 0:
        if head[at + 1:at + 2] != "=" and (at == 0 or head[at - 1] not in "=!<>"):
            return at
        at = head.rfind("=", 0, at)
    return None


_SUBSCRIPT = re.compile(rf"{_GAP}\[")
# What may follow a subscript that is (part of) an assignment's target: ``=``, an
# annotation's ``:``, or the next element of a tuple or list target.
_TARGET_END = re.compile(rf"{_GAP}(?:=(?!=)|[:,)\]])")


def _assigned_through_a_subscript(f: _File, k: str) -> bool:
    """Is ``k[...]`` (one subscript of the name itself) followed by what may make it an
    assignment's target (``k_cache[slots] = v``; ``_TARGET_END``)? An element of a tuple or
    list target only where an assignment follows it in its statement
    (``_assignment_follows``): ``f(k[0], x)`` stores nothing. On raw text a string or comment
    may hide where brackets close or statements end: every such subscript counts."""
    if not f.subscripted(k):
        return False
    text, raw = f.text, not f.reduced
    for _, _, _, close in bracket_groups(text, (k,), raw, _SUBSCRIPT):
        if close is None:
            return True
        follower = _TARGET_END.match(text, close)
        if follower is None:
            continue
        if raw or follower.group().endswith(("=", ":")) or _assignment_follows(f, close):
            return True
    return False


def _assignment_follows(f: _File, at: int) -> bool:
    """Does an assignment's ``=`` stand after offset ``at`` of reduced text in its statement,
    outside every bracket the statement opens (``(k[s], x) = v, y``)? Unknown statement
    bounds answer yes."""
    text = f.text
    start = f.statement_start(at)
    if start is None:
        return True
    stop = _statement_end(text, start, len(text))
    if stop is None:
        return True
    depth = open_brackets(text, start, at)
    for match in _BRACKET_OR_EQUALS.finditer(text, at, stop):
        char = match.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth <= 0:
            return True
    return False


# A bracket, or an assignment's ``=`` (not ``==``, ``!=``, ``<=``, ``>=``, ``:=``, an augmented
# one, or a comparison's half).
_BRACKET_OR_EQUALS = re.compile(r"[()\[\]{}]|(?<![=!<>:+\-*/%&|^@~])=(?!=)")


CONDITION = _kv104
