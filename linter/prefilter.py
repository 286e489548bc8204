"""Prove, from the text alone, that (part of) a file cannot produce a finding, so libcst never
parses it.

Each rule gets a necessary condition derived from what its detection needs before it can
report. ``parse_plan`` applies them in rising cost: plain substring tests on the raw text, the
conditions on the raw text, the conditions again on the text reduced to code (``code_only``:
no comments, no plain string contents), and last per top-level statement (``segments``): a rule
whose findings all come from facts inside one function or class (one class, for KV203), or
from the rest of the module, can only report inside a definition whose own code meets its
condition, or in the rest when that does. The parser then sees only those definitions, or the
whole file when the rest of the module is involved or a rule is one this module does not know.

Every condition over-approximates: identifiers are collected from the whole text, and
"followed by ``[``" tolerates any whitespace or line continuation in between, so a condition
can be true for code without findings but never false for code with findings.
``tests/linter/test_fast_path_equivalence.py`` and the benchmark compare the result with the
slow path (every file parsed).

The conditions, by rule:

- every pair rule needs a K-side name and its V counterpart (``pairs.value_counterpart``, with
  the configured extra pairs) both present;
- KV101/KV102 need attention context (an attention word, an attention callable, a K/V
  projection name, or ``softmax`` for hand-written attention) and a K tensor name that is
  subscripted, reshaped or followed by an axis-moving step (``k.transpose(1, 2)[...]``);
  KV102 needs both sides so, or cut by split/chunk/tensor_split/narrow;
- KV103 needs attention or cache-manager context and a K *cache* name that is subscripted or an
  indexed gather/scatter call;
- KV201 needs a class, a ``*Linear`` constructor, and paired names;
- KV202 needs a view/reshape/unflatten/rearrange call and paired names;
- KV203 needs a chunk/split call and a KV-head-count name;
- KV105 needs attention context, a paired K tensor name and either a top-level function
  whose every return can be a cut, called in the file with a K tensor name among its arguments, or
  a name from a ``from x import`` statement called with a K tensor name first and its result
  assigned or passed on (the helper read from its module);
- KV106 needs a K-side scale name (``k_scale``, ``key_descale``, any case) with its V twin;
- KV104 needs a paired K-side name that is called, subscripted, written in place, assigned to
  its V twin, returned twice, or returned as ``self.`` attribute;
- KV204 needs a class, a ``*Linear`` constructor, a view/reshape call, a shape or size read,
  and paired names;
- KV205 needs a class, a ``*Linear`` constructor, a view/reshape call and a head-count name
  (any case);
- KV206 needs a key head-dim name with its value twin, and a view or allocation call;
- KV207 needs one top-level class (its code-only text, from its column-0 ``class`` line to the
  next column-0 ``def`` or ``class`` line) with a base that is a plain name of a top-level
  class of the file (with a K/V pair of names in it) or named by a ``from x import`` (the
  base read from that module), a parent ``__init__`` call, a K/V-side ``self.`` target whose
  statement holds a ``Linear``, and that target's twin not surely defined by the class
  itself. Surely defined (read line by line, brackets and continuations followed): a method
  of that name, or ``self.twin = ...`` starting a line at the indentation of a method body's
  first statement. A twin assigned only under ``if``/``for``/``with``/``try``, in an inner
  function or in a string, and any class indented with tabs, count as not defined;
- KV208 needs a head-dim keyword argument (``(head_dim=`` or ``, head_dim=``) of a call of a
  top-level class or of a name a ``from x import`` binds, and a value head-dim name (any case)
  in the same top-level definition, its decorators included;
- KV209 needs a K (or V) name passed first as the root of a name chain (after it only
  subscripts, calls and same-tensor methods: ``self.k_proj(x)``, ``k.transpose(1, 2)``) to a
  function the file defines (any depth, ``name(`` or ``self.name(``) with a view word in it
  and whose every ``return`` may be a view call or a name assigned one, after axis-keeping steps
  (a nested ``def``/``class``, tabs or unbalanced brackets: unsure, so yes), or by its plain
  name to one a ``from x import`` names; and its twin passed first to such a call too, the two
  calls differing past the first argument (equal texts from the end of the argument to the
  closing bracket mean equal arguments; a quote or comment there: unequal), or named in a
  statement with a view word (where the screen's viewed names all are);
- KV301 needs a class and a ``self.`` attribute pair.

KV105, KV207, KV208 and KV209 reason across top-level definitions (a helper and its caller, a
base and its subclass, a pool and its builder, a viewing helper and its caller) or files, so
they have no own unit: a file their conditions admit is left to their ``module_screens`` (KV208's
asked of the text and the modules it imports first, ``module_screens.TEXT_SCREENS``) on its
whole ``ast`` tree, and goes whole to libcst only when one of those says yes; otherwise the
other rules' units stand.

The rest of the module (what lies outside the units) holds the units' header lines, a class's
without its ``class`` keyword: its body is its own unit, so a condition that asks for a class
is not met by the rest for a top-level class's sake.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, TypeVar

from linter.chains import assigned_reaches, root_reaches
from linter.code_only import code_only
from linter.model.twins import is_value_head_dim, key_head_dim_twin
from linter.names import (
    ATTENTION_CALLABLES,
    CACHE_PARTS,
    INDEXED_CALLS,
    K_SIDE_TOKENS,
    RESHAPE_CALLS,
    SAME_TENSOR_METHODS,
    SEE_THROUGH,
    SHAPE_KEEPING,
    Role,
    is_attention_word,
    is_kv_head_count_name,
    is_kv_projection,
    is_kv_tensor_name,
    is_scale_name,
    key_counterpart,
    kv_side,
    name_role,
    value_counterpart,
)
from linter.rules import rule_triggers
from linter.segments import Segment, header, top_level_segments
from linter.settings import Settings
from linter.triggers import Scanner, Trigger

if TYPE_CHECKING:
    from linter.rules.base import Rule

_IDENTIFIER = re.compile(r"[^\W\d]\w*")
T = TypeVar("T")


@lru_cache(maxsize=8192)
def _compiled(pattern: str) -> re.Pattern[str]:
    # The conditions build patterns per name (``k_cache`` followed by ``[``); across a tree the
    # same few hundred recur, more than ``re``'s own cache of 512 holds (compiling took a
    # tenth of the pre-filter's time on vllm).
    return re.compile(pattern)


def word_first(words: Iterable[str]) -> str:
    """A pattern for any of ``words`` starting a word, written literal first with the boundary
    checked behind: ``re`` then jumps to the literal instead of trying a leading ``\\b`` at
    every position (4-10x faster on source text)."""
    return "(?:" + "|".join(f"{re.escape(w)}(?<!\\w{re.escape(w)})" for w in sorted(words)) + ")"


def _k_candidates(ids: Iterable[str]) -> set[str]:
    """The identifiers with a K-side part (``k``, ``cache_k``, ``key_states``): candidates for
    ``kv_side``. Each identifier is wrapped in ``_`` and put on a line of its own, so a part is
    ``_k_`` found by substring search."""
    wrapped = "_" + "_\n_".join(ids) + "_"
    found = set()
    for token in K_SIDE_TOKENS:
        needle = f"_{token}_"
        at = wrapped.find(needle)
        while at >= 0:
            start = wrapped.rfind("\n", 0, at) + 1
            end = wrapped.find("\n", at)
            end = len(wrapped) if end < 0 else end
            found.add(wrapped[start + 1:end - 1])
            at = wrapped.find(needle, end)
    return found
_LONE_CR = re.compile(r"\r(?!\n)")
# Anything the tokenizer lets stand between two tokens inside brackets.
# Each alternative matches in only one way (a comment runs to its newline), so no backtracking
# blow-up on banner lines such as ``########``.
_GAP = r"(?:\s|\\\r?\n|#[^\n]*\n)*"
# ``narrow(k, ...)``, ``torch.narrow(self.k, ...)``: group 1 is the tail of the first positional
# argument when that argument is a dotted name (star arguments before it are skipped).
_ARGUMENT_RESHAPE = re.compile(
    rf"{word_first(RESHAPE_CALLS)}{_GAP}\({_GAP}(?:\*[^,()]*,{_GAP})*(?:\({_GAP})*"
    rf"(?:\w+{_GAP}\.{_GAP})*(\w+){_GAP}\)*{_GAP}[,)]"
)
# Callables that are attention calls without an attention word in their name (none today).
_UNWORDED_CALLABLES = frozenset(c for c in ATTENTION_CALLABLES if not is_attention_word(c))
# Mirrors of the rules' own vocabularies (KV202's views, KV203's splits; KV103's are shared
# through ``names``); a rule that grows its vocabulary must grow these too, and the equivalence
# test fails until it does. Every cache part contains one of these:
_CACHE_PARTS_SHORT = ("cache", "pool", "buf", "pages", "past", "mem")
# KV103 speaks in attention code or in a scope named for a cache (any case).
_CACHE_SCOPE_WORDS = ("kv", "cache", "pool")
# A line that starts a definition, found from the newline before it (a leading literal lets
# ``re`` skip ahead; ``^`` in multiline mode would be tried at every position).
_DEFINITION = re.compile(r"\n(?=[ \t]*(?:(?:async[ \t]+)?def|class)\b|[ \t]*@)")
# Every name ``pairs.is_kv_projection`` accepts contains one of these.
_PROJECTION_WORDS = ("proj", "linear", "dense", "wk", "wv", "to_k", "to_v")
_VIEW_CALLS = frozenset({"view", "reshape", "unflatten", "rearrange"})
# Methods after which a name counts as reshaped (KV101) or cut (KV102), seen through included.
_RESHAPED_BY = RESHAPE_CALLS | SEE_THROUGH
_CUT_BY = SEE_THROUGH | {"split", "chunk", "tensor_split", "narrow"}
_RETURN_SELF = re.compile(rf"return(?<![A-Za-z0-9_]return){_GAP}self{_GAP}\.{_GAP}(\w+)")
# In-place writes through a name (KV104).
_WRITTEN_BY = frozenset({"copy_", "index_copy", "index_copy_"})
_SPLIT_CALLS = frozenset({"chunk", "split", "tensor_split"})


# Every ASCII character that cannot be part of an identifier, to a space.
_NON_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})


def identifier_set(text: str) -> frozenset[str]:
    """The distinct identifiers of ``text``, as ``_IDENTIFIER.findall`` finds them.

    For ASCII text, translating and splitting in C is about 3x faster than the regular
    expression: each maximal run of word characters, less its leading digits, is what the
    expression matches (non-ASCII text, where translating is slower, goes to the expression).
    """
    if not text.isascii():
        return frozenset(_IDENTIFIER.findall(text))
    words = set(text.translate(_NON_WORD).split())
    numeric = [w for w in words if w[0].isdigit()]
    if numeric:
        words.difference_update(numeric)
        words.update(filter(None, (w.lstrip("0123456789") for w in numeric)))
    return frozenset(words)


class _File:
    """Lazily computed facts about one file's text, shared by the rule conditions."""

    def __init__(self, text: str, settings: Settings, reduced: bool = False) -> None:
        self.text = text
        self.settings = settings
        # Reduced by ``code_only``: no strings or comments, so brackets can be counted.
        self.reduced = reduced
        self._identifiers: frozenset[str] | None = None
        self._pairs: list[str] | None = None
        self._lower: str | None = None
        self._cuts: list[int] | None = None
        self._with: dict[frozenset[str], list[str]] = {}
        self._attention: bool | None = None
        self._reshaped_arguments: frozenset[str] | None = None
        self._views: str | None = None
        self._code: str | None = None
        self._followers: dict[str, frozenset[str]] = {}
        self._returned: frozenset[str] | None = None
        self._joined: str | None = None
        self._joined_lower: str | None = None
        self._containing: dict[tuple[str, bool], frozenset[str]] = {}

    @property
    def extra_tails(self) -> frozenset[str]:
        return frozenset(c.rsplit(".", 1)[-1] for c in self.settings.extra_attention_callables)

    @property
    def code(self) -> str:
        """The text reduced by ``code_only`` (computed once: ``parse_plan`` reads it too)."""
        if self._code is None:
            self._code = self.text if self.reduced else code_only(self.text)
        return self._code

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def identifiers(self) -> frozenset[str]:
        if self._identifiers is None:
            self._identifiers = identifier_set(self.text)
        return self._identifiers

    @property
    def k_names(self) -> list[str]:
        """K-side identifiers whose V counterpart also occurs."""
        if self._pairs is None:
            self._pairs = self.pairs_among(self.identifiers)
        return self._pairs

    def pairs_among(self, ids: frozenset[str]) -> list[str]:
        """The K-side names in ``ids`` whose V counterpart is in ``ids`` too."""
        extra = self.settings.extra_pairs
        candidates = _k_candidates(ids)
        candidates.update(k for k, _ in extra if k in ids)
        return [
            name for name in candidates
            if kv_side(name, extra) == "k" and value_counterpart(name, extra) in ids
        ]

    def pairs_near(self, words: frozenset[str]) -> list[str]:
        """K-side names whose K and V sides both share a statement with one of ``words``."""
        return self.pairs_among(identifier_set("\n".join(self._chunks_with(words))))

    def attention_context(self) -> bool:
        if self._attention is None:
            self._attention = (
                # ``scopes`` also reads multi-head latent attention (``forward_mla``) as attention.
                "attn" in self.lower or "attention" in self.lower or "mla" in self.lower
                # Hand-written attention (``scopes.Scope.hand_attention``) needs a softmax call.
                or "softmax" in self.text
                or self.has_any(_UNWORDED_CALLABLES | self.extra_tails)
                or any(is_kv_projection(n) for part in _PROJECTION_WORDS for n in self.names_containing(part))
            )
        return self._attention

    def chunk_start(self, at: int) -> int:
        """Where the chunk holding offset ``at`` starts (see ``_chunks_with``)."""
        if self._cuts is None:
            self._cuts = [0, *definition_lines(self.text), len(self.text)]
        return self._cuts[bisect_right(self._cuts, at) - 1]

    def _chunks_with(self, words: frozenset[str]) -> list[str]:
        """The text's chunks in which one of ``words`` occurs as a whole word.

        The text is cut before every ``def``/``class``/decorator line. Such a line always
        starts a new statement, so one statement never spans two chunks (the one thing this
        assumes: no string literal inside a statement has a line that starts like a
        definition). The words are found in one scan of the whole text, each hit's chunk by
        its offset.
        """
        found = self._with.get(words)
        if found is None:
            text = self.text
            if self._cuts is None:
                self._cuts = [0, *definition_lines(text), len(text)]
            cuts = self._cuts
            hits = sorted({bisect_right(cuts, at) - 1 for at in _word_offsets(text, words)})
            found = [text[cuts[i]:cuts[i + 1]] for i in hits]
            self._with[words] = found
        return found

    def followed_by(self, name: str, pattern: str) -> bool:
        # No leading \b: a literal prefix lets ``re`` skip ahead; the boundary is checked here.
        # An ASCII word character before the name is ruled out inside ``re`` (behind the
        # literal, so ``re`` still jumps from one occurrence of the name to the next); the
        # loop checks the rest.
        for match in _compiled(rf"{re.escape(name)}(?<![A-Za-z0-9_]{re.escape(name)}){_GAP}{pattern}").finditer(self.text):
            if self._starts_word(match.start()):
                return True
        return False

    def _starts_word(self, start: int) -> bool:
        return start == 0 or not (self.text[start - 1].isalnum() or self.text[start - 1] == "_")

    def followers(self, name: str) -> frozenset[str]:
        """What follows ``name`` anywhere in the text (past blanks, comments and line
        continuations): ``[``, ``(``, or an attribute's name (``.view`` gives ``view``).

        One scan per name answers every question about it; the pattern, built per name, is
        shared by every file. Only the name is consumed (the rest is looked ahead), so an
        occurrence inside another's attribute (``k.k[0]``) is still seen.
        """
        found = self._followers.get(name)
        if found is None:
            pattern = _compiled(
                rf"{re.escape(name)}(?<![A-Za-z0-9_]{re.escape(name)})(?={_GAP}(?:([\[(])|\.{_GAP}(\w+)))"
            )
            found = frozenset(
                m.group(1) or m.group(2) for m in pattern.finditer(self.text) if self._starts_word(m.start())
            )
            self._followers[name] = found
        return found

    @property
    def returned_attributes(self) -> frozenset[str]:
        """The ``x`` of every ``return self.x``."""
        if self._returned is None:
            self._returned = frozenset(
                m.group(1) for m in _RETURN_SELF.finditer(self.text) if self._starts_word(m.start())
            )
        return self._returned

    def subscripted(self, name: str) -> bool:
        return "[" in self.followers(name)

    def reshaped(self, name: str) -> bool:
        after = self.followers(name)
        return "[" in after or not after.isdisjoint(_RESHAPED_BY) or self.argument_reshaped(name)

    def seen_through(self, name: str) -> bool:
        """``k.transpose(1, 2)[...]``: a subscript after axis-moving steps (``reshapes.see_through``).
        Any such step counts, subscripted or not: its arguments may hold brackets of any depth."""
        return not self.followers(name).isdisjoint(SEE_THROUGH)

    def cut(self, name: str) -> bool:
        """Subscripted, seen through, or cut by KV102's split/chunk/tensor_split/narrow."""
        after = self.followers(name)
        return "[" in after or not after.isdisjoint(_CUT_BY) or self.argument_reshaped(name)

    def argument_reshaped(self, name: str) -> bool:
        """``torch.narrow(k, ...)``, ``narrow(self.k, ...)``: a reshape whose first positional
        argument is a dotted name ending in ``name`` (what ``reshapes`` takes as its base)."""
        if self._reshaped_arguments is None:
            found = ()
            if not self.identifiers.isdisjoint(RESHAPE_CALLS):
                found = (m.group(1) for m in _ARGUMENT_RESHAPE.finditer(self.text))
            self._reshaped_arguments = frozenset(found)
        return name in self._reshaped_arguments

    def viewed(self, name: str) -> bool:
        """Can a KV202 view be about ``name``: its receiver's root, or the target assigned it?

        Read in the statements that mention a view call: a view's chain lies within one.
        """
        text, raw = self._view_text(), not self.reduced
        return (
            root_reaches(text, name, _VIEW_CALLS, SAME_TENSOR_METHODS, raw)
            or assigned_reaches(text, name, _VIEW_CALLS, raw)
            or _compiled(
                rf"{word_first(('reshape', 'unflatten', 'rearrange'))}{_GAP}\((?:{_GAP}\()*{_GAP}(?:\w+{_GAP}\.{_GAP})*{re.escape(name)}\b"
            ).search(text) is not None
        )

    def _view_text(self) -> str:
        if self._views is None:
            self._views = "\n".join(self._chunks_with(_VIEW_CALLS))
        return self._views

    def has_class(self) -> bool:
        """Is ``class`` a word of the text (not only a part of ``dataclass``)?"""
        return self.has_any(("class",))

    def has_any(self, words: Collection[str]) -> bool:
        """Is one of ``words`` (identifiers) a whole word of the text?"""
        if self._identifiers is not None:
            return not self._identifiers.isdisjoint(words)  # no scan of the text per word
        present = [word for word in words if word in self.text]
        if not present:
            return False
        return _compiled(rf"{word_first(present)}(?!\w)").search(self.text) is not None

    def names_containing(self, part: str, ignore_case: bool = False) -> set[str]:
        """Every identifier with ``part`` in it (any case: ``part`` is lower case)."""
        if self._identifiers is None and part not in (self.lower if ignore_case else self.text):
            return set()
        key = (part, ignore_case)
        found = self._containing.get(key)
        if found is None:
            found = self._containing[key] = frozenset(self._names_containing(part, ignore_case))
        return set(found)

    def _names_containing(self, part: str, ignore_case: bool) -> Iterable[str]:
        # The identifiers, one per line, searched for ``part`` in C; each hit's line is a name.
        # Lower-casing keeps every offset only for ASCII.
        if self._joined is None:
            self._joined = "\n".join(self.identifiers)
        joined = self._joined
        if ignore_case and not joined.isascii():
            return (n for n in self.identifiers if part in n.lower())
        if ignore_case:
            if self._joined_lower is None:
                self._joined_lower = joined.lower()
            haystack = self._joined_lower
        else:
            haystack = joined
        names, at = [], haystack.find(part)
        while at >= 0:
            start = haystack.rfind("\n", 0, at) + 1
            end = haystack.find("\n", at)
            end = len(haystack) if end < 0 else end
            names.append(joined[start:end])
            at = haystack.find(part, end)
        return names


def _word_offsets(text: str, words: Iterable[str]) -> Iterator[int]:
    """Where each of ``words`` occurs in ``text`` as a whole word (substring search in C, the
    boundaries checked here: an alternation of the words in ``re`` is tried at every offset)."""
    for word in words:
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if (at == 0 or not _is_word_char(text[at - 1])) and (end == len(text) or not _is_word_char(text[end])):
                yield at
            at = text.find(word, end)


def definition_lines(text: str) -> list[int]:
    """The offsets of the lines after the first that start a ``def``, ``class`` or decorator,
    as ``_DEFINITION`` finds them: the keywords found by substring search and their lines
    checked here, four times faster than trying the pattern at every newline."""
    starts = set()
    for word in ("def", "class", "@"):
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if word == "@" or end == len(text) or not _is_word_char(text[end]):
                line = text.rfind("\n", 0, at) + 1
                head = text[line:at]
                if line and (not head.strip(" \t") or (word == "def" and _ASYNC.fullmatch(head))):
                    starts.add(line)
            at = text.find(word, end)
    return sorted(starts)


_ASYNC = re.compile(r"[ \t]*async[ \t]+")
_BEFORE_A_DEF_NAME = re.compile(r"[ \t]*(?:async[ \t]+)?def[ \t]+")


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _kv101(f: _File) -> bool:
    extra = f.settings.extra_pairs
    return f.attention_context() and any(is_kv_tensor_name(k, extra) and f.reshaped(k) for k in f.k_names)


def _kv102(f: _File) -> bool:
    extra = f.settings.extra_pairs
    return f.attention_context() and any(
        is_kv_tensor_name(k, extra) and f.cut(k) and f.cut(value_counterpart(k, extra) or k)
        for k in f.k_names
    )


def _kv103(f: _File) -> bool:
    if not (f.attention_context() or any(word in f.lower for word in _CACHE_SCOPE_WORDS)):
        return False
    extra = f.settings.extra_pairs
    names = set().union(*(f.names_containing(part, ignore_case=True) for part in _CACHE_PARTS_SHORT))
    cache_names = [
        k for k in names
        if kv_side(k, extra) == "k" and is_kv_tensor_name(k, extra)
        and any(part.lower() in CACHE_PARTS for part in k.split("_"))
        and f.has_any([value_counterpart(k, extra) or k])
    ]
    if not cache_names:
        return False
    return f.has_any(INDEXED_CALLS) or any(f.subscripted(k) for k in cache_names)


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
    # what it returns is left to the module screen (``module_screens.kv105``), what an imported
    # one returns to its text screen (``module_screens.kv105_text``).
    if ("def" not in f.text and "import" not in f.text) or not f.attention_context():
        return set()
    extra = f.settings.extra_pairs
    keys = [k for k in f.k_names if is_kv_tensor_name(k, extra)]
    if not keys:
        return set()
    helpers = [name for name in cut_returning_defs(f.text) if f.text.count(name) >= 2]
    # A K name between the brackets of a call of a helper. Brackets are counted in the raw
    # text; where a quote or a comment lies before the close found, a string or comment may
    # have ended it early, and the search runs on to the next definition line (``chunks``: a
    # statement never crosses one).
    text = f.text
    if helpers:
        # The key is an argument by itself, a dotted name (``trim(self.k, n)``, ``trim(x, n=k)``),
        # as ``module_screens.kv105`` reads it: ``trim(k.t(), n)`` passes no key.
        key_argument = _compiled(
            rf"[(,=]{_GAP}(?:\({_GAP})*(?:\w+{_GAP}\.{_GAP})*{word_first(keys)}(?!\w){_GAP}(?:\){_GAP})*[,)]"
        )
        # One pattern for every helper: the names are the file's own, so nothing is reused.
        for call in re.compile(rf"{word_first(helpers)}{_GAP}\(").finditer(text):
            if call.start() and (text[call.start() - 1] == "." or _BEFORE_A_DEF_NAME.fullmatch(text, text.rfind("\n", 0, call.start()) + 1, call.start())):
                continue  # a method, or the helper's own ``def`` line
            start = call.end()
            end = _group_end(text, start)
            if any(c in text[start:end] for c in "'\"#"):
                after = _DEFINITION.search(text, start)
                end = after.start() if after else len(text)
            if key_argument.search(text, start - 1, min(end + 1, len(text))):
                return {""}
    # An imported helper (read from its file) cuts only a key passed first, and its result is
    # assigned or passed on: ``k = trim(k, n)``, ``attn(q, trim(self.k, n), v)``. Found from
    # the key's side (a few names, so the pattern is reused across files), the callee read
    # back from the bracket.
    imported = _from_imported(text) if "import" in text else set()
    if not imported:
        return set()
    called = set()
    key_first = _compiled(rf"\({_GAP}(?:\w+{_GAP}\.{_GAP})*{word_first(keys)}(?!\w|{_GAP}=(?!=))")
    for call in key_first.finditer(text):
        end = _blank_before(text, call.start())
        if end is None:
            return {""}  # a comment may stand between the callee and its bracket
        start = end
        while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        if text[start:end] in imported and _result_used(text, start):
            called.add(text[start:end])
    return called


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
_BRACKET = re.compile(r"[()\[\]{}]")


# A ``return`` line that can give a cut parameter: a subscript or a cutting call in it, a plain
# name, perhaps in parentheses (bound to a cut before), or an expression continued on the next lines; a comment may
# end the line.
_CUT_RETURN = re.compile(
    rf"^[ \t]+return\b(?:[^\n]*(?:\[|{word_first(tuple(RESHAPE_CALLS))})|(?:[ \t(]+\w+[ \t)]*|[^\n]*[(\\])[ \t]*(?:#[^\n]*)?$)",
    re.MULTILINE,
)


# ``from x import ...`` anywhere (after ``try:`` or ``;`` too, ``from.x``, ``from .import``):
# group 1 the leading dots, 2 the module, 3 what it imports, a bracketed list (its comments
# may hold a ``)``) or the rest of the line and the lines its continuations join. Literal
# first: ``re`` jumps from one ``from`` to the next.
_FROM_IMPORT = re.compile(
    r"from(?<![\w.]from)(?=[ \t.\\])(?:[ \t]|\\\r?\n)*(?=[\w.])(\.*)([\w.]*)(?:[ \t]|\\\r?\n)*import(?!\w)[ \t]*"
    r"(\((?:[^)#]|#[^\n]*(?![^\n]))*\)|(?:[^\n\\]|\\(?:\r?\n|.))*)"
)
_COMMENT = re.compile(r"#[^\n]*")
_ALIAS = re.compile(r"(\w+)(?:\s+as\s+(\w+))?")


def from_imports(text: str) -> Iterator[tuple[int, list[str], str, str]]:
    """(level, module parts, imported name, the name it binds) of each ``from`` import of
    ``text`` that ``_FROM_IMPORT`` finds."""
    for match in _FROM_IMPORT.finditer(text):
        names = _COMMENT.sub("", match.group(3)).strip("() \t\r\n\\")
        parts = match.group(2).split(".") if match.group(2) else []
        for item in names.replace("\\", " ").split(","):
            alias = _ALIAS.fullmatch(item.strip())
            if alias is not None:
                yield len(match.group(1)), parts, alias.group(1), alias.group(2) or alias.group(1)


@lru_cache(maxsize=4)
def _from_imported(text: str) -> frozenset[str]:
    """Every identifier a ``from x import ...`` statement names (aliases included), and more:
    the statement is looked for in strings and comments too. Asked by several conditions of
    the same text: computed once."""
    return frozenset(name for match in _FROM_IMPORT.finditer(text) for name in _IDENTIFIER.findall(match.group(3)))


def top_level_starts(text: str) -> list[re.Match[str]]:
    """``_TOP_LEVEL_START`` at each line in column 0 that starts a definition (group 1: a
    function's name), from ``definition_lines``."""
    found = []
    for line in (0, *definition_lines(text)):
        if line < len(text) and text[line] not in " \t" and (match := _TOP_LEVEL_START.match(text, line)):
            found.append(match)
    return found


_TOP_LEVEL_START = re.compile(r"^(?:(?:async[ \t]+)?def[ \t]+(\w+)|class\b|@)", re.MULTILINE)


def cut_returning_defs(text: str) -> list[str]:
    """The top-level functions that can be KV105 helpers, whose every ``return`` can give a
    cut of a parameter (``module_screens._may_cut_a_parameter``): rotary and other helpers
    that build new tensors (``torch.cat(...)``, ``q_embed, k_embed``), allocate
    (``return torch.empty(...)``) or return nothing cannot. A body runs to the next top-level
    definition (a comment in column 0 does not end it)."""
    starts = top_level_starts(text)
    found = []
    for here, after in zip(starts, [*starts[1:], None]):
        name = here.group(1)
        end = after.start() if after else len(text)
        # The one-pattern test first: most functions have no return that looks like a cut.
        if name and _a_return_may_cut(text, here.end(), end) and _every_return_may_cut(code_only(text[here.end():end])):
            found.append(name)
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
    Returns of a nested function are that function's, not this one's: with one in the body,
    any return may be.
    """
    if _NESTED_SCOPE.search(body):
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
    ``module_screens._cut_base`` reads one: a parameter subscripted or followed by a method
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
    ``parameters``?"""
    for match in _compiled(rf"(?<![\w.]){re.escape(name)}(?!\w)[^\n=]*=(?!=)").finditer(body):
        stop = _statement_end(body, match.end(), len(body))
        if stop is None or _may_cut(body[match.end():stop], parameters):
            return True
    return False


# A name, perhaps in parentheses (``return (out)``), across lines.
_PLAIN_NAME = re.compile(r"[\s\\(]*([^\W\d]\w*)[\s\\)]*")
_CUT_WORD = re.compile(rf"{word_first(tuple(RESHAPE_CALLS))}(?!\w)")


# A top-level class and its name (the module screens read it too).
TOP_LEVEL_CLASS = re.compile(r"^class[ \t]+(\w+)", re.MULTILINE)
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
    extra = f.settings.extra_pairs
    if extra.__class__ is not tuple:
        extra = tuple(map(tuple, extra))  # ``_twin`` caches by it
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
# A line that starts a ``def`` or ``class`` at any indentation: no statement crosses one.
_DEFINITION_LINE = re.compile(r"\n(?=[ \t]*(?:(?:async[ \t]+)?def|class)\b)")
_CLASS_NAME = re.compile(r"\n\f*class[ \t]+(\w+)")
_CLASS_HEAD = re.compile(r"class[ \t]+\w+[ \t]*")
# A method's statement that surely assigns ``self.X`` (group 1), alone or annotated with a
# plain (subscripted) name: ``self.v_proj = ...``, ``self.v_proj: nn.Linear = ...``. Nothing
# inside brackets can start so, so a line starting so starts a statement.
_SELF_DIRECT = re.compile(r"self[ \t]*\.[ \t]*(\w+)[ \t]*(?::[ \t]*[\w.]+(?:\[[\w., \t]*\])?[ \t]*)?=(?!=)")
_DEF_HEAD = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)")
_STRING_LEFT = re.compile(r'"[^"\n]*"')


@lru_cache(maxsize=4096)
def _twin(attr: str, extra: tuple[tuple[str, str], ...]) -> str | None:
    """The other side of K/V-side ``attr`` (``v_proj`` for ``k_proj`` and back), or None."""
    side = kv_side(attr, extra)
    if side is None:
        return None
    return (value_counterpart if side == "k" else key_counterpart)(attr, extra)


def _redeclaring_class(code: str, extra, local_bases: Callable[[], bool] = lambda: True) -> bool:
    """Can a top-level class of ``code`` (the text reduced by ``code_only``) pass
    ``module_screens.kv207``: a parent ``__init__`` call, a K/V-side ``self.`` target that a
    ``Linear`` follows in its statement whose twin the class does not surely define directly
    (``_surely_defined``), and a plain base named by a ``from x import`` or naming a
    top-level class (that one only when ``local_bases()``: the file names a K/V pair)?

    A class's text runs from its column-0 ``class`` line to the next column-0 ``def`` or
    ``class`` line; what follows the class there (other top-level statements) only adds to
    what is searched. The cheap tests go first; the file's identifiers (``local_bases``) are
    collected last."""
    starts = [m.end() for m in _CLASS_LINE.finditer(code)]
    first = _FIRST_CLASS.match(code)
    if first is not None:
        starts.insert(0, first.end())
    imported: frozenset[str] | None = None  # ``from x import``-ed names; None until needed
    local: set[str] | None = None  # the top-level class names, when a K/V pair is named
    for start in starts:
        after = _TOP_DEFINITION.search(code, start + 5)
        end = after.start() + 1 if after else len(code)
        if code.find("Linear", start, end) < 0 or not _calls_an_init(code, start, end):
            continue
        twins = _lonely_candidates(code, start, end, extra)
        if not twins:
            continue
        if twins <= _surely_defined(code[start:end]):
            continue
        bases = _bases(code, start, end)
        if bases is None:
            continue
        if bases is not True:
            if imported is None:
                imported = _from_imported(code)  # continuation lines included
            plain = _plain_bases(bases)
            if imported.isdisjoint(plain):
                if local is None:
                    local = set()
                    if local_bases():
                        local.update(_CLASS_NAME.findall(code))
                        if first is not None:
                            local.update(_CLASS_NAME.findall("\n" + code[first.end():code.find("\n", first.end())]))
                if local.isdisjoint(plain):
                    continue
        return True
    return False


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


def _statement_end(code: str, start: int, end: int) -> int | None:
    """Where the statement of reduced text that starts at ``start`` ends: the end of the first
    line after which its brackets are closed and no backslash continues it (a multi-line
    string's rest, indented by ``code_only`` on a later line, continues it too); None when the
    brackets do not add up."""
    depth = 0
    at = start
    while True:
        newline = code.find("\n", at, end)
        stop = end if newline < 0 else newline
        line = code[at:stop]
        counted = _STRING_LEFT.sub("", line) if '"' in line else line
        depth += (
            counted.count("(") + counted.count("[") + counted.count("{")
            - counted.count(")") - counted.count("]") - counted.count("}")
        )
        if newline < 0:
            return end
        if depth < 0:
            return None
        at = newline + 1
        if depth or line.rstrip().endswith("\\"):
            continue
        # Past blank lines, a line starting ' "' is the rest of a multi-line string.
        following = at
        while following < end and code[following] in " \t\r\n" and not code.startswith(' "', following):
            following += 1
        if not code.startswith(' "', following) or code.rfind("\n", 0, following) + 1 != following:
            return newline
        at = following


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
    ones ``module_screens.kv207`` looks up (not ``nn.Module``, ``Generic[T]``, keywords)."""
    if "(" in bases or "[" in bases or "{" in bases:
        items, depth, begin = [], 0, 0
        for i, char in enumerate(bases):
            if char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
            elif char == "," and depth == 0:
                items.append(bases[begin:i])
                begin = i + 1
        items.append(bases[begin:])
    else:
        items = bases.split(",")
    plain = []
    for item in items:
        item = item.replace("\\", " ").strip()
        if item.isidentifier():
            plain.append(item)
    return plain


def _surely_defined(text: str) -> set[str]:
    """Names that the class whose reduced text is ``text`` surely defines directly, as
    ``module_screens._direct_self_attrs`` reads them: its methods, and ``self.X`` assigned by
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


def _kv106(f: _File) -> bool:
    # A K-side scale name (``k_scale``, ``_k_scale``, ``key_descale``) with its V twin present.
    return "scale" in f.lower and any(is_scale_name(k) for k in f.k_names)


def _kv208(f: _File) -> bool:
    # A head-dim keyword argument of a call of a plain name (``Pool(..., head_dim=...)``, not
    # a ``def``'s parameter default) and a value head-dim name (it has "dim" or "size" in it,
    # any case) in one top-level definition: the call and the read lie in one function (the
    # screen's ``kv208``). The pool's class may be in another top-level definition or file:
    # no own unit.
    callees = _kv208_callees(f)
    if "" in callees:
        return True
    if not callees:
        return False
    known = set(TOP_LEVEL_CLASS.findall(f.text)) | (_from_imported(f.text) if "import" in f.text else set())
    return not callees.isdisjoint(known)


def head_dim_callees(text: str, settings: Settings) -> set[str]:
    """The plain names called with a head-dim keyword in a top-level definition that names a
    value head dim: the classes KV208 may read; ``""`` stands for a call whose callee the text
    cannot tell."""
    return _recalled("KV208", text, settings, _head_dim_callees)


def code_head_dim_callees(text: str, settings: Settings) -> set[str]:
    """``head_dim_callees`` read on ``text`` reduced to code, where no string or comment can
    hide a bracket: dearer, for the files whose raw text left a callee untold."""
    return _head_dim_callees(_File(code_only(text), settings, reduced=True))


def _kv208_callees(f: _File) -> set[str]:
    return _remembered("KV208", f, _head_dim_callees(f))


# The runner asks a module rule's text screen right after ``parse_plan`` asked the rule's
# condition of the same text: what the condition found then is kept (by rule: text, settings,
# facts of the last whole file), not worked out again.
_LAST: dict[str, tuple] = {}


def _remembered(code: str, f: _File, facts: T) -> T:
    if not f.reduced:
        _LAST[code] = (f.text, f.settings, facts)
    return facts


def _recalled(code: str, text: str, settings: Settings, find: Callable[[_File], T]) -> T:
    last = _LAST.get(code)
    if last and last[0] is text and last[1] == settings:
        return last[2]
    return find(_File(text, settings))


def _head_dim_callees(f: _File) -> set[str]:
    text = f.text
    if "=" not in text:
        return set()
    values = [n for n in f.names_containing("dim", True) | f.names_containing("size", True) if is_value_head_dim(n)]
    if not values:
        return set()
    named = set().union(*(f.names_containing(part, True) for part in (*_HEAD_DIM_PARTS, "d_v", "dv")))
    keywords = sorted(n for n in named if name_role(n) is Role.HEAD_DIM)
    value_word = _compiled(rf"{word_first(sorted(values))}(?!\w)")
    starts: list[int] | None = None
    callees = set()
    if not keywords:
        return callees
    # One scan for every keyword (a bracket or comma first lets ``re`` skip ahead).
    pattern = _compiled(rf"[(,]{_GAP}(?:{'|'.join(map(re.escape, keywords))}){_GAP}=(?!=)")
    brackets = _Brackets(text) if f.reduced else None
    for keyword in pattern.finditer(text):
        callee = _plain_callee(text, keyword.start(), brackets)
        if callee is None or callee in callees:
            continue
        if starts is None:
            starts = [m.start() for m in top_level_starts(text)]
        if value_word.search(text, *_top_level_region(text, starts, keyword.start())):
            callees.add(callee)
    return callees


class _Brackets:
    """The brackets of code-only text (every bracket in sight), each with the depth after it."""

    def __init__(self, code: str) -> None:
        self.offsets: list[int] = []
        self.depths: list[int] = []
        depth = 0
        for bracket in _BRACKET.finditer(code):
            depth += 1 if bracket.group() in "([{" else -1
            self.offsets.append(bracket.start())
            self.depths.append(depth)
        # Brackets that do not add up (``code_only`` misread a string): nothing can be told.
        self.balanced = depth == 0 and min(self.depths, default=0) >= 0

    def opener(self, at: int) -> int | None:
        """The offset of the innermost bracket open just after ``at``; None outside every
        bracket."""
        index = bisect_right(self.offsets, at) - 1
        depth = self.depths[index] if index >= 0 else 0
        if depth <= 0:
            return None
        # The bracket that opened this depth: the last one after which it was reached, going up.
        while index > 0 and not (self.depths[index] == depth and self.depths[index - 1] < depth):
            index -= 1
        return self.offsets[index]


def _plain_callee(text: str, at: int, brackets: _Brackets | None = None) -> str | None:
    """The plain name called with the argument list whose ``(`` or ``,`` is at ``at``; None
    for a ``def``'s parameters and a call of anything else (``x.Pool(``); ``""`` where it
    cannot be told (a string or comment may hide the bracket, unless ``brackets`` are those
    of ``text`` reduced to code)."""
    if brackets is not None:
        if not brackets.balanced:
            return ""
        opener = brackets.opener(at)
        # Outside every bracket: a name assigned (``n, head_dim = x.shape``).
        return None if opener is None else _callee_of(text, opener, at, code=True)
    depth = 0
    for bracket in reversed(list(_BRACKET.finditer(text, max(0, at - _CALL_REACH), at + 1))):
        if bracket.group() in ")]}":
            depth += 1
        elif depth:
            depth -= 1
        else:
            return _callee_of(text, bracket.start(), at, code=False)
    return ""


def _callee_of(text: str, opener: int, at: int, code: bool) -> str | None:
    line = text.rfind("\n", 0, opener) + 1
    if not code and any(c in text[line:at] for c in "#'\""):
        return ""
    if text[opener] != "(":
        return None  # a lambda's parameters in a list or dict display
    before = _CALLEE.search(text, line, opener)
    if before is None:
        return None if text[line:opener].strip() else ""  # the callee may be on the line before
    return None if before.group(1) else before.group(2)


# The name called by the bracket this ends at (group 2); group 1 when it is a ``def``,
# ``class`` or an attribute rather than a plain name.
_CALLEE = re.compile(r"(?:(def[ \t]+|class[ \t]+|\.[ \t]*)|(?<![\w.]))([^\W\d]\w*)[ \t]*\Z")
_CALL_REACH = 4000


def _top_level_region(text: str, starts: list[int], at: int) -> tuple[int, int]:
    """The span of the top-level definition around offset ``at`` (from its decorators to the
    next top-level line of ``_TOP_LEVEL_START``; the module's head before the first)."""
    index = bisect_right(starts, at)
    end = starts[index] if index < len(starts) else len(text)
    index -= 1
    while index > 0 and text[starts[index - 1]] == "@":
        index -= 1
    return (starts[index] if index >= 0 else 0), end


def _kv201(f: _File) -> bool:
    # Both projections are declared by a statement that calls a ``*Linear`` class.
    if "class" not in f.text or "Linear" not in f.text or not f.has_class():
        return False
    linears = frozenset(w for w in f.names_containing("Linear") if w.endswith("Linear"))
    return bool(linears) and bool(f.pairs_near(linears))


def _kv202(f: _File) -> bool:
    # The K view's statement names the K tensor (receiver root or assignment target), the V
    # view's statement the V one.
    if not f.has_any(_VIEW_CALLS):
        return False
    extra = f.settings.extra_pairs
    return any(
        f.viewed(k) and f.viewed(value_counterpart(k, extra) or k) for k in f.pairs_near(_VIEW_CALLS)
    )


def _kv209(f: _File) -> bool:
    facts = _remembered("KV209", f, _kv209_facts(f))
    return facts is not None and facts.holds(facts.imported)


def kv209_facts(text: str, settings: Settings) -> _Kv209Facts | None:
    """What ``_kv209`` read of ``text``: its verdict asked again with fewer imported helpers
    (``module_screens.kv209_text``)."""
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
        viewed = _named_with_a_view(self.f.code)
        return any(
            (k in through and twins[k] in viewed) or (twins[k] in through and k in viewed)
            for k in keys
        )


def _kv209_facts(f: _File) -> _Kv209Facts | None:
    # A call whose first argument is a name chain ending in a K (or V) of a pair, of a
    # function the file defines whose every ``return`` may be a view (read from its body,
    # ``_view_returning_defs``), or, called by its plain name, of a name a ``from x import``
    # binds (read from its module); the twin passed first to such a call too, or viewed. The
    # rest (the helper's arguments) is left to the module screen (``module_screens.kv209``),
    # an imported helper's body to its text screen (``module_screens.kv209_text``).
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
        # Per name (the same few recur across a tree: their patterns stay compiled), then what
        # stands before each occurrence: a bracket, a dot, or the start of a line the call's
        # bracket may have opened before.
        for match in _compiled(rf"{word_first((name,))}(?!\w)").finditer(text):
            start = i = match.start()
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
            after = _first_root_end(text, match.end())
            if after is None:
                continue
            callee = _BEFORE_ARGUMENT.search(text, max(0, start - 200), start)
            if callee is not None:
                # The call less its first argument, as the screen compares two: the callee and
                # the text from the end of the name's chain to the call's closing bracket (equal
                # texts close the same number of brackets, so they hold the same further
                # arguments); where a quote or comment may hide a bracket, this occurrence's own.
                close = _bracket_end(text, callee.end(3)) if after >= 0 else None
                rest = (callee.group(1), callee.group(2), text[after:close]) if close is not None else match.start()
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
    rf"(?<![\w.])(?:(self|cls){_GAP}\.{_GAP})?(\w+){_GAP}(\(){_GAP}(?:\({_GAP})*(?:\w+{_GAP}\.{_GAP})*\Z"
)


def _first_root_end(text: str, at: int) -> int | None:
    """Can the name ending at ``at`` be the root ``module_screens._first_root`` reads in a
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
def _named_with_a_view(code: str) -> frozenset[str]:
    """Every identifier in a statement of ``code`` (reduced by ``code_only``) with a view word
    in it: a superset of ``module_screens._viewed_names`` (the names in a view's receiver, its
    first argument, or the target it is assigned to), which are all in the view's statement.

    Statements are read from each ``def`` or ``class`` line (every such line of code starts a
    statement, outside any bracket) to the next; where their brackets do not balance, the
    whole stretch counts as one statement."""
    found: set[str] = set()
    if _VIEW_WORD.search(code) is None:
        return frozenset()
    cuts = [0, *(m.end() for m in _DEFINITION_LINE.finditer(code)), len(code)]
    for a, b in pairwise(cuts):
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
    return frozenset(found)


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
    as ``module_screens._may_return_a_view`` reads one: a view word in it, at least one
    ``return``, and every ``return`` a view call or a name, after axis-keeping steps
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
    names = names & frozenset(_DEF_NAME.findall(text))
    found = set()
    for name in names:
        verdicts = []
        for definition in _compiled(rf"def{_DEF_GAP}{re.escape(name)}(?!\w)").finditer(text):
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
            for definition in _compiled(rf"def{_DEF_GAP}{re.escape(name)}(?!\w)").finditer(code):
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
        return True  # a nested function's or class's returns are not this one's
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
_VIEWED = "<view>"
_NESTED_SCOPE = re.compile(rf"{word_first(('def', 'class'))}(?!\w)")
_RETURN_WORD = re.compile(rf"{word_first(('return',))}(?!\w)")
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
    """``body`` (reduced text) cut at every newline or ``;`` outside brackets and line
    continuations: its logical lines and simple statements. None when the brackets do not
    balance."""
    found, depth, start = [], 0, 0
    for part in _STATEMENT_PARTS.finditer(body):
        char = part.group()[0]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif char in "\n;" and not depth:
            found.append(body[start:part.start()])
            start = part.end()
    if depth:
        return None
    found.append(body[start:])
    return found


def _view_or_name(expression: str) -> str | None:
    """What ``module_screens._view_or_name`` makes of the expression ``expression`` (reduced
    text, one logical line): ``_VIEWED`` for what may be a view call, the name for a plain
    name, None for what surely is neither. Axis-keeping steps at its end are read through."""
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


def _kv203(f: _File) -> bool:
    # A KV head count's name has "head" or "group" in it (``sizes.is_kv_head_count_name``); the
    # split is of a fused QKV (its root says "qkv" or "query_key_value", any case), or unpacked
    # into three targets, the second K-side and the third V-side: both sides named in a chunk
    # (``_chunks_with``) that holds a split call.
    return (
        ("head" in f.text or "group" in f.text) and f.has_any(_SPLIT_CALLS)
        and any(is_kv_head_count_name(w) for w in f.names_containing("head") | f.names_containing("group"))
        and ("qkv" in f.lower or "query_key_value" in f.lower or _names_both_sides_near_a_split(f))
    )


def _names_both_sides_near_a_split(f: _File) -> bool:
    extra = f.settings.extra_pairs
    for chunk in f._chunks_with(_SPLIT_CALLS):
        sides = {kv_side(name, extra) for name in identifier_set(chunk)}
        if "k" in sides and "v" in sides:
            return True
    return False


_RETURN = word_first(("return",))


def _kv104(f: _File) -> bool:
    # A K-side name with its V twin present that is called (``self.k_proj(``), written through
    # (``k_cache[``, ``.copy_(``), assigned to its twin (``value = key.``) or returned twice.
    extra = f.settings.extra_pairs
    for k in f.k_names:
        if "(" in f.followers(k) and _call_assigned_to_a_value(f, k):
            return True
        if not is_kv_tensor_name(k, extra):
            continue
        v = value_counterpart(k, extra) or k
        if f.subscripted(k) or not f.followers(k).isdisjoint(_WRITTEN_BY) or f.followed_by(v, rf"{_GAP}={_GAP}\(*{_GAP}{k}\b"):
            return True
        if _compiled(rf"{_RETURN}{_GAP}\(?{_GAP}(?:\w+{_GAP}\.{_GAP})*{k}{_GAP},{_GAP}(?:\w+{_GAP}\.{_GAP})*{k}\b").search(f.text):
            return True
        if k in f.returned_attributes:
            return True
    return False


def _call_assigned_to_a_value(f: _File, k: str) -> bool:
    """Can a call of ``k`` be (part of) the value of an assignment to a V-side target
    (``v = self.k_proj(x)``, ``self.v_cache = torch.empty(self.get_k_shape())``)?

    Yes when a V-side name followed by ``=`` stands before the call on its line, or the call's
    statement may have begun on an earlier line: in code-only text, a bracket still open since
    the chunk's start or a backslash before the line; in raw text, any call.
    """
    text = f.text
    for match in _compiled(rf"{re.escape(k)}(?<![A-Za-z0-9_]{re.escape(k)}){_GAP}\(").finditer(text):
        at = match.start()
        if not f._starts_word(at):
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
        opened = text.count("(", start, line) + text.count("[", start, line) + text.count("{", start, line)
        closed = text.count(")", start, line) + text.count("]", start, line) + text.count("}", start, line)
        if opened > closed or text[start:line].rstrip(" \t\r\n").endswith("\\"):
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


def _kv204(f: _File) -> bool:
    # A class's ``*Linear`` K/V projection, viewed or reshaped with a shape read off a tensor.
    return (
        "class" in f.text and "Linear" in f.text and ("shape" in f.text or "size" in f.text)
        and f.has_any(("view", "reshape")) and f.has_class() and bool(f.k_names)
    )


def _kv205(f: _File) -> bool:
    # A class's ``*Linear`` projection viewed with a query head count (its name has "head", in
    # any case).
    return (
        "class" in f.text and "Linear" in f.text and "head" in f.lower and f.has_any(("view", "reshape"))
        and f.has_class()
    )


def _kv206(f: _File) -> bool:
    # A key head-dim name (``qk_head_dim``, ``head_k_dim``, ``d_k``) with its value twin present,
    # and a view or an allocation to use it in.
    if not f.has_any(_HEAD_DIM_USES):
        return False
    names = set().union(*(f.names_containing(part, True) for part in _HEAD_DIM_PARTS))
    return any((twin := key_head_dim_twin(n)) is not None and f.has_any((twin,)) for n in names)


# Every key head-dim name (``names.name_role``) has one of these in it, in any case; a value
# head dim's may have ``d_v`` or ``dv`` instead.
_HEAD_DIM_PARTS = ("head", "channels", "rope", "nope", "rotary", "d_k", "dk")


_HEAD_DIM_USES = (
    "view", "reshape", "unflatten", "empty", "zeros", "ones", "full", "randn", "rand",
    "new_empty", "new_zeros", "new_ones", "new_full",
)


def _kv301(f: _File) -> bool:
    # A class attribute pair ``self.k_cache`` / ``self.v_cache``.
    if "class" not in f.text or "self" not in f.text or not f.has_class():
        return False
    extra = f.settings.extra_pairs
    return any(
        is_kv_tensor_name(k, extra) and f.followed_by("self", rf"\.{_GAP}{k}\b")
        and f.followed_by("self", rf"\.{_GAP}{value_counterpart(k, extra) or k}\b")
        for k in f.k_names
    )


def _always(_: _File) -> bool:
    return True


_CONDITIONS: dict[str, Callable[[_File], bool]] = {
    "KV101": _kv101, "KV102": _kv102, "KV103": _kv103,
    "KV201": _kv201, "KV202": _kv202, "KV203": _kv203,
    "KV104": _kv104, "KV105": _kv105, "KV106": _kv106, "KV204": _kv204, "KV205": _kv205, "KV206": _kv206, "KV207": _kv207, "KV208": _kv208,
    "KV209": _kv209, "KV301": _kv301,
}


def _is_definition(segment: Segment) -> bool:
    return segment.definition


def _is_class(segment: Segment) -> bool:
    return segment.kind == "class"


# For each known condition, the top-level statements that hold all the facts any one of its
# findings rests on; the rest of the file is the module's part. KV101-KV202 reason inside one
# function or class scope (or the module scope); KV203 pairs a split with a KV head count
# anywhere in one class, or anywhere outside classes (the module and its functions).
_OWN_UNIT: dict[Callable[[_File], bool], Callable[[Segment], bool]] = {
    _kv101: _is_definition, _kv102: _is_definition, _kv103: _is_definition,
    _kv201: _is_definition, _kv202: _is_definition, _kv203: _is_class,
    _kv104: _is_definition, _kv106: _is_definition, _kv204: _is_class, _kv205: _is_class, _kv206: _is_definition,
    _kv301: _is_class,
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
    # Live rules whose facts lie in different definitions (KV105, KV207, KV208, KV209): when any is
    # left, the file goes whole unless their ``module_screens`` all say no; ``ranges`` then
    # stand for the other rules.
    module_rules: frozenset[str | None] = frozenset()

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
    passing = known.scanner.passing(text, lambda: bool(raw.k_names))
    if not passing:
        return NOTHING
    conditions = list(dict.fromkeys(known.conditions[code] for code in passing))
    module_live = [c for c in conditions if c not in _OWN_UNIT and c(raw)]
    unit_conditions = [c for c in conditions if c in _OWN_UNIT]
    # The raw text settles most files. Once one per-definition condition holds on it, the rest
    # are asked of the reduced text only: each is asked there anyway, and one that holds on
    # the reduced text alone only makes the plan larger.
    if not module_live and not any(c(raw) for c in unit_conditions):
        return NOTHING
    if _LONE_CR.search(text):
        # Old Mac line ends: code_only and segments count lines by "\n" only.
        return ParsePlan(True, rules=frozenset(_CODES.get(c) for c in [*module_live, *unit_conditions] if c(raw)))
    module_rules = frozenset(_CODES.get(c) for c in module_live)
    code = raw.code
    reduced = _File(code, settings, reduced=True)
    live = [c for c in unit_conditions if c(reduced)]
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
    ranges, unit_rules = [], []
    for segment in segments:
        relevant = [c for c in live if _OWN_UNIT[c](segment)]
        if relevant:
            unit = _File(segment.text, settings, reduced=True)
            held = frozenset(_CODES.get(c) for c in relevant if c(unit))
            if held:
                ranges.append((segment.start, segment.end))
                unit_rules.append(held)
    return ParsePlan(False, tuple(ranges), codes, tuple(unit_rules), module_rules)


_CODES = {condition: code for code, condition in _CONDITIONS.items()}


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
