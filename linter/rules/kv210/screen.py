"""KV210's ``ast`` screen: can a unit hold a K/V view, reshape, buffer or block pointer whose
sizes KV210 would question? It reads each call as the rule does (``linter.rules.kv210.rule``:
its sites, the side of what is shaped, the names of the shape) and leaves out only what the
rule's own reading keeps silent: a shape of no K/V side, a query head count beside a KV head
count in one shape, the value-dim question of a key-side shape or of one that names the
value's head dim. The rest of the rule's conditions (guards, MHA by construction, expansion,
latent scopes, padding) it does not read: it may say yes for code without findings, never no
for code with one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from linter.model.names import Role, is_kv_tensor_name, is_query_name, is_scale_name, kv_side, name_role
from linter.model.size_roles import (
    KERNEL_TWINS, KEYWORD_TWINS, allocates, attention_output, gradient_side, is_latent_scope, key_dim, kv_length_name,
    key_state, length_name, makes_buffers, query_heads, size_kind, value_dim, value_dim_twins, value_kernel_sizes,
    value_tile_from_key,
)
from linter.model.call_slots import query_heads_in_kv_fields
from linter.model.families import family_named
from linter.model.head_lookups import lookup_faults
from linter.model.key_norms import key_norm_name, key_norm_widths
from linter.model.input_widths import last_axis_of, query_input_widths
from linter.model.output_norms import output_norm_widths
from linter.model.tile_offsets import untiled_offsets
from linter.plan.screen_facts import Facts, _dotted, _tail, walk
from linter.settings import Settings

# The rule's readings (``rule._VIEWS``, ``_ALLOCATORS``, ``_ALLOCATOR_MODULES``,
# ``_NOT_SHAPE``, ``_CHAIN``), which a screen reads without importing libcst.
_VIEWS = frozenset({"view", "reshape", "unflatten", "new_empty", "new_zeros", "new_ones", "new_full"})
_ALLOCATORS = frozenset({"empty", "zeros", "ones", "full", "randn", "rand", "empty_strided"})
_ALLOCATOR_MODULES = frozenset({"torch", "np", "numpy", "jnp", "tl"})
_NOT_SHAPE = frozenset({"dtype", "device", "out", "pin_memory", "layout", "requires_grad", "memory_format", "fill_value"})
_CHAIN = frozenset({"transpose", "contiguous", "permute", "float", "to", "clone", "detach", "squeeze", "unsqueeze",
                    "flatten", "movedim", "half", "bfloat16", "view", "reshape"})


def _names(node: ast.AST, sure: bool) -> Iterator[tuple[str, ast.AST]]:
    """``rule._names``: the identifier tails a size reads, and the string a ``getattr`` reads,
    each with the node that reads it. Where ``ast`` cannot tell what libcst sees
    (``getattr(o, "a" "b")`` is no plain string to the rule, nor a bytes literal), ``sure``
    gives only names the rule reads too, and otherwise every name it may read."""
    kind = type(node)
    if kind is ast.Name:
        if node.id != "self":
            yield node.id, node
        return
    if kind is ast.Attribute:
        yield node.attr, node
        return
    if kind is ast.Call and type(node.func) is ast.Name and node.func.id == "getattr" and len(node.args) >= 2:
        if type(node.args[1]) is ast.Constant and type(node.args[1].value) in (str, bytes):
            if sure:
                for arg in (*node.args[2:], *(k.value for k in node.keywords)):
                    yield from _names(arg, sure)
                return
            if type(node.args[1].value) is str:
                yield node.args[1].value, node
    for child in ast.iter_child_nodes(node):
        yield from _names(child, sure)


def _base_of(node: ast.AST) -> str:
    """``rule._base_of``: the object a size name is read on (``""``: a local, ``self``'s)."""
    if type(node) is not ast.Attribute:
        return ""
    base = _dotted(node.value)
    if base is None:
        return "?"
    if base == "self":
        return ""
    return base[5:] if base.startswith("self.") else base


def _held(facts: Facts, known: set[str]) -> dict[str, set[str]]:
    """``rule``'s ``held``, over the whole unit: the names each object holds (every name of
    the unit for ``""``, the attributes read on ``layer`` for ``layer``)."""
    held: dict[str, set[str]] = {"": known}
    for node in walk(facts.tree):
        if type(node) is ast.Attribute:
            base = _base_of(node)
            if base:
                held.setdefault(base, set()).add(node.attr)
    return held


def _receiver_side(node: ast.expr, extra) -> str | None:
    """``rule._receiver_side``: a K/V name read through shape-keeping steps, or the output of
    a layer of this module applied to one K/V tensor."""
    while True:
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _CHAIN:
            node = node.func.value
        elif type(node) is ast.Subscript:
            node = node.value
        else:
            break
    name = _dotted(node)
    if name is not None:
        tail = name.rsplit(".", 1)[-1]
        return kv_side(tail, extra) if is_kv_tensor_name(tail, extra) else None
    if type(node) is not ast.Call:
        return None
    callee, tail = _dotted(node.func), _tail(node.func)
    if callee is None or tail is None:
        return None
    side = kv_side(tail, extra)
    if side is not None and not is_kv_tensor_name(tail, extra):
        return None
    if side is None and callee.startswith("self.") and len(node.args) == 1:
        only = node.args[0]
        side = _receiver_side(only.value if type(only) is ast.Starred else only, extra)
    return side


def _value_dim_slice(node: ast.expr) -> bool:
    """``rule._value_dim_slice``: ``out[..., : self.v_head_dim]``, cut to the value's head dim."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _CHAIN:
        node = node.func.value
    if type(node) is not ast.Subscript:
        return False
    parts = node.slice.elts if type(node.slice) is ast.Tuple else [node.slice]
    last = parts[-1] if parts else None
    if type(last) is not ast.Slice or last.lower is not None or last.step is not None or last.upper is None:
        return False
    if len(parts) > 1 and not (type(parts[0]) is ast.Constant and parts[0].value is Ellipsis):
        return False
    name = _dotted(last.upper)
    return name is not None and value_dim(name.rsplit(".", 1)[-1])


def _shape(values: list[ast.expr], bound: list[ast.expr], extra) -> tuple[dict[str, set[str]], set[str], bool]:
    """The names the rule reads in the shape ``values`` and the tuples its names are bound to
    (``bound``): (every one it may, with the objects it is read on; those it surely reads;
    whether it reads the key's head dim off the key: ``key.shape[-1]``)."""
    bases: dict[str, set[str]] = {}
    for v in (*values, *bound):
        for n, at in _names(v, False):
            bases.setdefault(n, set()).add(_base_of(at))
    return (
        bases,
        {n for v in values for n, _ in _names(v, True)},
        any(_key_dim_read(node, extra) for v in (*values, *bound) for node in walk(v)),
    )


def _key_dim_read(node: ast.AST, extra) -> bool:
    """``rule._key_dim_read``, any index: ``key.shape[...]`` or ``k.size(...)``."""
    if type(node) is ast.Subscript and type(node.value) is ast.Attribute and node.value.attr == "shape":
        base = _dotted(node.value.value)
    elif type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "size":
        base = _dotted(node.func.value)
    else:
        return False
    return base is not None and kv_side(base.rsplit(".", 1)[-1], extra) == "k"


def _call_shape_args(call: ast.Call) -> list[ast.expr]:
    """``rule._shape_args``: the arguments but those no part of a shape."""
    return [*call.args, *(k.value for k in call.keywords if k.arg not in _NOT_SHAPE)]


def _unstarred(node: ast.expr) -> ast.expr:
    # libcst's argument ``*x`` has ``x`` for its value.
    return node.value if type(node) is ast.Starred else node


def _tuples(facts: Facts) -> dict[str, list[ast.expr]]:
    """``rule._with_shape_names``: the sizes of the tuples each name is bound to, anywhere in
    the unit (the rule takes the bindings before the shape, in the shape's own function)."""
    found: dict[str, list[ast.expr]] = {}
    for targets, value in facts.assignments:
        if type(value) is ast.Tuple or type(value) is ast.List:
            for target in targets:
                if type(target) is ast.Name:
                    found.setdefault(target.id, []).extend(map(_unstarred, value.elts))
    return found


def _sites(facts: Facts, extra) -> Iterator[tuple[str, tuple[dict[str, set[str]], set[str], bool]]]:
    """(side, shape names) of every place the rule reads a shape (``rule._sites``), and more."""
    tuples = _tuples(facts)

    def _bound(args: list[ast.expr]) -> list[ast.expr]:
        # The rule reads each binding's tuple apart: its sizes may be read, none surely.
        return [e for a in args if type(a) is ast.Name for e in tuples.get(a.id, ())]

    def _shape_args(call: ast.Call) -> tuple[list[ast.expr], list[ast.expr]]:
        args = _call_shape_args(call)
        return args, _bound(args)

    for call in facts.calls:
        func = call.func
        tail = _tail(func)
        if type(func) is ast.Attribute and tail in _VIEWS:
            if _dotted(func.value) in _ALLOCATOR_MODULES:
                continue
            side = _receiver_side(func.value, extra)
            if side is None and _value_dim_slice(func.value):
                side = "v-dim"
            if side is None and type(out := _strip_chain(func.value)) is ast.Name and attention_output(out.id):
                side = "v-dim"
            if side is None and tail.startswith("new_"):
                side = _state_side(call)
            if side is not None:
                yield side, _shape(*_shape_args(call), extra)
        elif type(func) is ast.Attribute and allocates(tail):
            side = _receiver_side(func.value, extra)
            if side is not None:
                yield side, _shape(*_shape_args(call), extra)
        elif tail == "rearrange" and call.args:
            side = _receiver_side(_unstarred(call.args[0]), extra)
            if side is not None:
                sizes = [k.value for k in call.keywords if k.arg is not None]
                yield side, _shape(sizes, _bound(sizes), extra)
        elif tail == "make_block_ptr" and (call.args or call.keywords):
            # libcst's first argument may be a keyword one.
            base = _unstarred(call.args[0]) if call.args else call.keywords[0].value
            side = _receiver_side(base, extra)
            if side is None and (root := _dotted(base)) is not None:
                side = gradient_side(root)
            if side is not None:
                rest = [*call.args[1:], *(k.value for k in call.keywords)] if call.args else [k.value for k in call.keywords[1:]]
                yield side, _shape(rest, _bound(rest), extra)
        elif tail in _ALLOCATORS and (side := _state_side(call)) is not None:
            yield side, _shape(*_shape_args(call), extra)
    for targets, value in facts.assignments:
        for target in targets:
            name = _tail(target)
            if name is None:
                continue
            side = kv_side(name, extra) if is_kv_tensor_name(name, extra) or is_scale_name(name) else gradient_side(name)
            if side is None:
                continue
            for node in walk(value):
                if type(node) is ast.Call and ((_tail(node.func) or "") in _ALLOCATORS or (_tail(node.func) or "").startswith("new_")
                                               or makes_buffers(_tail(node.func))):
                    yield side, _shape(*_shape_args(node), extra)


def _strip_chain(node: ast.expr) -> ast.expr:
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _CHAIN:
        node = node.func.value
    return node


def _state_side(call: ast.Call) -> str | None:
    """``rule._state_site``: a key-side state by its shape (the rule also asks where it is made)."""
    return "k" if key_state(n for v in _call_shape_args(call) for n, _ in _names(v, False)) else None


_AS_QUERY = frozenset({"expand_as", "view_as", "reshape_as"})


def _reads_query_shape(node: ast.AST) -> bool:
    """``rule._reads_query_shape``: ``query.shape``, ``q.size(...)``."""
    for n in walk(node):
        if type(n) is ast.Attribute and n.attr in ("shape", "size"):
            base = _dotted(n.value)
            if base is not None and is_query_name(base.rsplit(".", 1)[-1]):
                return True
    return False


def _size_names(node: ast.AST) -> Iterator[str]:
    """``rule._size_names``: the names a value is made of, not those of the tests that choose
    among its branches."""
    kind = type(node)
    if kind is ast.IfExp:
        yield from _size_names(node.body)
        yield from _size_names(node.orelse)
    elif kind is ast.Compare:
        return
    elif kind is ast.Name or kind is ast.Attribute or (kind is ast.Call and type(node.func) is ast.Name
                                                      and node.func.id == "getattr"):
        yield from (n for n, _ in _names(node, False))
    else:
        for child in ast.iter_child_nodes(node):
            yield from _size_names(child)


def _statements(facts: Facts, known: set[str]) -> bool:
    """``rule._check_statements``: a value tile computed from the key's, twin size keywords,
    a KV head count bound to a number, K/V shaped as the query beside a KV length."""
    # The query head count from a parameter or a computed value, for a KV count bound to a number.
    query_from_input = any(map(query_heads, facts.params)) or any(
        type(value) is not ast.Constant and query_heads(_tail(t) or "") for targets, value in facts.assignments for t in targets)
    value_kernel = value_kernel_sizes(known)
    for targets, value in facts.assignments:
        for target in targets:
            name = _tail(target)
            if name is None:
                continue
            if value_kernel - {name} and value_tile_from_key(name, _size_names(value)) is not None:
                return True
            if query_from_input and type(value) is ast.Constant and type(value.value) is int and value.value > 1 \
                    and name_role(name) is Role.KV_HEADS and not is_query_name(name):
                return True
    lengths = any(map(kv_length_name, known))
    for call in facts.calls:
        keywords = {k.arg: k.value for k in call.keywords}
        if any(k in keywords and v in keywords and size_kind(n for n, _ in _names(keywords[k], False)) == "head"
               and size_kind(n for n, _ in _names(keywords[v], False)) == "width" for k, v in KEYWORD_TWINS.items()):
            return True
        if lengths and type(call.func) is ast.Attribute and call.func.attr in _AS_QUERY and call.args:
            like = _dotted(_unstarred(call.args[0]))
            if like is not None and is_query_name(like.rsplit(".", 1)[-1]):
                return True
    return False


# A string that is one name (``"num_key_value_heads"``), read in the unit's own lines.
_NAME_STRING = re.compile(r"""(["'])([A-Za-z_][A-Za-z_0-9]*)\1""")


def _kv_count_string(facts: Facts) -> bool:
    """Can a string of the unit name a KV head count? (Every lookup ``model.head_lookups``
    reports does.) Without the unit's lines: yes."""
    if facts.source is None:
        return True
    lines, offset = facts.source
    tree = facts.tree
    body = getattr(tree, "body", None)
    start = offset + (body[0].lineno - 1 if body else 0)
    end = offset + (getattr(body[-1], "end_lineno", len(lines)) if body else len(lines))
    text = "\n".join(lines[max(0, start - 1):end + 1])
    return any(name_role(m.group(2)) is Role.KV_HEADS for m in _NAME_STRING.finditer(text))


def _norm_into_layer(call: ast.Call) -> bool:
    """``self.o_proj(self.g_norm(o))``."""
    if len(call.args) != 1 or type(call.args[0]) is not ast.Call:
        return False
    inner, outer = call.args[0].func, call.func
    return (type(outer) is ast.Attribute and type(outer.value) is ast.Name and outer.value.id == "self"
            and type(inner) is ast.Attribute and type(inner.value) is ast.Name and inner.value.id == "self"
            and "norm" in inner.attr.lower())


def _builds_itself(facts: Facts) -> bool:
    """Three calls of ``cls`` or of a class of the unit (``model.call_slots`` needs two
    witnesses and one fault)."""
    classes = {n.name for n in walk(facts.tree) if type(n) is ast.ClassDef}
    if not classes:
        return False
    classes.add("cls")
    return sum(_tail(c.func) in classes for c in facts.calls) >= 3


def _models(facts: Facts, extra) -> bool:
    """The rule's own models of head count lookups, value tiles, input widths and output
    norms (exact), each asked where the unit holds what it needs."""
    if "make_block_ptr" in facts.attrs | facts.names and untiled_offsets(facts.tree):
        return True
    if ("view" in facts.attrs or "reshape" in facts.attrs) and any(
            len(a.targets) == 1 and type(a.targets[0]) is ast.Name and last_axis_of(a.value) for a in facts.assigns) \
            and query_input_widths(facts.tree, extra):
        return True
    if any(map(_norm_into_layer, facts.calls)) and output_norm_widths(facts.tree, extra):
        return True
    if _builds_itself(facts) and query_heads_in_kv_fields(facts.tree):
        return True
    if any(key_norm_name(a) for a in facts.attrs) and key_norm_widths(facts.tree):
        return True
    return _kv_count_string(facts) and bool(lookup_faults(facts.tree))


def _definition_names(tree: ast.AST) -> Iterator[str]:
    """The names of the unit's classes and functions, of the classes' bases, and of the model
    modules it reads through."""
    for node in walk(tree):
        if type(node) is ast.ClassDef:
            yield node.name
            yield from (b for b in map(_dotted, node.bases) if b is not None)
        elif type(node) is ast.FunctionDef or type(node) is ast.AsyncFunctionDef:
            yield node.name
        elif type(node) is ast.Attribute and node.attr.startswith("modeling_"):
            yield node.attr  # ``rule._family_modules``: a model module read through
        elif type(node) is ast.Name and node.id.startswith("modeling_"):
            yield node.id


def kv210(facts: Facts, settings: Settings) -> bool:
    extra = settings.extra_pairs
    if _models(facts, extra):
        return True
    # ``getattr(config, "num_key_value_heads")`` reads the name its string spells.
    read_by_getattr = {
        a.value for c in facts.calls if type(c.func) is ast.Name and c.func.id == "getattr"
        for a in (*c.args, *(k.value for k in c.keywords)) if type(a) is ast.Constant and type(a.value) is str
    }
    known = facts.names | facts.attrs | facts.params | read_by_getattr
    if _statements(facts, known):
        return True
    counts = any(name_role(n) is Role.KV_HEADS for n in known)
    # A definition named for a model family whose config has a KV head count (the rule asks
    # the function's, its class's and the bases' names; any definition of the unit may be one).
    # ``num_kv_heads=config.num_attention_heads`` in code for such a family.
    keyword = any(k.arg is not None and name_role(k.arg) is Role.KV_HEADS and query_heads(_tail(k.value) or "")
                  for c in facts.calls for k in c.keywords)
    # (Asked only where a K/V shape or such a keyword may need it.)
    family = (keyword or any(query_heads(n) for n in known)) and any(
        family_named(n) for n in _definition_names(facts.tree))
    if family and keyword:
        return True
    self_kv = family and any(type(t) is ast.Attribute and type(t.value) is ast.Name and t.value.id == "self"
                             and name_role(t.attr) is Role.KV_HEADS for targets, _ in facts.assignments for t in targets)
    kernel_dims = {k for k, v in KERNEL_TWINS.items() if k in facts.params and v in facts.params}
    value_dims = any(value_dim(n) for n in known)
    # Lengths read off a query's shape, where the unit holds the keys' own length.
    query_lengths = {
        _tail(t) for targets, value in facts.assignments for t in targets
        if _tail(t) is not None and length_name(_tail(t)) and _reads_query_shape(value)
    } if any(map(kv_length_name, known)) else set()
    if not counts and not family and not value_dims and not kernel_dims and not query_lengths:
        return False
    held: dict[str, set[str]] | None = None
    for side, (shape, surely, key_read) in _sites(facts, extra):
        if side in ("k", "v") and not query_lengths.isdisjoint(shape):
            return True
        # The rule's scope holds every name its function reads: one of MLA (``qk_nope_head_dim``)
        # in the shape makes it a latent scope, where head counts follow the path.
        if side in ("k", "v") and (counts or family) and any(query_heads(n) for n in shape) and not any(
                name_role(n) is Role.KV_HEADS for n in surely) and not is_latent_scope(surely):
            # The rule's family evidence counts only where the object holds no KV head count:
            # ``self``'s never does in a class that assigns one (``self.num_kv_heads = ...``).
            if family and any(b == "config" or (b == "" and not self_kv) for n in shape if query_heads(n)
                              for b in shape[n]):
                return True
            # A query head count and no KV head count in a K or V shape, where the object it is
            # read on holds a KV count.
            held = _held(facts, known) if held is None else held
            if any(name_role(m) is Role.KV_HEADS for n in shape if query_heads(n)
                   for base in shape[n] for m in held.get(base, ())):
                return True
        if side not in ("v", "v-dim"):
            continue
        # A kernel's key dim or tile without the value's in the shape.
        if any(n in kernel_dims and KERNEL_TWINS[n] not in surely for n in shape):
            return True
        # The value's head dim in the shape settles the rest.
        if not value_dims or any(value_dim(n) for n in surely):
            continue
        if key_read or any(key_dim(n) for n in shape):
            return True
        # A shared head dim, where the object it is read on holds a value head dim.
        if any(value_dim_twins(n) for n in shape):
            held = _held(facts, known) if held is None else held
            if any(t in held.get(base, ()) for n in shape for t in value_dim_twins(n) for base in shape[n]):
                return True
    return False


SCREEN = kv210
