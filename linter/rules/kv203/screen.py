"""KV203's ``ast`` screen: can this unit's tree hold a finding of KV203? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Iterator
from linter.model.ast_sizes import int_value
from linter.model.heads import equal_to_query
from linter.model.names import (
    SAME_TENSOR_METHODS,
    Role,
    is_kv_head_count_name,
    kv_side,
    name_role,
)
from linter.settings import Settings
from linter.plan.screen_facts import _IDENTIFIER, _push_children, _tail, _tensor_root, Facts, walk


# KV203's vocabulary, as in the rule.
_SPLITS = frozenset({"chunk", "split", "tensor_split"})
_FUNCTION_FORMS = frozenset({"chunk", "tensor_split", "split"})
_FIRST_KEYWORD = {"split": "split_size_or_sections", "chunk": "chunks", "tensor_split": "indices_or_sections"}


def _argument(args: list[ast.expr], keywords: list[ast.keyword], index: int, keyword: str) -> ast.expr | None:
    for kw in keywords:
        if kw.arg == keyword:
            return kw.value
    return args[index] if index < len(args) else None


def _kv203_first(call: ast.Call) -> tuple[str, ast.expr, int] | None:
    """The method (``chunk``, ``split``, ``tensor_split``), its parts or sizes argument and
    its literal dim (0 where none is given) of a split, as KV203's ``visit_Call`` reads them;
    None for any other call."""
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
    dim_arg = _argument(args, keywords, 1, "dim")
    dim = 0 if dim_arg is None else int_value(dim_arg)
    return None if first is None or dim is None else (func.attr, first, dim)


def _kv203_receiver(call: ast.Call) -> ast.expr:
    receiver = call.func.value  # type: ignore[attr-defined]
    if isinstance(receiver, ast.Name) and receiver.id == "torch" and call.args:
        receiver = call.args[0].value if type(call.args[0]) is ast.Starred else call.args[0]
    return receiver


# KV203's ``_WEIGHT_PARTS``.
_WEIGHT_PARTS = frozenset({"weight", "weights", "bias", "biases", "proj", "w", "wq", "wk", "wv", "wqkv"})


def _kv203_weight_named(name: str) -> bool:
    return not _WEIGHT_PARTS.isdisjoint(name.lower().split("_"))


def _kv203_weight(call: ast.Call, names: list[str | None] | None) -> bool:
    """``_is_weight``: the split tensor's receiver chain, or the three names it is unpacked
    into (the second and third), name a weight or bias."""
    if names is not None and len(names) == 3 and None not in names and all(
        _kv203_weight_named(n) for n in names[1:]  # type: ignore[arg-type]
    ):
        return True
    return any(_kv203_weight_named(n) for n in _kv203_chain(call))


def _kv203_chain(call: ast.Call) -> list[str]:
    """``_receiver_names``: the names along the split tensor's chain of attributes, subscripts
    and shape-keeping calls."""
    expr, chain = _kv203_receiver(call), []
    while True:
        if isinstance(expr, ast.Name):
            return [*chain, expr.id]
        if isinstance(expr, ast.Attribute):
            chain.append(expr.attr)
            expr = expr.value
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_TENSOR_METHODS:
            expr = expr.func.value
        else:
            return chain


def _kv203_split(call: ast.Call, three_targets: bool, function: ast.AST | None) -> bool:
    """Can this call (in ``function``) be one of KV203's equal-thirds splits
    (``_equal_thirds``)? A name of sizes is read through its function's one assignment before
    the call, as the rule's ``Aliases`` read it."""
    read = _kv203_first(call)
    if read is None:
        return False
    method, first, _ = read
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
        if (read := _kv203_first(call)) is not None and (
            read[2] != 0 and _kv203_qkv(call, unpacked.get(id(call)))
            or read[2] == 0 and _kv203_weight(call, unpacked.get(id(call))) and (
                _kv203_qkv(call, unpacked.get(id(call))) or any(map(_kv203_names_qkv, _kv203_chain(call)))
            )
        )
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


def _kv203_names_qkv(name: str) -> bool:
    low = name.lower()
    return "qkv" in low or "query_key_value" in low


def _kv203_qkv(call: ast.Call, names: list[str | None] | None) -> bool:
    """``_is_qkv``: the receiver's root names a fused QKV (``qkv``, ``query_key_value``), or
    the parts are unpacked into three names whose second is K-side and third V-side."""
    root = _tensor_root(_kv203_receiver(call))
    if root is not None and _kv203_names_qkv(root):
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

SCREEN = _kv203
