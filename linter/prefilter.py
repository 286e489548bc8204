"""Prove, from the text alone, that a file cannot produce a finding, so libcst never parses it.

Each rule gets a necessary condition derived from what its detection needs before it can
report; a file is parsed only when some enabled rule's condition holds. Every condition
over-approximates: identifiers are collected from the whole text (strings and comments too),
and "followed by ``[``" tolerates any whitespace, line continuation or comment in between, so a
condition can be true for a file without findings but never false for one with findings. A rule
this module does not know is always run. ``tests/linter/test_fast_path_equivalence.py`` and the
benchmark compare the result with the slow path (every file parsed).

The conditions, by rule:

- every pair rule needs a K-side name and its V counterpart (``pairs.value_counterpart``, with
  the configured extra pairs) both present;
- KV101/KV102 need attention context (an attention word, an attention callable, a K/V
  projection name) and a K tensor name that is subscripted (KV102: both sides) or reshaped;
- KV103 needs attention or cache-manager context and a K *cache* name that is subscripted or an
  indexed gather/scatter call;
- KV201 needs a class, a ``*Linear`` constructor, and paired names;
- KV202 needs a view/reshape/unflatten/rearrange call and paired names;
- KV203 needs a chunk/split call and a KV-head-count name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable

from linter.pairs import (
    ATTENTION_CALLABLES,
    K_SIDE_TOKENS,
    is_attention_word,
    is_kv_projection,
    is_kv_tensor_name,
    kv_side,
    value_counterpart,
)
from linter.reshapes import RESHAPE_CALLS
from linter.rules.base import Rule
from linter.settings import Settings
from linter.sizes import is_kv_head_count_name

_IDENTIFIER = re.compile(r"[^\W\d]\w*")
# Identifiers with a K-side part (``k``, ``cache_k``, ``key_states``): candidates for kv_side.
# Matched against the file's distinct identifiers, one per line.
_K_CANDIDATE = re.compile(rf"^(?:\w*_)?(?:{'|'.join(sorted(K_SIDE_TOKENS))})(?:_\w*)?$", re.MULTILINE)
# Identifiers that can be K/V projections (``pairs.is_kv_projection``) or KV head counts.
_PROJECTION_CANDIDATE = re.compile(r"^(?:\w*(?:proj|linear|dense)\w*|wk|wv|to_k|to_v)$", re.MULTILINE)
_HEAD_COUNT_CANDIDATE = re.compile(r"^\w*(?:head|group)\w*$", re.MULTILINE)
# Anything the tokenizer lets stand between two tokens inside brackets.
# Each alternative matches in only one way (a comment runs to its newline), so no backtracking
# blow-up on banner lines such as ``########``.
_GAP = r"(?:\s|\\\r?\n|#[^\n]*\n)*"
_RESHAPE_ALT = "|".join(sorted(RESHAPE_CALLS))
# ``torch.narrow(k, ...)`` / ``narrow(k, ...)``: the tensor is an argument, not the receiver.
_RESHAPE_WORD = re.compile(rf"\b(?:{_RESHAPE_ALT})\b")
_TENSOR_NAMESPACE = re.compile(rf"\b(?:torch|Tensor){_GAP}\.{_GAP}$")
# Callables that are attention calls without an attention word in their name (none today).
_UNWORDED_CALLABLES = frozenset(c for c in ATTENTION_CALLABLES if not is_attention_word(c))
# Mirrors of the rules' own vocabularies (KV103's cache words and indexed calls, KV202's views,
# KV203's splits); a rule that grows its vocabulary must grow these too, and the equivalence
# test fails until it does.
_CACHE_PARTS = frozenset({
    "cache", "caches", "pool", "pools", "buf", "buffer", "buffers", "pages", "past", "mem", "memory",
})
_CACHE_SCOPE = re.compile(r"kv|cache|pool", re.IGNORECASE)
_INDEXED_CALLS = frozenset({
    "index_copy_", "index_copy", "index_put_", "index_put", "index_add_", "index_fill_",
    "index_select", "scatter_", "scatter", "scatter_add_", "masked_scatter_",
    "npu_scatter_nd_update_", "npu_scatter_nd_update", "scatter_update_", "scatter_update",
})
_DEFINITION = re.compile(r"^(?=[ \t]*(?:(?:async[ \t]+)?def|class)\b|[ \t]*@)", re.MULTILINE)
_TOP_LEVEL = re.compile(r"^(?:(?:async[ \t]+)?def\b|class\b|@)", re.MULTILINE)
# A column-0 line that can start a module-level statement (closing brackets and comments cannot).
_MODULE_LINE = re.compile(r"^[^\s#)\]}]", re.MULTILINE)
_VIEW_CALLS = frozenset({"view", "reshape", "unflatten", "rearrange"})
_SPLIT_CALLS = frozenset({"chunk", "split", "tensor_split"})


class _File:
    """Lazily computed facts about one file's text, shared by the rule conditions."""

    def __init__(self, text: str, settings: Settings) -> None:
        self.text = text
        self.settings = settings
        self._identifiers: frozenset[str] | None = None
        self._pairs: list[str] | None = None
        self._lower: str | None = None
        self._chunks: list[str] | None = None

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def identifiers(self) -> frozenset[str]:
        if self._identifiers is None:
            self._identifiers = frozenset(_IDENTIFIER.findall(self.text))
        return self._identifiers

    @property
    def identifier_lines(self) -> str:
        """The distinct identifiers, one per line, for anchored regexes."""
        return "\n".join(self.identifiers)

    @property
    def k_names(self) -> list[str]:
        """K-side identifiers whose V counterpart also occurs."""
        if self._pairs is None:
            extra = self.settings.extra_pairs
            ids = self.identifiers
            candidates = set(_K_CANDIDATE.findall(self.identifier_lines))
            candidates.update(k for k, _ in extra if k in ids)
            self._pairs = [
                name for name in candidates
                if kv_side(name, extra) == "k" and value_counterpart(name, extra) in ids
            ]
        return self._pairs

    def attention_context(self) -> bool:
        if "attn" in self.lower or "attention" in self.lower:
            return True
        ids = self.identifiers
        extra_tails = {c.rsplit(".", 1)[-1] for c in self.settings.extra_attention_callables}
        return bool(ids & (_UNWORDED_CALLABLES | extra_tails)) or any(
            is_kv_projection(w) for w in _PROJECTION_CANDIDATE.findall(self.identifier_lines)
        )

    @property
    def chunks(self) -> list[str]:
        """The text cut before every ``def``/``class``/decorator line.

        Such a line always starts a new statement, so one statement never spans two chunks
        (the one thing this assumes: no string literal inside a statement has a line that
        starts like a definition).
        """
        if self._chunks is None:
            self._chunks = _DEFINITION.split(self.text)
        return self._chunks

    def together(self, name: str, words: Collection[str]) -> bool:
        """Does some statement mention identifier ``name`` and one of ``words``?"""
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        return any(
            any(word in chunk for word in words) and pattern.search(chunk) is not None
            and not set(_IDENTIFIER.findall(chunk)).isdisjoint(words)
            for chunk in self.chunks
        )

    def followed_by(self, name: str, pattern: str) -> bool:
        # No leading \b: a literal prefix lets ``re`` skip ahead; the boundary is checked here.
        for match in re.finditer(rf"{re.escape(name)}{_GAP}{pattern}", self.text):
            start = match.start()
            if start == 0 or not (self.text[start - 1].isalnum() or self.text[start - 1] == "_"):
                return True
        return False

    def subscripted(self, name: str) -> bool:
        return self.followed_by(name, r"\[")

    def reshaped(self, name: str) -> bool:
        return self.subscripted(name) or self.followed_by(name, rf"\.{_GAP}(?:{_RESHAPE_ALT})\b") or (
            self.function_reshape()
        )

    def function_reshape(self) -> bool:
        """A reshape called as a function (``torch.narrow(k, ...)``), taking the tensor as an argument."""
        if self.identifiers.isdisjoint(RESHAPE_CALLS):
            return False
        for match in _RESHAPE_WORD.finditer(self.text):
            before = self.text[max(0, match.start() - 200):match.start()]
            if not before.rstrip().endswith(".") or _TENSOR_NAMESPACE.search(before):
                return True
        return False

    def has_any(self, words: Collection[str]) -> bool:
        return any(word in self.text for word in words) and not self.identifiers.isdisjoint(words)


def _kv101(f: _File) -> bool:
    extra = f.settings.extra_pairs
    return bool(f.k_names) and f.attention_context() and any(
        is_kv_tensor_name(k, extra) and f.reshaped(k) for k in f.k_names
    )


def _kv102(f: _File) -> bool:
    extra = f.settings.extra_pairs
    return bool(f.k_names) and f.attention_context() and any(
        is_kv_tensor_name(k, extra) and f.subscripted(k) and f.subscripted(value_counterpart(k, extra) or k)
        for k in f.k_names
    )


def _kv103(f: _File) -> bool:
    extra = f.settings.extra_pairs
    cache_names = [
        k for k in f.k_names
        if is_kv_tensor_name(k, extra) and any(part.lower() in _CACHE_PARTS for part in k.split("_"))
    ]
    if not cache_names:
        return False
    if not (f.attention_context() or _CACHE_SCOPE.search(f.text)):
        return False
    return f.has_any(_INDEXED_CALLS) or any(f.subscripted(k) for k in cache_names)


def _kv201(f: _File) -> bool:
    # Both projections are declared by a statement that calls a ``*Linear`` class.
    extra = f.settings.extra_pairs
    linears = {w for w in f.identifiers if w.endswith("Linear")}
    return "class" in f.text and bool(linears) and any(
        f.together(k, linears) and f.together(value_counterpart(k, extra) or k, linears)
        for k in f.k_names
    )


def _kv202(f: _File) -> bool:
    # The K view's statement names the K tensor (receiver root or assignment target), the V
    # view's statement the V one.
    extra = f.settings.extra_pairs
    return f.has_any(_VIEW_CALLS) and any(
        f.together(k, _VIEW_CALLS) and f.together(value_counterpart(k, extra) or k, _VIEW_CALLS)
        for k in f.k_names
    )


def _kv203(f: _File) -> bool:
    return ("head" in f.text or "group" in f.text) and f.has_any(_SPLIT_CALLS) and any(
        is_kv_head_count_name(w) for w in _HEAD_COUNT_CANDIDATE.findall(f.identifier_lines)
    )


def _always(_: _File) -> bool:
    return True


# Rules whose every finding comes from facts inside one function or class scope (or the
# module scope); KV203 pairs a split with a head count anywhere in the module, so it is not.
_SCOPED = frozenset({_kv101, _kv102, _kv103, _kv201, _kv202})
_CONDITIONS: dict[str, Callable[[_File], bool]] = {
    "KV101": _kv101, "KV102": _kv102, "KV103": _kv103,
    "KV201": _kv201, "KV202": _kv202, "KV203": _kv203,
}


def may_have_findings(text: str, rules: Iterable[type[Rule]], settings: Settings) -> bool:
    """False only when none of ``rules`` can report anything on ``text``."""
    whole = _File(text, settings)
    candidates = [c for c in map(_condition, rules) if c(whole)]
    if not candidates or any(c not in _SCOPED for c in candidates):
        return bool(candidates)
    parts = [_File(unit, settings) for unit in units(text)]
    return any(c(part) for c in candidates for part in parts)


def units(text: str) -> list[str]:
    """Pieces of ``text`` such that every function or class scope lies inside one of them.

    The text is cut before each column-0 ``def``/``class``/decorator line (a top-level
    definition, which runs until the next one). Module-level statements can sit in any piece
    after a definition's body, so every piece that has a column-0 line besides its header is
    also part of one more unit, their concatenation, where the module scope's facts meet.
    """
    blocks = _blocks(text)
    module = [b for b in blocks if _MODULE_LINE.search(b, 1) or not _TOP_LEVEL.match(b)]
    return [*blocks, "\n".join(module)]


def _blocks(text: str) -> list[str]:
    # A column-0 "def" inside a triple-quoted string (a doctest, a code template) is not a
    # definition: cut only where the triple quotes seen so far are balanced.
    blocks: list[str] = []
    start = counted = doubles = singles = 0
    for match in _TOP_LEVEL.finditer(text):
        cut = match.start()
        doubles += text.count('"""', counted, cut)
        singles += text.count("'''", counted, cut)
        counted = cut
        if cut > start and not doubles % 2 and not singles % 2:
            blocks.append(text[start:cut])
            start = cut
    blocks.append(text[start:])
    return blocks


def _condition(rule: type[Rule]) -> Callable[[_File], bool]:
    # Only kvlint's own rules have known conditions; any other rule (a test's) always runs.
    if not rule.__module__.startswith("linter.rules."):
        return _always
    return _CONDITIONS.get(rule.code, _always)
