"""The text a rule needs before it can report: each rule's ``trigger``, and one scan for all.

A rule declares, beside its own code, the words a file must contain for the rule to have
anything to say about it::

    class GqaEqualQkvSplit(Rule):
        # A split call, and a KV head count (its name has "head" or "group" in it).
        trigger = Trigger(("chunk", "split"), ("head", "group"))

Each positional group is a tuple of substrings, matched as they are written; ``AnyCase(...)``
matches its (lower-case) words in any case; ``ATTENTION`` is the attention vocabulary (any
spelling of "attn"/"attention"/"mla", the K/V projection words, and the tails of the
``extra-attention-callables`` of the configuration); ``PAIRED`` stands for a K-side identifier
and its V twin both present in code (``k_cache`` and ``v_cache``, ``key`` and ``value``, or a
configured ``extra-pairs`` pair; ``text_plan`` asks it of the text less comments and strings),
the one fact every pair rule needs. A file passes a rule's trigger when
it holds at least one word of every group (and, with ``PAIRED``, a pair). A rule without a
trigger always passes. Write the cheap, rare words first: groups are tried in order and
``PAIRED`` (which collects the file's identifiers) only after every word group passed::

    class ClassCacheOneSide(Rule):
        # A class, and a K/V pair of names.
        trigger = Trigger(("class",), PAIRED)

A trigger must be a necessary condition of the rule's findings: true for every file on which
the rule can report. ``text_plan`` then asks its finer (and dearer) questions only for the
rules whose trigger passed; ``tests/linter/test_fast_path_equivalence.py`` compares the whole
fast path with parsing every file.

The trigger is read from the rule's source file, not by importing it: the rule modules import
libcst, which a run that parses nothing never loads. So the declaration must stay a literal
(strings, tuples, ``AnyCase``, ``ATTENTION``, ``PAIRED``) written as ``trigger = Trigger(...)``;
``tests/linter/test_triggers.py`` checks that what is read equals the class attribute.

The scan: every distinct word of the enabled rules' triggers is looked for once per file, all
before any rule is asked (plain substring search, which runs at memory speed); each group is
then one set test, and a rule stops at its first group without a hit (``PAIRED``, the dear
one, is asked only there). Measured on vllm 0.33.0 (50 MB of Python), one combined regular
expression over the same words took 1.2 s, fifteen substring searches 0.36 s. The words made
of word characters are looked for among the file's identifiers, all in one pass where the
compiled helper was built (``linter/_identifiers.c``'s ``present``: 1.8% less CPU over sglang
and vllm than a search per word, in four A/B runs).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path


class AnyCase(tuple):
    """A group of lower-case words matched in any case (on the lower-cased text)."""

    def __new__(cls, *words: str) -> AnyCase:
        return super().__new__(cls, words)


# The attention vocabulary a pair rule needs before it reads anything as attention code
# (``text_plan`` and ``scopes``): an attention word in any case, or a name with a K/V
# projection word in it; settings add the extra attention callables' tails.
ATTENTION = ("attn", "Attn", "ATTN", "attention", "Attention", "ATTENTION", "mla", "Mla", "MLA",
             "proj", "linear", "dense", "wk", "wv", "to_k", "to_v",
             # Hand-written attention (``scopes.Scope.hand_attention``) is read by its softmax.
             "softmax")
_ATTENTION_ANY_CASE = ("attn", "attention", "mla")


# The K/V pair group: evaluated by the caller (``text_plan`` knows the identifiers and the
# configured pairs); a one-element tuple so that it is a group like any other.
PAIRED = ("\x00paired",)


class Trigger:
    """All of ``groups`` must have a word in the file's text (see the module docstring)."""

    __slots__ = ("groups",)

    def __init__(self, *groups: tuple[str, ...]) -> None:
        for group in groups:
            if not isinstance(group, tuple) or not group or not all(isinstance(w, str) and w for w in group):
                raise TypeError(f"a trigger group is a non-empty tuple of words, not {group!r}")
        self.groups = tuple(AnyCase(*(w.lower() for w in g)) if isinstance(g, AnyCase) else tuple(g) for g in groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trigger) and _key(self.groups) == _key(other.groups)

    def __hash__(self) -> int:
        return hash(_key(self.groups))

    def __repr__(self) -> str:
        return f"Trigger{self.groups!r}"


def _key(groups: tuple) -> tuple:
    return tuple((isinstance(g, AnyCase), g) for g in groups)


class Scanner:
    """Which of some rules' triggers a text passes; built once per run."""

    def __init__(self, triggers: dict[str, Trigger | None], extra_callables: Iterable[str] = ()) -> None:
        tails = tuple(c.rsplit(".", 1)[-1] for c in extra_callables)
        # Each group as search keys: a word, or "\0" + word for a search in the lower-cased text.
        self._rules: list[tuple[str, tuple[frozenset[str], ...]]] = []
        for code, trigger in triggers.items():
            groups = () if trigger is None else tuple(
                _PAIRED_GROUP if g == PAIRED else frozenset(_keys(g, tails)) for g in trigger.groups
            )
            self._rules.append((code, groups))
        keys = {k for _, groups in self._rules for g in groups if g is not _PAIRED_GROUP for k in g}
        self._plain = frozenset(k for k in keys if k[0] != "\0")
        self._any_case = frozenset(k for k in keys if k[0] == "\0")
        wordlike = {k for k in keys if _WORDLIKE.match(k)}
        self._plain_unwordlike = self._plain - wordlike
        self._any_case_unwordlike = self._any_case - wordlike
        # The word-like keys by case: all looked for at once among the identifiers.
        self._among_words = {
            lower: tuple(sorted(k[1:] if lower else k for k in wordlike if (k[0] == "\0") == lower))
            for lower in (False, True)
        }

    def passing(
        self, text: str, paired: Callable[[], bool] | None = None, words: Callable[[], str] | None = None,
        lower_words: Callable[[], str] | None = None,
    ) -> set[str]:
        """The codes whose trigger ``text`` passes; ``paired()`` says whether the text holds a
        K/V pair of names (asked at most once, and only once a rule's other groups passed;
        without it, ``PAIRED`` always passes).

        ``words()``: the text's distinct identifiers, one per line (asked at most once). A
        word made of word characters is a substring of the text exactly when it is one of
        an identifier, and that list is a fraction of the text: most files lack most words,
        and each absent word was a scan of the whole text. ``lower_words()``: those identifiers
        lower-cased, where the caller keeps them (the conditions read them too).
        """
        hits = self._hits(text, words, lower_words)
        pair: bool | None = None
        found = set()
        for code, groups in self._rules:
            for group in groups:
                if group is _PAIRED_GROUP:
                    if pair is None:
                        pair = paired is None or paired()
                    if not pair:
                        break
                elif hits.isdisjoint(group):
                    break  # no word of this group: the rule has nothing to say
            else:
                found.add(code)
        return found

    def _hits(
        self, text: str, words: Callable[[], str] | None, lower_words: Callable[[], str] | None = None
    ) -> set[str]:
        """Every search key of the run's triggers that ``text`` holds, found all at once: a
        set test per group then replaces a lookup per word (the loop over the rules' words
        was a twentieth of the pre-filter's time on sglang)."""
        if words is None:
            lowered = text.lower() if self._any_case else ""
            return {k for k in self._plain if k in text} | {k for k in self._any_case if k[1:] in lowered}
        names = words()
        hits = {k for k in self._plain_unwordlike if k in text}
        hits.update(_present(names, self._among_words[False]))
        if self._among_words[True]:
            hits.update("\0" + w for w in _present(lower_words() if lower_words else names.lower(), self._among_words[True]))
        if self._any_case_unwordlike:
            lowered = text.lower()
            hits.update(k for k in self._any_case_unwordlike if k[1:] in lowered)
        return hits


# A search key (``"\0"`` marks any case) all of word characters: found among the identifiers.
_WORDLIKE = re.compile(r"\0?\w+\Z")


try:
    from linter._identifiers import present as _present
except ImportError:  # a build without a C compiler: one search per word

    def _present(text: str, words: tuple[str, ...]) -> set[str]:
        return {word for word in words if word in text}
# The PAIRED group, asked of the caller's ``paired()`` instead of the text.
_PAIRED_GROUP = frozenset(PAIRED)


def _keys(group: tuple[str, ...], tails: tuple[str, ...]) -> tuple[str, ...]:
    if group == PAIRED:
        return PAIRED
    if isinstance(group, AnyCase):
        return tuple("\0" + w for w in group)
    if group == ATTENTION:
        # The spellings seen in practice first (no lower-casing), any case last.
        return (*group, *tails, *("\0" + w for w in _ATTENTION_ANY_CASE))
    return group


# ``trigger = Trigger(`` at class level in a rule module.
_DECLARATION = re.compile(r"^[ \t]+trigger[ \t]*(?::[^=\n]*)?=[ \t]*(Trigger\()", re.MULTILINE)
_NAMES = {"ATTENTION": ATTENTION, "PAIRED": PAIRED}


@cache
def declared_trigger(path: str) -> Trigger | None:
    """The ``trigger = Trigger(...)`` a rule module declares, read without importing it."""
    text = Path(path).read_text(encoding="utf-8")
    match = _DECLARATION.search(text)
    if match is None:
        return None
    start = match.start(1)
    end = text.find(")", start)
    while end != -1:
        try:
            tree = ast.parse(text[start:end + 1], mode="eval")
        except SyntaxError:
            end = text.find(")", end + 1)
            continue
        return _evaluate(tree.body, f"{path}:{text.count(chr(10), 0, start) + 1}")
    raise ValueError(f"{path}: the trigger declaration never closes")


def _evaluate(node: ast.expr, where: str) -> object:
    """A literal trigger expression: strings, tuples, ``AnyCase(...)``, ``ATTENTION``, ``PAIRED``,
    ``Trigger(...)``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e, where) for e in node.elts)
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id == "AnyCase":
            return AnyCase(*(_evaluate(a, where) for a in node.args))
        if node.func.id == "Trigger":
            return Trigger(*(_evaluate(a, where) for a in node.args))
    raise ValueError(
        f"{where}: a trigger is written with strings, tuples, AnyCase(...), ATTENTION and PAIRED only"
    )
