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
    KERNEL_TWINS, KEYWORD_TWINS, allocates, attention_output, gradient_side, key_dim, kv_length_name, length_name, makes_buffers,
    query_heads, value_dim, value_dim_twins,
)
from linter.model.families import FAMILY_PARTS
from linter.model.key_norms import key_norm_name
from linter.model.names import Role, is_query_name, kv_side, name_role
from linter.model.tile_offsets import VALUE_TILES
from linter.plan.chains import bracket_groups
from linter.plan.file import _File
from linter.plan.words import identifier_set

# A model family's name (``model.families``) in any identifier: the evidence of a KV head
# count that code named for the family need not spell.
# Searched in the lower-cased identifiers, not the text: the rule takes a family only from names
# (a class, its bases, a function, a ``modeling_<family>`` module), and the identifiers are a
# fraction of the text.
_FAMILY = re.compile("|".join(sorted(FAMILY_PARTS)))

# Identifiers (whole words) of the calls the rule reads.
_SHAPE_WORDS = frozenset({
    "view", "reshape", "unflatten", "rearrange", "empty", "zeros", "ones", "full", "rand", "randn",
    "empty_strided", "new_empty", "new_zeros", "new_ones", "new_full", "make_block_ptr",
})


# The value-side tiles and dims a kernel's host may compute from the key's (``BV``, not ``V``).
_VALUE_TILES = frozenset(KERNEL_TWINS.values()) - {"V"}
_AS_QUERY = frozenset({"expand_as", "view_as", "reshape_as"})


def _shape_read_of_query(text: str) -> bool:
    """``query.shape``, ``q.size(1)``: is a query tensor's shape read? (The name before each
    ``.shape``/``.size``, read backwards: a regular expression would try every word.)"""
    for attr in (".shape", ".size"):
        at = text.find(attr)
        while at != -1:
            start = at
            while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1
            if start < at and is_query_name(text[start:at]):
                return True
            at = text.find(attr, at + 1)
    return False


# What follows a name bound to a number: ``= 8``, ``: int = (8)`` (a number that is no 0 or 1)
# to the end of the line.
_BOUND_TO_NUMBER = re.compile(r"[ \t]*(?::[^=\n]*)?=[ \t(]*(?:[2-9]|1[0-9_]|0[xXoObB])[0-9a-fA-F_]*[ \t)]*(?:#[^\n]*)?$",
                              re.MULTILINE)
_DOTTED = re.compile(r"[\w.]*")


def _number_bound(text: str, names: tuple[str, ...]) -> bool:
    """``self.n_kv_heads = 8``: is one of ``names`` the target of a statement that binds it to
    a number? Each name is found by ``str.find`` (a pattern over every line start costs more)."""
    for name in names:
        at = text.find(name)
        while at != -1:
            end = at + len(name)
            before = text[at - 1] if at else "\n"
            if not (before.isalnum() or before == "_") and (end == len(text) or not (text[end].isalnum() or text[end] == "_")):
                line = text.rfind("\n", 0, at) + 1
                if _DOTTED.fullmatch(text[line:at].lstrip(" \t")) and _BOUND_TO_NUMBER.match(text, end):
                    return True
            at = text.find(name, end)
    return False


_KEY_KERNEL = frozenset(KERNEL_TWINS)


def _tile_from_key(text: str, tile: str) -> bool:
    """``BV = min(triton.next_power_of_2(K), 64)``, ``BK, BV = ...``: a line that binds ``tile``
    and reads a key-side kernel size after its ``=``."""
    at = text.find(tile)
    while at != -1:
        line_end = text.find("\n", at)
        line = text[text.rfind("\n", 0, at) + 1:line_end if line_end != -1 else len(text)]
        eq = line.find("=")
        if eq != -1 and not line.startswith("=", eq + 1) and not identifier_set(line[eq + 1:]).isdisjoint(_KEY_KERNEL):
            return True
        at = text.find(tile, at + len(tile))
    return False


def _statements(f: _File, ids: frozenset[str], kv_counts: bool, kv_names: tuple[str, ...]) -> bool:
    """The rule's questions of statements rather than shapes: a value tile, twin size
    keywords, K/V shaped as the query beside a KV length, a KV head count written as a number."""
    if any(k in ids and v in ids and v + "=" in f.text for k, v in KEYWORD_TWINS.items()):
        return True
    if any(_tile_from_key(f.text, tile) for tile in _VALUE_TILES & ids):
        return True
    if not ids.isdisjoint(_AS_QUERY) and any(map(kv_length_name, f.names_containing("len", ignore_case=True))):
        return True
    # (A target is code: a getattr's string never is one.)
    return _number_bound(f.text, kv_names)


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


# A string that is one name: ``"num_key_value_heads"``.
_NAME_STRING = re.compile(r"""(["'])([A-Za-z_][A-Za-z_0-9]*)\1""")


def _kv_count_string(f: _File) -> bool:
    """Does a string of the file spell a KV head count (``"num_key_value_heads"``)? Every
    lookup ``model.head_lookups`` reports names one in a string; code-only text has lost them,
    the text it was read from holds them."""
    whole = f.source if f.reduced else f.text
    if whole is None or _NAMING_ESCAPE.search(whole):
        return True
    low = whole.lower()
    if "head" not in low and "group" not in low:
        return False
    return any(name_role(m.group(2)) is Role.KV_HEADS for m in _NAME_STRING.finditer(whole)
               if "head" in m.group(2).lower() or "group" in m.group(2).lower())


# ``inner = x.shape[-1]``, ``w = x.size(-1)``: a name bound to a width read off a tensor
# (``model.input_widths``).
_LAST_AXIS = re.compile(r"^[ \t]*\w+[ \t]*=[ \t]*\w+(?:\.shape\s*\[\s*-\s*1\s*\]|\.size\s*\(\s*-\s*1\s*\))", re.MULTILINE)
# ``self.o_proj(self.g_norm(``: a layer applied to a norm's result (``model.output_norms``).
_NORM_INTO_LAYER = re.compile(r"self\s*\.\s*\w+\s*\(\s*self\s*\.\s*\w*[Nn][Oo][Rr][Mm]\w*\s*\(")


_CLASS_NAME = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)


_CONSTRUCTION = re.compile(r"\b([A-Z]\w*|cls)[ \t]*\(")


def _self_constructions(text: str) -> bool:
    """Does a class of ``text`` (or ``cls``) look built three times (``ModelConfig(``), as a
    field's role needs two constructions that witness it and one that breaks it? (One scan
    for every capitalized call.)"""
    classes = {"cls", *_CLASS_NAME.findall(text)}
    counts: dict[str, int] = {}
    for name in _CONSTRUCTION.findall(text):
        if name in classes:
            counts[name] = counts.get(name, 0) + 1
            if counts[name] >= 3:
                return True
    return False


def _kv210(f: _File) -> bool:
    ids = f.identifiers  # one set for the many single-word questions below
    if not {"hasattr", "getattr", "get", "in"}.isdisjoint(ids) and _kv_count_string(f):
        return True  # a KV head count looked up by name (``model.head_lookups``)
    if "make_block_ptr" in ids and not ids.isdisjoint(VALUE_TILES):
        return True  # a value-tiled block pointer (``model.tile_offsets``)
    if not ids.isdisjoint(("view", "reshape")) and _LAST_AXIS.search(f.text):
        return True  # a width read off a tensor, and a view (``model.input_widths``)
    if _NORM_INTO_LAYER.search(f.text):
        return True  # a layer applied to a norm's result (``model.output_norms``)
    if "class" in ids and any(map(key_norm_name, f.names_containing("norm", ignore_case=True)
                                  | f.names_containing("ln", ignore_case=True))):
        return True  # a norm of the key, sized in its class (``model.key_norms``)
    if "class" in ids and any(map(query_heads, f.names_containing("head", ignore_case=True))) and \
            _self_constructions(f.text):
        return True  # a class built by its own factory methods (``model.call_slots``)
    wild = "getattr" in ids
    read = _read_by_getattr(f) if wild else frozenset()
    unit_wild = read is None
    counts = f.names_containing("head", ignore_case=True) | f.names_containing("group", ignore_case=True)
    kv_names = tuple(sorted(n for n in counts if name_role(n) is Role.KV_HEADS))
    family = _FAMILY.search(f.lower_names) is not None
    kv_counts = unit_wild or bool(kv_names) or any(name_role(n) is Role.KV_HEADS for n in read or ()) or family
    if _statements(f, ids, kv_counts, kv_names):
        return True
    if kv_names and family and any(re.search(rf"\b{n}\s*=(?!=)", f.text) for n in kv_names):
        return True  # a KV head count given by keyword in code for a family (``num_kv_heads=...``)
    # K/V buffer helpers (``create_kv_cache``): read as allocations where a KV count exists.
    helpers = frozenset(filter(makes_buffers, f.names_containing("cache", ignore_case=True)
                               | f.names_containing("kv", ignore_case=True))) if kv_counts else frozenset()
    # Methods that give a K/V buffer object its shape (``self.k_cache.allocate(...)``).
    allocators = frozenset(filter(allocates, f.names_containing("alloc", ignore_case=True)))
    if ids.isdisjoint(_SHAPE_WORDS) and not helpers and not allocators:
        return False
    kernel = any(key in ids and value in ids for key, value in KERNEL_TWINS.items())
    text = f.text
    # A length read off a query's shape, beside the keys' own length.
    lengths = any(map(kv_length_name, f.names_containing("len", ignore_case=True))) and _shape_read_of_query(text)
    dims = (f.names_containing("dim", ignore_case=True) | f.names_containing("size", ignore_case=True)
            | f.names_containing("channels", ignore_case=True) | f.names_containing("d_v", ignore_case=True)
            | f.names_containing("dv", ignore_case=True))
    value_dims = unit_wild or kernel or any(_value_dim(n) for n in (*dims, *(read or ())))
    if not kv_counts and not value_dims and not lengths:
        return False
    extra = f.settings.extra_pairs
    text, raw = f.text, not f.reduced
    sequences: frozenset[str] | None = None
    for at, _, inside, close in bracket_groups(text, _SHAPE_WORDS | helpers | allocators, raw):
        if close is None:
            return True
        sizes = identifier_set(text[inside:close])
        if kv_counts and sequences is None and not any(query_heads(n) for n in sizes):
            sequences = _sequence_names(text)
        asked = (kv_counts and (any(query_heads(n) for n in sizes) or not sequences.isdisjoint(sizes))) or (
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


# ``cache_shape = (b, heads, s, d)``: a name bound to a bracketed sequence (its sizes join a
# shape the name gives: ``rule._with_shape_names``), with or without brackets
# (``shape = b, h, s, d``): a binding whose line goes on with a comma.
_BINDS_SEQUENCE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*(?:[(\[\\]|[^\n#]*,)")


def _sequence_names(text: str) -> frozenset[str]:
    return frozenset(_BINDS_SEQUENCE.findall(text))


# Asked of the same names file after file.
_value_dim = lru_cache(maxsize=1 << 16)(value_dim)


@lru_cache(maxsize=1 << 16)
def _key_size(name: str) -> bool:
    """A key or shared head dim or a kernel's key dim: a size the rule questions in a V shape
    (as it does the key's ``.shape``/``.size`` read)."""
    return key_dim(name) or bool(value_dim_twins(name)) or name in KERNEL_TWINS


CONDITION = _kv210
