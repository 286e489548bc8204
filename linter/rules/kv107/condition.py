"""KV107 needs a K-side name and its V twin in the statements of function bodies: every broken
twin pairs a K statement with a V statement of one function that renames its K names (a kept K
name counts only where its V counterpart exists), so both sides of some pair stand in code
outside the functions' headers; or, for a V statement turned into a second copy of its K
twin, a K name twice in the bodies whose V counterpart stands anywhere. A header's parameters
(``def attend(q, k, v)``, the binding the rest of a module keeps of each definition) are no
statement.

Then, in the code alone, what ``model.symmetry`` reports needs near-twin statements: a
statement naming a V-side name and one naming its K twin within 12 lines whose tokens, the K
side's renamed to the V side's, agree but for one stretch (brackets and trailing commas aside,
which the ``ast`` tree does not keep), and that stretch is one the model reports: the V side
keeping the K side's tokens there (a kept name or expression), a stretch inside a subscript or
inside an axis call's or ``narrow``'s arguments (a bound, dims, order), or an op the twin
applies and the V side lacks (a layout op, a repeat, a cut); or the same part of a fused
tensor cut for both. Or a statement naming the K side repeated word for word within 12 lines,
or a V name assigned anew from its K twin's chain after an assignment of its own, or a V name
assigned in a branch and again less deep, beside its K twin at that depth. The ``ast``
screen (``screen._kv107``) then runs the rule's own model.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from linter.model.names import TWIN_ATTENTION_WORDS, key_counterpart, kv_side
from linter.model.symmetry import _WINDOW, query_to_key, twin_name
from linter.model.twin_ops import AXIS_CALLS, CONCATS, MIRRORED_METHODS
from linter.plan.file import _File
from linter.plan.words import identifier_lines

_DEF = re.compile(r"\bdef\s+\w+\s*\(")
# What follows a header's parameters: an optional return annotation, then its colon.
_HEADER_END = re.compile(r"[ \t\\\n]*(?:->[^:\n]*)?:")


def _kv107(f: _File) -> bool:
    if not f.k_names or "def" not in f.text:
        return False
    lower = f.lower_names
    if not any(word in lower for word in TWIN_ATTENTION_WORDS):
        return False  # ``key`` and ``value`` of a mapping: no attention word in any name
    text = f.text
    if not f.reduced:
        return True  # a string or comment may hide where a header's brackets close
    kept: list[str] = []
    at = 0
    for match in _DEF.finditer(text):
        if match.start() < at:
            continue
        end = _closing(text, match.end())
        if end is None or not _HEADER_END.match(text, end):
            return True  # brackets this reading cannot pair: keep the file
        kept.append(text[at:match.start()])
        at = end
    if not kept:
        return False  # no function: no statement of one
    kept.append(text[at:])
    bodies = "".join(kept)
    # A V statement turned into a second copy of its K twin names the K side twice in the
    # bodies, its V counterpart anywhere (a parameter, the class).
    if not f.pairs_among(identifier_lines(bodies)) and not any(
        len(re.findall(rf"\b{re.escape(k)}\b", bodies)) >= 2 for k in f.k_names
    ):
        return False
    if f.whole:
        return True  # the whole file: its definitions are asked one by one next
    return _near_twins(f)


_BRACKET = re.compile(r"[()\[\]{}]")


def _closing(text: str, start: int) -> int | None:
    """The offset after the bracket that closes the one opened just before ``start``."""
    depth = 1
    for match in _BRACKET.finditer(text, start):
        if match.group() in "([{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return match.end()
    return None


# Code-only text's tokens: a newline, a quote (``code_only`` blanks a string, keeping an
# f-string's expressions between its quotes), a name, a number, an operator or a bracket.
_TOKEN = re.compile(
    r"""\n|["']|[^\W\d]\w*|\d[\w.]*|\.\d\w*|\.\.\.|:=|->|\*\*=?|//=?|<<=?|>>=?"""
    r"""|[-+*/%@&|^<>=!]=|[-+*/%@&|^~<>=:;,.\\()\[\]{}]"""
)
_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")
# Statements whose header's colon starts a body: what follows it on the line is a statement.
_HEADERS = frozenset({
    "if", "elif", "else", "for", "while", "with", "try", "except", "finally", "def", "class", "async",
    "match", "case",
})
# Calls whose arguments a one-place difference may sit in and still be a break: axes, dims,
# the order of what is concatenated, a ``narrow`` length.
_ARGUMENT_CALLS = AXIS_CALLS | CONCATS | {"narrow"}
_UNKEPT = str.maketrans("", "", "(),")


def _statements(text: str) -> list[tuple[int, list[str]]] | None:
    """The simple statements of ``text`` (code only), each as (its first line, its tokens):
    a compound statement's header left out, a string as its quotes around its f-string
    expressions; None where the
    brackets do not pair (this reading cannot tell where statements end)."""
    found: list[tuple[int, list[str]]] = []
    current: list[str] = []
    line = start = depth = 0
    continued = False
    for token in _TOKEN.findall(text):
        if token == "\n":
            line += 1
            if depth == 0 and not continued and current:
                found.append((start, current))
                current = []
            continued = False
            continue
        if token == "\\":
            continued = True
            continue
        if token == "'" or token == '"':
            if current and current[-1] == '"':
                continue  # one string, however many quotes: adjacent strings are one constant
            token = '"'
        if token in _OPENERS:
            depth += 1
        elif token in _CLOSERS:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and (token == ";" or (token == ":" and current and current[0] in _HEADERS)):
            if token == ";" and current:
                found.append((start, current))
            current = []
            continue
        if not current:
            start = line
        current.append(token)
    if depth:
        return None
    if current:
        found.append((start, current))
    return found


def _comparable(tokens: list[str]) -> list[int]:
    """The positions of ``tokens`` that the ``ast`` tree keeps: no parentheses (grouping is
    no node) and no trailing comma."""
    last = len(tokens) - 1
    return [
        i for i, t in enumerate(tokens)
        if t != "(" and t != ")" and not (t == "," and i < last and tokens[i + 1] in _CLOSERS)
    ]


def _near_twins(f: _File) -> bool:
    statements = _statements(f.text)
    if statements is None:
        return True
    pairs = f.settings.extra_pairs
    if _repeated(statements, f.identifiers, pairs) or _rebuilt(statements, pairs):
        return True
    twins = {k: v for k in f.k_names if (v := twin_name(k, pairs)) != k}
    if _any_break(statements, twins):
        return True
    # A K statement that kept its Q twin's member (``model.symmetry._query_kept``): a query
    # name whose key counterpart occurs too.
    identifiers = f.identifiers
    query_twins = {q: k for q in identifiers if "q" in q.lower() and (k := query_to_key(q)) != q and k in identifiers}
    if query_twins and _any_break(statements, query_twins, kept_only=True):
        return True
    names = [*twins, *twins.values()]
    return bool(names) and (_unset(f.text, names, pairs) or _overwritten(f.text, names, pairs)) or _branch_repeat(f.text)


# A repeat of K and V in one branch of an ``if`` and a product in the other
# (``model.branch_repeat``): a repeat call, an ``else``, and a matmul or SDPA.
_REPEAT = re.compile(r"repeat\w*\s*\(")
# ``@`` after an operand (possibly on the line before, inside brackets); a decorator after a
# statement that ends in a name or bracket passes too.
_PRODUCT = re.compile(r"\bmatmul\s*\(|[\w)\]]\s*@(?!=)|\bscaled_dot_product_attention\s*\(")
_ELSE = re.compile(r"\b(?:else|elif)\b")


def _branch_repeat(text: str) -> bool:
    return bool(_REPEAT.search(text) and _ELSE.search(text) and _PRODUCT.search(text))


def _any_break(statements: list[tuple[int, list[str]]], twins: dict[str, str], kept_only: bool = False) -> bool:
    """Does a statement naming a counterpart in ``twins`` break with one naming its twin
    within 12 lines, in one place ``model.symmetry`` reports?"""
    values = set(twins.values())
    k_lines: list[int] = []
    k_statements: list[tuple[list[str], set[str]]] = []
    v_statements: list[tuple[int, list[str], set[str]]] = []
    for line, tokens in statements:
        present = set(tokens)
        if not present.isdisjoint(twins):
            k_lines.append(line)
            k_statements.append((tokens, present.intersection(twins)))
        if not present.isdisjoint(values):
            v_statements.append((line, tokens, present))
    for v_line, v_tokens, v_present in v_statements:
        for at in range(bisect_left(k_lines, v_line - _WINDOW), bisect_right(k_lines, v_line + _WINDOW)):
            k_tokens, k_words = k_statements[at]
            if k_tokens is not v_tokens and any(twins[w] in v_present for w in k_words):
                if _one_place_break(k_tokens, v_tokens, twins, kept_only):
                    return True
    return False


def _one_place_break(k_tokens: list[str], v_tokens: list[str], twins: dict[str, str], kept_only: bool = False) -> bool:
    """Do the two statements differ, the K side renamed, in one stretch of a kind
    ``model.symmetry`` reports?"""
    k_at, v_at = _comparable(k_tokens), _comparable(v_tokens)
    original = [k_tokens[i] for i in k_at]
    k = [twins.get(t, t) for t in original]
    v = [v_tokens[i] for i in v_at]
    nk, nv = len(k), len(v)
    p = 0
    while p < nk and p < nv and k[p] == v[p]:
        p += 1
    s = 0
    while s < nk - p and s < nv - p and k[nk - 1 - s] == v[nv - 1 - s]:
        s += 1
    k_part, v_part = k[p:nk - s], v[p:nv - s]
    # Twins rename a K name to its V counterpart where they agree, or in the operand of the
    # op the V side lacks.
    if not (
        any(original[i] is not k[i] for i in range(p))
        or any(original[i] is not k[i] for i in range(nk - s, nk))
        or (nk > nv and any(original[p + i] is not t and t in v_part for i, t in enumerate(k_part)))
    ):
        return False
    if not k_part and not v_part:
        if kept_only:
            return False
        # Mirrors: a break only where both cut the same rows of a fused tensor, the values
        # alike before the renaming too.
        if "=" not in v:
            return False
        value = v.index("=") + 1
        return original[value:] == v[value:] and "[" in v[value:] and ":" in v[value:]
    if nk == nv and all(v[i] == k[i] or v[i] == original[i] for i in range(p, nk - s)):
        return True  # the V side kept the K side's name or expression, in one place or more
    if kept_only:
        return False
    if nk > nv and (not v_part or holds(k_part, v_part)) and any(
        t == "[" or t in MIRRORED_METHODS or "repeat" in t.lower() for t in k_part
    ):
        return True  # the V side is its twin less an op or cut
    # Inside a subscript, or inside the arguments of an axis call or ``narrow``: in both.
    return _enclosed(v_tokens, v_at, p, nv - s) and _enclosed(k_tokens, k_at, p, nk - s)


def holds(part: list[str], inner: list[str]) -> bool:
    n = len(inner)
    return any(part[i:i + n] == inner for i in range(len(part) - n + 1))


def _enclosed(tokens: list[str], at: list[int], start: int, end: int) -> bool:
    """Is the stretch between comparable positions ``start`` and ``end`` inside a subscript's
    brackets, or an axis call's or ``narrow``'s parentheses?"""
    if start < end:
        first, last = at[start], at[end - 1] + 1
    else:
        first = last = at[start - 1] + 1 if start else 0
    stack: list[bool] = []
    for i in range(first):
        t = tokens[i]
        if t in _OPENERS:
            stack.append(t == "[" or (t == "(" and i > 0 and tokens[i - 1] in _ARGUMENT_CALLS))
        elif t in _CLOSERS and stack:
            stack.pop()
    depth = 0
    for i in range(first, len(tokens)):
        if not stack:
            return False
        t = tokens[i]
        if t in _OPENERS:
            depth += 1
        elif t in _CLOSERS:
            if depth:
                depth -= 1
            elif stack.pop() and i >= last:
                return True
    return False


def _repeated(statements: list[tuple[int, list[str]]], identifiers: frozenset[str], pairs) -> bool:
    """A statement for its effect naming the K side and no V name, written twice within 12
    lines, where the V counterpart of one of its K names exists (a fused name counts as its
    own): the V side's copy that kept every K name."""
    seen: dict[str, int] = {}
    for line, tokens in statements:
        # Grouping and trailing commas aside (the ``ast`` tree keeps neither); dropping every
        # comma can only make more statements alike.
        key = "".join(tokens).translate(_UNKEPT)
        first = seen.get(key)
        seen[key] = line
        if first is None or line - first > _WINDOW or not _effect(tokens):
            continue
        words = [t for t in set(tokens) if t in identifiers]
        if any(kv_side(t, pairs) == "v" for i, t in enumerate(tokens) if t in identifiers and tokens[i + 1:i + 2] != ["="]):
            continue  # a V name (a keyword argument's name aside): no copy of the K side
        if any(kv_side(t, pairs) == "k" and twin_name(t, pairs) in identifiers for t in words):
            return True
    return False


def _effect(tokens: list[str]) -> bool:
    """A call for its effect, or a store into a subscript or attribute (``symmetry._effect``)."""
    depth = 0
    for i, t in enumerate(tokens):
        if t in _OPENERS:
            depth += 1
        elif t in _CLOSERS:
            depth -= 1
        elif t == "=" and not depth:
            return i > 1 and (tokens[i - 1] == "]" or tokens[i - 2] == ".")
    return tokens[-1] == ")"


_DEF_LINE = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(", re.MULTILINE)


def _overwritten(text: str, names: list[str], pairs) -> bool:
    """What ``reaching.overwritten_value_twins`` needs: a V name assigned in a branch (deeper),
    then again less deep, where its K twin is assigned at that depth too. (An assignment after
    a ``;`` has no depth this reading can tell: it passes.)"""
    assigned: dict[str, list[tuple[int, int]]] = {}
    plain = re.compile(rf"^([ \t]*)({'|'.join(map(re.escape, names))})[ \t]*=(?!=)", re.MULTILINE)
    for match in plain.finditer(text):
        assigned.setdefault(match.group(2), []).append((match.end(), len(match.group(1))))
    if re.search(rf";[ \t]*(?:{'|'.join(map(re.escape, names))})[ \t]*=(?!=)", text):
        return True
    for name, where in assigned.items():
        key = key_counterpart(name, pairs) if kv_side(name, pairs) == "v" else None
        if key not in assigned:
            continue
        key_depths = {i for _, i in assigned[key]}
        if any(a < b and deep > shallow and shallow in key_depths for a, deep in where for b, shallow in where):
            return True
    return False


def _unset(text: str, names: list[str], pairs) -> bool:
    """What ``reaching.unset_value_twins`` needs: a K name assigned at a function's top level
    (indent I), its V twin assigned deeper (in a branch) with no parameter of that name and no
    assignment of it at indent I between the ``def`` and there, and after it, before the
    next such assignment, text that reads both."""
    assigned: dict[str, list[tuple[int, int]]] = {}
    plain = re.compile(rf"^([ \t]*)({'|'.join(map(re.escape, names))})[ \t]*=(?!=)", re.MULTILINE)
    for match in plain.finditer(text):
        assigned.setdefault(match.group(2), []).append((match.end(), len(match.group(1))))
    definitions: list[tuple[int, int, int]] | None = None
    for name, where in assigned.items():
        key = key_counterpart(name, pairs) if kv_side(name, pairs) == "v" else None
        if key not in assigned:
            continue
        word, key_word = re.compile(rf"\b{re.escape(name)}\b"), re.compile(rf"\b{re.escape(key)}\b")
        for at, indent in where:
            for top in {i for _, i in assigned[key] if i < indent}:
                if definitions is None:
                    definitions = [(m.start(), len(m.group(1)), m.end()) for m in _DEF_LINE.finditer(text)]
                start, header = next(((d, h) for d, i, h in reversed(definitions) if d < at and i < top), (0, 0))
                end = _closing(text, header) if header else None
                if end is not None and word.search(text, header, end):
                    continue  # a parameter: bound on every path
                if any(start < p < at and i == top for p, i in where):
                    continue  # bound at the top level before the branch
                end = next((d for d, i, _ in definitions if d > at and i < top), len(text))
                if not any(start < p < end and i == top for p, i in assigned[key]):
                    continue  # the K name is set at this indent in another function only
                stop = min((p for p, i in where if p > at and i == top), default=end)
                if _top_level_read(text, at, stop, top, word, key_word):
                    return True
    return False


def _top_level_read(text: str, start: int, stop: int, top: int, word: re.Pattern, key_word: re.Pattern) -> bool:
    """Does a statement at indent ``top`` between ``start`` and ``stop`` read both words?"""
    lines = re.compile(rf"^[ \t]{{0,{top}}}(?=\S)", re.MULTILINE)
    at = start
    while True:
        match = lines.search(text, at, stop)
        if match is None:
            return False
        end = lines.search(text, match.end() + 1, stop)
        until = stop if end is None else end.start()
        if match.end() - match.start() == top and word.search(text, match.end(), until) and key_word.search(text, match.end(), until):
            return True
        if end is None:
            return False
        at = end.start()


def _rebuilt(statements: list[tuple[int, list[str]]], pairs) -> bool:
    """``v = k.clone()`` after an assignment of ``v``: a V name assigned from its K twin's
    chain (``model.symmetry._rebuilt_from_key``)."""
    assigned: set[str] = set()
    for _, tokens in statements:
        if len(tokens) > 3 and tokens[1] == "=":
            name = tokens[0]
            if name in assigned and kv_side(name, pairs) == "v":
                value = [t for t in tokens[2:] if t != "(" and t != ")"]
                if (
                    len(value) > 1 and value[1] in (".", "[") and key_counterpart(name, pairs) == value[0]
                    and name not in value
                ):
                    return True
            assigned.add(name)
    return False


CONDITION = _kv107
