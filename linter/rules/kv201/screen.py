"""KV201's ``ast`` screen: can this unit's tree hold a finding of KV201? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from collections.abc import Callable, Iterator
from linter.model.ast_sizes import Aliases, heads_mismatch
from linter.model.names import (
    kv_side,
    value_counterpart,
)
from linter.settings import Settings
from linter.plan.screen_facts import _kv201_size, _UNREAD, Facts


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

SCREEN = _kv201
