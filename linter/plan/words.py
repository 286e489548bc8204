"""Identifiers and words in source text, the primitives every condition builds on: the
identifier pattern and ``identifier_set``, ``word_first`` patterns (a literal first, its word
boundary checked behind), patterns compiled once for every file (``_compiled``), and ``_GAP``,
what may stand between two tokens inside brackets.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from functools import lru_cache

from linter.plan.code_only import is_word_char as _is_word_char  # one definition: code_only needs it first


_IDENTIFIER = re.compile(r"[^\W\d]\w*")


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


# Anything the tokenizer lets stand between two tokens inside brackets.
# Each alternative matches in only one way (a comment runs to its newline), so no backtracking
# blow-up on banner lines such as ``########``. Possessive (``*+``), as is a name before a dot
# in the patterns that read name chains (``\w++``): what follows each is a token neither can
# match, so giving back never helps, and ``re`` no longer tries it (3.5% less CPU over sglang
# and vllm).
_GAP = r"(?:\s|\\\r?\n|#[^\n]*\n)*+"
# The dot between the parts of a dotted name (``re.split`` on it parts the name).
_DOT = re.compile(rf"{_GAP}\.{_GAP}")
# A call's opening bracket, where a callee's name ends.
_CALL_BRACKET = re.compile(rf"{_GAP}\(")


# Every ASCII byte that cannot be part of an identifier, to a space; every other byte (UTF-8's
# multi-byte sequences included) kept.
_NON_WORD_BYTES = bytes(c if c >= 128 or chr(c).isalnum() or c == 95 else 32 for c in range(256))


try:
    from linter._identifiers import identifiers as _compiled_identifiers
    from linter._identifiers import joined as _compiled_joined
    from linter._identifiers import spans as _compiled_spans
except ImportError:  # a build without a C compiler: the readings below answer alike
    _compiled_identifiers = _compiled_joined = _compiled_spans = None


def identifier_lines(text: str) -> str:
    """The distinct identifiers of ``text`` (``identifier_set``'s), one a line, in no
    particular order: what a file's trigger words and K/V pairs are looked for in.

    The compiled helper builds the string from the text's own characters, with no string per
    identifier (half the time of the set and its join over sglang's files; most files are
    asked nothing else)."""
    if _compiled_joined is not None:
        return _compiled_joined(text)
    return "\n".join(identifier_set(text))


def identifier_set(text: str) -> frozenset[str]:
    """The distinct identifiers of ``text``, as ``_IDENTIFIER.findall`` finds them.

    The compiled helper (``linter/_identifiers.c``) answers where the build made one: it
    tells repeated names apart in C, so only the distinct ones become strings (half the time
    of the reading below on ASCII text, which makes one string per occurrence, a third on
    other text). Without it:

    The text is encoded to UTF-8, its ASCII non-word bytes turned to spaces and split, all in C
    (3x faster than the expression on ASCII text; ``str.translate`` is slow on non-ASCII text,
    ``bytes.translate`` is not). Each run of word characters less its leading digits is an
    identifier; a run with a non-ASCII character in it goes to the expression, which finds in
    it what it finds there in the whole text (the ASCII non-word characters around a run end
    every identifier).
    """
    if _compiled_identifiers is not None:
        return _compiled_identifiers(text)
    data = text.encode("utf-8", "surrogatepass").translate(_NON_WORD_BYTES)
    if data.isascii():
        # Decoded once, split in C; only the words led by a digit (``128``, ``0x10``) are
        # visited (10% faster on the trees' files than one decode per word).
        words = set(data.decode("ascii").split())
        led = [word for word in words if word[0] <= "9"]
        if led:
            words.difference_update(led)
            words.update(word.lstrip("0123456789") for word in led)
            words.discard("")
        return frozenset(words)
    found = set()
    for word in set(data.split()):
        if word.isascii():
            if word[:1].isdigit():
                word = word.lstrip(b"0123456789")
                if not word:
                    continue
            found.add(word.decode("ascii"))
        else:
            found.update(_IDENTIFIER.findall(word.decode("utf-8", "surrogatepass")))
    return frozenset(found)


def named_matches(pattern: re.Pattern[str], text: str, names: Collection[str]) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` as though its group 1 (``(\\w++)``, a whole name) were an
    alternation of ``names``: its matches whose name is one of them, each where that pattern
    would match, the search going on just after the start of a match of another name (the
    alternation fails there and is tried at the next character; after a match, past its end).

    One pattern for every file: the names are a file's own (KV208's head-dim keywords), and a
    pattern of them was compiled for that file alone, a quarter of a millisecond each, over
    a hundred times a tree."""
    at = 0
    while (match := pattern.search(text, at)) is not None:
        if match.group(1) in names:
            yield match
            at = match.end()
        else:
            at = match.start() + 1


def word_spans(text: str, words: Iterable[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each whole-word occurrence of each of ``words`` in ``text``.

    Found by substring search, the boundaries checked after each hit: most names occur a few
    times, and a pattern compiled for a name one file alone uses cost more than the search
    (compiling them was a twentieth of the pre-filter's time on sglang). The compiled helper
    (``linter/_identifiers.c``) searches and checks in C where the build made one (1.8% off
    a whole run over sglang and vllm, one process). Without it, a
    word found often (``k`` inside other words, ``self``) is scanned for by a pattern from
    its ``_FEW``-th occurrence on, in C; such words are few, so their patterns serve every
    file.

    The spans of the last text asked about are kept, by word: the conditions of one file ask
    for the same names again (a fifth of the 33,000 searches on sglang repeat one).
    """
    if text is not _last_text[0]:
        _last_text[0], _last_spans[0] = text, {}
    known = _last_spans[0]
    for word in words:
        spans = known.get(word)
        if spans is None:
            spans = known[word] = _compiled_spans(text, word) if _compiled_spans is not None else list(_spans(text, word))
        yield from spans


# The text of the spans kept (held, so its identity cannot pass to another), and its spans.
_last_text: list[str | None] = [None]
_last_spans: list[dict[str, list[tuple[int, int]]]] = [{}]


def _spans(text: str, word: str) -> Iterator[tuple[int, int]]:
    at, found = text.find(word), 0
    while at >= 0:
        if found == _FEW:
            escaped = re.escape(word)
            pattern = _compiled(rf"{escaped}(?<![A-Za-z0-9_]{escaped})(?![A-Za-z0-9_])")
            if text.isascii():  # ``re`` checked every boundary (``isascii`` takes no scan)
                yield from (match.span() for match in pattern.finditer(text, at))
                return
            for match in pattern.finditer(text, at):
                at, end = match.span()
                # ``re`` checked the ASCII boundaries; a letter of another script is left.
                if (at == 0 or not _is_word_char(text[at - 1])) and (end == len(text) or not _is_word_char(text[end])):
                    yield at, end
            return
        found += 1
        end = at + len(word)
        if (at == 0 or not _is_word_char(text[at - 1])) and (end == len(text) or not _is_word_char(text[end])):
            yield at, end
        at = text.find(word, end)


_FEW = 16
