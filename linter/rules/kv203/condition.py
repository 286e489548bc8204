"""KV203 needs a chunk/split call and a KV-head-count name.
"""

from __future__ import annotations

import re

from linter.model.names import is_kv_head_count_name, kv_side
from linter.rules.kv203.screen import _kv203_weight_named as _weight_named
from linter.plan.chains import _after_group, bracket_groups
from linter.plan.file import _File
from linter.plan.statements import top_level_parts
from linter.plan.words import _GAP, identifier_set


# A mirror of KV203's splits (see ``vocabulary``).
_SPLIT_CALLS = frozenset({"chunk", "split", "tensor_split"})


def _kv203(f: _File) -> bool:
    # A KV head count's name has "head" or "group" in it (``sizes.is_kv_head_count_name``), and
    # a split call that can be of a fused QKV into equal thirds (``_qkv_split``).
    return (
        ("head" in f.text or "group" in f.text) and f.has_any(_SPLIT_CALLS)
        and any(is_kv_head_count_name(w) for w in f.names_containing("head") | f.names_containing("group"))
        and _qkv_split(f)
    )


def _qkv_split(f: _File) -> bool:
    """A split call that may cut into equal thirds along a literal axis (``_may_be_thirds``),
    in a statement that names a fused QKV or a K-side and a V-side name, and, on dim 0, a
    weight or bias.

    KV203 reads only a split of a receiver whose root says "qkv" or "query_key_value" (any
    case), or unpacked into three names the second K-side and the third V-side
    (``_is_qkv``): the root and the names lie between the statement's start and the call's
    closing bracket. On raw text a string or comment in the brackets may hide where they
    close, and statements are not told apart: the call's chunk (from the last definition line
    before it) stands for its statement.
    """
    text, raw = f.text, not f.reduced
    extra = f.settings.extra_pairs
    for at, end, inside, close in bracket_groups(text, _SPLIT_CALLS, raw):
        if close is None:
            return True
        axis = _may_be_thirds(text, at, end, inside, close - 1)
        if axis is None:
            continue
        start = None if raw else f.statement_start(at)
        statement = text[f.chunk_start(at) if start is None else start:close]
        if axis == 0 and not any(_weight_named(name) for name in identifier_set(statement)):
            continue  # dim 0 is a fused weight's or bias's, named on the way (``_is_weight``)
        lowered = statement.lower()
        if "qkv" in lowered or "query_key_value" in lowered:
            return True
        sides = {kv_side(name, extra) for name in identifier_set(statement)}
        if "k" in sides and "v" in sides:
            return True
    return False


_KEYWORD = re.compile(rf"{_GAP}(\w+){_GAP}=(?!=)")
_TORCH_BEFORE = re.compile(rf"(?<![\w.])torch{_GAP}\.{_GAP}\Z")
_FOR = re.compile(r"(?<!\w)for(?!\w)")


def _may_be_thirds(text: str, at: int, end: int, start: int, stop: int) -> int | None:
    """The axis along which the split call named at ``text[at:end]``, its arguments
    ``text[start:stop]``, may cut into equal thirds as KV203 reads it (``visit_Call``,
    ``_equal_thirds``), else None: its ``dim`` an integer literal, or left out (0), and a
    chunk/tensor_split into the literal 3, or a split by a list or tuple of three parts that
    read alike less their blanks (``pairs.normalized``), or by anything else (a name, a
    product, one size). ``torch.X`` takes the tensor first. A form this does not read (the
    sizes by keyword) may cut any axis: -1.
    """
    parts, dim = [], None
    for part in top_level_parts(text, start, stop):
        keyword = _KEYWORD.match(text, part[0])
        if keyword is None:
            parts.append(part)
        elif keyword.group(1) == "dim":
            dim = text[keyword.end():part[1]]
        else:
            return -1  # the sizes (or the tensor) by keyword
    if _TORCH_BEFORE.search(text, max(0, at - 64), at):
        parts = parts[1:]
    if dim is None and len(parts) > 1:
        dim = text[parts[1][0]:parts[1][1]]
    axis = 0 if dim is None else _integer(dim)
    if not parts or axis is None:
        return None  # no sizes, or an axis that is no literal: no finding
    first_start, first_stop = parts[0]
    first = _normalized(text[first_start:first_stop])
    if text[at:end] != "split":
        return axis if _integer(first) == 3 else None
    if first[:1] not in ("[", "("):
        return axis
    opener = text.index(first[0], first_start)
    closer = _after_group(text, opener, False) or first_stop
    if _normalized(text[closer:first_stop]):
        return axis  # ``[h] * 3``, ``(a + b) * c``: more than a literal
    if _FOR.search(text, opener, closer):
        return axis  # a comprehension
    elements = top_level_parts(text, opener + 1, closer - 1)
    if elements and not _normalized(text[elements[-1][0]:elements[-1][1]]):
        elements.pop()  # a trailing comma
    if first[0] == "(" and len(elements) < 2:
        return axis  # a parenthesized expression, no tuple
    equal = len(elements) == 3 and len({_normalized(text[s:e]) for s, e in elements}) == 1
    return axis if equal else None


def _integer(source: str) -> int | None:
    """The value of an integer literal (``3``, ``-1``, ``0x3``, parenthesized or not; more
    than ``sizes.int_value`` reads), else None."""
    try:
        return int(_normalized(source).replace("(", "").replace(")", ""), 0)
    except ValueError:
        return None


def _normalized(source: str) -> str:
    """``source`` less blanks and line continuations: coarser than ``pairs.normalized``,
    which reads an element without the blanks around it."""
    return "".join(source.split()).replace("\\", "")


CONDITION = _kv203
