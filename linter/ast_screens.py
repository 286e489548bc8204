"""A second look at what the text pre-filter let through, on the standard library's syntax tree.

The runner parses each planned top-level definition (or a whole file, when module-level code
is involved) with ``ast``, which builds its tree in C, about ten times faster than libcst. A
screen asks of that tree whether a rule can report at all; libcst then parses only the
definitions some live rule's screen lets through (classes live for the method-scoped rules
only: their header and the methods that pass), and nothing when none does. libcst stays the
pass that reports and fixes.

A screen must over-approximate its rule exactly as the pre-filter conditions do: it may say yes
for code without findings, never no for code with one. A rule without a screen always passes.
Screens read ``Facts``, one walk of the tree whose scope is the whole unit (a fact of any
method counts for all), and follow their rule's own model as far as it is cheap: KV101,
KV102 and KV103 look at one function's scope at a time (``Facts.scopes``), as the rules do;
KV101 needs its cut K and whole V in one call; KV201 compares the projections' output sizes,
KV204 the lengths its views carry, KV205 its view's shape elements. KV102 and KV103 compare
their sites as text, K names swapped to V, as the rules do, when the runner hands over the
lines the tree was parsed from (``source``); without them they keep the wider answer.
``tests/linter/test_ast_screens.py`` holds each sharpened screen to shapes its rule reports
and look-alikes it does not; ``tests/linter/test_fast_path_equivalence.py`` and the
benchmark compare the fast path (text pre-filter, screens, libcst) with parsing and visiting
every file.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Collection, Iterator
from typing import NamedTuple, TypeVar

from linter.ast_sizes import Aliases, heads_mismatch, int_value
from linter.heads import equal_to_query
from linter.model.twins import key_head_dim_twin
from linter.names import (
    ATTENTION_CALLABLES,
    AXISLESS_RESHAPES,
    CACHE_PARTS,
    INDEXED_CALLS,
    INDEXED_DATA_POSITION,
    INDEXED_FREE_FUNCTIONS,
    INDEXED_IGNORED_KEYWORDS,
    LATENT_ATTENTION,
    METADATA_ATTRIBUTES,
    QUIET_CALLS,
    RESHAPE_CALLS,
    RESHAPE_DIM_ARGS,
    SAME_TENSOR_METHODS,
    SEE_THROUGH,
    SHAPE_KEEPING,
    STORAGE,
    Role,
    counterpart_of_dotted,
    is_kv_head_count_name,
    is_kv_tensor_name,
    is_query_name,
    is_scale_name,
    key_counterpart,
    kv_side,
    name_role,
    swap_kv_text,
    value_counterpart,
)
from linter.settings import Settings

Screen = Callable[["Facts", Settings], bool]
# The lines a tree was parsed from, and how many come before its first: line ``n`` of the tree
# is ``lines[offset + n - 1]``.
Source = tuple[list[str], int]

# Per node class, its fields that hold nodes: (name, whether a list). Read from the class's ASDL
# signature (``Name(identifier id, expr_context ctx)``): identifiers, strings, constants and
# ints are never nodes, and ``ctx`` no screen asks about; so the walks test no value's type.
_CHILDREN: dict[type, tuple[tuple[str, bool], ...]] = {}
_PRIMITIVES = frozenset({"identifier", "string", "constant", "int"})
_SIGNATURE = re.compile(r"(\w+)([*?]?) (\w+)")


def _children(kind: type) -> tuple[tuple[str, bool], ...]:
    found = _CHILDREN.get(kind)
    if found is None:
        signature = (kind.__doc__ or "").split("\n", 1)[0]
        typed = {name: (type_, mark) for type_, mark, name in _SIGNATURE.findall(signature)}
        if set(typed) != set(kind._fields):
            raise TypeError(f"cannot read the fields of ast.{kind.__name__} from {signature!r}")
        found = _CHILDREN[kind] = tuple(
            (name, typed[name][1] == "*") for name in kind._fields
            if name != "ctx" and typed[name][0] not in _PRIMITIVES
        )
    return found


def _push_children(node: ast.AST, kind: type, stack: list) -> None:
    """Put ``node``'s child nodes (of class ``kind``) on ``stack``, as ``walk`` does."""
    for name, many in _CHILDREN.get(kind) or _children(kind):
        value = getattr(node, name, None)
        if many:
            stack.extend(value or ())
        elif value is not None:
            stack.append(value)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself included), each after its parent, as ``ast.walk``
    gives them less the ``Load``/``Store`` contexts no screen asks about: about five times
    faster than ``ast.walk``, whose per-node generators were the screens' largest cost."""
    todo = [node]
    pop, append, extend = todo.pop, todo.append, todo.extend
    children = _CHILDREN
    while todo:
        current = pop()
        if current is None:
            continue  # ``kw_defaults`` and ``Dict.keys`` hold None for a missing node
        yield current
        kind = current.__class__
        for name, many in children.get(kind) or _children(kind):
            value = getattr(current, name, None)
            if many:
                extend(value or ())
            elif value is not None:
                append(value)


# KV203's vocabulary, as in the rule.
_SPLITS = frozenset({"chunk", "split", "tensor_split"})
_FUNCTION_FORMS = frozenset({"chunk", "tensor_split", "split"})
_FIRST_KEYWORD = {"split": "split_size_or_sections", "chunk": "chunks", "tensor_split": "indices_or_sections"}


def _argument(args: list[ast.expr], keywords: list[ast.keyword], index: int, keyword: str) -> ast.expr | None:
    for kw in keywords:
        if kw.arg == keyword:
            return kw.value
    return args[index] if index < len(args) else None


def _kv203_first(call: ast.Call) -> tuple[str, ast.expr] | None:
    """The method (``chunk``, ``split``, ``tensor_split``) and its parts or sizes argument of
    a split along a feature axis, as KV203's ``visit_Call`` reads them; None for any other
    call."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _SPLITS:
        return None
    args, keywords = list(call.args), call.keywords
    if isinstance(func.value, ast.Name) and func.value.id == "torch" and func.attr in _FUNCTION_FORMS:
        # torch.chunk(qkv, 3, -1): the receiver is the first positional argument.
        if not args:
            return None
        args = args[1:]
    if any(isinstance(a, ast.Starred) for a in args) or any(kw.arg is None for kw in keywords):
        return None
    first = _argument(args, keywords, 0, _FIRST_KEYWORD[func.attr])
    dim = int_value(_argument(args, keywords, 1, "dim"))
    return None if first is None or dim is None or dim == 0 else (func.attr, first)


def _kv203_split(call: ast.Call, three_targets: bool, function: ast.AST | None) -> bool:
    """Can this call (in ``function``) be one of KV203's equal-thirds splits
    (``_equal_thirds``)? A name of sizes is read through its function's one assignment before
    the call, as the rule's ``Aliases`` read it."""
    read = _kv203_first(call)
    if read is None:
        return False
    method, first = read
    if method != "split":
        return int_value(first) == 3
    if isinstance(first, ast.Name) and function is not None:
        first = _kv203_alias(function, first, call) or first
    if isinstance(first, (ast.List, ast.Tuple)):
        # Equal source text (the rule's test) means equal trees.
        return len(first.elts) == 3 and len({ast.dump(e) for e in first.elts}) == 1
    if isinstance(first, ast.BinOp) and isinstance(first.op, ast.Mult):
        sides = (first.left, first.right)
        if any(int_value(n) == 3 for n in sides) and any(
            isinstance(n, (ast.List, ast.Tuple)) and len(n.elts) == 1 for n in sides
        ):
            return True  # [head_dim] * 3
    # One size for every part: only when the call is unpacked into three names.
    return three_targets


_FUNCTION_KINDS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _kv203_alias(function: ast.AST, name: ast.Name, call: ast.Call) -> ast.expr | None:
    """``Aliases.resolve`` of ``name`` at ``call``: the value of its one single-target
    assignment in ``function`` (a function inside keeps its own) that KV203 has visited by
    then (one that starts before the call); None for none or several."""
    at = (call.lineno, call.col_offset)
    values = [
        node.value for node in _kv203_region(function, _FUNCTION_KINDS)
        if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name
        and node.targets[0].id == name.id and (node.lineno, node.col_offset) < at
    ]
    return values[0] if len(values) == 1 else None


def _kv203_region(root: ast.AST, inner: tuple[type, ...]) -> Iterator[ast.AST]:
    """``root`` and the nodes under it, less those under (and at) a node of the ``inner`` kinds
    below it: the nodes KV203 files under ``root``'s own function or class."""
    todo = [root]
    while todo:
        node = todo.pop()
        if node is None or (node is not root and isinstance(node, inner)):
            continue
        yield node
        _push_children(node, type(node), todo)


def _kv203(facts: Facts, settings: Settings) -> bool:
    """A split into equal thirds of what reads as a fused QKV output (``_is_qkv``), filed
    under a class that names a KV head count, anywhere but as a keyword, not proven equal to
    the query head count (``_settle``); outside classes, under a unit that names one."""
    three: set[int] = set()
    unpacked: dict[int, list[str | None]] = {}  # call -> the names its assignment unpacks into
    for node in facts.assigns:
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, (ast.Tuple, ast.List)):
            names = [_tail(e) for e in target.elts]
            calls = [id(n) for n in walk(node.value) if isinstance(n, ast.Call)]
            unpacked.update((call, names) for call in calls)
            if len(target.elts) == 3:
                three.update(calls)
    splits = [
        call for call in facts.calls
        if _kv203_first(call) is not None and _kv203_qkv(call, unpacked.get(id(call)))
    ]
    if not splits:
        return False
    # The names the walk collected first; the rarer spellings (a class, an import) by a walk.
    spelled = facts.names | facts.attrs | facts.params | {fn.name for fn in facts.functions}
    if not (any(is_kv_head_count_name(name) for name in spelled) or any(
        is_kv_head_count_name(name) for node in walk(facts.tree) for name in _identifiers(node)
    )):
        return False
    owners: dict[int, bool] = {}  # class -> whether it names a KV head count not proven equal
    for call, (function, owner) in _kv203_places(facts.tree, splits).items():
        if not _kv203_split(call, id(call) in three, function):
            continue
        if owner is None:
            return True  # the module's: its functions and statements lie beyond this unit
        if id(owner) not in owners:
            owners[id(owner)] = _kv203_unequal_heads(owner, facts)
        if owners[id(owner)]:
            return True
    return False


def _kv203_places(tree: ast.AST, calls: list[ast.Call]) -> dict[ast.Call, tuple[ast.AST | None, ast.ClassDef | None]]:
    """Per call: its innermost function, and the class KV203 files its split under (None: the
    module), as the rule's owners stack: a function hands its splits to the class around it
    (``leave_FunctionDef``), a split outside functions stays with its class."""
    wanted = {id(call): call for call in calls}
    found = {}
    todo: list[tuple[ast.AST, ast.AST | None, ast.ClassDef | None, ast.ClassDef | None]] = [(tree, None, None, None)]
    while todo:
        node, function, around, owner = todo.pop()
        if node is None:
            continue
        kind = type(node)
        if kind is ast.Call and id(node) in wanted:
            found[wanted[id(node)]] = (function, owner)
        elif kind is ast.ClassDef:
            # Its decorators and bases are the class's own, as libcst visits them after
            # ``visit_ClassDef``; a function's too.
            around = node
            owner = node if function is None else owner
        elif kind in _FUNCTION_KINDS:
            function, owner = node, around
        children: list[ast.AST] = []
        _push_children(node, kind, children)
        todo.extend((child, function, around, owner) for child in children)
    return found


def _kv203_unequal_heads(owner: ast.ClassDef, facts: Facts) -> bool:
    """Does ``owner`` (less the classes inside it) name a KV head count, anywhere but as a
    keyword, that ``_Owner.equal_to_query`` does not prove equal to the query head count?"""
    nodes = list(_kv203_region(owner, (ast.ClassDef,)))
    named = {name for node in nodes for name in _identifiers(node) if is_kv_head_count_name(name)}
    return bool(named) and not named <= _kv203_equal_to_query(nodes, facts)


_HEAD_ROLES = (Role.Q_HEADS, Role.KV_HEADS)


def _kv203_equal_to_query(nodes: list[ast.AST], facts: Facts) -> set[str]:
    """``_Owner.equal_to_query`` over the assignments among ``nodes``: the KV head counts every
    assignment of which reads a query head count or another such name, and nothing else of a
    head count's name. Only the KV head counts' reads are kept: no other name is proven."""
    assigned: dict[str, list[set[str] | None]] = {}
    for node in nodes:
        if type(node) is not ast.Assign:
            continue
        names = [_kv203_target(t) for t in node.targets]
        if None in names or not any(name_role(n) is Role.KV_HEADS for n in names):
            continue
        heads = _kv203_heads(node, facts)
        for name in names:
            assigned.setdefault(name, []).append(None if heads is None else heads | (set(names) - {name}))
    return equal_to_query(assigned)


def _kv203_target(target: ast.expr) -> str | None:
    """``_target_name``: a plain name, or ``X`` of ``self.X``."""
    if type(target) is ast.Name:
        return target.id
    if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
        return target.attr
    return None


def _kv203_heads(node: ast.Assign, facts: Facts) -> set[str] | None:
    """The head counts' names in the source text of ``node``'s value, as ``_Owner.record``
    reads them (its comments and strings included); None without that text, or where the
    lines handed over are not the ones ``node`` was parsed from."""
    if facts.source is None:
        return None
    text = facts.text(node.targets[-1], node)  # " = value"
    try:
        read = ast.parse("_" + text).body
    except (SyntaxError, ValueError):
        return None
    if len(read) != 1 or type(read[0]) is not ast.Assign or ast.dump(read[0].value) != ast.dump(node.value):
        return None
    return {w for w in _IDENTIFIER.findall(text) if name_role(w) in _HEAD_ROLES}


def _kv203_qkv(call: ast.Call, names: list[str | None] | None) -> bool:
    """``_is_qkv``: the receiver's root names a fused QKV (``qkv``, ``query_key_value``), or
    the parts are unpacked into three names whose second is K-side and third V-side."""
    func = call.func
    receiver = func.value
    if isinstance(receiver, ast.Name) and receiver.id == "torch" and call.args:
        receiver = call.args[0].value if type(call.args[0]) is ast.Starred else call.args[0]
    root = _tensor_root(receiver)
    if root is not None and ("qkv" in root.lower() or "query_key_value" in root.lower()):
        return True
    return (
        names is not None and len(names) == 3 and None not in names
        and kv_side(names[1]) == "k" and kv_side(names[2]) == "v"
    )


def _identifiers(node: ast.AST) -> list[str]:
    """The identifiers a node itself spells (not its children's); keyword names excluded, as
    KV203 excludes them (``f(total_num_kv_heads=n)`` names the callee's parameter)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [*node.name.split("."), *([node.asname] if node.asname else [])]
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler):
        return [node.name] if node.name else []
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, ast.MatchClass):
        return list(node.kwd_attrs)
    return []


_SHAPE_METHODS = frozenset({"view", "reshape"})
_REARRANGE = frozenset({"rearrange"})


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _names_in(node: ast.AST) -> set[str]:
    """Every name and attribute spelled in ``node``: a superset of its tensor root."""
    return {n.id if isinstance(n, ast.Name) else n.attr for n in walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _sequence(args: list[ast.expr], keywords: list[ast.keyword]) -> list[ast.expr] | None:
    if keywords or any(isinstance(a, ast.Starred) for a in args):
        return None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        elements = args[0].elts
        return None if any(isinstance(e, ast.Starred) for e in elements) else list(elements)
    return args


def _kv202_view(call: ast.Call) -> tuple[tuple, dict[str, ast.expr], ast.expr] | None:
    """(form, axis -> size, receiver) of a call KV202 reads as a view, as the rule does."""
    func, args = call.func, list(call.args)
    full = _dotted(func)
    tail = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if tail is None:
        return None
    if full in ("rearrange", "einops.rearrange"):
        if len(args) < 2 or not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
            return None
        sizes = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
        return (("rearrange", args[1].value), sizes, args[0]) if sizes else None
    if full in ("torch.reshape", "torch.unflatten"):
        if not args:
            return None  # a keyword-only call: no receiver the rule can read
        receiver, args = args[0], args[1:]
    elif isinstance(func, ast.Attribute) and tail in (*_SHAPE_METHODS, "unflatten"):
        receiver = func.value
    else:
        return None
    if tail == "unflatten":
        if len(args) + len(call.keywords) != 2 or len(args) < 1:
            return None
        shape = _sequence(args[1:], call.keywords)
        form: tuple = ("unflatten", ast.dump(args[0]), len(shape or ()))
        minimum = 2
    else:
        shape = _sequence(args, call.keywords)
        form = ("shape", len(shape or ()))
        minimum = 3
    if shape is None or len(shape) < minimum:
        return None
    return form, {str(i): size for i, size in enumerate(shape)}, receiver


def _kv202(facts: Facts, settings: Settings) -> bool:
    """A K view and a V view of one form in one scope whose sizes name different head counts
    at some axis (``ast_sizes.heads_mismatch``, names resolved through the scope's single
    assignments), read as the rule reads them. The rule also wants every V view it pairs with
    a K view to differ; one is enough here.

    Asked first of the whole unit's calls and assignments (read in the facts' one walk),
    without the sizes: every scope's views are among the unit's, so a unit with no pair of
    views anywhere needs no walk of its scopes (most units the condition lets through)."""
    extra = settings.extra_pairs
    if not any(True for _ in _kv202_pairs(_kv202_views(facts.assigns, facts.calls, extra), extra)):
        return False
    for nodes in _kv202_scopes(facts.tree):
        aliases = Aliases()
        assigns, calls = [], []
        for node in nodes:
            kind = type(node)
            if kind is ast.Assign:
                assigns.append(node)
                if len(node.targets) == 1:
                    aliases.record(node.targets[0], node.value)
            elif kind is ast.Call:
                calls.append(node)
        for (_, k_sizes, _), (_, v_sizes, _) in _kv202_pairs(_kv202_views(assigns, calls, extra), extra):
            if any(
                axis in v_sizes and heads_mismatch(size, v_sizes[axis], resolve=aliases.resolve)
                for axis, size in k_sizes.items()
            ):
                return True
    return False


_View = tuple[tuple, dict[str, ast.expr], set[str]]


def _kv202_views(assigns: list[ast.Assign], calls: list[ast.Call], extra) -> list[_View]:
    """(form, axis -> size, the K/V names it is about) of each of ``calls`` KV202 reads as a
    view of a K/V tensor: its receiver's root, or the target of the assignment whose method
    chain it is."""
    chains: dict[int, str] = {}  # a call of a K/V-named assignment's method chain -> its target
    for node in assigns:
        if len(node.targets) == 1:
            target = node.targets[0]
            name = _tensor_root(target) if type(target) in (ast.Name, ast.Attribute) else None
            if name is not None and kv_side(name, extra):
                value = node.value
                while type(value) is ast.Call:
                    chains[id(value)] = name
                    if type(value.func) is not ast.Attribute:
                        break
                    value = value.func.value
    views = []
    for call in calls:
        view = _kv202_view(call)
        if view is None:
            continue
        form, sizes, receiver = view
        root = _tensor_root(receiver)
        ids = {root} if root is not None and kv_side(root, extra) else set()
        if id(call) in chains and not is_query_name(root):
            ids.add(chains[id(call)])
        if ids:
            views.append((form, sizes, ids))
    return views


def _kv202_pairs(views: list[_View], extra) -> Iterator[tuple[_View, _View]]:
    """Each (K view, V view) of one form about a K name and its V partner."""
    for k_view in views:
        k_form, _, k_ids = k_view
        partners = {value_counterpart(i, extra) for i in k_ids} - {None}
        if not partners or any(kv_side(i, extra) != "k" for i in k_ids):
            continue
        for v_view in views:
            if v_view[0] == k_form and v_view[2] & partners:
                yield k_view, v_view


def _kv202_scopes(tree: ast.AST) -> list[list[ast.AST]]:
    """The nodes of each scope KV202 checks on its own: the module, and each function with its
    decorators, parameters and annotations (the rule opens a function's scope before visiting
    any of them). Classes, lambdas and comprehensions belong to the scope around them."""
    found = []
    todo = [tree]
    while todo:
        root = todo.pop()
        nodes: list[ast.AST] = []
        stack = [root]
        while stack:
            current = stack.pop()
            if current is None:
                continue
            kind = current.__class__
            if (kind is ast.FunctionDef or kind is ast.AsyncFunctionDef) and current is not root:
                todo.append(current)
                continue
            nodes.append(current)
            _push_children(current, kind, stack)
        found.append(nodes)
    return found


def _only_slices(node: ast.Subscript) -> bool:
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return all(
        isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis))
        for e in elements
    )


def _cuts_nothing(node: ast.Subscript) -> bool:
    """``x[:, None]``, ``x[..., :]``: whole axes and new ones only. The rule reads no axis in
    it (``reshapes.reshape_of`` is None), so it compares with no other site: a Triton kernel's
    ``offs_k[:, None]`` beside ``offs_v[None, :]`` is no pair of cuts."""
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return all(
        not isinstance(e, ast.Slice) or (e.lower is None and e.upper is None and e.step is None)
        for e in elements
    )


def _seen_through(node: ast.expr | None) -> ast.expr | None:
    """``k`` of ``k.transpose(1, 2).contiguous()``: the rules read a cut after axis-moving
    steps as a cut of the tensor itself."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SEE_THROUGH:
        node = node.func.value
    return node


_SPLIT_CALLS = frozenset({"split", "chunk", "tensor_split", "narrow"})


def _cut_bases(facts: Facts):
    """What KV102 compares: every tensor subscripted with slices only, or split, chunked or
    narrowed (``k.split(...)``, ``torch.split(k, ...)``), seen through axis-moving steps."""
    for node in facts.subscripts:
        if _only_slices(node):
            yield node.value
    for node in facts.calls:
        if _tail(node.func) in _SPLIT_CALLS:
            if isinstance(node.func, ast.Attribute):
                yield node.func.value
            positional = [a for a in node.args if type(a) is not ast.Starred]
            if positional:
                yield positional[0]  # as ``reshapes._call_reshape`` reads it: ``*x`` is skipped


def _kv102(facts: Facts, settings: Settings) -> bool:
    """A K tensor and its V counterpart both cut (sliced, split, chunked or narrowed) in one
    scope, and (where the source text is at hand) a site the rule can report: one with no
    site of the other side alike (``_unmatched``); the rule compares each K site with the V
    sites as text, K names swapped to V, and reports only a site none of the other side
    matches."""
    extra = settings.extra_pairs
    if not _kv102_anywhere(facts, extra):
        return False
    if facts.source is None:
        return True
    return any(_kv102_scope(nodes, extra, facts.text, facts.site_context) for nodes in facts.scopes())


def _kv102_scope(
    nodes: list[ast.AST], extra, text: Callable[[ast.AST, ast.AST], str], context: Callable[[], _SiteContext]
) -> bool:
    # (kind, base) -> each site: the node, its axis-moving steps (``Access.through``) and its
    # text: ``[...]`` of a slice-only subscript (``Access``), or the arguments of a
    # split/chunk/tensor_split/narrow (``_check_cuts``), whitespace removed.
    found: dict[tuple[str, str], list[tuple[ast.AST, str, str]]] = {}
    for node in nodes:
        if type(node) is ast.Subscript:
            if type(node.value) is ast.Subscript or not _only_slices(node) or _cuts_nothing(node):
                continue  # a chain, or no cut: no access KV102 compares
            tensor = _seen_through(node.value)
            base, kind, after = _dotted(tensor), "slice", node.value
            through = "".join(text(tensor, after).split()) if tensor is not after else ""
        elif type(node) is ast.Call and _tail(node.func) in _SPLIT_CALLS:
            base_found = _call_base(node)
            base, kind, after, through = base_found and base_found[0], _tail(node.func), node.func, ""
        else:
            continue
        if base is not None and is_kv_tensor_name(base, extra):
            found.setdefault((kind, base), []).append((node, through, _written(text, after, node)))
    # All sites alike by text need no more (most scopes); else the sites the rule reads
    # (``_SiteContext``: not quiet, not inside a chain), each with its ``if`` arms.
    if not _some_pair_differs({key: {written for _, _, written in sites} for key, sites in found.items()}, extra, keep_key=True):
        return False
    where = context()
    paired = {
        key: [
            (through, written, where.arms.get(id(node), ()), type(node) is ast.Subscript and type(node.ctx) is ast.Store)
            for node, through, written in sites if id(node) not in where.unread
        ]
        for key, sites in found.items()
    }
    texts = {key: {written for _, written, _, _ in sites} for key, sites in paired.items() if sites}
    return _some_pair_differs(texts, extra, keep_key=True) and _unmatched(paired, extra)


def _unmatched(sites: dict[tuple[str, str], list[tuple[str, str, tuple, bool]]], extra) -> bool:
    """Is some K site alike no V site it can meet while it differs from one, or a V site
    read (not written to) likewise? Alike: the same axis-moving steps (the K side's names
    swapped to V, as ``_compare`` reads them) and the same text, the two sides' names
    mirrored as ``_some_pair_differs`` mirrors them. ``scopes.mismatches`` reports nothing
    else: a site with an alike one on the other side compares ``SAME`` with it (or, where its
    axes cannot be read, compares with none), and a V site written to (``v[6:] += 100``, a
    test perturbing V) reports nothing of its own. Sites in different arms of one ``if``
    never meet (``scopes.exclusive``)."""
    for base, k_sites, v_sites in _k_v_groups(sites, extra):
        keep = base.rsplit(".", 1)[-1]
        ks = [((swap_kv_text(through, extra), swap_kv_text(t, extra)), arms, True) for through, t, arms, _ in k_sites]
        vs = [((through, _swap_except(t, keep, extra)), arms, not store) for through, t, arms, store in v_sites]
        for mine, others in ((ks, vs), (vs, ks)):
            for written, arms, reports in mine:
                met = [other for other, other_arms, _ in others if not _exclusive(arms, other_arms)]
                if reports and written not in met and met:
                    return True
    return False


def _exclusive(a: tuple, b: tuple) -> bool:
    """``scopes.exclusive`` on the arms ``_SiteContext`` records."""
    arms = dict(a)
    return any(node in arms and arms[node] != arm for node, arm in b)


class _SiteContext:
    """Where each node of a tree stands as ``scopes`` walks it: inside a quiet call (``print``,
    ``logger.info``, ``assert*``), an ``assert``, an f-string or under a metadata attribute
    (``.shape``), or inside a subscript chain (``k[a][b]``'s ``k[a]``), where the rule records
    no site (``unread``); and the ``if`` arms that hold it, counted from its function's body
    (``arms``: (id of the ``if``, 0 for its body, 1 for its ``else``), outermost first)."""

    def __init__(self, tree: ast.AST) -> None:
        self.unread: set[int] = set()
        self.arms: dict[int, tuple] = {}
        roots = [tree]
        while roots:
            root = roots.pop()
            stack = [(child, False, ()) for child in getattr(root, "body", ())]
            while stack:
                node, quiet, arms = stack.pop()
                kind = type(node)
                if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                    roots.append(node)  # its own scope, walked afresh
                    continue
                if quiet:
                    self.unread.add(id(node))
                if arms:
                    self.arms[id(node)] = arms
                if kind is ast.If:
                    stack.append((node.test, quiet, arms))
                    stack.extend((c, quiet, (*arms, (id(node), 0))) for c in node.body)
                    stack.extend((c, quiet, (*arms, (id(node), 1))) for c in node.orelse)
                    continue
                if kind is ast.Call:
                    stack.append((node.func, quiet, arms))
                    tail = _tail(node.func)
                    inner = quiet or tail in QUIET_CALLS or (tail or "").startswith("assert")
                    stack.extend((a, inner, arms) for a in node.args)
                    stack.extend((k.value, inner, arms) for k in node.keywords)
                    continue
                if kind is ast.Attribute:
                    stack.append((node.value, quiet or node.attr in METADATA_ATTRIBUTES, arms))
                    continue
                if kind is ast.Subscript and type(node.value) is ast.Subscript:
                    self.unread.add(id(node.value))
                if kind is ast.Assert or kind is ast.JoinedStr:
                    quiet = True
                stack.extend((c, quiet, arms) for c in ast.iter_child_nodes(node))


def _some_pair_differs(sites: dict[tuple[str, str], set[str]], extra, keep_key: bool) -> bool:
    """Do a K tensor's sites and its V partner's (of one kind) differ in text, the K side's
    names swapped to V as the rules compare them? Sites all alike give no mismatch."""
    for base, k_texts, v_texts in _k_v_groups(sites, extra):
        keep = base.rsplit(".", 1)[-1]
        # KV102 swaps V bounds too, but for the K tensor's own name (``cache_v[:cache_k.size(1)]``
        # sizes V by K); KV103 compares V indices as written.
        texts = {swap_kv_text(t, extra) for t in k_texts} | {
            _swap_except(t, keep, extra) if keep_key else t for t in v_texts
        }
        if len(texts) > 1:
            return True
    return False


_Sites = TypeVar("_Sites")


def _k_v_groups(sites: dict[tuple[str, str], _Sites], extra) -> Iterator[tuple[str, _Sites, _Sites]]:
    """(K base, its sites, its V partner's sites of the same kind) for each K tensor of
    ``sites`` (keyed by (kind, base)) whose partner has sites too."""
    for (kind, base), k_sites in sites.items():
        if kv_side(base.rsplit(".", 1)[-1], extra) != "k":
            continue
        v_sites = sites.get((kind, counterpart_of_dotted(base, extra) or ""))
        if v_sites is not None:
            yield base, k_sites, v_sites



def _swap_except(text: str, keep: str, extra) -> str:
    """``text`` with K names swapped to V but for ``keep`` (the rule's ``_swap_except``)."""
    return _IDENTIFIER.sub(lambda m: m.group(0) if m.group(0) == keep else swap_kv_text(m.group(0), extra), text)


def _written(text: Callable[[ast.AST, ast.AST], str], after: ast.AST, node: ast.AST) -> str:
    """The text of ``node`` after ``after`` (a subscript's brackets, a call's arguments),
    whitespace removed as ``pairs.normalized`` removes it; never equal to another site's when
    it is not the text expected there."""
    written = "".join(text(after, node).split())
    if written[-1:] != ("]" if type(node) is ast.Subscript else ")"):
        return f"<unread {id(node)}>"
    return written


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _kv102_anywhere(facts: Facts, extra) -> bool:
    """A K tensor and its V counterpart both cut (sliced, split, chunked or narrowed)."""
    sliced = {
        base for node in _cut_bases(facts)
        if (base := _dotted(_seen_through(node))) is not None and is_kv_tensor_name(base, extra)
    }
    return any(
        kv_side(base.rsplit(".", 1)[-1], extra) == "k" and counterpart_of_dotted(base, extra) in sliced
        for base in sliced
    )


class Facts:
    """What the screens ask of one tree, collected in one walk: the unit (a top-level
    definition, or a whole file) is the scope, which over-approximates every rule's own (a
    class, a method): a fact of any method counts for all."""

    def __init__(self, tree: ast.AST, source: Source | None = None) -> None:
        self.tree = tree
        self.source = source

    def text(self, after: ast.AST, node: ast.AST) -> str:
        """The source text from the end of ``after`` to the end of ``node`` (``[:n]`` of
        ``k[:n]`` after ``k``); needs ``source``."""
        lines, offset = self.source
        first, last = offset + after.end_lineno - 1, offset + node.end_lineno - 1
        if not 0 <= first <= last < len(lines):
            return ""  # not the lines this tree was parsed from: no text compares equal
        # Column offsets count UTF-8 bytes.
        if first == last:
            return lines[first].encode()[after.end_col_offset:node.end_col_offset].decode(errors="replace")
        middle = "\n".join(lines[first + 1:last])
        return "\n".join((
            lines[first].encode()[after.end_col_offset:].decode(errors="replace"), middle,
            lines[last].encode()[:node.end_col_offset].decode(errors="replace"),
        ))

    def __getattr__(self, name: str):
        # The walk runs on the first question: KV102, KV202 and KV203 walk the tree themselves.
        if name.startswith("__"):
            raise AttributeError(name)
        self._walk()
        return object.__getattribute__(self, name)

    def scopes(self) -> list[list[ast.AST]]:
        """The nodes of each scope ``scopes.ScopeTracking`` checks on its own, parents first:
        every function's body (its lambdas and comprehensions included, nested definitions
        not), and the module's statements outside definitions. A class body is no scope."""
        found = self.__dict__.get("_scopes")
        if found is None:
            found = self.__dict__["_scopes"] = _scopes(self.tree)
        return found

    def site_context(self) -> _SiteContext:
        """Where each node stands as ``scopes`` walks the tree (``_SiteContext``), read on the
        first question: KV102's and KV103's screens ask it only of units with a site."""
        found = self.__dict__.get("_site_context")
        if found is None:
            found = self.__dict__["_site_context"] = _SiteContext(self.tree)
        return found

    def _walk(self) -> None:
        tree = self.tree
        self.calls: list[ast.Call] = []
        self.returns: list[ast.Return] = []
        # (flattened targets, value) of every assignment with a value.
        self.assignments: list[tuple[list[ast.expr], ast.expr]] = []
        self.assigns: list[ast.Assign] = []
        self.params: set[str] = set()
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.none_default = False  # some parameter defaults to None
        self.self_attrs: set[str] = set()  # X of every ``self.X``
        self.attrs: set[str] = set()  # every attribute name
        self.names: set[str] = set()  # every Name
        self.subscripts: list[ast.Subscript] = []
        for node in walk(tree):
            kind = type(node)
            if kind is ast.Call:
                self.calls.append(node)
            elif kind is ast.Attribute:
                self.attrs.add(node.attr)
                if type(node.value) is ast.Name and node.value.id == "self":
                    self.self_attrs.add(node.attr)
            elif kind is ast.Name:
                self.names.add(node.id)
            elif kind is ast.Subscript:
                self.subscripts.append(node)
            elif kind is ast.Assign:
                self.assigns.append(node)
                self.assignments.append((_flat(node.targets), node.value))
            elif kind is ast.AnnAssign:
                if node.value is not None:
                    self.assignments.append((_flat([node.target]), node.value))
            elif kind is ast.Return:
                self.returns.append(node)
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                self.functions.append(node)
                args = node.args
                self.params.update(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a)
                if any(type(d) is ast.Constant and d.value is None for d in (*args.defaults, *args.kw_defaults)):
                    self.none_default = True


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _scopes(tree: ast.AST) -> list[list[ast.AST]]:
    found = []
    todo = [tree]
    while todo:
        root = todo.pop()
        nodes: list[ast.AST] = []
        stack = list(reversed(root.body))
        while stack:
            current = stack.pop()
            if current is None:
                continue
            if isinstance(current, _DEFINITIONS):
                todo.append(current)  # its own scope (a class: its methods are)
                continue
            nodes.append(current)
            kind = current.__class__
            _push_children(current, kind, stack)
        if not isinstance(root, ast.ClassDef):
            found.append(nodes)
    return found


def _flat(targets: list[ast.expr]) -> list[ast.expr]:
    flat: list[ast.expr] = []
    todo = list(targets)
    while todo:
        target = todo.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            todo.extend(target.elts)
        elif isinstance(target, ast.Starred):
            todo.append(target.value)
        else:
            flat.append(target)
    return flat


def _tail(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _self_attr(node: ast.expr) -> str | None:
    """``X`` of ``self.X``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _builds_linear(value: ast.expr) -> bool:
    """A ``*Linear(...)`` call anywhere in ``value`` (what the models' ``linear_layer`` finds
    directly, in an ``IfExp`` branch or as a wrapper's first argument, and more)."""
    return any(
        isinstance(n, ast.Call) and (_tail(n.func) or "").endswith("Linear") for n in walk(value)
    )


def _is_kv_tensor(node: ast.expr | None, side: str, extra) -> bool:
    tail = _tail(node)
    return tail is not None and kv_side(tail, extra) == side and is_kv_tensor_name(tail, extra)


_WRITES = {"copy_": 0, "index_copy_": 2, "index_copy": 2}


def _kv104(facts: Facts, settings: Settings) -> bool:
    """Each of KV104's five findings, less its "the twin exists and is unused" evidence."""
    extra = settings.extra_pairs
    for node in facts.returns:
        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            first, second = node.value.elts
            name = _dotted(first)
            if name is not None and _dotted(second) == name and _is_kv_tensor(first, "k", extra):
                return True  # return k_cache, k_cache
    for call in facts.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _WRITES:
            index = _WRITES[func.attr]
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            if index < len(positional) and _kv104_crossed(func.value, positional[index], extra):
                return True  # k_cache.copy_(v)
    for targets, value in facts.assignments:
        values = [value, *(value.elts if isinstance(value, (ast.Tuple, ast.List)) else ())]
        for target in targets:
            if isinstance(target, ast.Subscript) and any(_kv104_crossed(target.value, v, extra) for v in values):
                return True  # k_cache[slots] = v
    # A V-side name: the target, the value parameter, or the method's name.
    names = facts.params | _assigned_tails(facts) | {fn.name for fn in facts.functions}
    if not any(kv_side(n, extra) == "v" for n in names):
        return False
    # The rest needs its function: its parameters, its name, its own assignments. Each
    # function's assignments are among the unit's, so one that may count anywhere is asked
    # for first (walking every function cost this screen most of its time).
    if not any(kv_side(fn.name, extra) == "v" for fn in facts.functions) and not any(
        _kv104_may_count(target, value, extra) for targets, value in facts.assignments for target in targets
    ):
        return False
    return any(_kv104_function(fn, extra) for fn in facts.functions)


def _kv104_crossed(base: ast.expr, value: ast.expr, extra) -> bool:
    """Can writing ``value`` into ``base`` be KV104's crossed write (``_crossed_writes``): a
    V-side tensor into a K-side one whose V twin is another tensor? ``k_input[..., :r] =
    v_input``, MLA's key built from its own value twin, is none."""
    if not (
        _is_kv_tensor(base, "k", extra) and isinstance(value, (ast.Name, ast.Attribute))
        and _is_kv_tensor(value, "v", extra)
    ):
        return False
    twin = value_counterpart(_tail(base), extra)
    return twin is not None and twin != _tail(value)


def _kv104_may_count(target: ast.expr, value: ast.expr, extra) -> bool:
    """Can ``target = value`` be what ``_kv104_function`` reports, in some function (its
    conditions less the function's parameters)?"""
    tail = _tail(target)
    if tail is None:
        return False
    if (
        isinstance(target, ast.Name) and isinstance(value, (ast.Call, ast.Subscript))
        and is_kv_tensor_name(tail, extra) and (key := key_counterpart(tail, extra)) is not None
        and _tensor_root(value) == key
    ):
        return True
    if kv_side(tail, extra) != "v":
        return False
    for call in walk(value):
        if isinstance(call, ast.Call):
            callee = _dotted(call.func)
            if callee is None or callee.count(".") > 1 or ("." in callee and not callee.startswith("self.")):
                continue
            k_name = callee.rsplit(".", 1)[-1]
            if kv_side(k_name, extra) == "k" and (twin := value_counterpart(k_name, extra)) is not None and twin != tail:
                return True
    return False


def _assigned_tails(facts: Facts) -> set[str]:
    return {tail for targets, _ in facts.assignments for t in targets if (tail := _tail(t)) is not None}


def _tensor_root(expr: ast.expr) -> str | None:
    """``tensor_roots.tensor_root`` on the standard library's tree."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Attribute):
            return expr.attr
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            func = expr.func
            expr = func.value if isinstance(func, ast.Attribute) and func.attr in SAME_TENSOR_METHODS else func
        else:
            return None


def _kv104_function(fn: ast.FunctionDef | ast.AsyncFunctionDef, extra) -> bool:
    args = fn.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    if kv_side(fn.name, extra) == "v" and any(
        (attr := _kv104_reached(site)) is not None and _kv104_key_with_twin(attr, extra)
        for site in _kv104_sites(fn)
    ):
        return True  # a value-side method reaching self.k_*
    for node in walk(fn):
        if isinstance(node, ast.Assign):
            # ``a = b = x`` binds nothing in the model; reading each target over-approximates.
            bound = [b for target in node.targets for b in _kv104_bindings(target, node.value)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bound = list(_kv104_bindings(node.target, node.value))
        else:
            continue
        for target, value in bound:
            tail = _tail(target)
            if (
                isinstance(target, ast.Name) and tail in params and isinstance(value, (ast.Call, ast.Subscript))
                and is_kv_tensor_name(tail, extra) and key_counterpart(tail, extra) in params
                and _tensor_root(value) == key_counterpart(tail, extra)
            ):
                return True  # value = key.view(...) over the value parameter
            if tail is None or kv_side(tail, extra) != "v":
                continue
            for call in walk(value):
                if not isinstance(call, ast.Call):
                    continue
                callee = _dotted(call.func)
                if callee is None or callee.count(".") > 1 or ("." in callee and not callee.startswith("self.")):
                    continue
                k_name = callee.rsplit(".", 1)[-1]
                if kv_side(k_name, extra) != "k":
                    continue
                twin = value_counterpart(k_name, extra)
                if twin is None or twin == tail or ("." not in callee and twin not in params):
                    continue
                return True  # v = self.k_proj(x)
    return False


def _kv104_bindings(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """The (name, value) bindings of ``target = value`` that ``FunctionModel`` records with no
    unpacking position, the only ones ``_twin_calls`` and ``_dead_value_parameter`` read: a
    name or attribute takes the value; a tuple or list takes a literal tuple or list of its
    length element by element (``q, k, v = self.q(x), self.k(x), self.v(x)``), and otherwise
    binds its names by position (none here) while a nested tuple reads the whole value again."""
    if isinstance(target, (ast.Name, ast.Attribute)):
        yield target, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if (
            isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in (*value.elts, *target.elts))
        ):
            for element, part in zip(target.elts, value.elts):
                yield from _kv104_bindings(element, part)
        else:
            for element in target.elts:
                if isinstance(element, (ast.Tuple, ast.List)):
                    yield from _kv104_bindings(element, value)


def _kv104_sites(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    """What ``_value_method_on_key`` reads in a method: the returned values and the
    subscripts assigned to whose base is a dotted name (``FunctionModel`` records no other
    store: ``self.k_buffer[i][loc] = x`` is none)."""
    for node in walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            yield node.value
        elif isinstance(node, ast.Assign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from (t for t in _flat(targets) if isinstance(t, ast.Subscript) and _dotted(t.value) is not None)


def _kv104_reached(expr: ast.expr) -> str | None:
    """The ``X`` of the ``self.X`` that ``expr`` reaches through subscripts and method calls
    (``self.k_buffer[i]``, ``self.k_buffer.view(n)``), as ``_value_method_on_key`` walks to
    its root; ``self.get_key_buffer(i)`` reaches ``self`` itself, no attribute."""
    while isinstance(expr, (ast.Subscript, ast.Call)):
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return None
    return _self_attr(expr)


def _kv104_key_with_twin(attr: str, extra) -> bool:
    """A K-side tensor attribute with a V twin to name (``k_buffer``, ``v_buffer``)."""
    return (
        kv_side(attr, extra) == "k" and is_kv_tensor_name(attr, extra)
        and value_counterpart(attr, extra) is not None
    )


def _kv_projections(facts: Facts, extra, self_only: bool = True) -> set[str]:
    """The K/V-side attributes (``self.X``, or any ``obj.X``) assigned a ``*Linear`` layer."""
    found = set()
    for targets, value in facts.assignments:
        for t in targets:
            if (
                isinstance(t, ast.Attribute) and (not self_only or _self_attr(t) is not None)
                and kv_side(t.attr, extra) is not None and _builds_linear(value)
            ):
                found.add(t.attr)
    return found


def _kv204(facts: Facts, settings: Settings) -> bool:
    """A K/V ``*Linear`` projection, a parameter defaulting to None (the optional cross-attention
    input), a shape read and a view or reshape; and a function projecting states that may be
    that input (``_may_differ``: the optional parameter itself, or a name chosen between it
    and another by ``a if c else b``) through a K/V projection (``flows.projected``)."""
    extra = settings.extra_pairs
    return (
        facts.none_default and not facts.attrs.isdisjoint(_SHAPE_METHODS)
        and not facts.attrs.isdisjoint(("shape", "size")) and bool(_kv_projections(facts, extra))
        and any(_kv204_function(fn, extra) for fn in facts.functions)
    )


def _kv204_function(fn: ast.FunctionDef | ast.AsyncFunctionDef, extra) -> bool:
    """A view of a K/V projection of states that may be the optional input, with a shape name
    carrying the length of another tensor (not a K/V-side one): ``_shaped``, ``_may_differ``."""
    optional = _none_defaults(fn.args)
    if not optional:
        return False
    bound: dict[str, list[tuple[ast.expr, int | None, int | None]]] = {}
    chosen: set[str] = set()  # names bound to ``a if c else b`` with an optional branch
    views: list[ast.Call] = []
    for node in walk(fn):
        kind = type(node)
        if kind is ast.Call:
            if type(node.func) is ast.Attribute and node.func.attr in _SHAPE_METHODS:
                views.append(node)
        elif (kind is ast.Assign or kind is ast.AnnAssign) and node.value is not None:
            value = node.value
            targets = node.targets if kind is ast.Assign else [node.target]
            for target in targets:
                _kv204_bind(target, value, bound)
            # ``current = enc if enc is not None else hidden``, alone or an element of a tuple.
            if any(
                type(v) is ast.IfExp and any(type(b) is ast.Name and b.id in optional for b in (v.body, v.orelse))
                for v in (value, *(value.elts if isinstance(value, (ast.Tuple, ast.List)) else ()))
            ):
                chosen.update(n.id for t in targets for n in walk(t) if type(n) is ast.Name)
    if not views:
        return False
    lengths: dict[str, set[str]] = {}
    for _ in range(8):  # names carrying lengths through names: a few hops
        grew = False
        for name, bindings in bound.items():
            found = set().union(*(_kv204_lengths(v, p, w, lengths) for v, p, w in bindings))
            if not found <= lengths.get(name, set()):
                lengths.setdefault(name, set()).update(found)
                grew = True
        if not grew:
            break
    for call in views:
        states = _kv204_states(call.func.value, bound, extra, 0) & (optional | chosen)
        if not states:
            continue
        carried = {t for a in (*call.args, *(kw.value for kw in call.keywords)) for n in walk(a) if type(n) is ast.Name for t in lengths.get(n.id, ())}
        if any(t not in states or len(states) > 1 for t in carried if kv_side(t, extra) is None):
            return True
    return False


def _kv204_bind(target: ast.expr, value: ast.expr, bound: dict) -> None:
    """Record ``model.functions``' assignments: (value, position, width) of each plain name;
    ``b, s, h = x.shape`` gives each its position among three."""
    if type(target) is ast.Name:
        bound.setdefault(target.id, []).append((value, None, None))
    elif isinstance(target, (ast.Tuple, ast.List)):
        elements = target.elts
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements) and not any(
            type(e) is ast.Starred for e in (*value.elts, *elements)
        ):
            for element, item in zip(elements, value.elts):
                _kv204_bind(element, item, bound)
        elif all(type(e) is ast.Name for e in elements):
            for i, element in enumerate(elements):
                bound.setdefault(element.id, []).append((value, i, len(elements)))
        else:
            # Nested or starred unpacking: read as if each name took the whole value.
            for n in walk(target):
                if type(n) is ast.Name:
                    bound.setdefault(n.id, []).append((value, None, None))


def _kv204_lengths(value: ast.AST, position: int | None, width: int | None, lengths: dict[str, set[str]]) -> set[str]:
    """``_length_sources``: the tensors whose token length ``value`` carries."""
    read = _kv204_shape_read(value)
    if read is not None:
        tensor, index = read
        if not index:
            keeps = position is None or (position == 1 and width == 3)
        elif position is not None or len(index) != 1:
            keeps = False
        else:
            element = index[0]
            keeps = type(element) is ast.Slice or int_value(element) == 1 or type(element) is ast.Tuple
        return {tensor} if keeps else set()
    if type(value) is ast.Subscript and type(value.value) is ast.Name and value.value.id in lengths:
        # ``input_shape[0]`` is the batch; the index itself may read a length too (where the
        # rule has not yet seen the name carry one and reads the children).
        own = set() if int_value(value.slice) == 0 else lengths[value.value.id]
        return own | _kv204_lengths(value.slice, None, None, lengths)
    if type(value) is ast.Name:
        return lengths.get(value.id, set())
    found: set[str] = set()
    for child in ast.iter_child_nodes(value):
        found |= _kv204_lengths(child, None, None, lengths)
    return found


def _kv204_shape_read(node: ast.AST) -> tuple[str, list[ast.AST]] | None:
    """``_shape_read``: (``x``, index) for ``x.shape``, ``x.shape[...]``, ``x.size(...)``,
    ``x.size()[...]``."""
    if type(node) is ast.Subscript:
        inner = _kv204_shape_read(node.value)
        if inner is None or inner[1]:
            return None
        index = node.slice
        return inner[0], list(index.elts) if type(index) is ast.Tuple and len(index.elts) != 1 else [index]
    if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "size":
        tensor, index = node.func.value, [*node.args, *(kw.value for kw in node.keywords)]
    elif type(node) is ast.Attribute and node.attr == "shape":
        tensor, index = node.value, []
    else:
        return None
    return (tensor.id, index) if type(tensor) is ast.Name else None


def _kv204_states(receiver: ast.expr, bound: dict, extra, depth: int) -> set[str]:
    """The states a view's receiver may be a K/V projection of (``flows.projected``):
    ``self.k_proj(x)`` itself, or a name bound to one."""
    if type(receiver) is ast.Name:
        if depth > 6:
            return set()
        # An unpacked name (``v, _ = self.v_proj(x)``) is no simple binding: ``binding_before``
        # gives none.
        return set().union(*(
            _kv204_states(v, bound, extra, depth + 1) for v, position, _ in bound.get(receiver.id, ()) if position is None
        ))
    found = _projection_call(receiver, extra)
    return set() if found is None else {found[1]}


def _projection_call(node: ast.expr, extra) -> tuple[str, str] | None:
    """(``k_proj``, ``x``) of ``self.k_proj(x)``, a call ``flows.projected`` reads as a K/V
    projection's output: one argument, a name, and one side (``query_key_value`` is both)."""
    if type(node) is not ast.Call:
        return None
    attr = _self_attr(node.func)
    # libcst counts ``*x`` and ``**x`` as arguments whose value is ``x``.
    args = [a.value if type(a) is ast.Starred else a for a in node.args] + [kw.value for kw in node.keywords]
    if (
        attr is None or kv_side(attr, extra) is None or len(args) != 1 or type(args[0]) is not ast.Name
        or (value_counterpart(attr, extra) and key_counterpart(attr, extra))
    ):
        return None
    return attr, args[0].id


def _none_defaults(args: ast.arguments) -> set[str]:
    """The parameters defaulting to None (``model.functions``' ``optional``)."""
    positional = [*args.posonlyargs, *args.args]
    pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults), *zip(args.kwonlyargs, args.kw_defaults)]
    return {a.arg for a, d in pairs if type(d) is ast.Constant and d.value is None}


_KV_ROLES = (Role.KV_HEADS, Role.KV_WIDTH)


def _kv205(facts: Facts, settings: Settings) -> bool:
    """A view or reshape naming a query head count, of a K/V ``*Linear`` projection's output
    (``self.k_proj(x)`` itself, or a name bound to it, through names: ``flows.projected``)
    whose assignment names a KV head count or width."""
    extra = settings.extra_pairs
    views = [call for call in facts.calls if _kv205_query_view(call)]
    if not views:
        return False
    declared = {
        attr
        for targets, value in facts.assignments
        for target in targets
        if (attr := _self_attr(target)) is not None and kv_side(attr, extra) is not None
        and _builds_linear(value) and any(name_role(n) in _KV_ROLES for n in _names_in(value))
    }
    if not declared:
        return False
    # Every value a plain name is bound to anywhere in the unit (``model.functions`` keeps the
    # last simple binding before the view, in the view's own function): a literal tuple's
    # elements too, as ``k, v = self.k_proj(x), self.v_proj(x)`` pairs them.
    bound: dict[str, list[ast.expr]] = {}
    for targets, value in facts.assignments:
        values = (value, *value.elts) if isinstance(value, (ast.Tuple, ast.List)) else (value,)
        for target in targets:
            if type(target) is ast.Name:
                bound.setdefault(target.id, []).extend(values)
    for call in views:
        todo, seen = [call.func.value], set()
        while todo:
            receiver = todo.pop()
            if type(receiver) is ast.Name:
                if receiver.id not in seen:
                    seen.add(receiver.id)
                    todo.extend(bound.get(receiver.id, ()))
            elif (found := _projection_call(receiver, extra)) is not None and found[0] in declared:
                return True
    return False


def _kv205_query_view(call: ast.Call) -> bool:
    """A view or reshape of a name or a call with an element of its shape that is one query
    head count alone (``sizes.factors`` of it is that one name)."""
    func = call.func
    if type(func) is not ast.Attribute or func.attr not in _SHAPE_METHODS or type(func.value) not in (ast.Name, ast.Call):
        return False
    # ``_shape_elements``: libcst's arguments less ``*x`` and ``**x``.
    values = [a for a in call.args if type(a) is not ast.Starred] + [kw.value for kw in call.keywords if kw.arg is not None]
    if len(values) == 1 and isinstance(values[0], (ast.Tuple, ast.List)):
        values = [e for e in values[0].elts if type(e) is not ast.Starred]
    for e in values:
        if type(e) is ast.Call and type(e.func) is ast.Name and e.func.id == "getattr":
            return True  # ``getattr(config, "num_attention_heads")`` names what it reads
        tail = _tail(e)
        if tail is not None and name_role(tail) is Role.Q_HEADS:
            return True
    return False


_KV206_VIEWS = frozenset({"view", "reshape", "unflatten"})
_ALLOCATORS = frozenset({
    "empty", "zeros", "ones", "full", "randn", "rand", "new_empty", "new_zeros", "new_ones", "new_full",
})


def _kv206(facts: Facts, settings: Settings) -> bool:
    """A key head dim whose value twin is named too, in a view of a V-side ``*Linear``
    projection's output or in an allocation assigned to a V-side tensor."""
    extra = settings.extra_pairs
    known = facts.names | facts.attrs | facts.params | {fn.name for fn in facts.functions}

    def names_key_dim(call: ast.Call) -> bool:
        return any(
            (twin := key_head_dim_twin(n)) is not None and twin in known
            for a in (*call.args, *call.keywords) for n in _names_in(a)
        )

    if any(kv_side(attr, extra) == "v" for attr in _kv_projections(facts, extra)) and any(
        isinstance(call.func, ast.Attribute) and call.func.attr in _KV206_VIEWS and names_key_dim(call)
        for call in facts.calls
    ):
        return True
    for targets, value in facts.assignments:
        if any(_is_kv_tensor(t, "v", extra) for t in targets) and any(
            isinstance(call, ast.Call) and ((tail := _tail(call.func)) in _ALLOCATORS or (tail or "").startswith("new_"))
            and names_key_dim(call)
            for call in walk(value)
        ):
            return True
    return False


def _kv301(facts: Facts, settings: Settings) -> bool:
    """A ``self.`` K/V pair both assigned, and one of them rebuilt from itself: first anywhere
    in the unit, then class by class as the rule reads each (``_kv301_class``)."""
    extra = settings.extra_pairs
    assigned = {a for targets, _ in facts.assignments for t in targets if (a := _self_attr(t)) is not None}
    paired = set()
    for attr in assigned:
        twin = value_counterpart(attr, extra) if is_kv_tensor_name(attr, extra) else None
        if twin in assigned:
            paired.update((attr, twin))
    if not paired:
        return False
    for targets, value in facts.assignments:
        for target in targets:
            attr = _self_attr(target.value if isinstance(target, ast.Subscript) else target)
            if attr in paired and any(_self_attr(n) == attr for n in walk(value)):
                # The rule asks it of one class at a time, of each method with its own pairs.
                return any(_kv301_class(node, extra) for node in walk(facts.tree) if type(node) is ast.ClassDef)
    return False


def _kv301_class(node: ast.ClassDef, extra) -> bool:
    """Does a method of this class rebuild one side of a pair from itself (``self.k =
    f(self.k)``, ``self.k[...] = f(self.k)``) and never read the other side's name? The
    rule's ``owned_pairs`` (both sides set in one method, by method name) and ``_check``
    (``model.mentions`` of the twin, then its assignments and stores); each method is asked,
    where the rule asks the last of those sharing a name."""
    methods = [(m.name, _kv301_body(m)) for m in node.body if type(m) is ast.FunctionDef or type(m) is ast.AsyncFunctionDef]
    set_in: dict[str, set[str]] = {}
    for name, nodes in methods:
        set_in.setdefault(name, set()).update(
            attr for n in nodes if type(n) is ast.Assign or (type(n) is ast.AnnAssign and n.value is not None)
            for t in _flat(n.targets if type(n) is ast.Assign else [n.target]) if (attr := _self_attr(t)) is not None
        )
    twins: dict[str, set[str]] = {}
    for set_here in set_in.values():
        for attr in set_here:
            twin = value_counterpart(attr, extra)
            if kv_side(attr, extra) == "k" and is_kv_tensor_name(attr, extra) and twin in set_here:
                twins.setdefault(attr, set()).add(twin)
                twins.setdefault(twin, set()).add(attr)
    if not twins:
        return False
    for _, nodes in methods:
        # What ``mentions`` counts, or less: names and attribute names read (a target's own
        # name is not; ``self.k += x`` and ``del`` reads are left out, which only keeps more).
        read = {n.id if type(n) is ast.Name else n.attr for n in nodes if type(n) in (ast.Name, ast.Attribute) and type(n.ctx) is ast.Load}
        for n in nodes:
            if type(n) is not ast.Assign and (type(n) is not ast.AnnAssign or n.value is None):
                continue
            for target in _flat(n.targets if type(n) is ast.Assign else [n.target]):
                attr = _self_attr(target.value if type(target) is ast.Subscript else target)
                if attr in twins and not twins[attr] <= read and any(_self_attr(v) == attr for v in walk(n.value)):
                    return True
    return False


def _kv301_body(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``method``'s body that its ``function_model`` walks: nested definitions
    are left out, and so is an annotated assignment's annotation, which the model never reads."""
    nodes: list[ast.AST] = []
    stack: list = list(reversed(method.body))
    while stack:
        current = stack.pop()
        if current is None or isinstance(current, _DEFINITIONS):
            continue
        nodes.append(current)
        kind = current.__class__
        if kind is ast.AnnAssign:
            stack.extend((current.target, current.value))
        else:
            _push_children(current, kind, stack)
    return nodes


def _kv201(facts: Facts, settings: Settings) -> bool:
    """A K ``*Linear`` projection and its V twin declared (on any object) with output sizes
    written differently: ``sizes.heads_mismatch`` finds no mismatch between sizes of equal
    text, nor between sizes that differ only in brackets, comments or spelling of one
    constant (equal ``ast`` trees), which classify factor by factor alike. Then, class by
    class, sizes that ``ast_sizes.heads_mismatch`` finds naming different head counts, names
    resolved as the rule resolves them: ``_kv201_visit``."""
    extra = settings.extra_pairs
    declared: dict[str, set[str]] = {}
    for targets, value in facts.assignments:
        if len(targets) != 1 or type(targets[0]) is not ast.Attribute or kv_side(targets[0].attr, extra) is None:
            continue
        size = _kv201_size(value)
        if size is not None:
            declared.setdefault(targets[0].attr, set()).add(size if size is _UNREAD else ast.dump(size))
    for attr, sizes in declared.items():
        twin = value_counterpart(attr, extra)
        if twin in declared and (len(sizes) > 1 or sizes != declared[twin] or _UNREAD in sizes):
            tree = facts.tree
            return _kv201_visit(tree.body if type(tree) is ast.Module else [tree], None, None, extra)
    return False


# A class's ``self.X`` values (shared by the aliases of its body and of every function in it)
# and its declarations: (attribute, output size, the aliases of the scope declaring it).
_KV201Class = tuple[dict, list[tuple[str, "ast.expr | str", Aliases]]]


def _kv201_visit(statements: list[ast.stmt], owner: _KV201Class | None, aliases: Aliases | None, extra) -> bool:
    """Do ``statements`` (in the class ``owner``, in the scope whose names ``aliases`` holds)
    hold a class whose K and V declarations name different head counts? The rule's visitor:
    each class collects the declarations in it, nested classes their own; each class body and
    function has its own local names, and every scope in a class shares the class's ``self``
    attributes; one-target assignments with a value record an alias (``sizes.Aliases``) wherever
    a class encloses them. Where the rule picks one V declaration (the K's block's, or the only
    one), any is asked."""
    for node in statements:
        kind = type(node)
        if kind is ast.ClassDef:
            inner: _KV201Class = ({}, [])
            if _kv201_visit(node.body, inner, _kv201_aliases(inner[0]), extra) or _kv201_mismatch(inner[1], extra):
                return True
            continue
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            if _kv201_visit(node.body, owner, _kv201_aliases(owner[0] if owner is not None else {}), extra):
                return True
            continue
        if owner is not None and aliases is not None and (
            kind is ast.Assign and len(node.targets) == 1 or kind is ast.AnnAssign and node.value is not None
        ):
            target = node.targets[0] if kind is ast.Assign else node.target
            aliases.record(target, node.value)
            size = _kv201_size(node.value)
            if type(target) is ast.Attribute and size is not None and kv_side(target.attr, extra) is not None:
                owner[1].append((target.attr, size, aliases))
        for block in _kv201_blocks(node):
            if _kv201_visit(block, owner, aliases, extra):
                return True
    return False


def _kv201_aliases(attrs: dict) -> Aliases:
    """A scope's aliases: its own local names, its class's ``self`` attributes."""
    aliases = Aliases()
    aliases.attrs = attrs
    return aliases


def _kv201_blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists of a compound statement (its ``except`` and ``case`` bodies too)."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if type(block) is list:
            yield block
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        yield part.body


def _kv201_mismatch(declarations: list[tuple[str, ast.expr | str, Aliases]], extra) -> bool:
    """``_check``: a K declaration and a V declaration of its twin whose sizes name different
    head counts, each side's names resolved in the K's scope first, then the V's; a size read
    behind ``*`` or ``**`` always counts."""
    for attr, k_size, k_aliases in declarations:
        twin = value_counterpart(attr, extra)
        for v_attr, v_size, v_aliases in declarations:
            if v_attr != twin or twin is None:
                continue
            if k_size is _UNREAD or v_size is _UNREAD or heads_mismatch(
                k_size, v_size, resolve=_kv201_chain(k_aliases, v_aliases), implicit_one=True
            ) is not None:
                return True
    return False


def _kv201_chain(first: Aliases, second: Aliases) -> Callable[[ast.expr], ast.expr | None]:
    """The rule's ``_chain``: a name resolved in ``first``, else in ``second``."""

    def resolve(node: ast.expr) -> ast.expr | None:
        found = first.resolve(node)
        return found if found is not None else second.resolve(node)

    return resolve


# KV201's reading of a ``*Linear`` call's output size (``model.classes.output_size``).
_OUTPUT_KEYWORDS = frozenset({"out_features", "output_size", "out_dim", "output_dim", "out_size"})
_OUTPUT_INDEX = {"LazyLinear": 0}
_UNREAD = "<a size behind * or **>"


def _kv201_size(value: ast.expr) -> ast.expr | str | None:
    """The output size of the layer ``model.classes.linear_layer`` finds in ``value``, or
    ``_UNREAD`` where an unpacked argument hides which argument it is."""
    if type(value) is ast.IfExp:
        layers = [b for b in (value.body, value.orelse) if type(b) is ast.Call]
        if len(layers) != 1:
            return None
        value = layers[0]
    if type(value) is not ast.Call:
        return None
    tail = _tail(value.func)
    if tail is None or not tail.endswith("Linear"):
        first = value.args[0] if value.args else None
        first = first.value if type(first) is ast.Starred else first
        # libcst's first argument is the first written: a keyword before it hides it.
        if type(first) is not ast.Call or not (_tail(first.func) or "").endswith("Linear") or (
            value.keywords and _before(value.keywords[0], first)
        ):
            return None
        value, tail = first, _tail(first.func)
    if any(type(a) is ast.Starred for a in value.args) or any(kw.arg is None for kw in value.keywords):
        return _UNREAD
    for kw in value.keywords:
        if kw.arg in _OUTPUT_KEYWORDS:
            return kw.value
    index = _OUTPUT_INDEX.get(tail, 1)
    return value.args[index] if index < len(value.args) else None


def _before(a: ast.AST, b: ast.AST) -> bool:
    return (a.lineno, a.col_offset) < (b.lineno, b.col_offset)


def _kv101(facts: Facts, settings: Settings) -> bool:
    """A K tensor cut along some axis whose V partner, in the same function, is read whole
    and never rebound to a resized tensor (what ``_value_source`` needs to name it)."""
    extra = settings.extra_pairs
    if not _kv101_anywhere(facts, extra):
        return False
    callables = settings.extra_attention_callables
    by_any_call = []
    for nodes in facts.scopes():
        paired = _kv101_scope(nodes, extra, callables)
        if paired is _KERNEL:
            return True
        if paired is _ANY_CALL:
            by_any_call.append(nodes)
    if not by_any_call:
        return False
    latent = _kv101_latent(facts.tree)
    return any(not any(id(node) in latent for node in nodes) for nodes in by_any_call)


# What pairs a cut K with its whole V in a scope (``_kv101_scope``): an attention kernel or
# hand-written attention, which the rule reads anywhere, or only a call of unknown signature,
# which it reads outside a latent pool's functions.
_KERNEL = "kernel"
_ANY_CALL = "any call"




def _kv101_latent(tree: ast.AST) -> set[int]:
    """The body statements of each function ``check_scope`` reads as a latent (MLA) cache
    pool's, where only attention kernels (and hand-written attention) pair a K with its V:
    among the enclosing classes and functions (the function itself included), one named for
    MLA and one for storage. The tree shows no more of them than the rule's excerpt (a method
    screened alone shows only its own name), so a function latent here is latent to the rule."""
    found: set[int] = set()
    todo: list[tuple[ast.AST, tuple[str, ...]]] = [(tree, ())]
    while todo:
        node, names = todo.pop()
        if isinstance(node, _DEFINITIONS):
            names = (*names, node.name)
            if type(node) is not ast.ClassDef and any(LATENT_ATTENTION.search(n) for n in names) and any(
                STORAGE.search(n) for n in names
            ):
                found.update(id(statement) for statement in node.body)
        # Definitions sit among statements only: in the bodies of compound ones.
        for field in _BLOCKS:
            todo.extend((child, names) for child in getattr(node, field, ()))
    return found


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _kv101_anywhere(facts: Facts, extra) -> bool:
    """The unit-wide check, cheap and run first: a K tensor cut, and its V partner's name."""
    tails = facts.names | facts.attrs
    bases: list[ast.expr] = [s.value for s in facts.subscripts if _cuts(s)]
    for call in facts.calls:
        func = call.func
        if _tail(func) in RESHAPE_CALLS:
            if isinstance(func, ast.Attribute):
                bases.append(func.value)
            positional = [a for a in call.args if type(a) is not ast.Starred]
            if positional:
                bases.append(positional[0])  # torch.narrow(k, ...)
    for base in bases:
        tail = _tail(_seen_through(base))
        if tail is None or kv_side(tail, extra) != "k" or not is_kv_tensor_name(tail, extra):
            continue
        if value_counterpart(tail, extra) in tails:
            return True
    return False


def _kv101_scope(nodes: list[ast.AST], extra, callables: Collection[str]) -> str | None:
    """KV101 in one scope: a K cut that may be on a token/head axis (``reshapes``' roles),
    whose bounds do not name the V side, whose partner is read whole (under shape-keeping
    steps only: ``v``, ``v.view(...)``, not ``v[:n]`` or ``v.shape``) and never resized in the
    scope (``_value_source`` needs both to name it), and one call (or hand-written attention's
    products) given both: the cut K, or a name bound from it, and that cut's own partner
    whole, or its alias (``_is_unmatched`` compares the value with the cut's partner); a call
    of unknown signature pairs them as ``_paired_argument`` does. ``_KERNEL``, ``_ANY_CALL``
    or None: what pairs them, a kernel preferred."""
    cuts: dict[int, str] = {}
    for node in nodes:
        if type(node) is ast.Subscript:
            found = _kv101_subscript_cut(node, extra)
        elif type(node) is ast.Call:
            found = _kv101_call_cut(node, extra)
        else:
            continue
        if found is not None:
            cuts[id(node)] = found
    if not cuts:
        return None
    live = (set(cuts.values()) & _read_whole(nodes)) - _resized_names(nodes)
    if not live:
        return None
    keys, values = _kv101_derived(nodes, cuts, live)

    def key_partners(arg: ast.expr) -> set[str]:
        # Hand-written attention's operands hold the key deeper (``k.transpose(-2, -1)``).
        found: set[str] = set()
        for n in walk(arg):
            if id(n) in cuts:
                found.add(cuts[id(n)])
            elif type(n) is ast.Name:
                found |= keys.get(n.id, set())
        return found

    def value_partners(arg: ast.expr) -> set[str]:
        name = _dotted(_strip_shape_keeping(arg))
        return set() if name is None else ({name} & live) | values.get(name, set())

    any_call = False
    products: list[ast.expr] = []
    softmax = False
    for node in nodes:
        if type(node) is ast.Call:
            attention = _kv101_attention_call(node, callables)
            if (attention or not any_call) and _kv101_paired(node, cuts, keys, value_partners, attention):
                if attention:
                    return _KERNEL
                any_call = True
            args = [a for a in node.args if not isinstance(a, ast.Starred)] + [kw.value for kw in node.keywords]
            tail = _tail(node.func)
            if tail == "softmax":
                softmax = True
            elif tail in ("matmul", "bmm", "einsum"):
                for a in args:
                    products.extend(a.elts if isinstance(a, (ast.List, ast.Tuple)) else (a,))
        elif type(node) is ast.BinOp and type(node.op) is ast.MatMult:
            products += (node.left, node.right)
    # Hand-written attention: scores with the cut K, a softmax, a product with its whole V.
    if softmax:
        partners = {partner for p in products for partner in key_partners(p)}
        if any(partners & value_partners(p) for p in products):
            return _KERNEL
    return _ANY_CALL if any_call else None


def _kv101_attention_call(call: ast.Call, callables: Collection[str]) -> bool:
    """``pairs.is_attention_call``: a kernel whose K and V arguments the rule knows."""
    tail = _tail(call.func)
    return tail is not None and (tail in ATTENTION_CALLABLES or tail in callables or _dotted(call.func) in callables)


def _kv101_paired(
    call: ast.Call, cuts: dict[int, str], keys: dict[str, set[str]], value_partners: Callable[[ast.expr], set[str]],
    attention: bool,
) -> bool:
    """Does ``call`` take an argument traced to a K cut and, as another argument, that cut's
    partner whole? An attention kernel's may be any two (over-approximating
    ``attention_kv_args``); in another call (``_paired_argument``) the partner must be nearer
    to the key than every argument surely named for it and surely no whole tensor: from
    ``f(q, k[:0], v[:0], out, k, v)`` the rule takes ``v[:0]`` as ``k[:0]``'s value, ``v``
    never, and ``v[:0]`` resolves to no name."""
    # libcst's arguments less ``*x`` and ``**x``, in the order written.
    args = [a for a in call.args if type(a) is not ast.Starred] + [kw.value for kw in call.keywords if kw.arg is not None]
    keyed = [(at, partners) for at, arg in enumerate(args) if (partners := _from_a_cut(arg, cuts, keys))]
    if not keyed:
        return False
    values = [value_partners(a) for a in args]
    for at, partners in keyed:
        for partner in partners:
            ranks = [(abs(i - at), i < at) for i, found in enumerate(values) if i != at and partner in found]
            if not ranks:
                continue
            if attention:
                return True
            tail = partner.rsplit(".", 1)[-1]
            nearest = min(ranks)
            if not any(
                (abs(i - at), i < at) < nearest for i, a in enumerate(args)
                if i != at and _tensor_root(a) == tail and _dotted(_strip_shape_keeping(a)) is None
            ):
                return True
    return False


def _strip_shape_keeping(node: ast.expr) -> ast.expr:
    """``reshapes.strip_shape_keeping``: ``v`` of ``v.contiguous().view(...)``."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in SHAPE_KEEPING:
        node = node.func.value
    return node


def _kv101_derived(
    nodes: list[ast.AST], cuts: dict[int, str], partners: set[str]
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(names bound from a K cut, names bound to a whole V partner), each with the partners
    it may stand for, through up to ``_MAX_HOPS`` assignments or loops, as ``_origin`` and
    ``_value_source`` follow them (``_bound_from_a_cut``); on the V side only plain names bound
    to the partner itself (under shape-keeping steps), or looping over it."""
    bindings: list[tuple[list[ast.expr], ast.expr, bool]] = []  # (targets, value, loop)
    for node in nodes:
        kind = type(node)
        if kind is ast.Assign:
            bindings.append((node.targets, node.value, False))
        elif kind is ast.AnnAssign and node.value is not None:
            bindings.append(([node.target], node.value, False))
        elif kind is ast.For or kind is ast.AsyncFor or kind is ast.comprehension:
            bindings.append(([node.target], node.iter, True))
    keys: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}

    def aliased(value: ast.expr) -> set[str]:
        name = _dotted(_strip_shape_keeping(value))
        return set() if name is None else ({name} & partners) | values.get(name, set())

    for _ in range(_MAX_HOPS + 1):
        grew = False
        for targets, value, loop in bindings:
            bound = list(_bound_from_a_cut(targets, value, loop, cuts, keys).items())
            grew |= _kv101_merge(keys, bound)
            if loop:
                # ``for v_i in [v] * n``: every pass the same V (``_repeated_item``); a ``zip``
                # binds each name to its own iterable (``scopes._zips_onto``).
                aliases = [
                    (name, aliased(item)) for name, iterable in _loop_bound(targets[0], value)
                    if (item := _repeated_item(iterable)) is not None
                ]
            else:
                aliases = [(t.id, aliased(v)) for t, v in _assigned_pairs(targets, value)]
            grew |= _kv101_merge(values, aliases)
        if not grew:
            break
    return keys, values


def _kv101_merge(names: dict[str, set[str]], bound: list[tuple[str, set[str]]]) -> bool:
    """Adds each name's partners to ``names``; did any partner come new?"""
    grew = False
    for name, partners in bound:
        if partners and not partners <= names.get(name, set()):
            names.setdefault(name, set()).update(partners)
            grew = True
    return grew


def _from_a_cut(expr: ast.expr, cuts: dict[int, str], keys: dict[str, set[str]]) -> set[str]:
    """The partners of the K cuts ``_origin`` may trace ``expr`` (a call's argument) to: under
    shape-keeping steps, a cut itself, a subscript of one or of a name bound from one (a
    piece), or a name bound from one. A cut anywhere else in it (``torch.cat([k[:n], x])``,
    ``f(k[:n])``) is no origin."""
    node = _strip_shape_keeping(expr)
    found = {cuts[id(node)]} if id(node) in cuts else set()
    if type(node) is ast.Subscript:
        node = _strip_shape_keeping(node.value)
        if id(node) in cuts:
            found.add(cuts[id(node)])
    if type(node) is ast.Name:
        found |= keys.get(node.id, set())
    return found


def _bound_from_a_cut(
    targets: list[ast.expr], value: ast.expr, loop: bool, cuts: dict[int, str], keys: dict[str, set[str]]
) -> dict[str, set[str]]:
    """The names one binding may bind to a K cut, with the cuts' partners, as ``scopes`` binds
    them and ``_origin`` follows them: a loop's name (or each name a ``zip`` binds) over a cut
    itself; a plain name assigned what ``_from_a_cut`` traces (``_assigned_pairs``); the names
    unpacking a cut itself, the pieces of a split (``scopes._splits_into``); anything else
    binds none."""
    found: dict[str, set[str]] = {}
    if loop:
        for name, iterable in _loop_bound(targets[0], value):
            if id(cut := _strip_shape_keeping(iterable)) in cuts:
                found.setdefault(name, set()).add(cuts[id(cut)])
        return found
    for target, bound in _assigned_pairs(targets, value):
        if partners := _from_a_cut(bound, cuts, keys):
            found.setdefault(target.id, set()).update(partners)
    if id(cut := _strip_shape_keeping(value)) in cuts:
        for e in (e for t in targets if type(t) in (ast.Tuple, ast.List) for e in t.elts if type(e) is ast.Name):
            found.setdefault(e.id, set()).add(cuts[id(cut)])
    return found


def _loop_bound(target: ast.expr, iterable: ast.expr) -> list[tuple[str, ast.expr]]:
    """(name, iterable) for each plain name a loop binds to an iterable of its own, as
    ``scopes._Walker._bind_loop_target`` binds them: a lone name to the loop's iterable, the
    names of ``for a, b in zip(xs, ys)`` each to its own."""
    if type(target) is ast.Name:
        return [(target.id, iterable)]
    if (
        type(target) in (ast.Tuple, ast.List) and type(iterable) is ast.Call and _tail(iterable.func) == "zip"
        and len(target.elts) == len(iterable.args) and not iterable.keywords
        and not any(type(e) is ast.Starred for e in (*target.elts, *iterable.args))
    ):
        return [(e.id, a) for e, a in zip(target.elts, iterable.args) if type(e) is ast.Name]
    return []


def _repeated_item(iterable: ast.expr) -> ast.expr | None:
    """``kv101_key_only_reshape._repeated_item``: ``v`` in ``[v] * n``, ``(v,) * n`` or
    ``itertools.repeat(v, n)``, one object every pass."""
    if type(iterable) is ast.BinOp and type(iterable.op) is ast.Mult:
        for side in (iterable.left, iterable.right):
            if type(side) in (ast.List, ast.Tuple) and len(side.elts) == 1 and type(side.elts[0]) is not ast.Starred:
                return side.elts[0]
        return None
    if type(iterable) is ast.Call and _dotted(iterable.func) == "itertools.repeat" and iterable.args:
        first = iterable.args[0]
        return None if type(first) is ast.Starred else first
    return None


def _assigned_pairs(targets: list[ast.expr], value: ast.expr) -> list[tuple[ast.Name, ast.expr]]:
    """(name, value) of each plain name an assignment binds to a value of its own, as
    ``scopes._Walker.assign`` binds them: ``a = b = x`` binds both to ``x``, ``a, b = x, y``
    each to its element; other unpacking binds no value."""
    if (
        len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
        and len(targets[0].elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in (*targets[0].elts, *value.elts))
    ):
        return [(t, v) for t, v in zip(targets[0].elts, value.elts) if type(t) is ast.Name]
    return [(t, value) for t in targets if type(t) is ast.Name]


# How many bindings ``kv101_key_only_reshape`` follows back from an argument (``_MAX_HOPS``).
_MAX_HOPS = 4


def _kv101_partner(base: str | None, bounds: ast.AST, extra) -> str | None:
    """The V partner of a K tensor cut at ``base`` with ``bounds``, unless the bounds name a
    V-side identifier (``k[:, :v.shape[1]]`` trims K to V: the rule lets it be)."""
    if base is None or not is_kv_tensor_name(base, extra) or kv_side(base.rsplit(".", 1)[-1], extra) != "k":
        return None
    if not any(isinstance(n, _KEYWORD_SPELLED) for n in walk(bounds)) and any(
        kv_side(n, extra) == "v" for n in _names_in(bounds)
    ):
        return None
    return counterpart_of_dotted(base, extra)


# Expressions spelled with a keyword (``a if c else b``, ``x in xs``, ``not x``): the rule
# reads identifiers in the bounds' text with whitespace removed, where a name next to such a
# keyword runs into it (``v_len if c`` -> ``v_lenifc``), so a V-side name there may go unseen.
_KEYWORD_SPELLED = (
    ast.IfExp, ast.BoolOp, ast.Compare, ast.Not, ast.Lambda, ast.comprehension, ast.Await, ast.Yield, ast.YieldFrom,
)


def _kv101_subscript_cut(node: ast.Subscript, extra) -> str | None:
    """The partner of a subscript ``reshapes._subscript_reshape`` reads as a cut with an axis
    other than the last (-1, after ``...``): the only axis that is a head dim at every rank."""
    base = _dotted(node.value)
    if base is None:
        base = _dotted(_seen_through(node.value)) if _seen_through(node.value) is not node.value else None
    if base is None:
        return None
    index = node.slice
    # ``k[a, b]`` has one element per axis; ``k[(a, b)]`` (the tuple written in parentheses,
    # so it starts before its first element) is one index, as libcst reads it.
    if isinstance(index, ast.Tuple) and index.elts and (index.col_offset, index.lineno) == (index.elts[0].col_offset, index.elts[0].lineno):
        elements = index.elts
    else:
        elements = [index]
    ellipsis_at = next((i for i, e in enumerate(elements) if isinstance(e, ast.Constant) and e.value is Ellipsis), None)
    consuming = [i for i, e in enumerate(elements) if i != ellipsis_at and not (isinstance(e, ast.Constant) and e.value is None)]
    for position, i in enumerate(consuming):
        e = elements[i]
        if isinstance(e, ast.Slice):
            if e.lower is None and e.upper is None and e.step is None:
                continue
        elif int_value(e) is not None or "layer" in (_dotted(e) or "").lower():
            continue  # ``kv[0]`` unpacks a stacked cache, ``cache[layer]`` picks a layer
        if ellipsis_at is not None and i > ellipsis_at and position == len(consuming) - 1:
            continue  # axis -1
        return _kv101_partner(base, index, extra)
    return None


def _kv101_call_cut(call: ast.Call, extra) -> str | None:
    """The partner of a call ``reshapes._call_reshape`` reads as a cut whose axis is a
    literal other than -1 (an unplaceable axis is ambiguous, and the rule stays silent)."""
    func = call.func
    tail = _tail(func)
    if tail not in RESHAPE_CALLS:
        return None
    found = _call_base(call)
    if found is None:
        return None
    base, shift = found
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if tail not in AXISLESS_RESHAPES:
        position, default = RESHAPE_DIM_ARGS[tail]
        dim = next((kw.value for kw in call.keywords if kw.arg == "dim"), None)
        if dim is None and len(positional) > position + shift:
            dim = positional[position + shift]
        axis = default if dim is None else int_value(dim)
        if axis is None or axis == -1:
            return None
    return _kv101_partner(base, call, extra)


def _call_base(call: ast.Call) -> tuple[str, int] | None:
    """(the tensor, where its arguments start) that ``reshapes._call_reshape`` reads a
    reshaping call as acting on: a method's receiver (``k.narrow(...)``, 0), else the first
    argument (``torch.narrow(k, ...)``, 1)."""
    func = call.func
    method_base = _dotted(func.value) if isinstance(func, ast.Attribute) else None
    if method_base is not None and method_base not in ("torch", "torch.Tensor", "Tensor"):
        return method_base, 0
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    base = _dotted(positional[0]) if positional else None
    return None if base is None else (base, 1)


# ``kv101_key_only_reshape._RESIZING_CALLS``: a V bound to one of these may already match.
_RESIZING_CALLS = RESHAPE_CALLS | {"cat", "concat", "concatenate", "stack", "pad", "gather", "roll", "repeat_kv"}


def _read_whole(nodes: list[ast.AST]) -> set[str]:
    """The dotted names the scope reads as whole tensors: not subscripted, not an attribute's
    owner (``v.shape``), except under shape-keeping calls (``v.view(...)`` is still ``v``
    to ``strip_shape_keeping``). ``nodes`` come parents first."""
    covered: set[int] = set()
    transparent: set[int] = set()
    whole: set[str] = set()
    for node in nodes:
        kind = type(node)
        if kind is ast.Subscript:
            covered.add(id(node.value))
        elif kind is ast.Call:
            func = node.func
            if type(func) is ast.Attribute and func.attr in SHAPE_KEEPING:
                (covered if id(node) in covered else transparent).add(id(func.value))
        elif kind is ast.Attribute:
            if id(node.value) not in transparent:
                covered.add(id(node.value))
            if id(node) not in covered and type(node.ctx) is ast.Load and (name := _dotted(node)) is not None:
                whole.add(name)
        elif kind is ast.Name:
            if id(node) not in covered and type(node.ctx) is ast.Load:
                whole.add(node.id)
    return whole


def _resized_names(nodes: list[ast.AST]) -> set[str]:
    """Names the scope binds (``name = value``, or one element of ``a, b = x, y``) to a value
    holding a subscript of a named tensor or a resizing call: ``_resized_anywhere``."""
    bound: list[tuple[ast.Name, ast.expr]] = []
    for node in nodes:
        if type(node) is ast.Assign:
            bound += _assigned_pairs(node.targets, node.value)
        elif type(node) is ast.AnnAssign and node.value is not None:
            bound += _assigned_pairs([node.target], node.value)
    return {name.id for name, value in bound if _resizes(value)}


def _resizes(value: ast.expr) -> bool:
    todo = [value]
    while todo:
        node = todo.pop()
        if type(node) is ast.Lambda:
            todo.append(node.body)  # the scope walker reads a lambda's body, not its defaults
            continue
        if type(node) is ast.Call and _tail(node.func) in _RESIZING_CALLS:
            return True
        if type(node) is ast.Subscript:
            inner = node.value
            while type(inner) is ast.Subscript:
                inner = inner.value
            if _dotted(_seen_through(inner)) is not None:
                return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def _cuts(node: ast.Subscript) -> bool:
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for e in elements:
        if isinstance(e, ast.Slice):
            if e.lower is not None or e.upper is not None or e.step is not None:
                return True
        elif not (isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis or type(e.value) is int)):
            return True
    return False




def _chain_root(node: ast.expr) -> str | None:
    """``self.k_buffer`` of ``self.k_buffer[layer][ids]``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return _dotted(node)


def _kv103(facts: Facts, settings: Settings) -> bool:
    """A K cache (a K-side tensor name with a cache word) and its V partner both subscripted
    or handed to an indexed gather/scatter call in one scope, and (where the source text is
    at hand) a site the rule can report: one that meets sites of the other side but none
    alike (``_kv103_unmatched``); the rule compares indices as text, K names swapped to V,
    and reports only a site none of the other side matches."""
    extra = settings.extra_pairs
    if not _kv103_anywhere(facts, extra):
        return False
    if facts.source is None:
        return True
    return any(_kv103_scope(nodes, extra, facts.text, facts.site_context) for nodes in facts.scopes())


def _kv103_scope(
    nodes: list[ast.AST], extra, text: Callable[[ast.AST, ast.AST], str], context: Callable[[], _SiteContext]
) -> bool:
    # (kind, base) -> each site: an indexing subscript chain on a cache (``_indexed_accesses``)
    # or an indexed call on one (``_indexed_calls``, by its name), with its compared text,
    # whether the rule surely records it, and whether it is written to.
    found: dict[tuple[str, str], list[tuple[ast.AST, str, bool, bool]]] = {}
    inner: set[int] = set()
    # A cache handed to an indexed call -> whether the rule surely reads it as the call's
    # operand (no access of its own) rather than, maybe, as an access.
    operands: dict[int, bool] = {}
    # What the rule's walk skips (a lambda's defaults, annotations): sites there may be none.
    unwalked: set[int] = set()
    for node in nodes:
        kind = type(node)
        if kind is ast.Subscript:
            if id(node) in inner:
                continue  # part of a longer chain, compared as that chain
            root, indexes = node, False
            while type(root) is ast.Subscript:
                inner.add(id(root))
                indexes = indexes or _kv103_indexes(root)
                root = root.value
            base = _dotted(root)
            if base is None or not indexes or operands.get(id(node)) or not _is_cache(base, extra):
                continue
            sure = id(node) not in operands and id(node) not in unwalked
            store = type(node.ctx) is ast.Store
            found.setdefault(("access", base), []).append((node, _written(text, root, node), sure, store))
        elif kind is ast.Call and (tail := _tail(node.func)) in INDEXED_CALLS:
            _kv103_call(node, tail, extra, text, id(node) not in unwalked, operands, found)
        elif kind is ast.Lambda:
            unwalked.update(id(n) for n in walk(node.args))
        elif kind is ast.AnnAssign:
            unwalked.update(id(n) for n in walk(node.annotation))
            if node.value is None:
                unwalked.update(id(n) for n in walk(node.target))
    # All sites alike by text need no more (most scopes); else the sites the rule reads
    # (``_SiteContext``: not quiet), each with its ``if`` arms.
    if not _some_pair_differs({key: {written for _, written, _, _ in sites} for key, sites in found.items()}, extra, keep_key=False):
        return False
    where = context()
    read = {
        key: [(written, where.arms.get(id(node), ()), sure, store) for node, written, sure, store in sites if id(node) not in where.unread]
        for key, sites in found.items()
    }
    return _kv103_unmatched(read, extra)


def _kv103_indexes(node: ast.Subscript) -> bool:
    """Does the subscript select or gather (the rule's ``_has_index``)? ``k[(None, None)]``
    is one index to libcst, a tuple to ``ast``: a tuple without slices counts as one."""
    return not _only_slices(node) or (type(node.slice) is ast.Tuple and not any(type(e) is ast.Slice for e in node.slice.elts))


def _kv103_call(
    node: ast.Call, tail: str, extra, text: Callable[[ast.AST, ast.AST], str], walked: bool,
    operands: dict[int, bool], found: dict[tuple[str, str], list[tuple[ast.AST, str, bool, bool]]],
) -> None:
    """Record the indexed call ``node`` as the rule's ``_indexed_calls`` reads it: on the first
    of its receiver and first positional argument that is a cache. The rule skips a loop
    counter's name (``non_tensors``) and a free function this scope binds, which the screen
    does not see: a call with two candidates, or called by a bare name, records each candidate,
    none of them sure."""
    method = type(node.func) is ast.Attribute
    if not method and tail not in INDEXED_FREE_FUNCTIONS:
        return  # a local helper with its own signature
    first = [a for a in node.args if type(a) is not ast.Starred][:1]
    candidates = [
        (operand, root) for operand in ([node.func.value] if method else []) + first
        if (root := _kv103_root(operand)) is not None and _is_cache(_dotted(root), extra)
    ]
    sure = walked and method and len(candidates) == 1
    for operand, root in candidates:
        if type(operand) is ast.Subscript:
            operands[id(operand)] = sure
        # From the cache's name to the call's end; from the callee on where the cache is an
        # argument, so every argument is in it.
        start, argument = (root, None) if method and operand is node.func.value else (node.func, operand)
        written = _kv103_call_text(text, start, node, tail, argument)
        found.setdefault((tail, _dotted(root)), []).append((node, written, sure, False))


def _kv103_root(node: ast.expr) -> ast.expr | None:
    """``self.k_buffer`` (the node) of ``self.k_buffer[layer]``, when it is a dotted name."""
    while type(node) is ast.Subscript:
        node = node.value
    return node if _dotted(node) is not None else None


class _Start(NamedTuple):
    """Where a node starts, read by ``Facts.text`` as the end of its ``after``."""

    end_lineno: int
    end_col_offset: int


def _kv103_call_text(
    text: Callable[[ast.AST, ast.AST], str], start: ast.AST, call: ast.Call, tail: str, operand: ast.expr | None
) -> str:
    """The text of ``call`` after ``start``, whitespace removed, less what the rule does not
    compare (``_index_arguments``): the data written (at ``INDEXED_DATA_POSITION`` among the
    positional arguments other than ``operand``) and the keywords that name no index. Each
    cut leaves its commas, so texts alike still mean the same arguments alike."""
    written = _written(text, start, call)
    if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
        return written  # libcst counts ``*a`` and ``**kw`` among the positions: cut nothing
    positional = [a for a in call.args if a is not operand]
    data = INDEXED_DATA_POSITION.get(tail)
    cuts = [positional[data]] if data is not None and data < len(positional) else []
    cuts += [k for k in call.keywords if k.arg in INDEXED_IGNORED_KEYWORDS]
    if not cuts or written[-1:] != ")":
        return written
    pieces = []
    for cut in cuts:
        pieces.append(text(start, _Start(cut.lineno, cut.col_offset)))
        start = cut
    pieces.append(text(start, call))
    return "".join("".join(pieces).split())


def _kv103_unmatched(sites: dict[tuple[str, str], list[tuple[str, tuple, bool, bool]]], extra) -> bool:
    """Is some site alike no site of the other side it meets while it meets one, as
    ``scopes.mismatches`` reports? K texts have their names swapped to V (the rule's
    ``_swapped``), V texts stay as written; only a site the rule surely records counts as
    alike, and a V site written to reports nothing of its own. Sites in different arms of one
    ``if`` never meet."""
    for _, k_sites, v_sites in _k_v_groups(sites, extra):
        ks = [(swap_kv_text(written, extra), arms, sure, True) for written, arms, sure, _ in k_sites]
        vs = [(written, arms, sure, not store) for written, arms, sure, store in v_sites]
        for mine, others in ((ks, vs), (vs, ks)):
            for written, arms, _, reports in mine:
                met = [(other, sure) for other, other_arms, sure, _ in others if not _exclusive(arms, other_arms)]
                if reports and met and (written, True) not in met:
                    return True
    return False


def _is_cache(base: str, extra) -> bool:
    tail = base.rsplit(".", 1)[-1]
    return is_kv_tensor_name(base, extra) and any(part.lower() in CACHE_PARTS for part in tail.split("_"))


def _kv103_anywhere(facts: Facts, extra) -> bool:
    bases = {_chain_root(s.value) for s in facts.subscripts}
    for call in facts.calls:
        if _tail(call.func) in INDEXED_CALLS:
            if isinstance(call.func, ast.Attribute):
                bases.add(_chain_root(call.func.value))
            bases.update(_chain_root(a) for a in call.args)
    for base in bases:
        if base is None or not is_kv_tensor_name(base, extra):
            continue
        tail = base.rsplit(".", 1)[-1]
        if (
            kv_side(tail, extra) == "k" and any(part.lower() in CACHE_PARTS for part in tail.split("_"))
            and counterpart_of_dotted(base, extra) in bases
        ):
            return True
    return False


def _kv106(facts: Facts, settings: Settings) -> bool:
    """A V-side scale assigned from its K twin: as a branch of ``a if .. else b`` or ``a or b``,
    or alone (the rule then also needs an enclosing test of the value scale)."""
    extra = settings.extra_pairs
    for targets, value in facts.assignments:
        for target in targets:
            name = _dotted(target)
            if name is None or not is_scale_name(name):
                continue
            head, _, tail = name.rpartition(".")
            twin = key_counterpart(tail, extra) if kv_side(tail, extra) == "v" else None
            if twin is None:
                continue
            key = f"{head}.{twin}" if head else twin
            if isinstance(value, ast.IfExp):
                branches = (value.body, value.orelse)
            elif isinstance(value, ast.BoolOp):
                branches = value.values
            else:
                branches = (value,)
            if any(_dotted(b) == key for b in branches):
                return True
    return False


def _kv107(facts: Facts, settings: Settings) -> bool:
    """The rule's own model (``model.symmetry``), on the same ``ast`` tree: exact."""
    from linter.model.symmetry import breaks  # it walks with this module's ``walk``

    return bool(breaks(facts.tree, settings.extra_pairs))


SCREENS: dict[str, Screen] = {
    "KV102": _kv102,
    "KV202": _kv202,
    "KV203": _kv203,
    "KV101": _kv101, "KV103": _kv103, "KV106": _kv106, "KV107": _kv107, "KV104": _kv104, "KV201": _kv201, "KV204": _kv204, "KV205": _kv205, "KV206": _kv206, "KV301": _kv301,
}


# Rules whose findings in a method rest on that method and the names enclosing it only
# (``scopes.ScopeTracking``: a class body is no scope of theirs; KV202 keeps one scope per
# function; KV106 reads one assignment and the tests around it), so a class can be cut down
# to its header, the methods their screens let through, and its other statements when their
# screens let those through together.
METHOD_SCOPED: frozenset[str | None] = frozenset({"KV101", "KV102", "KV103", "KV106", "KV202"})


def may_report(tree: ast.AST, rules: Collection[str | None], settings: Settings, source: Source | None = None) -> bool:
    """Can any of ``rules`` (codes; None: a rule without known conditions) report on ``tree``
    (parsed from ``source``, where given)?"""
    if any(code not in SCREENS for code in rules):
        return True  # no walk at all when some live rule has no screen
    facts = Facts(tree, source)
    return any(SCREENS[code](facts, settings) for code in rules)


def reporting(
    tree: ast.AST, rules: Collection[str | None], settings: Settings, source: Source | None = None
) -> frozenset[str | None]:
    """The ``rules`` that may report on ``tree``: those without a screen, and those whose
    screen lets it through. With ``source``, the text ``tree`` was parsed from, a screen that
    compares code as text (KV102, KV103) can say more."""
    facts = Facts(tree, source) if any(code in SCREENS for code in rules) else None
    return frozenset(code for code in rules if code not in SCREENS or SCREENS[code](facts, settings))
