"""Triton block pointers that take the value's tile but not the program's place along it.

A kernel that splits the value's head dim across programs (``i_v = tl.program_id(0)``) offsets
each V-tiled block pointer by its tile (``(i_t * BT, i_v * BV)`` with block shape ``(BT,
BV)``). A block pointer of the same tile at offset 0 on that axis, never advanced, makes every
program read or write the first tile: the output of all programs lands on V's first ``BV``
columns.

Read on stdlib ``ast`` trees, so the rule and its screen ask one code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from linter.model.ast_walk import walk

# The value's tile sizes: a kernel tiles V's head dim by one of them.
VALUE_TILES = frozenset({"BV", "BLOCK_V", "BLOCK_DV"})


@dataclass(frozen=True)
class TileFault:
    node: ast.AST   # the offset that stays 0
    pointer: str    # the block pointer's name
    tile: str       # the value tile
    index: str      # the program's tile index other pointers use


def _elements(node: ast.AST) -> list[ast.expr] | None:
    return list(node.elts) if isinstance(node, (ast.Tuple, ast.List)) else None


def _block_ptr(call: ast.AST) -> tuple[list[ast.expr], list[ast.expr]] | None:
    """(offsets, block shape) of ``tl.make_block_ptr(base, shape, strides, offsets, block, order)``."""
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "make_block_ptr":
        return None
    args = list(call.args)
    for keyword in call.keywords:
        position = {"offsets": 3, "block_shape": 4}.get(keyword.arg or "")
        if position is not None:
            while len(args) <= position:
                args.append(ast.Constant(None))
            args[position] = keyword.value
    if len(args) < 5:
        return None
    offsets, block = _elements(args[3]), _elements(args[4])
    if offsets is None or block is None or len(offsets) != len(block):
        return None
    return offsets, block


def _tile_index(offset: ast.expr, tile: str) -> str | None:
    """``i_v`` of ``i_v * BV`` (either order)."""
    if isinstance(offset, ast.BinOp) and isinstance(offset.op, ast.Mult):
        for a, b in ((offset.left, offset.right), (offset.right, offset.left)):
            if isinstance(a, ast.Name) and isinstance(b, ast.Name) and b.id == tile:
                return a.id
    return None


def _zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _functions(tree: ast.AST) -> Iterator[ast.AST]:
    for node in walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _advanced(function: ast.AST) -> set[str]:
    """Pointers moved after they are made (``tl.advance(p_o, ...)``) or made more than once."""
    moved: set[str] = set()
    made: dict[str, int] = {}
    for node in walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name == "advance" and isinstance(node.args[0], ast.Name):
                moved.add(node.args[0].id)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    made[target.id] = made.get(target.id, 0) + 1
                    if isinstance(node, ast.AugAssign):
                        moved.add(target.id)
    return moved | {n for n, count in made.items() if count > 1}


def untiled_offsets(tree: ast.AST) -> list[TileFault]:
    """Every V-tiled block pointer of ``tree`` fixed at the first tile where the kernel's
    other V-tiled pointers move with a tile index."""
    found: list[TileFault] = []
    if not any(n.__class__ is ast.Attribute and n.attr == "make_block_ptr" or n.__class__ is ast.Name
               and n.id == "make_block_ptr" for n in walk(tree)):
        return found
    for function in _functions(tree):
        pointers: list[tuple[str, list[ast.expr], list[ast.expr]]] = []
        for node in walk(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                read = _block_ptr(node.value)
                if read is not None:
                    pointers.append((node.targets[0].id, *read))
        indices = {(block[j].id, index) for _, offsets, block in pointers for j in range(len(block))
                   if isinstance(block[j], ast.Name) and block[j].id in VALUE_TILES
                   and (index := _tile_index(offsets[j], block[j].id)) is not None}
        if not indices:
            continue
        moved = None
        for name, offsets, block in sorted(pointers, key=lambda p: p[1][0].lineno if p[1] else 0):
            for j, size in enumerate(block):
                tile = size.id if isinstance(size, ast.Name) else None
                index = next((i for t, i in sorted(indices) if t == tile), None)
                if index is None or not _zero(offsets[j]):
                    continue
                moved = _advanced(function) if moved is None else moved
                if name not in moved:
                    found.append(TileFault(offsets[j], name, tile, index))
    return sorted(found, key=lambda f: (f.node.lineno, f.node.col_offset))
