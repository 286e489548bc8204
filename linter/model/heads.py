"""What a size expression says about attention heads, whichever syntax tree it was read from.

``num_key_value_heads * head_dim`` and ``num_heads * head_dim`` differ in the head *count*;
``num_heads * qk_head_dim`` and ``num_heads * v_head_dim`` differ only in the head *dim*, which
K and V may legitimately do (MLA). A size is split into multiplicative factors, each classified
by its name (``names.name_role``); two sizes are compared factor by factor with the head-dim
factors dropped, and differ only when what is left provably names different head counts: a
Q-side count or full width (``num_heads``, ``hidden_size``) against a KV-side one
(``num_kv_heads``, ``kv_dim``, MQA's literal ``1``), or two different integers. Anything
unclassifiable (a call, a sequence length, a name we do not know) compares as no mismatch.

The rules read libcst's tree (``sizes``), the ``ast`` screens the standard library's
(``ast_sizes``): each gives ``factors`` a ``Reader`` for its own nodes, so both classify and
compare with this one code and cannot drift apart. No libcst here: the screens run without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from linter.model.names import Role, head_count_side, name_role


@dataclass(frozen=True)
class Factor:
    key: str  # identifier tail, integer value, or the expression's text
    role: Role
    value: int | None = None  # for integer literals


class Reader(Protocol):
    """How ``factors`` reads one syntax tree's nodes."""

    def int_value(self, node: Any) -> int | None:
        """The value of an integer literal (``3``, ``-1``), else None."""

    def operands(self, node: Any) -> tuple[str, Any, Any] | None:
        """("*", "/", "+" or "other", left, right) of a binary operation, else None;
        ``//`` reads as "/", ``-`` as "+"."""

    def tail(self, node: Any) -> str | None:
        """``x`` of ``x``, ``a.x`` and ``getattr(a, "x", ...)``, else None."""

    def key(self, node: Any) -> str:
        """Text that is equal for two nodes wherever libcst's whitespace-free source is."""


# Resolves ``x`` / ``self.x`` to the single expression it was assigned, or None.
Resolver = Callable[[Any], Any]

_HEADS_ROLES = (Role.Q_HEADS, Role.KV_HEADS)


def factors(expr: Any, reader: Reader, resolve: Resolver | None = None, _depth: int = 0) -> list[Factor]:
    """The multiplicative factors of ``expr``, each classified."""
    value = reader.int_value(expr)
    if value is not None:
        return [Factor(str(value), Role.UNKNOWN, value)]
    operation = reader.operands(expr)
    if operation is not None:
        op, left, right = operation
        if op == "*":
            return factors(left, reader, resolve, _depth) + factors(right, reader, resolve, _depth)
        text = reader.key(expr)
        if op == "/":
            # hidden_size // num_heads is a head dim.
            divisor = factors(right, reader, resolve, _depth)
            if len(divisor) == 1 and divisor[0].role in _HEADS_ROLES:
                return [Factor(text, Role.HEAD_DIM)]
        if op == "+":
            # (qk_nope_head_dim + qk_rope_head_dim) is a head dim.
            terms = factors(left, reader, resolve, _depth) + factors(right, reader, resolve, _depth)
            if terms and all(t.role is Role.HEAD_DIM for t in terms):
                return [Factor(text, Role.HEAD_DIM)]
        return [Factor(text, Role.UNKNOWN)]
    tail = reader.tail(expr)
    if tail is None:
        return [Factor(reader.key(expr), Role.UNKNOWN)]
    role = name_role(tail)
    if role in (Role.HEAD_DIM, *_HEADS_ROLES) or resolve is None or _depth >= 4:
        return [Factor(tail, role)]
    target = resolve(expr)
    if target is None:
        return [Factor(tail, role)]
    expanded = factors(target, reader, resolve, _depth + 1)
    if role is not Role.UNKNOWN and any(f.role is Role.UNKNOWN and f.value is None for f in expanded):
        # A named width is more telling than an expansion we cannot read.
        return [Factor(tail, role)]
    return expanded


@dataclass(frozen=True)
class HeadsMismatch:
    """Two sizes that provably name different head counts, with what each side names."""

    left: str | int
    right: str | int

    @property
    def linear(self) -> bool:
        """One side names a head count of its own: K and V heads differ by design here."""
        return self.left in ("k", "v") or self.right in ("k", "v")


def compare(left: list[Factor], right: list[Factor], implicit_one: bool = False) -> HeadsMismatch | None:
    """How two sizes' factors differ in head count, up to head-dim factors; None where they do
    not provably differ.

    ``implicit_one``: a size made only of head dims (``head_dim``) counts as one head, as in an
    MQA projection ``Linear(hidden, head_dim)``; off for view positions, where the last axis is
    the head dim itself.
    """
    lf = [f for f in left if f.role is not Role.HEAD_DIM]
    rf = [f for f in right if f.role is not Role.HEAD_DIM]
    lc, rc = Counter(f.key for f in lf), Counter(f.key for f in rf)
    if lc == rc:
        return None
    lk = 1 if implicit_one and not lf else _kind(_only(lf, lc - rc))
    rk = 1 if implicit_one and not rf else _kind(_only(rf, rc - lc))
    if lk is None or rk is None or not _differ(lk, rk):
        return None
    if lk == "k" or rk == "v":
        # Each side on a count of its own (``num_k_heads`` for K, ``num_v_heads`` for V): linear
        # attention, where value heads differ from query/key heads by design.
        return None
    return HeadsMismatch(lk, rk)


def _only(found: list[Factor], surplus: Counter[str]) -> list[Factor]:
    """The factors of one side that the other side lacks."""
    left = Counter(surplus)
    picked = []
    for f in found:
        if left[f.key] > 0:
            left[f.key] -= 1
            picked.append(f)
    return picked


def _kind(diff: Sequence[Factor]) -> str | int | None:
    """What one side's extra factors name: "q" (query heads or full width), "kv", "k"/"v" (one
    side's own head count), or an int."""
    if not diff:
        return None
    if all(f.value is not None for f in diff):
        product = 1
        for f in diff:
            product *= f.value  # type: ignore[operator]
        return product
    if len(diff) != 1:
        return None
    role = diff[0].role
    if role in (Role.Q_HEADS, Role.Q_WIDTH):
        return "q"
    if role is Role.KV_HEADS:
        return head_count_side(diff[0].key) or "kv"
    if role is Role.KV_WIDTH:
        return "kv"
    return None


def _differ(a: str | int, b: str | int) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a != b
    if isinstance(a, int) or isinstance(b, int):
        # MQA's single head is a KV-side count; any other bare integer is unclassifiable.
        number, word = (a, b) if isinstance(a, int) else (b, a)
        return number == 1 and word == "q"
    return a != b


def describe(kind: str | int, linear: bool = False) -> str:
    """Words for a side of a mismatch: "query heads", "KV heads", "one head", "8 heads".

    ``linear``: the other side names one side's own head count (linear attention), where the
    query head count is the key's too.
    """
    if kind == "q":
        return "query/key heads" if linear else "query heads"
    if kind == "kv":
        return "KV heads"
    if kind == "k":
        return "key heads"
    if kind == "v":
        return "value heads"
    if kind == 1:
        return "one head"
    return f"{kind} heads"


def equal_to_query(assigned: dict[str, list[Collection[str] | None]]) -> set[str]:
    """The KV head counts among ``assigned`` (a name -> the head-count names each of its
    assignments reads, None where a value was not read) that provably equal the query head
    count (no GQA): every assignment reads a query head count or another such name, and no
    other KV head count (``self.total_num_kv_heads = self.total_num_heads``). KV203's rule and
    its ``ast`` screen both ask it."""
    proven: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, reads in assigned.items():
            if name in proven or name_role(name) is not Role.KV_HEADS:
                continue
            if all(r and all(name_role(w) is Role.Q_HEADS or w in proven for w in r) for r in reads):
                proven.add(name)
                changed = True
    return proven
