"""KV102's ``ast`` screen: can this unit's tree hold a finding of KV102? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Callable
from linter.model.names import (
    counterpart_of_dotted,
    is_kv_tensor_name,
    kv_side,
    swap_kv_text,
)
from linter.settings import Settings
from linter.plan.screen_facts import _call_base, _dotted, _exclusive, _k_v_groups, _only_slices, _seen_through, _SiteContext, _some_pair_differs, _swap_except, _tail, _written, Facts


def _cuts_nothing(node: ast.Subscript) -> bool:
    """``x[:, None]``, ``x[..., :]``: whole axes and new ones only. The rule reads no axis in
    it (``reshapes.reshape_of`` is None), so it compares with no other site: a Triton kernel's
    ``offs_k[:, None]`` beside ``offs_v[None, :]`` is no pair of cuts."""
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return all(
        not isinstance(e, ast.Slice) or (e.lower is None and e.upper is None and e.step is None)
        for e in elements
    )


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

SCREEN = _kv102
