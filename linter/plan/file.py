"""``_File``: the facts about one file's text that the rule conditions share, each computed when
first asked and kept (identifiers, K/V pairs, attention context, what follows a name, the
chunks between definition lines), with the patterns only it reads.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator

from linter.plan.chains import assigned_reaches, cut_reading, root_reaches
from linter.plan.code_only import code_only
from linter.model.names import (
    ATTENTION_CALLABLES,
    K_SIDE_TOKENS,
    RESHAPE_CALLS,
    SAME_TENSOR_METHODS,
    SEE_THROUGH,
    is_attention_word,
    is_kv_projection,
    kv_side,
    value_counterpart,
)
from linter.plan.lines import definition_lines
from linter.plan.statements import _statement_extent
from linter.plan.vocabulary import _VIEW_CALLS
from linter.plan.words import _DOT, _GAP, _compiled, identifier_lines, identifier_set, word_first, word_spans
from linter.settings import Settings


try:
    from linter._identifiers import lines_with as _compiled_lines_with
    from linter._identifiers import with_part as _compiled_with_part
except ImportError:  # a build without a C compiler: the searches below answer alike
    _compiled_lines_with = _compiled_with_part = None

_K_TOKENS = tuple(sorted(K_SIDE_TOKENS))


def _k_candidates(ids: Iterable[str] | str) -> set[str]:
    """The identifiers (names, or a str of names one per line) with a K-side part (``k``,
    ``cache_k``, ``key_states``): candidates for ``kv_side``.

    The compiled helper (``linter/_identifiers.c``) compares each name's parts in place where
    the build made one (about a third of the time of the search below). Without it, each
    identifier is wrapped in ``_`` and put on a line of its own, so a part is ``_k_`` found by
    substring search."""
    if _compiled_with_part is not None:
        return _compiled_with_part(ids, _K_TOKENS)
    return _k_candidates_searched(ids)


def _k_candidates_searched(ids: Iterable[str] | str) -> set[str]:
    wrapped = "_" + (ids.replace("\n", "_\n_") if isinstance(ids, str) else "_\n_".join(ids)) + "_"
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


# What follows a reshape call's name in ``narrow(k, ...)``, ``torch.narrow(self.k, ...)``:
# group 1 is the tail of the first positional argument when that argument is a dotted name
# (star arguments before it are skipped).
_ARGUMENT_OF_RESHAPE = re.compile(
    rf"{_GAP}\({_GAP}(?:\*[^,()]*,{_GAP})*(?:\({_GAP})*(?:\w++{_GAP}\.{_GAP})*(\w++){_GAP}\)*{_GAP}[,)]"
)
# Callables that are attention calls without an attention word in their name (none today).
_UNWORDED_CALLABLES = frozenset(c for c in ATTENTION_CALLABLES if not is_attention_word(c))


# Every name ``pairs.is_kv_projection`` accepts contains one of these.
_PROJECTION_WORDS = ("proj", "linear", "dense", "wk", "wv", "to_k", "to_v")


# The calls KV102 reads as cuts beside slices (``rules.kv102.screen._SPLIT_CALLS``).
_SPLIT_CALLS = frozenset({"split", "chunk", "tensor_split", "narrow"})
# What may follow a name: a bracket, or a dot and an attribute's name.
_FOLLOWER = re.compile(rf"{_GAP}(?:([\[(])|\.{_GAP}(\w+))")
_SELF_ATTRIBUTE = re.compile(rf"self(?<![A-Za-z0-9_]self)(?={_GAP}\.{_GAP}(\w+))")
# ``name = value`` or ``name: annotation = value`` (an annotation may run over lines; to the
# first ``=`` after the colon, which at worst reads a later statement's value).
_ASSIGNED_NAME = re.compile(rf"{_GAP}(?::[^=]*?)?={_GAP}\(*{_GAP}(\w+)")
# A function-style view and the dotted name it takes first (looked ahead, so a view inside
# that name, ``reshape(x.reshape(k))``, is matched too).
_FUNCTION_VIEW = re.compile(
    rf"{word_first(('reshape', 'unflatten', 'rearrange'))}(?={_GAP}\((?:{_GAP}\()*{_GAP}((?:\w++{_GAP}\.{_GAP})*\w+))"
)
_RETURN_SELF = re.compile(rf"return(?<![A-Za-z0-9_]return){_GAP}self{_GAP}\.{_GAP}(\w+)")


class _File:
    """Lazily computed facts about one file's text, shared by the rule conditions."""

    def __init__(
        self, text: str, settings: Settings, reduced: bool = False, source: str | None = None, whole: bool = False,
    ) -> None:
        self.text = text
        self.settings = settings
        # Reduced by ``code_only``: no strings or comments, so brackets can be counted.
        self.reduced = reduced
        # The raw text this one is reduced from (None: not reduced, or read without it).
        self.source = source
        # The whole file's code, not one definition of it: its definitions are asked next.
        self.whole = whole
        self._identifiers: frozenset[str] | None = None
        self._pairs: list[str] | None = None
        self._cuts: list[int] | None = None
        self._with: dict[frozenset[str], list[str]] = {}
        self._attention: bool | None = None
        self._reshaped_arguments: frozenset[str] | None = None
        self._views: str | None = None
        self._view_arguments: frozenset[str] | None = None
        self._code: str | None = None
        self._followers: dict[str, frozenset[str]] = {}
        self._cut_readings: dict[str, frozenset[str]] = {}
        self._assigned: dict[str, frozenset[str]] = {}
        self._self_attributes: frozenset[str] | None = None
        self._returned: frozenset[str] | None = None
        self._joined: str | None = None
        self._lined: str | None = None
        self._joined_lower: str | None = None
        self._containing: dict[tuple[str, bool], frozenset[str]] = {}
        self._statements: dict[int, tuple[list[int], int]] = {}

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
    def lower_names(self) -> str:
        """The identifiers, one per line, lower-cased (computed once). A word of word
        characters occurs in the lower-cased text exactly when it occurs in one of these (a
        name's leading digits, left out, cannot start a word that begins with a letter); of a
        reduced text, these are the names of code alone."""
        if self._joined_lower is None:
            self._joined_lower = self.joined_identifiers().lower()
        return self._joined_lower

    @property
    def identifiers(self) -> frozenset[str]:
        if self._identifiers is None:
            # Split from the joined names where they were read (cheaper than a second scan).
            joined = self._joined
            self._identifiers = identifier_set(self.text) if joined is None else frozenset(joined.split("\n") if joined else ())
        return self._identifiers

    @property
    def k_names(self) -> list[str]:
        """K-side identifiers whose V counterpart also occurs."""
        if self._pairs is None:
            self._pairs = self.pairs_among(self.joined_identifiers())
        return self._pairs

    def joined_identifiers(self) -> str:
        """The distinct identifiers, one per line (computed once)."""
        if self._joined is None:
            self._joined = identifier_lines(self.text)
        return self._joined

    def among_identifiers(self, words: Collection[str]) -> frozenset[str]:
        """Those of ``words`` that are identifiers of the text (``identifiers & words``).

        Looked up in the joined identifiers, a line each, rather than in a set of them: a few
        substring searches of that short string cost less than splitting it into a set, which
        most files are asked for nothing else."""
        if self._identifiers is not None:
            return self._identifiers & frozenset(words)
        if self._lined is None:
            self._lined = f"\n{self.joined_identifiers()}\n"
        lined = self._lined
        return frozenset(w for w in words if f"\n{w}\n" in lined)

    def pairs_among(self, ids: frozenset[str] | str) -> list[str]:
        """The K-side names among ``ids`` (a set, or names one per line) whose V counterpart
        is among them too. Most texts have no candidate; the few that do ask for a few
        counterparts, each one search of the lines."""
        extra = self.settings.extra_pairs
        if isinstance(ids, str):
            lines = f"\n{ids}\n"

            def has(name: str | None) -> bool:
                return name is not None and f"\n{name}\n" in lines
        else:
            has = ids.__contains__
        candidates = _k_candidates(ids)
        candidates.update(k for k, _ in extra if has(k))
        return [
            name for name in candidates
            if kv_side(name, extra) == "k" and has(value_counterpart(name, extra))
        ]

    def pairs_near(self, words: frozenset[str]) -> list[str]:
        """K-side names whose K and V sides both share a statement with one of ``words``."""
        return self.pairs_among(identifier_lines("\n".join(self._chunks_with(words))))

    def attention_context(self) -> bool:
        if self._attention is None:
            self._attention = (
                # ``scopes`` also reads multi-head latent attention (``forward_mla``) as attention.
                "attn" in self.lower_names or "attention" in self.lower_names or "mla" in self.lower_names
                # Hand-written attention (``scopes.Scope.hand_attention``) needs a softmax call.
                or "softmax" in self.joined_identifiers()
                or self.has_any(_UNWORDED_CALLABLES | self.extra_tails)
                or any(is_kv_projection(n) for part in _PROJECTION_WORDS for n in self.names_containing(part))
            )
        return self._attention

    def chunk_start(self, at: int) -> int:
        """Where the chunk holding offset ``at`` starts (see ``_chunks_with``)."""
        if self._cuts is None:
            self._cuts = [0, *definition_lines(self.text), len(self.text)]
        return self._cuts[bisect_right(self._cuts, at) - 1]

    def statement_start(self, at: int) -> int | None:
        """Where the statement of reduced text holding offset ``at`` begins, read statement by
        statement from its chunk's start (where a statement begins); None when the brackets
        do not add up before ``at``.

        The chunk's statements are read once, up to its first that does not add up: asked
        from the chunk's start for every offset, a long function cost its length per call.
        """
        start = self.chunk_start(at)
        known = self._statements.get(start)
        if known is None:
            text, starts = self.text, [start]
            cuts = self._cuts  # set by ``chunk_start``
            end = cuts[bisect_right(cuts, start)] if start < cuts[-1] else len(text)  # type: ignore[index]
            while True:
                stop, broken = _statement_extent(text, starts[-1], end)
                if stop is None or stop >= end:
                    break
                starts.append(stop + 1)
            known = self._statements[start] = (starts, broken if stop is None else len(text))
        starts, broken = known
        if broken < at:
            return None
        return starts[bisect_right(starts, at) - 1]

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

    def _starts_word(self, start: int) -> bool:
        return start == 0 or not (self.text[start - 1].isalnum() or self.text[start - 1] == "_")

    def followers(self, name: str) -> frozenset[str]:
        """What follows ``name`` anywhere in the text (past blanks, comments and line
        continuations): ``[``, ``(``, or an attribute's name (``.view`` gives ``view``).

        One scan per name answers every question about it: each whole-word occurrence
        (``word_spans``), what follows matched where it ends, so an occurrence inside
        another's attribute (``k.k[0]``) is still seen.
        """
        found = self._followers.get(name)
        if found is None:
            text = self.text
            found = set()
            for _, end in word_spans(text, (name,)):
                after = _FOLLOWER.match(text, end)
                if after is not None:
                    found.add(after.group(1) or after.group(2))
            found = self._followers[name] = frozenset(found)
        return found

    def assigned_names(self, name: str) -> frozenset[str]:
        """The first name of every value assigned to ``name`` (``v = k``, ``v = (k.t())``,
        ``v: Tensor = k.view(...)``)."""
        found = self._assigned.get(name)
        if found is None:
            text = self.text
            found = self._assigned[name] = frozenset(
                match.group(1) for _, end in word_spans(text, (name,)) if (match := _ASSIGNED_NAME.match(text, end))
            )
        return found

    @property
    def self_attributes(self) -> frozenset[str]:
        """The ``x`` of every ``self.x``: ``followers("self")`` less the brackets."""
        if self._self_attributes is None:
            if self.text.isascii():  # no letter of another script before a ``self``: ``re`` reads it all
                self._self_attributes = frozenset(_SELF_ATTRIBUTE.findall(self.text))
            else:
                self._self_attributes = self.followers("self") - {"[", "("}
        return self._self_attributes

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
        """Can ``rules.kv101.screen._kv101_anywhere`` read a cut of ``name``: a subscript that cuts
        (``k[:n]``, not ``k[0]`` or ``k[:, None]``) or a reshape call (``k.narrow(...)``),
        after axis-moving steps or not, or ``name`` (so stepped) first in a reshape's
        arguments. A step alone (``k.float()``) is no cut."""
        reading = self.cut_reading(name)
        return (
            "[cut" in reading or "?" in reading or not reading.isdisjoint(RESHAPE_CALLS)
            or ("," in reading and not self.identifiers.isdisjoint(RESHAPE_CALLS))
            or self.argument_reshaped(name)
        )

    def cut(self, name: str) -> bool:
        """Can ``rules.kv102.screen._kv102_anywhere`` read a cut of ``name``: a subscript of slices
        only, or a split/chunk/tensor_split/narrow, as ``reshaped`` reads a cut."""
        reading = self.cut_reading(name)
        return (
            "[slices" in reading or "?" in reading or not reading.isdisjoint(_SPLIT_CALLS)
            or ("," in reading and not self.identifiers.isdisjoint(_SPLIT_CALLS))
            or self.argument_reshaped(name)
        )

    def cut_reading(self, name: str) -> frozenset[str]:
        """``chains.cut_reading`` of ``name`` (computed once per name)."""
        found = self._cut_readings.get(name)
        if found is None:
            found = self._cut_readings[name] = cut_reading(self.text, name, SEE_THROUGH, not self.reduced)
        return found

    def argument_reshaped(self, name: str) -> bool:
        """``torch.narrow(k, ...)``, ``narrow(self.k, ...)``: a reshape whose first positional
        argument is a dotted name ending in ``name`` (what ``reshapes`` takes as its base)."""
        if self._reshaped_arguments is None:
            # Each reshape call's name found by substring search, the rest matched where it
            # ends: one expression scanning for an alternation of the names was tried at every
            # offset (a tenth of a second per thousand units on transformers).
            text, found = self.text, set()
            for at, end in word_spans(text, self.identifiers & RESHAPE_CALLS):
                match = _ARGUMENT_OF_RESHAPE.match(text, end)
                if match is not None:
                    found.add(match.group(1))
            self._reshaped_arguments = frozenset(found)
        return name in self._reshaped_arguments

    def viewed(self, name: str) -> bool:
        """Can a KV202 view be about ``name``: its receiver's root, the target assigned it, or
        a part of the dotted name a function-style view takes first (``reshape(self.k, s)``)?

        Read in the statements that mention a view call: a view's chain lies within one.
        """
        text, raw = self._view_text(), not self.reduced
        return (
            root_reaches(text, name, _VIEW_CALLS, SAME_TENSOR_METHODS, raw)
            or assigned_reaches(text, name, _VIEW_CALLS, raw)
            or name in self._function_view_arguments()
        )

    def _function_view_arguments(self) -> frozenset[str]:
        if self._view_arguments is None:
            self._view_arguments = frozenset(
                part for match in _FUNCTION_VIEW.finditer(self._view_text()) for part in _DOT.split(match.group(1))
            )
        return self._view_arguments

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
        if self._joined is not None:
            # The identifiers were read: a search of them each (a whole word is an identifier).
            return bool(self.among_identifiers(words))
        present = [word for word in words if word in self.text]
        if not present:
            return False
        return _compiled(rf"{word_first(present)}(?!\w)").search(self.text) is not None

    def names_containing(self, part: str, ignore_case: bool = False) -> set[str]:
        """Every identifier with ``part`` in it (any case: ``part`` is lower case)."""
        if self._identifiers is None and not ignore_case and part not in self.text:
            return set()
        key = (part, ignore_case)
        found = self._containing.get(key)
        if found is None:
            found = self._containing[key] = frozenset(self._names_containing(part, ignore_case))
        return set(found)

    def _names_containing(self, part: str, ignore_case: bool) -> Iterable[str]:
        # The identifiers, one per line, searched for ``part`` in C; each hit's line is a name.
        # Lower-casing keeps every offset only for ASCII.
        joined = self.joined_identifiers()
        if ignore_case and not joined.isascii():
            return (n for n in self.identifiers if part in n.lower())
        if ignore_case:
            haystack = self.lower_names
        else:
            haystack = joined
        if _compiled_lines_with is not None:
            return _compiled_lines_with(haystack, joined, part)  # the loop below, in C
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
    return (at for at, _ in word_spans(text, words))
