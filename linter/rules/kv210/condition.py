"""KV210 needs, in one class (or function), a call of a view, reshape, ``rearrange``,
allocation or block pointer whose statement names a K/V side (``k = k.view(...)``,
``self.v_cache = torch.zeros(...)``, ``rearrange(self.k_proj(x), ...)``) and whose arguments
name a query head count while a KV head count is named in the unit, or a key or shared head
dim (a ``.shape``/``.size`` read, a Triton kernel's ``K``/``BK``) while a value head dim is. A
``getattr`` stands in for any of these names (in code-only text its string is gone), and a
statement whose start cannot be found stands for any side.
"""

from __future__ import annotations

import re
from functools import lru_cache

from linter.model.size_roles import (
    KERNEL_TWINS, KEYWORD_TWINS, attention_output, gradient_side, key_dim, kv_length_name, length_name, makes_buffers,
    query_heads, value_dim, value_dim_twins,
)
from linter.model.names import Role, is_query_name, kv_side, name_role
from linter.plan.chains import bracket_groups
from linter.plan.file import _File
from linter.plan.words import identifier_set

# Identifiers (whole words) of the calls the rule reads.
_SHAPE_WORDS = frozenset({
    "view", "reshape", "unflatten", "rearrange", "empty", "zeros", "ones", "full", "rand", "randn",
    "empty_strided", "new_empty", "new_zeros", "new_ones", "new_full", "make_block_ptr",
})


# The value-side tiles and dims a kernel's host may compute from the key's (``BV``, not ``V``).
_VALUE_TILES = frozenset(KERNEL_TWINS.values()) - {"V"}
_AS_QUERY = frozenset({"expand_as", "view_as", "reshape_as"})
# ``self.n_kv_heads = 8``: a name bound to a number (the rule asks whether it counts KV heads).
_NUMBER_BOUND = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t(]*[0-9]")


def _statements(f: _File, ids: frozenset[str], kv_counts: bool) -> bool:
    """The rule's questions of statements rather than shapes: a value tile, twin size
    keywords, K/V shaped as the query beside a KV length, a K/V buffer helper, a KV head count
    written as a number."""
    if not ids.isdisjoint(_VALUE_TILES) or any(k in ids and v in ids for k, v in KEYWORD_TWINS.items()):
        return True
    if not ids.isdisjoint(_AS_QUERY) and any(map(kv_length_name, f.names_containing("len", ignore_case=True))):
        return True
    if not kv_counts:
        return False
    if any(map(makes_buffers, f.names_containing("cache", ignore_case=True) | f.names_containing("kv", ignore_case=True)
               | f.names_containing("buffer", ignore_case=True) | f.names_containing("pool", ignore_case=True)
               | f.names_containing("past", ignore_case=True))):
        return True
    return any(name_role(m.group(1)) is Role.KV_HEADS for m in _NUMBER_BOUND.finditer(f.text))


# An escape that can spell a letter, digit or underscore in a string.
_NAMING_ESCAPE = re.compile(r"\\[xuUN0-7]")


def _read_by_getattr(f: _File) -> frozenset[str] | None:
    """The words a ``getattr`` of ``f`` may read by name: its strings' words, which code-only
    text has lost and the text it was read from (``_File.source``) still holds; a raw text's
    identifiers hold them already. None where they are unknown: no source, or an escape that
    may spell a name (``"num\\x5fheads"``)."""
    if f.reduced and f.source is None:
        return None
    whole = f.source if f.reduced else f.text
    if _NAMING_ESCAPE.search(whole):
        return None
    return identifier_set(whole) if f.reduced else frozenset()


def _kv210(f: _File) -> bool:
    ids = f.identifiers  # one set for the many single-word questions below
    wild = "getattr" in ids
    read = _read_by_getattr(f) if wild else frozenset()
    unit_wild = read is None
    counts = f.names_containing("head", ignore_case=True) | f.names_containing("group", ignore_case=True)
    kv_counts = unit_wild or any(name_role(n) is Role.KV_HEADS for n in (*counts, *(read or ())))
    if _statements(f, ids, kv_counts):
        return True
    if ids.isdisjoint(_SHAPE_WORDS):
        return False
    kernel = any(key in ids and value in ids for key, value in KERNEL_TWINS.items())
    # A length read off a query's shape, beside the keys' own length.
    lengths = any(map(kv_length_name, f.names_containing("len", ignore_case=True))) and any(map(is_query_name, ids))
    dims = (f.names_containing("dim", ignore_case=True) | f.names_containing("size", ignore_case=True)
            | f.names_containing("channels", ignore_case=True) | f.names_containing("d_v", ignore_case=True)
            | f.names_containing("dv", ignore_case=True))
    value_dims = unit_wild or kernel or any(_value_dim(n) for n in (*dims, *(read or ())))
    if not kv_counts and not value_dims and not lengths:
        return False
    extra = f.settings.extra_pairs
    text, raw = f.text, not f.reduced
    for at, _, inside, close in bracket_groups(text, _SHAPE_WORDS, raw):
        if close is None:
            return True
        sizes = identifier_set(text[inside:close])
        asked = (kv_counts and any(query_heads(n) for n in sizes)) or (
            lengths and any(length_name(n) and not kv_length_name(n) for n in sizes)) or (value_dims and (
            any(map(_key_size, sizes)) or (("shape" in sizes or "size" in sizes) and any(kv_side(n, extra) == "k" for n in sizes))))
        if not asked:
            # Only a getattr in the statement may still name a size in its string, which
            # code-only text has lost: in the brackets, or before them in their chunk.
            if not wild:
                continue
            if "getattr" in sizes:
                return True
            if f.reduced and "getattr" not in text[f.chunk_start(at):at]:
                continue
        # Finding where the statement starts costs more than all the questions above.
        start = f.statement_start(at) if f.reduced else None
        if start is None:
            return True
        prefix = identifier_set(text[start:at])
        # A ``getattr`` in the statement may name a side or a size in its string, which
        # code-only text has lost.
        if wild and ("getattr" in prefix or "getattr" in sizes):
            return True
        if asked and ("[" in text[start:at] or any(kv_side(n, extra) or gradient_side(n) or attention_output(n)
                                                   for n in prefix | sizes)):
            return True
    return False


# Asked of the same names file after file.
_value_dim = lru_cache(maxsize=1 << 16)(value_dim)


@lru_cache(maxsize=1 << 16)
def _key_size(name: str) -> bool:
    """A key or shared head dim or a kernel's key dim: a size the rule questions in a V shape
    (as it does the key's ``.shape``/``.size`` read)."""
    return key_dim(name) or bool(value_dim_twins(name)) or name in KERNEL_TWINS


CONDITION = _kv210
