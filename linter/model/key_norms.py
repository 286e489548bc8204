"""A norm over the whole key, sized with the query's width.

A key norm (``self.k_norm``) normalizes either one head (sized with the head dim) or K's whole
width, which is the KV head count times the head dim. Sized with the model's or the query's
width (``RMSNorm(hidden_size)``, ``num_heads * head_dim``) it fails on every checkpoint whose
KV head count is not the query's; sized with the model width divided by the KV head count
(``d_model // n_kv_heads``) it is neither a head dim nor K's width. Reported only for a norm
the class applies to K (not to an input before its projection), in a class that holds a KV
head count (``num_kv_heads``, ``config.n_kv_heads``): where there is none, the
model is multi-head attention and the widths agree.

A configuration module the file imports (``from .configuration_esmc import EsmcConfig``) that
rejects a KV head count other than the query's (``if num_key_value_heads != num_attention_heads:
raise``) makes the model multi-head attention by construction: the rule asks
``imported_config_forbids_gqa`` (the screen, which has no path, does not: it may say yes for
more).

Read on stdlib ``ast`` trees, so the rule and its screen ask one code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from linter.model.ast_reading import tail
from linter.model.module_files import module_file, read_once
from linter.model.ast_walk import walk
from linter.model.names import Role, is_kv_tensor_name, kv_side, name_role

# ``k_norm``, ``key_layernorm``, ``k_ln``, ``key_norm_layer``: a norm of the key.
_KEY_NORM = re.compile(r"^(?:k|key)_?(?:norm|layernorm|layer_norm|ln)(?:_|$)", re.IGNORECASE)
# Keywords that give a norm its size.
_SIZE_KEYWORDS = frozenset({"size", "normalized_shape", "hidden_size", "dim", "num_features", "d_model", "features"})


@dataclass(frozen=True)
class KeyNormFault:
    node: ast.expr  # the norm's size
    norm: str
    kv_heads: str  # the KV head count the class holds
    divided: bool  # a width divided by the KV head count (else the query's width)


def key_norm_name(name: str) -> bool:
    return bool(_KEY_NORM.match(name))


def _size(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg in _SIZE_KEYWORDS:
            return keyword.value
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            return None
        if any(name_role(n) is not Role.UNKNOWN for n in _names(arg)):
            return arg
    return None


def _names(node: ast.AST) -> list[str]:
    return [n.attr if isinstance(n, ast.Attribute) else n.id for n in walk(node) if isinstance(n, (ast.Name, ast.Attribute))]


def _role(node: ast.expr) -> Role:
    name = tail(node)
    return name_role(name) if name is not None else Role.UNKNOWN


def _query_width(size: ast.expr) -> bool:
    """``hidden_size``, ``self.q_size``, ``num_heads * head_dim``: the query's (the model's) width."""
    if _role(size) is Role.Q_WIDTH:
        return True
    if isinstance(size, ast.BinOp) and isinstance(size.op, ast.Mult):
        roles = {_role(size.left), _role(size.right)}
        return roles == {Role.Q_HEADS, Role.HEAD_DIM}
    return False


def _width_per_kv_head(size: ast.expr) -> bool:
    """``d_model // n_kv_heads``: the query's width cut into as many parts as K has heads."""
    return isinstance(size, ast.BinOp) and isinstance(size.op, (ast.FloorDiv, ast.Div)) \
        and _role(size.left) is Role.Q_WIDTH and _role(size.right) is Role.KV_HEADS


def _applied_to_key(cls: ast.ClassDef, norm: str) -> bool:
    """Is ``self.<norm>`` applied to K (``self.k_norm(k.contiguous())``,
    ``self.k_norm(self.k_proj(x))``) in the class? A norm applied to the input before its
    projection (``self.k_norm(cross_states)``) has the input's width."""
    for node in walk(cls):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == norm
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and node.args):
            continue
        arg = node.args[0]
        while isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and _CHAIN.fullmatch(arg.func.attr):
            arg = arg.func.value
        name = tail(arg.func) if isinstance(arg, ast.Call) else tail(arg)
        if name is not None and kv_side(name) == "k" and (isinstance(arg, ast.Call) or is_kv_tensor_name(name)):
            return True
    return False


# Steps that keep a tensor what it is: ``k.contiguous()``, ``k.float()``.
_CHAIN = re.compile(r"contiguous|float|to|view|reshape|transpose|flatten|unflatten|clone|half|bfloat16|type")


def _mha_by_construction(cls: ast.ClassDef) -> bool:
    """``self.num_kv_heads = self.num_heads``: a KV head count that is the query's."""
    for node in walk(cls):
        if isinstance(node, ast.Assign) and _role(node.value) is Role.Q_HEADS and any(
                _role(t) is Role.KV_HEADS for t in node.targets):
            return True
    return False


def key_norm_widths(tree: ast.AST) -> list[KeyNormFault]:
    found: list[KeyNormFault] = []
    seen: set[int] = set()  # a class nested in another is walked once
    for cls in walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        kv_heads = sorted({n for n in _names(cls) if name_role(n) is Role.KV_HEADS})
        if not kv_heads or _mha_by_construction(cls):
            continue
        for node in walk(cls):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(node.value, ast.Call):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            norm = next((t for t in map(tail, targets) if t is not None and key_norm_name(t)), None)
            if norm is None:
                continue
            size = _size(node.value)
            if size is None or not _applied_to_key(cls, norm):
                continue
            divided = _width_per_kv_head(size)
            if divided or _query_width(size):
                found.append(KeyNormFault(size, norm, kv_heads[0], divided))
    return sorted(found, key=lambda f: (f.node.lineno, f.node.col_offset))


def _forbids_gqa(text: str) -> bool:
    """Does this module raise where a KV head count differs from the query's?"""
    if "raise" not in text:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    for node in walk(tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.NotEq)):
            continue
        roles = {_role(node.test.left), _role(node.test.comparators[0])}
        if roles == {Role.KV_HEADS, Role.Q_HEADS} and any(isinstance(n, ast.Raise) for n in node.body):
            return True
    return False


def imported_config_forbids_gqa(tree: ast.AST, path: str) -> bool:
    """Does a configuration module imported relatively (``from .configuration_x import ...``)
    reject a KV head count other than the query's?"""
    for node in walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and node.module and "config" in node.module.lower():
            target = module_file(path, node.level, node.module.split("."))
            if target is not None and read_once(target, _forbids_gqa, False):
                return True
    return False
