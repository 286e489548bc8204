"""What the ``ast`` screens (``linter.plan.screens``) share: ``Facts``, one walk of a unit's
tree, and the readings more than one rule's screen makes (dotted names, cut bases, projection
output sizes, the text of a site with K names swapped to V).

Screens read ``Facts``, whose scope is the whole unit (a fact of any method counts for all),
and follow their rule's own model as far as it is cheap; each rule's screen is in its folder
(``linter/rules/kvNNN/screen.py``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

from linter.model.ast_walk import _children, _push_children, walk  # noqa: F401 (the screens import them from here)
from linter.model.names import (
    METADATA_ATTRIBUTES,
    QUIET_CALLS,
    SAME_TENSOR_METHODS,
    SEE_THROUGH,
    counterpart_of_dotted,
    is_kv_tensor_name,
    key_counterpart,
    kv_side,
    swap_kv_text,
    value_counterpart,
)
from linter.settings import Settings

Screen = Callable[["Facts", Settings], bool]
# The lines a tree was parsed from, and how many come before its first: line ``n`` of the tree
# is ``lines[offset + n - 1]``.
Source = tuple[list[str], int]

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


def _only_slices(node: ast.Subscript) -> bool:
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return all(
        isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis))
        for e in elements
    )


def _seen_through(node: ast.expr | None) -> ast.expr | None:
    """``k`` of ``k.transpose(1, 2).contiguous()``: the rules read a cut after axis-moving
    steps as a cut of the tensor itself."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SEE_THROUGH:
        node = node.func.value
    return node


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
