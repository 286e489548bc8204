"""K/V twin symmetry: each V-side statement paired with its K twin, and the places where the
pair breaks.

Two simple statements of one function are twins when the K statement, its K-side names
renamed to their V sides (``names.value_counterpart``), has the V statement's shape: the same
targets, the same call chain, the same arguments. Attention code writes K and V in such pairs
(``k = self.k_proj(x)`` / ``v = self.v_proj(x)``), so a V statement that differs from its
renamed twin in exactly one place is where a copy-paste edit went wrong:

- ``twin-name``: the V statement keeps the K-side name the renaming changes (``v =
  self.k_proj(x)``, ``value_cache = kv.get_key_cache()``, ``k_cache[s] = value``). Evidence:
  the V-side counterpart exists in the function or its class; in most shipped bugs it is used
  a few lines away.
- ``one-side-op``: the V statement moves other axes than its twin (``transpose``/``permute``/
  ``movedim`` dims, ``cat`` dim or operand order) or drops the twin's layout op or cast
  (``.transpose``, ``.repeat_interleave``, ``repeat_kv(...)``, ``.to(...)``).
- ``one-side-slice``: the V statement cuts other tokens or heads than its twin (a slice bound,
  a ``narrow`` length) or none at all.

Legitimate asymmetries differ in more than one place or in a way read as design: a K
transposed for ``Q @ K^T`` while V keeps its last axis last, a cut of the last (head-dim) axis
after an ellipsis (Dk != Dv), a bound that names a V size of its own (``v_head_dim``), RoPE
and norms applied to K only (another callable, not a dropped layout op), a fused buffer cut
into K and V parts (its name is neither side's).

And, by reaching definitions, ``v-rebuilt-from-k``: a V name that already held a value is
assigned again from its K twin alone (``v = k.clone()`` after ``v = self.v_proj(x)``), where
no test of V guards the assignment.

Everything here reads the standard library's ``ast`` and only what lies inside one top-level
definition (the function, its enclosing class), so the rule (``KV107``) and its ``ast``
screen run the same code on the same unit and cannot disagree.
"""

from __future__ import annotations

import ast
import copy
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from linter.model.ast_reading import FUNCTIONS, blocks, bodies, int_value, root_word, tail
from linter.model.ast_reading import dotted as dotted_name
from linter.model.twin_ops import CONCATS, MOVES, TRANSPOSES, axes_differ, moves_last_axis, axis_difference, axis_list, dropped_operand, slice_difference, transposed_for_scores
from linter.model.twin_ops import dropped as dropped_op
from linter.model.branch_repeat import unrepeated_uses
from linter.model.reaching import overwritten_value_twins, rebuilds, rebuilt_from_key, unset_value_twins
from linter.model.ast_walk import walk
from linter.model.names import (
    METADATA_ATTRIBUTES,
    TWIN_ATTENTION_WORDS,
    is_kv_tensor_name,
    is_query_name,
    kv_side,
    value_counterpart,
)

# How far apart (in lines) twins may stand: the K and V lines of one step sit together.
_WINDOW = 12

# What K and V always share, so a K name read for it on the V side changes nothing.
_SHARED_METADATA = frozenset({"dtype", "device", "is_cuda", "layout", "get_device", "is_floating_point", "itemsize", "element_size"})
# Calls that allocate a fresh buffer: a V buffer built from K's shape, dtype and device takes K's
# geometry, never K's data, so whether that geometry fits V is a size question (KV210: only
# where V has a head dim of its own), not a kept twin.
_ALLOCATIONS = frozenset({
    "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
    "new_zeros", "new_ones", "new_empty", "new_full",
})
# Statements that only display or check.
_QUIET = frozenset({"print", "debug", "info", "warning", "warn", "error", "log", "assert_close"})


@dataclass(frozen=True)
class Break:
    """One broken twin: where the V statement differs (1-based lines, ``ast`` byte columns)."""

    kind: str  # "twin-name", "one-side-op", "one-side-slice", "v-rebuilt-from-k"
    node: ast.AST
    twin_line: int
    message: str
    suggestion: str


def breaks(tree: ast.AST, extra_pairs: Iterable[tuple[str, str]] = ()) -> list[Break]:
    """Every broken K/V twin in the attention functions of ``tree``."""
    pairs = tuple(extra_pairs)
    found: list[Break] = []
    classes: dict[int, _Members] = {}
    for function, owner in _functions(tree, None):
        found.extend(_function_breaks(function, owner, classes, pairs))
        found.extend(_branch_breaks(function, pairs))
    return found


def _branch_breaks(function: ast.AST, pairs: tuple[tuple[str, str], ...]) -> Iterator[Break]:
    """A product in one branch of an ``if`` that reads K or V unrepeated where the sibling
    branch repeats both to the query's head count (``model.branch_repeat``)."""
    for product, name, line in unrepeated_uses(function, pairs):
        yield Break(
            "one-side-op", product, line,
            f"`{name}` reaches this product unrepeated, but the other branch of the same `if` "
            f"repeats it to the query's head count first (line {line}): with fewer KV heads "
            "than query heads this branch multiplies the wrong heads or fails",
            f"repeat `{name}` here as the other branch does (line {line})",
        )


def _attention_code(names: _Names, function: ast.AST, owner: ast.ClassDef | None) -> bool:
    """Do the function's names, its class's, or their own names hold an attention word?"""
    words = [*names.words, function.name, *([owner.name] if owner is not None else [])]
    return any(word in name.lower() for name in words for word in TWIN_ATTENTION_WORDS)


def _functions(node: ast.AST, owner: ast.ClassDef | None) -> Iterator[tuple[ast.AST, ast.ClassDef | None]]:
    # Definitions stand only in statement bodies: no expression is walked to find them.
    for body in bodies(node):
        for child in body:
            if isinstance(child, FUNCTIONS):
                yield child, owner
                yield from _functions(child, None)
            elif isinstance(child, ast.ClassDef):
                yield from _functions(child, child)
            else:
                yield from _functions(child, owner)


# ---------------------------------------------------------------- one function


class _Names:
    """What a function and its class name: the evidence that a V counterpart exists. A class's
    members are read once for all its methods (``classes``, by the class's identity); a
    method's own locals are read for it alone, with where each is first bound."""

    def __init__(self, function: ast.AST, owner: ast.ClassDef | None, classes: dict[int, _Members]) -> None:
        self.function = function
        self._owner = owner
        self._classes = classes
        self._members: _Members | None = None
        self._loop_names: set[str] | None = None
        self._equal: dict[str, set[str]] | None = None
        self._bound: dict[str, int] | None = None
        self._read: set[str] = set()
        self._tests: dict[int, list[ast.expr]] | None = None
        self._branches: dict[int, tuple] = {}
        self._assignments: list[ast.Assign] = []

    def _read_members(self) -> _Members:
        # Read only when asked: a function whose breaks need no evidence never walks its class.
        if self._members is None:
            owner = self._owner
            if owner is None:
                self._members = _members(self.function)
            else:
                found = self._classes.get(id(owner))
                if found is None:
                    found = self._classes[id(owner)] = _members(owner)
                self._members = found
        return self._members

    @property
    def dotted(self) -> set[str]:
        return self._read_members()[0]

    @property
    def words(self) -> set[str]:
        return self._read_members()[1]

    @property
    def attributes(self) -> set[str]:
        return self._read_members()[2]

    def asserted_equal(self, a: str, b: str) -> bool:
        """``assert HEAD_DIM_K == HEAD_DIM_V``: the function guarantees the two are one value."""
        if self._equal is None:
            groups: dict[str, set[str]] = {}
            for node in walk(self.function):
                if not isinstance(node, ast.Assert):
                    continue
                for compare in walk(node.test):
                    if not isinstance(compare, ast.Compare):
                        continue
                    operands = [compare.left, *compare.comparators]
                    for op, left, right in zip(compare.ops, operands, operands[1:]):
                        words = (tail(left), tail(right))
                        if isinstance(op, ast.Eq) and None not in words:
                            merged = groups.get(words[0], {words[0]}) | groups.get(words[1], {words[1]})
                            for word in merged:
                                groups[word] = merged
            self._equal = groups
        return b in self._equal.get(a, ())

    @property
    def loop_names(self) -> set[str]:
        """``for key, value in d.items()``: a mapping's keys and values, not K and V."""
        if self._loop_names is None:
            self._loop_names = {
                n.id for node in walk(self.function) if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension))
                for n in walk(node.target) if isinstance(n, ast.Name)
            }
        return self._loop_names

    @property
    def assignments(self) -> list[ast.Assign]:
        """The function's assignments, nested blocks included."""
        if self._tests is None:
            self._read_blocks()
        return self._assignments

    def tests_above(self, statement: ast.stmt) -> list[ast.expr]:
        """The tests of the ``if`` and ``while`` statements ``statement`` stands under."""
        if self._tests is None:
            self._read_blocks()
        return self._tests.get(id(statement), [])

    def branch(self, statement: ast.stmt) -> tuple:
        """The branches ``statement`` stands in, outermost first: (an ``if``, body or else)."""
        if self._tests is None:
            self._read_blocks()
        return self._branches.get(id(statement), ())

    def _read_blocks(self) -> None:
        self._tests = {}
        self._branches = {}
        self._assignments = []
        todo: list[tuple[list[ast.stmt], list[ast.expr], tuple]] = [(self.function.body, [], ())]
        while todo:
            body, tests, branch = todo.pop()
            for statement in body:
                if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
                    continue
                self._tests[id(statement)] = tests
                self._branches[id(statement)] = branch
                if isinstance(statement, ast.Assign):
                    self._assignments.append(statement)
                if isinstance(statement, (ast.If, ast.While)):
                    inner = [*tests, statement.test]
                    todo.append((statement.body, inner, (*branch, (id(statement), "body"))))
                    todo.append((statement.orelse, inner, (*branch, (id(statement), "orelse"))))
                else:
                    todo.extend((block, tests, branch) for block in bodies(statement))

    def exists(self, word: str, dotted: str | None, line: int) -> bool:
        """Does the V counterpart ``word`` (``dotted`` as written) exist at ``line``? An
        attribute or method of the class (or of any object the function reads) exists
        throughout; a local name only once a binding of it precedes ``line`` (a parameter, an
        earlier assignment), or where the function reads it without binding it (a global). A
        local of another method, or one bound only further down, is no evidence."""
        if dotted is not None and "." in dotted and dotted in self.dotted:
            return True
        if word in self.attributes:
            return True
        if self._bound is None:
            self._bound = {}
            for node in walk(self.function):
                kind = node.__class__
                if kind is ast.Name:
                    if node.ctx.__class__ is ast.Load:
                        self._read.add(node.id)
                    elif node.lineno < self._bound.get(node.id, node.lineno + 1):
                        self._bound[node.id] = node.lineno
                elif kind is ast.arg:
                    self._bound[node.arg] = 0
        first = self._bound.get(word)
        if first is not None:
            return first < line
        return word in self._read


_Members = tuple[set[str], set[str], set[str]]


def _members(root: ast.AST) -> _Members:
    """The dotted names of attributes, every word (names, attributes, parameters, methods:
    whether the code is attention code), and the members (attributes, methods, class-level
    names) under ``root``."""
    dotted: set[str] = set()
    words: set[str] = set()
    attributes: set[str] = set()
    for node in walk(root):
        kind = node.__class__
        if kind is ast.Name:
            words.add(node.id)
        elif kind is ast.Attribute:
            words.add(node.attr)
            attributes.add(node.attr)
            name = dotted_name(node)
            if name is not None:
                dotted.add(name)
        elif kind is ast.arg:
            words.add(node.arg)
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            words.add(node.name)  # a method ``get_v_shape`` of the class
            attributes.add(node.name)
            dotted.add(f"self.{node.name}")
        elif kind is ast.ClassDef:
            for statement in node.body:
                if isinstance(statement, (ast.Assign, ast.AnnAssign)):
                    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                    attributes.update(n.id for t in targets for n in walk(t) if n.__class__ is ast.Name)
    return dotted, words, attributes


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The simple statements of a body, nested blocks included, nested definitions not."""
    for statement in body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
            if getattr(statement, "value", None) is not None:
                yield statement
        elif isinstance(statement, ast.Expr):
            if isinstance(statement.value, ast.Call) and tail(statement.value.func) not in _QUIET:
                yield statement
        elif isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            continue
        else:
            for field in ("body", "orelse", "finalbody"):
                yield from _statements(getattr(statement, field, None) or [])
            for handler in getattr(statement, "handlers", None) or []:
                yield from _statements(handler.body)
            for case in getattr(statement, "cases", None) or []:
                yield from _statements(case.body)


class _Sides:
    """The K-side and V-side identifiers of one statement."""

    __slots__ = ("k", "v", "query_member")

    def __init__(self, statement: ast.stmt, known: dict[str, str | None], pairs) -> None:
        self.k = False
        self.v = False
        self.query_member = False  # an attribute with a query part (``attn.norm_q``)
        for node in walk(statement):
            kind = node.__class__
            if kind is ast.Name:
                word = node.id
            elif kind is ast.Attribute:
                word = node.attr
                if not self.query_member and query_to_key(word) != word:
                    self.query_member = True
            else:
                continue
            side = known.get(word, "")
            if side == "":
                side = known[word] = kv_side(word, pairs)
            if side == "k":
                self.k = True
            elif side == "v":
                self.v = True


def _function_breaks(function: ast.AST, owner: ast.ClassDef | None, classes: dict, pairs) -> list[Break]:
    statements = sorted(_statements(function.body), key=lambda s: (s.lineno, s.col_offset))
    known: dict[str, str | None] = {}
    sides = [_Sides(s, known, pairs) for s in statements]
    if not any(s.k for s in sides):
        return []
    names: _Names | None = None
    found: list[Break] = []
    for i, (statement, side) in enumerate(zip(statements, sides)):
        if not side.v:
            continue
        best: tuple[int, ast.stmt, _Diff] | None = None
        mirrored = False
        for j, (twin, twin_side) in enumerate(zip(statements, sides)):
            if j == i or not twin_side.k:
                continue
            distance = abs(twin.lineno - statement.lineno)
            if distance > _WINDOW:
                continue
            diff = _one_difference(twin, statement, pairs)
            if diff is _MIRROR:
                # A K statement this one mirrors exactly (``self.values = v`` beside ``self.keys
                # = k`` in one branch, a cut pair in the other): nothing broke, unless both
                # take the very same part of a fused tensor.
                same = _same_part(twin, statement, pairs)
                if same is not None:
                    found.append(same)
                mirrored = True
                break
            if diff is not None and (best is None or distance < best[0]):
                best = (distance, twin, diff)
        if best is None or mirrored:
            continue
        if best[2].dropped:
            if names is None:
                names = _Names(function, owner, classes)
            if _query_step(best[2].k, best[1], statement, statements, names, pairs):
                continue
        if names is None:
            names = _Names(function, owner, classes)
        found.extend(_classify(best[2], best[1], statement, names, pairs))
    if any(s.v for s in sides):
        found.extend(_query_kept(statements, sides, lambda: names or _Names(function, owner, classes), pairs))
        found.extend(
            Break(
                "one-side-op", u.key, u.set_at,
                f"`{tail(u.key.targets[0])}` is set on every path, its value twin `{u.value}` only in one branch "
                f"(line {u.set_at}); line {u.read_at} reads both, so on the other path the value twin is unset",
                f"set `{u.value}` beside `{tail(u.key.targets[0])}` on every path",
            )
            for u in unset_value_twins(function, pairs)
        )
        found.extend(
            Break(
                "one-side-op", o.value, o.set_at,
                f"`{o.value.targets[0].id}`, set in a branch on line {o.set_at}, is overwritten here before it is "
                f"read, by a line that mirrors its key twin `{o.key}`: the branch's value is lost on every path",
                f"set `{o.value.targets[0].id}` here only on the paths the branch does not cover (an `else`)",
            )
            for o in overwritten_value_twins(function, pairs)
        )
    key_only = {id(s) for s, side in zip(statements, sides) if side.k and not side.v and _effect(s)}
    if key_only:
        found.extend(_repeated_key_statements(function, key_only, lambda: names or _Names(function, owner, classes), pairs))
    if any(rebuilds(s, pairs) for s, side in zip(statements, sides) if side.k and side.v):
        found.extend(
            Break(
                "v-rebuilt-from-k", r.value, r.defined,
                f"`{r.name}`, computed on line {r.defined}, is replaced by a value built from the key `{r.key}` alone",
                f"keep the computed `{r.name}`, or build it from `{r.name}`",
            )
            for r in rebuilt_from_key(function, pairs)
        )
    if found and not _attention_code(names or _Names(function, owner, classes), function, owner):
        return []
    return found


def _query_kept(statements: list[ast.stmt], sides: list["_Sides"], known: Callable[[], _Names], pairs) -> list[Break]:
    """``key = attn.norm_added_q(key)`` beside ``query = attn.norm_added_q(query)``, where
    ``attn.norm_added_k`` exists: a K statement that repeats its Q twin but for one member it
    kept on the query side. Only a kept member of an object counts (a norm, a projection, a
    scale): Q and K differ in their ops and cuts by design. Asked in functions that name a K
    name and its V counterpart (attention code of K and V, as the text condition reads it)."""
    candidates = [s for s, side in zip(statements, sides) if side.k and not side.v and side.query_member]
    if not candidates:
        return []
    words = {w for s in statements for w in map(tail, walk(s)) if w is not None}
    if not any(kv_side(w, pairs) == "k" and twin_name(w, pairs) in words for w in words):
        return []
    found: list[Break] = []
    for statement in candidates:
        members = [
            n for n in walk(statement)
            if n.__class__ is ast.Attribute and query_to_key(n.attr) != n.attr and dotted_name(n) is not None
        ]
        if len(members) != 1:
            continue
        best: tuple[int, ast.stmt, _Diff] | None = None
        for twin in statements:
            distance = abs(twin.lineno - statement.lineno)
            if twin is statement or distance > _WINDOW:
                continue
            diff = _one_difference(twin, statement, QUERY_TO_KEY)
            if diff is _MIRROR:
                best = None
                break
            if diff is not None and diff.kept_word is not None and (best is None or distance < best[0]):
                best = (distance, twin, diff)
        if best is None or best[2].v is not members[0]:
            continue
        member = members[0]
        dotted = dotted_name(member)
        twin_dotted = dotted[: -len(member.attr)] + query_to_key(member.attr)
        if twin_dotted not in known().dotted:
            continue
        found.append(Break(
            "twin-name", member, best[1].lineno,
            f"the key side uses `{dotted}`, the name its query twin (line {best[1].lineno}) uses, "
            f"though the key counterpart `{twin_dotted}` exists",
            f"use `{twin_dotted}` on the key side",
        ))
    return found


def _same_part(twin: ast.stmt, statement: ast.stmt, pairs) -> Break | None:
    """``v_w = qkv_w[q:q + kv]`` beside ``k_w = qkv_w[q:q + kv]``: K and V cut the same rows of
    a tensor that is neither side's (a fused weight or buffer), so V is a copy of K."""
    if not (isinstance(twin, ast.Assign) and isinstance(statement, ast.Assign)):
        return None
    if len(statement.targets) != 1 or len(twin.targets) != 1:
        return None
    value = statement.value
    if not isinstance(value, ast.Subscript) or not isinstance(twin.value, ast.Subscript):
        return None
    target = tail(statement.targets[0])
    if target is None or not is_kv_tensor_name(target, pairs):
        return None
    base = root_word(value.value)
    if base is None or kv_side(base, pairs) is not None or ast.dump(value) != ast.dump(twin.value):
        return None
    elements = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    # Rows or columns between bounds; an index (``slot_mapping[i]``) may serve both sides.
    cut = [e for e in elements if isinstance(e, ast.Slice) and (e.lower is not None or e.upper is not None)]
    if not cut or any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elements):
        return None  # a head-dim cut after an ellipsis: MLA's K and V share the latent
    return Break(
        "twin-name", value, twin.lineno,
        f"the value takes the same part of `{dotted_name(value.value) or base}` as its key twin (line {twin.lineno}): "
        "V becomes a copy of K",
        "cut the value's own part (the next rows or the second half)",
    )


def _repeated_key_statements(function: ast.AST, key_only: set[int], known: Callable[[], _Names], pairs) -> list[Break]:
    """``prefetch(tma_k)`` twice in one block where ``tma_v`` exists: the V statement became a
    second copy of its K twin, every V name turned back into its K name."""
    found: list[Break] = []
    for body in blocks(function):
        candidates = [s for s in body if id(s) in key_only]
        # Two copies of a statement in one block span as many lines and columns: only those
        # are compared whole.
        widths = Counter(_width(s) for s in candidates)
        seen: dict[str, ast.stmt] = {}
        for statement in candidates:
            if widths[_width(statement)] < 2:
                continue
            key = ast.dump(statement)
            first = seen.get(key)
            seen[key] = statement
            if first is None or statement.lineno - first.lineno > _WINDOW:
                continue
            kept = _key_name_with_value_twin(statement, known(), pairs)
            if kept is not None:
                node, twin = kept
                found.append(Break(
                    "twin-name", node, first.lineno,
                    f"this statement repeats line {first.lineno} word for word, key side and all, "
                    f"though the value counterpart `{twin}` exists: the value side's copy kept the key's names",
                    f"use `{twin}` in the value side's statement",
                ))
    return found


def _width(statement: ast.stmt) -> tuple[int, int]:
    return statement.end_lineno - statement.lineno, statement.end_col_offset - statement.col_offset


def _effect(statement: ast.stmt) -> bool:
    """A call for its effect, or a store into a subscript or attribute: statements that are
    done once per side, never twice alike."""
    if isinstance(statement, ast.Expr):
        return isinstance(statement.value, ast.Call) and tail(statement.value.func) not in _QUIET
    if isinstance(statement, ast.Assign):
        return all(isinstance(t, (ast.Subscript, ast.Attribute)) for t in statement.targets)
    return False


def _key_name_with_value_twin(statement: ast.stmt, names: _Names, pairs) -> tuple[ast.AST, str] | None:
    kept = None
    for node in walk(statement):
        word = tail(node)
        if word is None:
            continue
        side = kv_side(word, pairs)
        if side == "v":
            return None
        if side == "k" and kept is None:
            twin = twin_name(word, pairs)
            dotted = dotted_name(node)
            twin_dotted = None if dotted is None else dotted[: -len(word)] + twin
            if names.exists(twin, twin_dotted, statement.lineno):
                kept = (node, twin_dotted or twin)
    return kept


# ---------------------------------------------------------------- comparing twins


@dataclass
class _Diff:
    k: object  # the K twin's node (or value) there
    v: object  # the V statement's node (or value) there
    path: tuple[ast.AST, ...]  # the V statement's nodes above it, outermost first
    order: bool = False  # a list whose elements are the twin's, reordered
    kept: bool = False  # a K expression of several names kept whole
    dropped: bool = False  # the twin's op (or cut) applied to what the V side has bare
    axes: bool = False  # a call moving axes (``transpose``) with other integer axes than the twin's
    kept_word: str | None = None  # the K name the V side kept where the renaming changes it


# The answer for a V statement that mirrors its K twin exactly.
_MIRROR = _Diff(None, None, ())


class _Differs(Exception):
    """More than one difference: no twins."""


def _one_difference(k_statement: ast.stmt, v_statement: ast.stmt, pairs) -> _Diff | None:
    """The single place where ``v_statement`` differs from ``k_statement`` renamed K -> V;
    ``_MIRROR`` when they are equal (nothing broke); None when they differ in more than one
    place, or rename nothing (no twins)."""
    if type(k_statement) is not type(v_statement):
        return None
    found = _Found()
    try:
        _compare(k_statement, v_statement, pairs, found, [])
    except _Differs:
        return None
    # Twins rename at least one K name to its V counterpart: two copies of one statement that
    # names both sides (``o = attend(q, k, v)`` in two branches) are no pair.
    if not found.renamed:
        return None
    if not found:
        return _MIRROR
    return found[0]


def twin_name(word: str, pairs) -> str:
    """``word`` with its K side renamed to its V side (itself: no K-side word, or a fused one);
    with ``QUERY_TO_KEY`` for ``pairs``, its query side renamed to its key side."""
    if pairs is QUERY_TO_KEY:
        return query_to_key(word)
    twin = value_counterpart(word, pairs)
    if twin is None or _fused(word):
        return word
    return twin


class _QueryToKey(tuple):
    """The renaming of Q/K twins (``q_norm`` -> ``k_norm``), passed where K/V pairs go."""


QUERY_TO_KEY = _QueryToKey()
_Q_TO_K = {"q": "k", "Q": "K", "query": "key", "Query": "Key", "queries": "keys", "xq": "xk", "wq": "wk"}


@lru_cache(maxsize=1 << 14)
def query_to_key(word: str) -> str:
    """``word`` with its one query part renamed to the key's (itself: none, or several)."""
    return _rename_one_part(word, _Q_TO_K)


def _rename_one_part(word: str, table: dict[str, str]) -> str:
    parts = word.split("_")
    hits = [i for i, part in enumerate(parts) if part in table]
    if len(hits) != 1:
        return word
    parts[hits[0]] = table[parts[hits[0]]]
    return "_".join(parts)


_FUSED = re.compile(r"(?:^|_)(?:key_value|keys_values|k_v|K_V)(?:_|$)")


def _fused(word: str) -> bool:
    """``num_key_value_groups``, ``k_v_cache``: a name of both sides at once, no side's."""
    return _FUSED.search(word) is not None


def _record(found: list[_Diff], diff: _Diff) -> None:
    found.append(diff)
    # One place, or one K name kept wherever it stands (``[c.key_cache[i] for c in s if
    # c.key_cache[i]]`` for the value list): a copy that swapped the other names.
    if len(found) > 1 and (diff.kept_word is None or diff.kept_word != found[0].kept_word):
        raise _Differs


def _compare(k: object, v: object, pairs, found: list[_Diff], path: list[ast.AST]) -> None:
    if isinstance(k, ast.AST):
        if int_value(k) is not None and int_value(v) is not None:
            if int_value(k) != int_value(v):
                _record(found, _Diff(k, v, tuple(path)))
            return
        inner = dropped_operand(k, v)
        if inner is not None:
            # ``v = v.view(s)`` beside ``k = k.view(s).transpose(1, 2)``: the V side equals the
            # twin's operand, one op short. One difference, not a cascade of them.
            sub = _Found()
            try:
                _compare(inner, v, pairs, sub, path)
            except _Differs:
                sub = None
            if sub is not None and not sub:
                found.renamed = found.renamed or sub.renamed
                _record(found, _Diff(k, v, tuple(path), dropped=True))
                return
        if type(k) is not type(v):
            _record(found, _Diff(k, v, tuple(path)))
            return
        if isinstance(k, ast.Name):
            _compare_words(k.id, v.id, k, v, pairs, found, path)
            return
        if isinstance(k, ast.Constant):
            if type(k.value) is not type(v.value) or (
                k.value != v.value and not (type(k.value) is str and twin_name(k.value, pairs) == v.value)
            ):
                _record(found, _Diff(k, v, tuple(path)))
            return
        if isinstance(k, ast.Call) and axes_differ(k, v):
            _record(found, _Diff(k, v, tuple(path), axes=True))
            path.append(v)
            try:
                _compare(k.func, v.func, pairs, found, path)
            finally:
                path.pop()
            return
        if isinstance(k, ast.Attribute):
            _compare_words(k.attr, v.attr, k, v, pairs, found, path)
            # The receivers must still agree: ``x.k_proj`` vs ``y.k_proj`` is two differences.
        if isinstance(k, (ast.List, ast.Tuple)) and len(k.elts) == len(v.elts) and len(k.elts) > 1:
            if _reordered(k, v, pairs):
                _record(found, _Diff(k, v, tuple(path), order=True))
                return
        if isinstance(k, _COMPOUND):
            # ``cache_v[a:cache_k.size(2) + key.size(2)]`` beside ``cache_k[a:cache_k.size(2) +
            # key.size(2)]``: a whole K expression kept is one difference, however many names.
            sub = _Found()
            try:
                _compare_fields(k, v, pairs, sub, path)
            except _Differs:
                if ast.dump(k) != ast.dump(v):
                    raise
                _record(found, _Diff(k, v, tuple(path), kept=True))
                return
            found.renamed = found.renamed or sub.renamed
            for diff in sub:
                _record(found, diff)
            return
        _compare_fields(k, v, pairs, found, path)
        return
    if isinstance(k, list):
        if not isinstance(v, list) or len(k) != len(v):
            # An element more or less: the parent node is where they differ.
            _record(found, _Diff(path[-1] if path else k, path[-1] if path else v, tuple(path[:-1])))
            return
        for a, b in zip(k, v):
            _compare(a, b, pairs, found, path)
        return
    if k != v and not (isinstance(k, str) and isinstance(v, str) and twin_name(k, pairs) == v):
        _record(found, _Diff(k, v, tuple(path)))


_COMPOUND = (ast.BinOp, ast.Call, ast.Subscript)


def _compare_fields(k: ast.AST, v: ast.AST, pairs, found: list[_Diff], path: list[ast.AST]) -> None:
    path.append(v)
    try:
        for field in k._fields:
            if field in ("ctx", "type_comment", "kind"):
                continue
            a, b = getattr(k, field, None), getattr(v, field, None)
            if field == "arg" and isinstance(a, str) and isinstance(b, str):
                _compare_words(a, b, k, v, pairs, found, path)
                continue
            if field in ("attr", "id"):
                continue
            _compare(a, b, pairs, found, path)
    finally:
        path.pop()


def _compare_words(a: str, b: str, k: ast.AST, v: ast.AST, pairs, found: list, path: list) -> None:
    renamed = twin_name(a, pairs)
    if renamed != b:
        _record(found, _Diff(k, v, tuple(path), kept_word=a if a == b and isinstance(v, (ast.Name, ast.Attribute)) else None))
    elif renamed != a:
        found.renamed = True  # a K name met by its V counterpart: the statements are twins


class _Found(list):
    renamed = False


def _reordered(k: ast.AST, v: ast.AST, pairs) -> bool:
    """Are ``v``'s elements ``k``'s (renamed) in another order?"""
    mine = [ast.dump(e) for e in v.elts]
    theirs = [ast.dump(_rename_tree(e, pairs)) for e in k.elts]
    return mine != theirs and sorted(mine) == sorted(theirs)


def _rename_tree(node: ast.AST, pairs, rename: Callable[[str, object], str] | None = None) -> ast.AST:
    """A copy of ``node`` with its names renamed (K -> V unless ``rename`` says otherwise)."""
    rename = rename or twin_name

    class _Renamer(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            return ast.copy_location(ast.Name(id=rename(n.id, pairs), ctx=n.ctx), n)

        def visit_Attribute(self, n: ast.Attribute) -> ast.AST:
            return ast.copy_location(ast.Attribute(value=self.visit(n.value), attr=rename(n.attr, pairs), ctx=n.ctx), n)

    return _Renamer().visit(copy.deepcopy(node))


_K_TO_Q = {"k": "q", "K": "Q", "key": "query", "Key": "Query", "keys": "queries", "xk": "xq", "wk": "wq"}


def _to_query(word: str, pairs) -> str:
    return _rename_one_part(word, _K_TO_Q)


def _query_step(op: object, twin: ast.stmt, statement: ast.stmt, statements: list[ast.stmt], names: _Names, pairs) -> bool:
    """Is the op the V statement lacks a Q/K step? The query gets it too, and it is a head
    expansion (linear attention expands Q and K to V's heads), or a layout move that Q and K
    undo (or V takes) further down on the same path: RoPE's layout. A cut of Q and K alike, or
    a move none undoes, is the layout all three need, V's included."""
    if not _shared_with_query(twin, [s for s in statements if abs(s.lineno - twin.lineno) <= _WINDOW], pairs):
        return False
    if not isinstance(op, ast.Call) or not isinstance(op.func, ast.Attribute) or op.func.attr not in MOVES:
        return isinstance(op, ast.Call)
    axes = axis_list(op)
    if axes is None:
        return True  # axes not read: no claim
    undo = _inverse(op.func.attr, axes)
    targets = {_target_name(twin), _target_name(statement)}
    targets |= {_to_query(n, pairs) for n in targets if n is not None}
    targets.discard(None)
    last = max(twin.lineno, statement.lineno)
    branch = names.branch(twin)
    value = _target_name(statement)
    moves = [
        root_word(node.func.value)
        for s in statements if s.lineno > last and names.branch(s)[:len(branch)] == branch
        for node in walk(s)
        if node.__class__ is ast.Call and isinstance(node.func, ast.Attribute) and node.func.attr == op.func.attr
        and axis_list(node) in (axes, undo) and root_word(node.func.value) in targets
    ]
    # Q and K moved and moved back while V stays (RoPE's layout), or V taking the move later:
    # V ends in the layout K ends in. V moved back alone never had the move.
    keys = 1 + sum(1 for word in moves if word != value and kv_side(word, pairs) == "k")
    values = sum(1 for word in moves if word == value)
    return bool(moves) and keys % 2 == values % 2


def _inverse(op: str, axes: list[int]) -> list[int]:
    """The axes of the move that undoes ``op(*axes)``."""
    if op == "permute" and sorted(axes) == list(range(len(axes))):
        inverse = [0] * len(axes)
        for i, a in enumerate(axes):
            inverse[a] = i
        return inverse
    if op in ("movedim", "moveaxis") and len(axes) == 2:
        return axes[::-1]
    return axes[::-1] if op in TRANSPOSES else axes


def _shared_with_query(twin: ast.stmt, nearby: list[ast.stmt], pairs) -> bool:
    """Does the query get the K twin's statement too (``q = q.view(s).transpose(1, 2)`` beside
    ``k = k.view(s).transpose(1, 2)``)? Then the op the V statement lacks is a Q/K step (RoPE's
    layout, Q and K expanded to V's heads in linear attention), not a K/V one."""
    want = ast.dump(_rename_tree(twin, pairs, _to_query))
    return want != ast.dump(twin) and any(ast.dump(s) == want for s in nearby)


# ---------------------------------------------------------------- what a difference means


def _classify(diff: _Diff, twin: ast.stmt, statement: ast.stmt, names: _Names, pairs) -> list[Break]:
    k, v, path = diff.k, diff.v, diff.path
    parent = path[-1] if path else None
    if diff.order:
        call = parent if isinstance(parent, ast.Call) else None
        if call is not None and tail(call.func) in CONCATS and call.args and call.args[0] is v:
            return [Break("one-side-op", v, twin.lineno,
                          f"the value side concatenates its parts in another order than its key twin (line {twin.lineno})",
                          "concatenate the value parts in the key's order")]
        return []
    if diff.axes:
        op, k_axes, v_axes = tail(v.func), axis_list(k), axis_list(v)
        if not isinstance(v.func, ast.Attribute) or transposed_for_scores(op, k_axes, v_axes):
            return []  # K transposed for ``Q @ K^T`` while V keeps its last axis last
        return [Break("one-side-op", v, twin.lineno,
                      f"the value side's `{op}({', '.join(map(str, v_axes))})` moves other axes than its key "
                      f"twin's `{op}({', '.join(map(str, k_axes))})` (line {twin.lineno})",
                      "move the value's axes as its key twin does")]
    if diff.kept:
        return _kept_key_expression(v, twin, statement, names, pairs)
    if isinstance(k, (ast.Name, ast.Attribute)) and isinstance(v, (ast.Name, ast.Attribute)):
        return _kept_key_name(k, v, parent, twin, statement, names, pairs)
    axis = axis_difference(k, v, path)
    if axis is not None:
        if _kept_transposed(int_value(k), int_value(v), twin, statement, names):
            return []
        return [Break("one-side-op", v, twin.lineno, axis, "move the value's axes as its key twin does")]
    dropped = dropped_op(k, pairs) if diff.dropped else None
    if dropped is not None and _moved_for_scores(k, twin, names):
        return []  # K's axes moved for the product with Q (``baddbmm(q, k)``); V's layout suits ``probs @ V``
    if dropped is not None:
        kind, text = dropped
        return [Break(kind, v, twin.lineno, f"{text} (key twin at line {twin.lineno})",
                      "apply the key twin's operation to the value as well")]
    cut = slice_difference(k, v, path, pairs)
    if cut is not None:
        return [Break("one-side-slice", v, twin.lineno, f"{cut} (key twin at line {twin.lineno})",
                      "cut the value's tokens and heads as its key twin does")]
    return []


def _kept_transposed(k_axis: int, v_axis: int, twin: ast.stmt, statement: ast.stmt, names: _Names) -> bool:
    """K and V working along the last two axes, each its own (``cat(.., dim=-1)`` beside
    ``cat(.., dim=-2)``), where one side is kept transposed on purpose ([.., head_dim, seq], the
    layout ``Q @ K`` or a transposed-value kernel wants): the statement stands under a test
    naming a transposed layout (``if self.transpose_value:``), or the side working along the
    last axis is named transposed (``k_t``) or was laid out earlier in the function with its
    last axis moved (``key = key.reshape(..).transpose(-1, -2)``)."""
    if {k_axis, v_axis} != {-1, -2} and not (min(k_axis, v_axis) >= 0 and abs(k_axis - v_axis) == 1):
        return False
    if any(_names_transposition(test) for s in (twin, statement) for test in names.tests_above(s)):
        return True
    last = twin if (k_axis == -1 or (k_axis >= 0 and k_axis > v_axis)) else statement
    target = _target_name(last)
    if target is None:
        return False
    if _transposed_word(target):
        return True
    return any(
        _target_name(s) == target and s.lineno < last.lineno and _moves_last_axis(s.value)
        for s in names.assignments
    )


# Products that take the query first and the key second: the score product ``Q @ K``.
_SCORE_PRODUCTS = frozenset({"matmul", "bmm", "baddbmm", "mm"})


def _moved_for_scores(k: ast.AST, twin: ast.stmt, names: _Names) -> bool:
    """The K twin moves axes (``.transpose(1, 2)``) and what it binds is next multiplied by a
    query (``alibi.baddbmm(batch1=query, batch2=key)``, ``torch.bmm(q, k)``, ``q @ k``): K laid
    out as ``K^T`` for the scores, which V, multiplied from the right of the probabilities,
    never needs."""
    if not (isinstance(k, ast.Call) and tail(k.func) in MOVES):
        return False
    target = _target_name(twin)
    if target is None:
        return False
    for node in walk(names.function):
        if getattr(node, "lineno", 0) <= twin.lineno:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Call) and tail(node.func) in _SCORE_PRODUCTS:
            operands = [*node.args, *(keyword.value for keyword in node.keywords)]
        else:
            continue
        # K taken as bound: a product that moves K again (``q @ k.transpose(-2, -1)``) shows
        # that the earlier move was a heads move, which V needs as well.
        words = [operand.id if isinstance(operand, ast.Name) else root_word(operand) for operand in operands]
        bare = [isinstance(operand, (ast.Name, ast.Attribute)) for operand in operands]
        at = next((i for i, word in enumerate(words) if word == target and bare[i]), None)
        if at is not None and any(is_query_name(word) for word in words[:at]):
            return True
    return False


def _names_transposition(test: ast.expr) -> bool:
    return any(
        word is not None and ("transpos" in word.lower() or "trans" in word.lower().split("_"))
        for word in map(tail, walk(test))
    )


def _transposed_word(word: str) -> bool:
    low = word.lower()
    return "transpos" in low or any(part in ("t", "trans") for part in low.split("_")) or word[-1:] == "T" and len(word) <= 3


def _target_name(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        return tail(statement.targets[0])
    return None


def _moves_last_axis(value: ast.expr) -> bool:
    """A chain that moves the last axis: ``.transpose(-1, -2)``, ``.permute(0, 2, 3, 1)``."""
    for node in walk(value):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MOVES:
            axes = axis_list(node)
            if axes is not None and moves_last_axis(node.func.attr, node):
                return True
    return False


def _kept_key_name(k, v, parent, twin, statement, names: _Names, pairs) -> list[Break]:
    """``v = self.k_proj(x)`` beside ``k = self.k_proj(x)``: the V statement kept the K name."""
    k_word, v_word = tail(k), tail(v)
    if k_word != v_word or kv_side(k_word, pairs) != "k":
        return []
    if isinstance(parent, ast.Attribute) and parent.value is v and parent.attr in METADATA_ATTRIBUTES:
        return []  # ``k.dtype`` for ``v.dtype``: K and V agree on metadata
    if isinstance(v, ast.Name) and v.id in names.loop_names:
        return []
    if isinstance(v, ast.Name) and isinstance(parent, ast.Call) and any(
        a is v and i and is_query_name(tail(parent.args[i - 1])) for i, a in enumerate(parent.args)
    ):
        # ``check(v_scale, query, key)``: the query and key as context, not a copy. The key as
        # the first operand (``cast(k_tile, q, v_scale)`` for ``cast(v_tile, q, v_scale)``) is.
        return []
    twin_word = twin_name(k_word, pairs)
    if names.asserted_equal(k_word, twin_word):
        return []
    dotted = dotted_name(v)
    twin_dotted = None if dotted is None else (dotted[: -len(v_word)] + twin_word)
    # The counterpart as written (``self.v_proj``, ``layer.v_scale``), or its name on any
    # object of the function or class (``cache.get_value_cache`` read from another cache).
    if not names.exists(twin_word, twin_dotted, statement.lineno):
        return []
    shown = twin_dotted or twin_word
    where = "stored into" if isinstance(getattr(v, "ctx", None), ast.Store) or _in_target(v, statement) else "uses"
    return [Break(
        "twin-name", v, twin.lineno,
        f"the value side {where} `{dotted or v_word}`, the name its key twin (line {twin.lineno}) "
        f"uses, though the value counterpart `{shown}` exists",
        f"use `{shown}` on the value side",
    )]


def _kept_key_expression(v: ast.AST, twin: ast.stmt, statement: ast.stmt, names: _Names, pairs) -> list[Break]:
    """A V statement keeping a whole K expression (``cache_k.size(2) + key_states.size(2)``)
    whose V counterparts (``cache_v``, ``value_states``) exist."""
    # ``dtype=key.dtype, device=key.device``: K and V share dtype and device.
    shared = {
        id(n.value) for n in walk(v) if n.__class__ is ast.Attribute and n.attr in _SHARED_METADATA
    }
    if _allocates(statement):
        # ``torch.zeros(key.shape, dtype=self.k_proj.weight.dtype)``: every name under a metadata
        # read (its object chain included) asks for K's geometry only.
        shared |= {
            id(inner) for n in walk(v) if n.__class__ is ast.Attribute and n.attr in METADATA_ATTRIBUTES
            for inner in walk(n.value)
        }
    renamed = [
        (word, twin_name(word, pairs)) for word, n in ((tail(n), n) for n in walk(v))
        if word is not None and id(n) not in shared and kv_side(word, pairs) == "k"
    ]
    if not renamed or not all(names.exists(twin_word, None, statement.lineno) for _, twin_word in renamed):
        return []
    shown = ", ".join(sorted({f"`{w}`" for _, w in renamed}))
    return [Break(
        "twin-name", v, twin.lineno,
        f"the value side keeps its key twin's expression (line {twin.lineno}) whole, key-side names and all, "
        f"though the value counterparts {shown} exist",
        f"use {shown} on the value side",
    )]


def _allocates(statement: ast.stmt) -> bool:
    value = getattr(statement, "value", None)
    return isinstance(value, ast.Call) and tail(value.func) in _ALLOCATIONS


def _in_target(node: ast.AST, statement: ast.stmt) -> bool:
    targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
    return any(t is not None and any(n is node for n in walk(t)) for t in targets)


# ---------------------------------------------------------------- reaching definitions


# ---------------------------------------------------------------- small helpers


