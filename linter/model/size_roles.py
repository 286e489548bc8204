"""Where a size comes from, and which size a K/V shape must carry.

A size expression gets a role from the names it is written with (``names.name_role``: a query
head count, a KV head count, a head dim) refined by side: ``v_head_dim`` is the value's head
dim, ``qk_head_dim``/``head_k_dim`` the key's, a bare ``head_dim`` the one both share unless the
scope gives the value its own, and ``key.shape[-1]`` the key's head dim read from the key
tensor. A scope is one function with its own class: facts from another function or class are
no evidence about this one.

The checks a K/V shape (a view, a reshape, an allocation of a K/V buffer) must pass:

- a K or V shape carries the KV head count, not the query's, where the scope has a KV head
  count of its own (one not equal to the query's by construction);
- a V shape carries the value's head dim, not the key's, where the scope has a value head dim of
  its own (one not assigned from the key's).

Text only below the libcst layer: the names and their assignments are given as strings, so the
rule (libcst) and its screen ask one code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Iterable, Mapping, Sequence

from linter.model.twins import is_value_head_dim, key_head_dim_twin
from linter.model.names import Role, head_count_side, kv_side, name_role

# Multi-head latent attention: K/V head counts follow the path (one latent head when decoding,
# the query's when prefilling), and V is a prefix or tail of K's latent.
_LATENT = re.compile(r"kv_lora_rank|qk_nope_head_dim|qk_rope_head_dim|latent|(?:^|_)mla(?:_|$)|MLA")

# Key-side head dims that ``key_head_dim_twin`` does not pair (no "head" in them): width-like
# names of ``nn.MultiheadAttention`` and papers' ``d_k``.
_KEY_DIM_TWINS = {
    "kdim": "vdim", "k_dim": "v_dim", "qk_dim": "v_dim", "d_k": "d_v", "dk": "dv",
    "k_channels": "v_channels", "qk_channels": "v_channels", "head_size": "v_head_size",
    "head_dim": "v_head_dim",
}
_VALUE_DIMS = frozenset(_KEY_DIM_TWINS.values())
# The shared head dims, and the value dims they stand in for when the scope has one.
_SHARED_DIMS = frozenset({"head_dim", "head_size", "attention_head_size", "attn_head_size"})

# Name parts of a part of a head dim (MLA's rope and nope parts, the latent rank).
_PARTS = frozenset({"rope", "nope", "lora", "rank", "rotary", "pe"})
# Name parts of a K/V tensor expanded to the query's head count.
_EXPANDED = frozenset({"full", "expanded", "expand", "repeated", "rep", "repeat", "broadcast", "tiled", "gqa"})

# Calls after which a K/V tensor may carry the query's head count (GQA expanded for a kernel).
_EXPANDS = re.compile(r"repeat|expand|broadcast|tile", re.IGNORECASE)
# Calls after which V may carry the key's head dim on purpose.
_PADS = re.compile(r"(?:^|_)pad(?:_|$)|pad$", re.IGNORECASE)


def is_latent_scope(names: Iterable[str]) -> bool:
    """Names of an MLA layer or a latent cache (``kv_lora_rank``, ``forward_mla``)."""
    return any(_LATENT.search(n) for n in names)


def query_heads(name: str) -> bool:
    return name_role(name) is Role.Q_HEADS


def shared_kv_heads(name: str) -> bool:
    """``num_key_value_heads``, ``n_kv_heads``, ``num_query_groups``: the count K and V share
    (linear attention's ``num_k_heads``/``num_v_heads`` are one side's own)."""
    return name_role(name) is Role.KV_HEADS and head_count_side(name) is None


def value_dim(name: str) -> bool:
    """``v_head_dim``, ``head_dim_v``, ``vdim``, ``d_v``: the value's own head dim."""
    return name in _VALUE_DIMS or is_value_head_dim(name)


def head_dim_part(name: str) -> bool:
    """``qk_rope_head_dim``, ``qk_nope_head_dim``, ``kv_lora_rank``: a part of a (latent) head
    dim, not the head dim of K or V as a whole."""
    return bool(_PARTS & set(name.lower().split("_")))


def key_dim(name: str) -> bool:
    """``qk_head_dim``, ``head_k_dim``, ``d_k``, ``kdim``: a head dim named as the key's own (a
    shared ``head_dim`` is not, nor a rope/nope part of it)."""
    if head_dim_part(name):
        return False
    return key_head_dim_twin(name) is not None or (name in _KEY_DIM_TWINS and name not in _SHARED_DIMS)


def expanded_name(name: str) -> bool:
    """``k_full``, ``key_expanded``, ``v_rep``: a K/V tensor named as expanded to the query's
    head count."""
    return bool(_EXPANDED & set(name.lower().split("_")))


def side_heads(name: str, side: str) -> bool:
    """A head count of one side's own (``tp_k_head_num`` for K, ``num_v_heads`` for V)."""
    return name_role(name) is Role.KV_HEADS and head_count_side(name) == side


# Triton kernels' head dims and tiles (``K: tl.constexpr``, ``BV: tl.constexpr``): each key-side
# name with the value's, checked on its own (a block may take ``V`` for its shape and ``BK``
# for its tile).
KERNEL_TWINS = {"K": "V", "BK": "BV", "DK": "DV", "BLOCK_K": "BLOCK_V", "BLOCK_DK": "BLOCK_DV", "HEAD_DIM_K": "HEAD_DIM_V"}


def gradient_side(name: str) -> str | None:
    """``b_dv``, ``p_dk``, ``dv``: the side of a kernel's gradient tensor or pointer."""
    parts = set(name.lower().split("_"))
    if "dk" in parts and "dv" not in parts:
        return "k"
    if "dv" in parts and "dk" not in parts:
        return "v"
    return None


def value_dim_twins(name: str) -> tuple[str, ...]:
    """The value head dims a key-side or shared head dim stands in for: ``qk_head_dim`` ->
    (``v_head_dim``,); ``head_dim`` -> every spelling of a value head dim."""
    if head_dim_part(name):
        return ()
    twin = key_head_dim_twin(name)
    found = [twin] if twin else []
    if name in _KEY_DIM_TWINS:
        found.append(_KEY_DIM_TWINS[name])
    if name in _SHARED_DIMS or (name.startswith("_") and name[1:] in _SHARED_DIMS):
        found += ["v_head_dim", "head_dim_v", "head_v_dim", "value_head_dim", "v_head_size", "head_size_v"]
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class Assigned:
    """One assignment of a size name: the identifier tails its value reads (a ``getattr``'s
    string too), and its text without ``self.`` (``config.head_dim``, ``v.shape[2]``)."""

    reads: frozenset[str]
    text: str


Assignments = Mapping[str, Sequence[Assigned]]


def equal_by_construction(name: str, other: Sequence[str] | str, assigned: Assignments) -> bool:
    """Is ``name`` provably the same size as ``other`` (one name, or any of several): every
    assignment of it is one of them (``self.v_head_dim = self.head_dim``; a conditional
    ``n if x is None else y`` is no proof), or every assignment of it and of one of them has
    one same text (``self.v_head_dim = config.head_dim`` beside ``self.head_dim =
    config.head_dim``)?"""
    others = (other,) if isinstance(other, str) else tuple(other)
    mine = assigned.get(name, ())
    if not mine:
        return False
    if all(a.text in others for a in mine):
        return True
    texts = {a.text for a in mine}
    if len(texts) != 1 or "(" in next(iter(texts)):
        # A call may return a different size each time, or a tuple of them
        # (``self.num_heads, self.num_kv_heads = partition(...)``): no one source.
        return False
    return any((theirs := assigned.get(o, ())) and {a.text for a in theirs} == texts for o in others)


def equal_to_query(name: str, assigned: Assignments, _seen: frozenset[str] = frozenset()) -> bool:
    """A KV head count assigned only from query head counts (multi-head attention by
    construction: ``self.num_kv_heads = self.num_heads``), or from the same source as a query
    head count."""
    mine = assigned.get(name, ())
    if not mine:
        return False
    seen = _seen | {name}
    if all(a.reads and all(query_heads(w) or (w not in seen and shared_kv_heads(w) and equal_to_query(w, assigned, seen))
                           for w in a.reads if query_heads(w) or name_role(w) is Role.KV_HEADS or w == name)
           and any(query_heads(w) or name_role(w) is Role.KV_HEADS for w in a.reads)
           for a in mine):
        return True
    return equal_by_construction(name, [n for n in assigned if query_heads(n)], assigned)


def shape_names(names: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(query head counts, KV head counts, value head dims) among the names of a shape."""
    names = list(names)
    return (
        [n for n in names if query_heads(n)],
        [n for n in names if name_role(n) is Role.KV_HEADS],
        [n for n in names if value_dim(n)],
    )


def side_of_names(names: Iterable[str], extra_pairs: Iterable[tuple[str, str]] = ()) -> str | None:
    """"k" or "v" when the identifiers of an expression name one side only."""
    sides = {kv_side(n, extra_pairs) for n in names} - {None}
    return sides.pop() if len(sides) == 1 else None


def expands(tail: str | None) -> bool:
    return tail is not None and bool(_EXPANDS.search(tail))


def pads(tail: str | None) -> bool:
    return tail is not None and bool(_PADS.search(tail))


# Verbs and nouns of a helper that makes K/V caches (``create_kv_cache``, ``init_cache``,
# ``allocate_kv``): its arguments are the caches' sizes.
_MAKE_VERBS = frozenset({"create", "alloc", "allocate", "init", "make", "build", "new"})
_BUFFER_NOUNS = frozenset({"cache", "caches", "kv", "kvcache"})


def makes_buffers(callee: str | None) -> bool:
    """``create_kv_cache``, ``allocate_cache``: a helper whose result is a K/V buffer."""
    if callee is None:
        return False
    parts = set(callee.lower().split("_"))
    return bool(parts & _MAKE_VERBS) and bool(parts & _BUFFER_NOUNS)


# Methods of a K/V buffer object that give it a shape from their arguments
# (``self.k_cache.allocate(seq_len, dtype, device, shape)``).
_ALLOCATE_VERBS = frozenset({"allocate", "alloc", "reallocate", "realloc"})


def allocates(method: str | None) -> bool:
    """``allocate``, ``alloc_buffer``: a method that gives its object a shape."""
    return method is not None and bool(_ALLOCATE_VERBS & set(method.lower().split("_")))


_LENGTH_PARTS = frozenset({"len", "lens", "length", "lengths", "seqlen", "seqlens"})
_KV_LENGTH_SIDES = frozenset({"k", "kv", "key", "keys", "v", "value", "src"})


def length_name(name: str) -> bool:
    """``seqlen``, ``q_len``, ``max_seqlen_k``: a name of a sequence length."""
    return bool(_LENGTH_PARTS & set(name.lower().split("_")))


def kv_length_name(name: str) -> bool:
    """``k_len``, ``kv_seq_len``, ``max_seqlen_k``, ``src_len``: the keys' own length."""
    parts = set(name.lower().split("_"))
    return bool(_LENGTH_PARTS & parts) and bool(_KV_LENGTH_SIDES & parts)


# The kernel's value-side dims and tiles, and the key-side ones that stand for them.
_VALUE_KERNEL = frozenset(KERNEL_TWINS.values())
_KEY_KERNEL = frozenset(KERNEL_TWINS)


def value_tile_from_key(target: str, reads: Iterable[str]) -> str | None:
    """``BV = min(triton.next_power_of_2(K), 64)``: a value-side tile or dim (not ``V``
    itself) computed from the key's (``K``, ``BK``) and from no value-side size; the key's
    name it reads."""
    if target not in _VALUE_KERNEL or target == "V":
        return None
    reads = set(reads)
    if reads & _VALUE_KERNEL:
        return None
    return next((n for n in sorted(reads) if n in _KEY_KERNEL), None)


def value_kernel_sizes(names: Iterable[str]) -> set[str]:
    return set(names) & _VALUE_KERNEL


# Names of the attention output, whose last axis is the value's head dim.
_OUTPUTS = frozenset({"o", "out", "output", "attn_output", "attn_out", "attention_output", "context", "context_layer"})


def attention_output(name: str) -> bool:
    return name in _OUTPUTS


# Keywords of a layer's per-head sizes, key side with the value's (Keras' and Flax's
# ``key_dim``/``value_dim``, ``nn.MultiheadAttention``'s ``kdim``/``vdim``).
KEYWORD_TWINS = {"key_dim": "value_dim", "kdim": "vdim", "k_dim": "v_dim", "d_k": "d_v"}


def size_kind(names: Iterable[str]) -> str | None:
    """"head" for a size read from head dims only, "width" for one read from model widths
    only (``hidden_dim``, ``embed_dim``), else None."""
    roles = {name_role(n) for n in names} - {Role.UNKNOWN}
    if roles == {Role.HEAD_DIM}:
        return "head"
    if roles and roles <= {Role.Q_WIDTH, Role.KV_WIDTH}:
        return "width"
    return None


_STATE_PARTS = frozenset({"state", "states", "cache", "caches", "memory", "past"})


def state_function(name: str) -> bool:
    """``init_state``, ``allocate_cache``: a function that makes recurrent states or caches."""
    return bool(_STATE_PARTS & set(name.lower().split("_")))


def key_state(names: Iterable[str]) -> bool:
    """A buffer shaped with the key's own head dim (``(b, h, head_k_dim, slots)``: a key-slot
    state), and with no value head dim (a ``K x V`` state has the query's heads) nor a dim the
    query shares (``head_dim_qk``: a query-side or output buffer as well)."""
    names = set(names)
    return any(key_dim(n) and "qk" not in n.lower().split("_") for n in names) and not any(map(value_dim, names))
