"""One-pass facts about a function (or module) scope, shared by the data-flow rules.

A ``Scope`` records, in source order, every simple binding, subscript access and call of one
function body (nested functions and classes are scopes of their own), plus which names are
certainly not tensors. Rules ask it questions instead of walking the tree per name. The model
is built once per scope node and cached, so every rule in a batched traversal shares it.

Order is pre-order position in the walk: "before" means earlier in the source, ignoring control
flow, which is what a linter can afford and is right for straight-line attention code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import libcst as cst

from linter.model.einsum import Einsum, einsum_of, is_scores, is_weighted_sum
from linter.model.functions import params_of
from linter.model.names import (
    LATENT_ATTENTION,
    METADATA_ATTRIBUTES,
    QUIET_CALLS,
    is_attention_word,
    is_kv_projection,
    is_kv_tensor_name,
    kv_side,
    value_counterpart,
)
from linter.model.pairs import callee_tail, dotted_name, is_attention_call, source_of
from linter.model.reshapes import (
    PIECEWISE,
    reshape_of,
    see_through,
    strip_shape_keeping,
)
from linter.model.tensor_roots import tensor_root

# Iterables whose loop targets are keys, indices or counters, not tensors.
_NON_TENSOR_ITERABLES = frozenset({"items", "keys", "range", "enumerate"})
# Calls that only materialise or reorder an iterable: ``list(d.keys())`` still yields keys.
_ORDERING_WRAPPERS = frozenset({"list", "tuple", "sorted", "reversed", "set"})
# Matrix products written as calls (``torch.matmul(p, v)``, ``torch.bmm(q, k.transpose(1, 2))``).
_MATMUL_CALLS = frozenset({"matmul", "bmm"})
# What a softmax's weights may not pass through between einsum scores and their weighted sum
# (``scopes.Scope._weights_of``): another product, or a join with other scores (BigBird
# concatenates the bands of several keys, then sums slices of the weights with other values).
_PRODUCT_CALLS = _MATMUL_CALLS | {"einsum", "mm", "cat", "concat", "concatenate", "stack"}
# Fields that hold only whitespace, brackets and punctuation: never worth descending into.
_SKIPPED_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
    "footer", "trailing_whitespace", "newline", "operator", "equal", "colon", "star",
    "lbracket", "rbracket", "lbrace", "rbrace", "dot", "whitespace_before", "whitespace_after",
    "decorators", "returns", "annotation",
})


# The ``if`` arms a site sits in: (id of the If node, 0 for its body or 1 for its else/elif),
# and the loop bodies: (id of the For/While node, LOOP_BODY).
Branch = tuple[tuple[int, int], ...]
LOOP_BODY = 2


def loops_around(site: object) -> frozenset[int]:
    """The ``for``/``while`` statements whose body holds a site."""
    return frozenset(node for node, arm in getattr(site, "branch", ()) if arm == LOOP_BODY)


@dataclass(frozen=True)
class Binding:
    name: str
    order: int
    # The right-hand side of ``name = value`` (or the iterable of ``for name in ...``).
    value: cst.BaseExpression | None
    # "assign", "loop", "param", "piece" (unpacked from a split or chunk), "aug" (``x += y``,
    # ``x *= s``: the name keeps its earlier value, updated) or "other" (other unpacking, with,
    # import, def)
    kind: str
    # The statement line when the assignment is alone on it (where a fix can insert a mirror).
    line: cst.SimpleStatementLine | None = None
    # Walk-order range of the value: the calls and accesses inside it have orders in between.
    value_orders: tuple[int, int] = (0, 0)
    # Bound by a comprehension's ``for``: visible inside that comprehension only.
    comprehension: bool = False


@dataclass(frozen=True)
class Access:
    """A subscript chain on a named object: ``k_pool[layer][ids]`` is one access."""

    node: cst.Subscript  # the outermost subscript
    base: str
    chain: tuple[cst.Subscript, ...]  # innermost first
    order: int
    store: bool
    quiet: bool
    branch: Branch = ()
    # The axis-moving steps between the base and the subscript (``.transpose(1,2)`` in
    # ``k.transpose(1, 2)[:, :, :n]``), whitespace removed; empty when the base is subscripted.
    through: str = ""


@dataclass(frozen=True)
class CallSite:
    node: cst.Call
    tail: str | None
    order: int
    quiet: bool
    branch: Branch = ()


@dataclass(frozen=True)
class MatMul:
    """``a @ b``, ``torch.matmul(a, b)`` or ``torch.bmm(a, b)``."""

    node: cst.BaseExpression
    left: cst.BaseExpression
    right: cst.BaseExpression
    order: int
    quiet: bool
    branch: Branch = ()


@dataclass(frozen=True)
class EinsumSite:
    """An ``einsum`` of two operands whose equation could be read (``linter.model.einsum``)."""

    einsum: Einsum
    order: int
    quiet: bool
    branch: Branch = ()


@dataclass(frozen=True)
class HandAttention:
    """Attention written out: ``s = q @ k.transpose(-2, -1)``, a softmax, then ``p @ v``.

    ``key`` is the K operand under its transpose, ``value`` the V operand; the pair reads like
    the key and value arguments of an attention kernel (``tail`` names it in messages).
    """

    node: cst.BaseExpression  # the value product ``p @ v``
    key: cst.BaseExpression
    value: cst.BaseExpression
    order: int
    tail: str = "hand-written attention"
    # The key's number of axes when the product says it (an einsum term without ``...``).
    rank: int | None = None


def exclusive(a: object, b: object) -> bool:
    """Do two sites sit in different arms of one ``if`` (``if is_v: ... else: ...``)? Then no run
    of the function executes both, and they cannot be compared as a K/V pair."""
    arms = dict(getattr(a, "branch", ()))
    return any(node in arms and arms[node] != arm for node, arm in getattr(b, "branch", ()))


@dataclass
class Scope:
    node: cst.CSTNode
    enclosing: tuple[str, ...]  # names of the enclosing classes and functions, outermost first
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    accesses: list[Access] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    non_tensors: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    names_used: set[str] = field(default_factory=set)
    matmuls: list[MatMul] = field(default_factory=list)
    einsums: list[EinsumSite] = field(default_factory=list)
    # Every rule asks; the answer depends only on the configured extra callables.
    _attention: dict[tuple[str, ...], bool] = field(default_factory=dict, repr=False)
    _hand: list[HandAttention] | None = field(default=None, repr=False)

    def binding_before(self, name: str, order: int) -> Binding | None:
        found = None
        for binding in self.bindings.get(name, ()):
            if binding.order >= order:
                break
            found = binding
        return found

    def visible_at(self, name: str, order: int) -> bool:
        """Can code written at walk order ``order`` (a statement of this body, not inside a
        comprehension) read ``name``? Names bound nowhere here are globals or builtins; a name
        bound here must be bound before, and not only by a comprehension's ``for``."""
        bindings = self.bindings.get(name)
        if not bindings:
            return True
        return any(b.order < order and not b.comprehension for b in bindings)

    def rebound_between(self, name: str, start: int, end: int) -> bool:
        return any(start < b.order < end for b in self.bindings.get(name, ()))

    def calls_within(self, orders: tuple[int, int]) -> Iterator[CallSite]:
        return (c for c in self.calls if orders[0] < c.order < orders[1])

    def accesses_within(self, orders: tuple[int, int]) -> Iterator[Access]:
        return (a for a in self.accesses if orders[0] < a.order < orders[1])

    def is_bound_or_used(self, name: str) -> bool:
        return name in self.bindings or name in self.names_used

    def attention_calls(self, extra_callables: Iterable[str] = ()) -> list[CallSite]:
        extra = tuple(extra_callables)
        return [c for c in self.calls if not c.quiet and is_attention_call(c.node, extra)]

    def is_attention_code(self, extra_callables: Iterable[str] = ()) -> bool:
        """Attention call, attention-named function/class, or K/V projections in this scope."""
        extra = tuple(extra_callables)
        if extra not in self._attention:
            self._attention[extra] = self._has_attention_sign(extra)
        return self._attention[extra]

    def _has_attention_sign(self, extra_callables: tuple[str, ...]) -> bool:
        return (
            any(is_attention_word(name) or LATENT_ATTENTION.search(name) for name in self.enclosing)
            or any(is_kv_projection(attr) for attr in self.attributes)
            # ``self.attn(...)``, ``ring_flash_attn_forward(...)``: attention-named callees.
            or any(c.tail is not None and is_attention_word(c.tail) for c in self.calls)
            or bool(self.attention_calls(extra_callables))
            or bool(self.hand_attention())
        )

    def hand_attention(self) -> list[HandAttention]:
        """Attention written out in this scope: a softmax, scores from a matrix product with a
        transposed K-side tensor, and a product with that tensor's V twin after it. All three
        are needed: ``x @ w.transpose(0, 1)`` alone is a linear layer, a softmax alone a
        classifier."""
        if self._hand is None:
            self._hand = self._find_hand_attention()
        return self._hand

    def _find_hand_attention(self) -> list[HandAttention]:
        if not (self.matmuls or self.einsums) or not any(c.tail == "softmax" and not c.quiet for c in self.calls):
            return []
        found = self._einsum_attention()
        for scores in self.matmuls:
            key = _transposed_operand(scores.right)
            root = None if key is None or scores.quiet else tensor_root(key)
            if root is None or not is_kv_tensor_name(root) or kv_side(root) != "k":
                continue
            twin = value_counterpart(root)
            for product in self.matmuls:
                if product.order > scores.order and not product.quiet and tensor_root(product.right) == twin:
                    found.append(HandAttention(product.node, key, product.right, product.order))
                    break
        return found

    def _einsum_attention(self) -> list[HandAttention]:
        """``s = einsum("bhqd,bhkd->bhqk", q, k)``, a softmax of ``s``, then ``einsum("bhqk,
        bhkd->bhqd", p, v)`` (or ``p @ v``). The equations say which product is which
        (``linter.model.einsum``), and the weights must be the softmax of these scores with no other
        product in between: an MLA absorption (``einsum(q_nope, w_kc)``) feeds a second product
        before any softmax, a K-only indexer's scores are never multiplied with a value."""
        found = []
        for scores in self.einsums:
            if scores.quiet:
                continue
            for index in (1, 0):
                key = _transposed_operand(scores.einsum.operands[index]) or scores.einsum.operands[index]
                root = tensor_root(key)
                if root is not None and is_kv_tensor_name(root) and kv_side(root) == "k" and is_scores(scores.einsum, index):
                    break
            else:
                continue
            twin = value_counterpart(root)
            for order, node, weights, value in self._weighted_sums(twin, scores.order):
                if self._weights_of(weights, order, scores.einsum.node):
                    found.append(HandAttention(node, key, value, order, rank=scores.einsum.ranks[index]))
                    break
        return found

    def _weighted_sums(self, twin: str | None, after: int) -> Iterator[tuple[int, cst.BaseExpression, cst.BaseExpression, cst.BaseExpression]]:
        """(order, node, weights, value) of every product of something with ``twin`` after
        walk order ``after``: ``einsum(eq, p, v)`` summing over the value's tokens, ``p @ v``."""
        sites = []
        for site in self.einsums:
            if site.order <= after or site.quiet:
                continue
            for index in (1, 0):
                if tensor_root(site.einsum.operands[index]) == twin and is_weighted_sum(site.einsum, index):
                    sites.append((site.order, site.einsum.node, site.einsum.operands[1 - index], site.einsum.operands[index]))
                    break
        for product in self.matmuls:
            if product.order > after and not product.quiet and tensor_root(product.right) == twin:
                sites.append((product.order, product.node, product.left, product.right))
        yield from sorted(sites, key=lambda site: site[0])

    def _weights_of(self, expr: cst.BaseExpression, order: int, scores: cst.Call, softmax: bool = False,
                    hops: int = 0) -> bool:
        """Is ``expr`` (read at walk order ``order``) a softmax of ``scores``, through names,
        casts, masks, dropout and scaling, but through no other matrix product and no join
        with other scores?"""
        names, tails, reached = _reads(expr, scores)
        softmax = softmax or "softmax" in tails
        if reached:
            return softmax
        if tails & _PRODUCT_CALLS or hops >= _MAX_FLOW_HOPS:
            return False
        for name in names:
            binding = self.binding_before(name, order)
            while binding is not None and binding.kind == "aug":
                binding = self.binding_before(name, binding.order)
            if binding is None or binding.kind != "assign" or binding.value is None:
                continue
            if self._weights_of(binding.value, binding.order, scores, softmax, hops + 1):
                return True
        return False


# Rules of one traversal ask for the same scope in turn; a small cache lets them share it.
_CACHE: dict[int, tuple[cst.CSTNode, Scope]] = {}
_CACHE_SIZE = 16


def scope_of(node: cst.FunctionDef | cst.Module, enclosing: tuple[str, ...]) -> Scope:
    cached = _CACHE.get(id(node))
    if cached is not None and cached[0] is node:
        return cached[1]
    scope = _build(node, enclosing)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(node)] = (node, scope)
    return scope


class ScopeTracking:
    """Mixin for rules: calls ``check_scope`` once per function and once for module code."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._enclosing: list[str] = []

    def check_scope(self, scope: Scope) -> None:
        raise NotImplementedError

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enclosing.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._enclosing.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enclosing.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.check_scope(scope_of(original_node, tuple(self._enclosing)))
        self._enclosing.pop()

    def leave_Module(self, original_node: cst.Module) -> None:
        self.check_scope(scope_of(original_node, ()))

    def report_mismatch(self, found: Mismatch, message: str, suggestion: str) -> None:
        """Report at the unmatched side, naming the other side as related (needs Rule.report)."""
        k_text, v_text = source_of(found.key.node), source_of(found.value.node)
        if found.anchor == "k":
            anchor, other = found.key.node, (found.value.node, f"V side: `{v_text}`")
        else:
            anchor, other = found.value.node, (found.key.node, f"K side: `{k_text}`")
        self.report(anchor, message, suggestion=suggestion, related=[other])


def _build(node: cst.FunctionDef | cst.Module, enclosing: tuple[str, ...]) -> Scope:
    scope = Scope(node, enclosing)
    walker = _Walker(scope)
    if isinstance(node, cst.FunctionDef):
        for param in params_of(node.params):
            walker.bind(param.name.value, None, "param")
        walker.walk(node.body)
    else:
        walker.walk_all(node.body)
    return scope


_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[kind] = names
    return names


class _Walker:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.order = 0
        self.line: cst.SimpleStatementLine | None = None
        self.comprehension = False  # binding a comprehension ``for``'s targets now
        self.branch: Branch = ()

    def bind(self, name: str, value: cst.BaseExpression | None, kind: str,
             value_orders: tuple[int, int] = (0, 0), alone: bool = True) -> None:
        line = self.line if kind == "assign" and alone else None
        self.scope.bindings.setdefault(name, []).append(
            Binding(name, self.order, value, kind, line, value_orders, self.comprehension)
        )

    def walk_all(self, nodes: Iterable[cst.CSTNode], quiet: bool = False, store: bool = False) -> None:
        for child in nodes:
            self.walk(child, quiet, store)

    def walk(self, node: cst.CSTNode, quiet: bool = False, store: bool = False) -> None:
        self.order += 1
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            handler(self, node, quiet, store)
        else:
            self.generic(node, quiet, store)

    def generic(self, node: cst.CSTNode, quiet: bool, store: bool) -> None:
        for name in _child_fields(node):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                self.walk(value, quiet, store)
            elif isinstance(value, (tuple, list)):
                for item in value:
                    if isinstance(item, cst.CSTNode):
                        self.walk(item, quiet, store)

    # Scope boundaries: the name is bound here, the body belongs to its own scope.
    def nested_def(self, node: cst.FunctionDef | cst.ClassDef, quiet: bool, store: bool) -> None:
        self.bind(node.name.value, None, "other")

    def simple_line(self, node: cst.SimpleStatementLine, quiet: bool, store: bool) -> None:
        self.line = node if len(node.body) == 1 else None
        self.walk_all(node.body, quiet)
        self.line = None

    def assign(self, node: cst.Assign, quiet: bool, store: bool) -> None:
        if len(node.targets) == 1 and _pairs_up(node.targets[0].target, node.value):
            self.unpack(node.targets[0].target, node.value, quiet)
            return
        if len(node.targets) == 1 and _splits_into(node.targets[0].target, node.value):
            # ``k1, k2 = torch.split(k, [a, b], dim=1)``: each name is one piece of the split.
            start = self.order
            self.walk(node.value, quiet)
            for element in node.targets[0].target.elements:
                self.bind(element.value.value, node.value, "piece", (start, self.order + 1), alone=False)
            return
        start = self.order
        self.walk(node.value, quiet)
        for target in node.targets:
            self.bind_target(target.target, node.value, quiet, (start, self.order + 1))

    def ann_assign(self, node: cst.AnnAssign, quiet: bool, store: bool) -> None:
        if node.value is not None:
            start = self.order
            self.walk(node.value, quiet)
            self.bind_target(node.target, node.value, quiet, (start, self.order + 1))

    def aug_assign(self, node: cst.AugAssign, quiet: bool, store: bool) -> None:
        self.walk(node.value, quiet)
        if isinstance(node.target, cst.Name):
            self.bind(node.target.value, None, "aug")
        else:
            self.bind_target(node.target, None, quiet)

    def unpack(self, target: cst.Tuple | cst.List, value: cst.Tuple | cst.List, quiet: bool) -> None:
        """``q, k = q[:n], k[:n]``: each name is bound to its own element, as if assigned alone.

        The statement binds several names, so it is no line a fix could mirror (``line`` is None).
        """
        self.order += 1  # the value tuple itself
        elements = []
        for element in value.elements:
            start = self.order
            self.walk(element.value, quiet)
            elements.append((element.value, (start, self.order + 1)))
        for name, (element, orders) in zip(target.elements, elements):
            if isinstance(name.value, cst.Name):
                self.bind(name.value.value, element, "assign", orders, alone=False)
            else:
                self.bind_target(name.value, None, quiet)

    def bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None,
                    quiet: bool, value_orders: tuple[int, int] = (0, 0)) -> None:
        if isinstance(target, cst.Name):
            self.bind(target.value, value, "assign" if value is not None else "other", value_orders)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind_target(element.value, None, quiet)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, None, quiet)
        else:
            self.walk(target, quiet, store=True)

    def loop(self, node: cst.For | cst.CompFor, quiet: bool, store: bool) -> None:
        self.walk(node.iter, quiet)
        self.comprehension = isinstance(node, cst.CompFor)
        self._bind_loop_target(node, quiet)
        self.comprehension = False
        if isinstance(node, cst.For):
            self.loop_body(node, quiet)
            if node.orelse is not None:
                self.walk(node.orelse, quiet)
        else:
            self.walk_all(node.ifs, quiet)
            if node.inner_for_in is not None:
                self.walk(node.inner_for_in, quiet)

    def loop_body(self, node: cst.For | cst.While, quiet: bool) -> None:
        outer = self.branch
        self.branch = (*outer, (id(node), LOOP_BODY))
        self.walk(node.body, quiet)
        self.branch = outer

    def while_(self, node: cst.While, quiet: bool, store: bool) -> None:
        self.walk(node.test, quiet)
        self.loop_body(node, quiet)
        if node.orelse is not None:
            self.walk(node.orelse, quiet)

    def _bind_loop_target(self, node: cst.For | cst.CompFor, quiet: bool) -> None:
        self.scope.non_tensors.update(_non_tensor_targets(node.target, node.iter))
        if isinstance(node.target, cst.Name):
            self.bind(node.target.value, node.iter, "loop")
        elif _zips_onto(node.target, node.iter):
            # ``for k_c, v_c in zip(k.chunk(n), v.chunk(n))``: each name walks its own iterable.
            for name, arg in zip(node.target.elements, node.iter.args):
                if isinstance(name.value, cst.Name):
                    self.bind(name.value.value, arg.value, "loop")
                else:
                    self.bind_target(name.value, None, quiet)
        else:
            self.bind_target(node.target, None, quiet)

    def if_(self, node: cst.If, quiet: bool, store: bool) -> None:
        self.walk(node.test, quiet)
        outer = self.branch
        self.branch = (*outer, (id(node), 0))
        self.walk(node.body, quiet)
        if node.orelse is not None:
            self.branch = (*outer, (id(node), 1))
            self.walk(node.orelse, quiet)
        self.branch = outer

    def with_item(self, node: cst.WithItem, quiet: bool, store: bool) -> None:
        self.walk(node.item, quiet)
        if node.asname is not None:
            self.bind_target(node.asname.name, None, quiet)

    def assert_(self, node: cst.Assert, quiet: bool, store: bool) -> None:
        self.generic(node, True, False)

    def formatted(self, node: cst.FormattedString, quiet: bool, store: bool) -> None:
        self.generic(node, True, False)

    def binary(self, node: cst.BinaryOperation, quiet: bool, store: bool) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self.scope.matmuls.append(MatMul(node, node.left, node.right, self.order, quiet, self.branch))
        self.generic(node, quiet, store)

    def call(self, node: cst.Call, quiet: bool, store: bool) -> None:
        tail = callee_tail(node)
        # A logging or assert call is quiet itself, not only in its arguments: nothing it is given
        # is attended over, so no rule may pair the arguments as a kernel's K and V.
        quiet_args = quiet or tail in QUIET_CALLS or (tail or "").startswith("assert")
        self.scope.calls.append(CallSite(node, tail, self.order, quiet_args, self.branch))
        if tail == "einsum":
            einsum = einsum_of(node)
            # A product of two: attention's scores and weighted sum are nothing else.
            if einsum is not None and len(einsum.operands) == 2:
                self.scope.einsums.append(EinsumSite(einsum, self.order, quiet, self.branch))
        if tail in _MATMUL_CALLS:
            operands = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
            if len(operands) == 2:
                self.scope.matmuls.append(MatMul(node, operands[0], operands[1], self.order, quiet, self.branch))
        self.walk(node.func, quiet)
        for arg in node.args:
            self.walk(arg.value, quiet_args)

    def subscript(self, node: cst.Subscript, quiet: bool, store: bool) -> None:
        chain = [node]
        inner = node.value
        while isinstance(inner, cst.Subscript):
            chain.append(inner)
            inner = inner.value
        base, through = dotted_name(inner), ""
        if base is None:
            base, through = see_through(inner)
        if base is not None:
            self.scope.accesses.append(
                Access(node, base, tuple(reversed(chain)), self.order, store, quiet, self.branch, through)
            )
        self.walk(inner, quiet)
        for sub in chain:
            for element in sub.slice:
                self.walk(element.slice, quiet)

    def attribute(self, node: cst.Attribute, quiet: bool, store: bool) -> None:
        self.scope.attributes.add(node.attr.value)
        self.walk(node.value, quiet or node.attr.value in METADATA_ATTRIBUTES)

    def name(self, node: cst.Name, quiet: bool, store: bool) -> None:
        self.scope.names_used.add(node.value)

    def lambda_(self, node: cst.Lambda, quiet: bool, store: bool) -> None:
        self.walk(node.body, quiet)


def _iterates_keys_or_counters(iterable: cst.BaseExpression) -> bool:
    """``d.items()``, ``range(n)``, ``enumerate(xs)``, also inside ``list(...)``/``sorted(...)``."""
    while isinstance(iterable, cst.Call):
        tail = callee_tail(iterable)
        if tail in _NON_TENSOR_ITERABLES:
            return True
        if tail not in _ORDERING_WRAPPERS or not iterable.args:
            return False
        iterable = iterable.args[0].value
    return False


def _non_tensor_targets(target: cst.BaseExpression, iterable: cst.BaseExpression) -> Iterator[str]:
    """The loop names that hold keys or counters: all of ``for key, value in d.items()``, but
    only the counter of ``for i, (k, v) in enumerate(past_key_values)``, whose items are
    what ``past_key_values`` holds."""
    while isinstance(iterable, cst.Call) and callee_tail(iterable) in _ORDERING_WRAPPERS and iterable.args:
        iterable = iterable.args[0].value
    if (
        isinstance(iterable, cst.Call) and callee_tail(iterable) == "enumerate" and iterable.args
        and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
    ):
        counter, item = target.elements
        yield from _target_names(counter.value)
        if _iterates_keys_or_counters(iterable.args[0].value):
            yield from _target_names(item.value)
    elif _iterates_keys_or_counters(iterable):
        yield from _target_names(target)


def _pairs_up(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """``a, b = x, y``: a target tuple matched element for element by a value tuple."""
    return (
        isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
        and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))
    )


def _splits_into(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """``a, b = k.split(...)`` / ``torch.chunk(k, 2)``: plain names unpacking one piecewise op."""
    if not isinstance(target, (cst.Tuple, cst.List)) or not all(isinstance(e.value, cst.Name) and isinstance(e, cst.Element) for e in target.elements):
        return False
    reshape = reshape_of(strip_shape_keeping(value))
    return reshape is not None and reshape.kind in PIECEWISE


def _zips_onto(target: cst.BaseExpression, iterable: cst.BaseExpression) -> bool:
    """``for a, b in zip(xs, ys)``: one plain iterable per target name."""
    return (
        isinstance(target, (cst.Tuple, cst.List)) and isinstance(iterable, cst.Call)
        and callee_tail(iterable) == "zip" and len(target.elements) == len(iterable.args)
        and not any(isinstance(e, cst.StarredElement) for e in target.elements)
        and all(arg.keyword is None and not arg.star for arg in iterable.args)
    )


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)


_HANDLERS = {
    cst.FunctionDef: _Walker.nested_def,
    cst.ClassDef: _Walker.nested_def,
    cst.SimpleStatementLine: _Walker.simple_line,
    cst.Assign: _Walker.assign,
    cst.AnnAssign: _Walker.ann_assign,
    cst.AugAssign: _Walker.aug_assign,
    cst.For: _Walker.loop,
    cst.CompFor: _Walker.loop,
    cst.While: _Walker.while_,
    cst.If: _Walker.if_,
    cst.WithItem: _Walker.with_item,
    cst.Assert: _Walker.assert_,
    cst.FormattedString: _Walker.formatted,
    cst.Call: _Walker.call,
    cst.Subscript: _Walker.subscript,
    cst.Attribute: _Walker.attribute,
    cst.Name: _Walker.name,
    cst.Lambda: _Walker.lambda_,
    cst.BinaryOperation: _Walker.binary,
}


# How many assignments a softmax's weights are followed back through to their scores.
_MAX_FLOW_HOPS = 6


def _reads(expr: cst.CSTNode, target: cst.CSTNode) -> tuple[set[str], set[str], bool]:
    """The names ``expr`` reads, the tails of the calls in it (a ``@`` counts as ``matmul``),
    and whether ``target`` is part of it."""
    names: set[str] = set()
    tails: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if node is target:
            return names, tails, True
        if isinstance(node, cst.Name):
            names.add(node.value)
            continue
        if isinstance(node, cst.Call):
            tail = callee_tail(node)
            if tail is not None:
                tails.add(tail)
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
            tails.add("matmul")
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)  # ``p.float``: the attribute's own name is no variable
            continue
        elif isinstance(node, (cst.Lambda, cst.BaseComp)):
            continue
        stack.extend(node.children)
    return names, tails, False


def _transposed_operand(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``k`` in ``k.transpose(-2, -1)``, ``k.transpose(2, 3)``, ``k.mT`` or ``k.permute(0, 1, 3, 2)``:
    the scores' right operand of hand-written attention."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("mT", "mH"):
        return expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("transpose", "permute"):
        return expr.func.value
    return None


SAME = "same"
DIFFER = "differ"


@dataclass(frozen=True)
class Mismatch:
    key: object  # the K-side site (an Access or CallSite)
    value: object  # the V-side site nearest to it that differs
    anchor: str  # "k" when the K site has no equal V site, "v" for a leftover V site read


def mismatches(keys: list, values: list, compare, where=lambda site: site.order, anchors=lambda site: True) -> list[Mismatch]:
    """Pair K and V sites that have no equal counterpart, each with its nearest differing one.

    ``compare(k, v)`` returns SAME, DIFFER, or None when the two cannot be compared (then
    neither evidence of a match nor of a mismatch), as are sites in different arms of one ``if``.
    A K site equal to any V site is matched.
    ``where`` places a site (its line, say) for choosing the nearest partner; a K site
    ``anchors`` turns away is never reported for itself, only named beside a V site.

    One finding per mismatched pair: K sites whose nearest differing V site is the same are one
    mismatch, reported once at the K site nearest to it. A V site read with no equal K site
    (``attn(q, k, v[:m])`` beside ``attn(q, k[:n], v[:n])``) is reported unless a K finding
    already names it; a V site written to (``v[6:] += 100``, a test perturbing V on purpose) is
    not: writing into V alone changes values, not which tokens K and V describe.
    """
    verdicts = {(id(k), id(v)): None if exclusive(k, v) else compare(k, v) for k in keys for v in values}
    by_value: dict[int, Mismatch] = {}
    for k in keys:
        if not anchors(k):
            continue
        nearest = _nearest_unequal(k, [(verdicts[id(k), id(v)], v) for v in values], where)
        if nearest is None:
            continue
        known = by_value.get(id(nearest))
        if known is None or abs(where(k) - where(nearest)) < abs(where(known.key) - where(nearest)):
            by_value[id(nearest)] = Mismatch(k, nearest, "k")
    found = list(by_value.values())
    for v in values:
        if id(v) in by_value or getattr(v, "store", False):
            continue
        nearest = _nearest_unequal(v, [(verdicts[id(k), id(v)], k) for k in keys], where)
        if nearest is not None:
            found.append(Mismatch(nearest, v, "v"))
    return found


def _nearest_unequal(site, row: list, where):
    """The nearest site of ``row`` ((verdict, other) pairs) that differs, or None if one is equal."""
    if any(answer == SAME for answer, _ in row):
        return None
    differing = [other for answer, other in row if answer == DIFFER]
    if not differing:
        return None
    return min(differing, key=lambda other: abs(where(other) - where(site)))
