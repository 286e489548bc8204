"""KV103's ``ast`` screen: can this unit's tree hold a finding of KV103? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Callable
from typing import NamedTuple
from linter.model.names import (
    CACHE_PARTS,
    INDEXED_CALLS,
    INDEXED_DATA_POSITION,
    INDEXED_FREE_FUNCTIONS,
    INDEXED_IGNORED_KEYWORDS,
    counterpart_of_dotted,
    is_kv_tensor_name,
    kv_side,
    swap_kv_text,
)
from linter.settings import Settings
from linter.plan.screen_facts import _dotted, _exclusive, _k_v_groups, _only_slices, _SiteContext, _some_pair_differs, _tail, _written, Facts, walk


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
    of its receiver and first positional argument that is a cache. The rule skips a free
    function this scope binds, which the screen does not see: a call with two candidates, or
    called by a bare name, records each candidate, none of them sure."""
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

SCREEN = _kv103
