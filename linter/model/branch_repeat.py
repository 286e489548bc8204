"""Sibling branches of one ``if``: one repeats K and V to the query's head count (GQA), the
other multiplies the query with the same K (or the weights with the same V) unrepeated.

Both branches start from the same K and V (whatever reaches the ``if``), so when one branch
needs ``repeat_kv(key_states, groups)`` before its ``torch.matmul``, the other needs it too,
unless the ``if`` itself tells the MHA path from the GQA one (its test names a group or KV head
count).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from linter.model.ast_reading import FUNCTIONS, root_word, tail
from linter.model.names import is_kv_head_count_name, key_counterpart, value_counterpart

# Products that need K and V with the query's head count: a plain matmul, or SDPA without
# ``enable_gqa``.
_PRODUCTS = frozenset({"matmul", "scaled_dot_product_attention"})
# A test naming one of these chooses between head layouts itself.
_LAYOUT_WORDS = ("group", "n_rep", "rep", "gqa", "mqa", "multi_query")


def unrepeated_uses(function: ast.AST, extra_pairs: Iterable[tuple[str, str]] = ()) -> Iterator[tuple[ast.AST, str, int]]:
    """(the product, the K or V name it reads unrepeated, the line of the sibling's repeat)
    for every such product in ``function``'s own ``if`` statements."""
    pairs = tuple(extra_pairs)
    for node in _own_nodes(function):
        if not isinstance(node, ast.If) or not node.orelse or _chooses_layout(node.test):
            continue
        body, orelse = _repeats(node.body), _repeats(node.orelse)
        for repeated, other, branch in ((body, orelse, node.orelse), (orelse, body, node.body)):
            twins = {
                name: line for name, line in repeated.items()
                if (v := value_counterpart(name, pairs)) is not None and v in repeated
            }
            twins.update({
                value_counterpart(name, pairs): line for name, line in twins.items()  # type: ignore[misc]
            })
            if not twins:
                continue
            done = set(other)
            for product, name in _products(branch):
                if name in twins and name not in done and not _repeated_before(function, node, name):
                    yield product, name, twins[name]
                    done.add(name)


def _chooses_layout(test: ast.expr) -> bool:
    for node in ast.walk(test):
        word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if word is not None and (is_kv_head_count_name(word) or any(w in word.lower() for w in _LAYOUT_WORDS)):
            return True
    return False


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """``node``'s nodes, less those of functions and classes defined inside it."""
    todo = list(ast.iter_child_nodes(node))
    while todo:
        child = todo.pop()
        if isinstance(child, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            continue
        yield child
        todo.extend(ast.iter_child_nodes(child))


def _statements_nodes(block: list[ast.stmt]) -> Iterator[ast.AST]:
    for statement in block:
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            continue
        yield statement
        yield from _own_nodes(statement)


def _repeats(block: list[ast.stmt]) -> dict[str, int]:
    """Names a block rebinds to their own GQA repeat: ``k = repeat_kv(k, n)``,
    ``k = k.repeat_interleave(n, dim=1)``; by name, the first such line."""
    found: dict[str, int] = {}
    for node in _statements_nodes(block):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        if _repeat_of(node.value) == name:
            found.setdefault(name, node.lineno)
    return found


def _repeat_of(value: ast.expr) -> str | None:
    """The name a repeat call repeats: ``repeat_kv(k, n).to(dtype)`` -> k."""
    while isinstance(value, ast.Call):
        name = tail(value.func) or ""
        if "repeat" in name.lower():
            if isinstance(value.func, ast.Attribute) and name in ("repeat_interleave", "repeat"):
                return root_word(value.func.value)
            return root_word(value.args[0]) if value.args else None
        if not isinstance(value.func, ast.Attribute):
            return None
        value = value.func.value
    return None


def _products(block: list[ast.stmt]) -> Iterator[tuple[ast.AST, str]]:
    """The products in ``block`` that read a K or V name directly: ``torch.matmul(q,
    k.transpose(2, 3))``, ``w @ v``, ``F.scaled_dot_product_attention(q, k, v)``, in line
    order."""
    found = []
    for node in _statements_nodes(block):
        operands: list[ast.expr] = []
        if isinstance(node, ast.Call) and tail(node.func) in _PRODUCTS:
            if any(k.arg == "enable_gqa" for k in node.keywords):
                continue
            operands = list(node.args[:3])
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            operands = [node.left, node.right]
        for operand in operands[1:]:
            name = _operand_name(operand)
            if name is not None and (value_counterpart(name) or key_counterpart(name)):
                found.append((node.lineno, node.col_offset, node, name))
    for *_, node, name in sorted(found, key=lambda f: (f[0], f[1])):
        yield node, name


def _operand_name(operand: ast.expr) -> str | None:
    """``k`` of ``k``, ``k.transpose(2, 3)``, ``k.to(dtype)``: the tensor itself, not a part."""
    while isinstance(operand, ast.Call) and isinstance(operand.func, ast.Attribute):
        operand = operand.func.value
    return operand.id if isinstance(operand, ast.Name) else None


def _repeated_before(function: ast.AST, statement: ast.If, name: str) -> bool:
    """Is ``name`` repeated anywhere in ``function`` before the ``if`` (K and V already at the
    query's head count when both branches start)?"""
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.Assign) and node.lineno < statement.lineno
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and _repeat_of(node.value) == name
        ):
            return True
    return False

