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
configured ``extra-pairs`` pair; ``prefilter`` asks it of the text less comments and strings),
the one fact every pair rule needs. A file passes a rule's trigger when
it holds at least one word of every group (and, with ``PAIRED``, a pair). A rule without a
trigger always passes. Write the cheap, rare words first: groups are tried in order and
``PAIRED`` (which collects the file's identifiers) only after every word group passed::

    class ClassCacheOneSide(Rule):
        # A class, and a K/V pair of names.
        trigger = Trigger(("class",), PAIRED)

A trigger must be a necessary condition of the rule's findings: true for every file on which
the rule can report. ``prefilter`` then asks its finer (and dearer) questions only for the
rules whose trigger passed; ``tests/linter/test_fast_path_equivalence.py`` compares the whole
fast path with parsing every file.

The trigger is read from the rule's source file, not by importing it: the rule modules import
libcst, which a run that parses nothing never loads. So the declaration must stay a literal
(strings, tuples, ``AnyCase``, ``ATTENTION``, ``PAIRED``) written as ``trigger = Trigger(...)``;
``tests/linter/test_triggers.py`` checks that what is read equals the class attribute.

The scan: every distinct word of the enabled rules' triggers is looked for at most once per
file (plain substring search, which runs at memory speed), and a rule stops at its first
group without a hit. Measured on vllm 0.33.0 (50 MB of Python), one combined regular
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
# (``prefilter`` and ``scopes``): an attention word in any case, or a name with a K/V
# projection word in it; settings add the extra attention callables' tails.
ATTENTION = ("attn", "Attn", "ATTN", "attention", "Attention", "ATTENTION", "mla", "Mla", "MLA",
             "proj", "linear", "dense", "wk", "wv", "to_k", "to_v",
             # Hand-written attention (``scopes.Scope.hand_attention``) is read by its softmax.
             "softmax")
_ATTENTION_ANY_CASE = ("attn", "attention", "mla")


# The K/V pair group: evaluated by the caller (``prefilter`` knows the identifiers and the
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
        self._rules: list[tuple[str, tuple[tuple[str, ...], ...]]] = []
        for code, trigger in triggers.items():
            groups = () if trigger is None else tuple(_keys(g, tails) for g in trigger.groups)
            self._rules.append((code, groups))
        self._wordlike = frozenset(k for _, groups in self._rules for g in groups for k in g if _WORDLIKE.match(k))
        # The word-like keys by case: all looked for at once among the identifiers.
        self._among_words = {
            lower: tuple(sorted(k[1:] if lower else k for k in self._wordlike if (k[0] == "\0") == lower))
            for lower in (False, True)
        }

    def passing(
        self, text: str, paired: Callable[[], bool] | None = None, words: Callable[[], str] | None = None
    ) -> set[str]:
        """The codes whose trigger ``text`` passes; ``paired()`` says whether the text holds a
        K/V pair of names (asked at most once; without it, ``PAIRED`` always passes).

        ``words()``: the text's distinct identifiers, one per line (asked at most once). A
        word made of word characters is a substring of the text exactly when it is one of
        an identifier, and that list is a fraction of the text: most files lack most words,
        and each absent word was a scan of the whole text.
        """
        seen: dict[str, bool] = {}
        # (searched among the identifiers?, lower-cased?) -> the text searched, built once.
        haystacks: dict[tuple[bool, bool], str] = {}
        # Lower-cased? -> the word-like keys found among the identifiers, all looked for at once.
        among: dict[bool, set[str]] = {}
        wordlike = self._wordlike
        found = set()
        for code, groups in self._rules:
            for group in groups:
                for key in group:
                    hit = seen.get(key)
                    if hit is None:
                        if key == _PAIRED_KEY:
                            hit = paired is None or paired()
                        else:
                            slot = (words is not None and key in wordlike, key[0] == "\0")
                            present = among.get(slot[1]) if slot[0] else None
                            if present is None:
                                haystack = haystacks.get(slot)
                                if haystack is None:
                                    plain = haystacks.get((slot[0], False))
                                    if plain is None:
                                        plain = haystacks[slot[0], False] = words() if slot[0] else text  # type: ignore[misc]
                                    haystack = haystacks[slot] = plain.lower() if slot[1] else plain
                                if slot[0]:
                                    present = among[slot[1]] = _present(haystack, self._among_words[slot[1]])
                            needle = key[1:] if slot[1] else key
                            hit = needle in present if present is not None else needle in haystack
                        seen[key] = hit
                    if hit:
                        break
                else:
                    break  # no word of this group: the rule has nothing to say
            else:
                found.add(code)
        return found


# A search key (``"\0"`` marks any case) all of word characters: found among the identifiers.
_WORDLIKE = re.compile(r"\0?\w+\Z")


try:
    from linter._identifiers import present as _present
except ImportError:  # a build without a C compiler: one search per word

    def _present(text: str, words: tuple[str, ...]) -> set[str]:
        return {word for word in words if word in text}
_PAIRED_KEY = PAIRED[0]


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
