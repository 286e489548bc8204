"""KV210: a K/V view, reshape or buffer sized with a size of the wrong role (size provenance)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, replace

import libcst as cst

from linter.model.classes import OwnerTracking
from linter.model.flows import projected
from linter.finding import Finding
from linter.model.call_slots import query_heads_in_kv_fields
from linter.model.families import family_kv_heads
from linter.model.functions import FunctionModel, function_model
from linter.model.head_lookups import lookup_faults
from linter.model.key_norms import imported_config_forbids_gqa, key_norm_widths
from linter.model.input_widths import query_input_widths
from linter.model.output_norms import output_norm_widths
from linter.model.tile_offsets import untiled_offsets
from linter.model.mqa_branches import heads_shared_off_calls
from linter.model.size_roles import (
    KEYWORD_TWINS,
    Assigned,
    allocates,
    attention_output,
    equal_by_construction,
    equal_to_query,
    expands,
    KERNEL_TWINS,
    expanded_name,
    gradient_side,
    is_latent_scope,
    key_dim,
    kv_length_name,
    length_name,
    makes_buffers,
    pads,
    query_heads,
    shape_names,
    key_state,
    state_function,
    shared_kv_heads,
    side_heads,
    size_kind,
    value_dim,
    value_dim_twins,
    value_kernel_sizes,
    value_tile_from_key,
)
from linter.model.walk import children
from linter.model.names import (
    Role, is_kv_tensor_name, is_query_name, is_scale_name, key_counterpart, kv_side, name_role, value_counterpart,
)
from linter.model.pairs import callee_tail, dotted_name, normalized, source_of
from linter.rules.base import Example, Rule
from linter.plan.triggers import AnyCase, Trigger

# Methods that give a tensor a shape from their arguments.
_VIEWS = frozenset({"view", "reshape", "unflatten", "new_empty", "new_zeros", "new_ones", "new_full"})
# Functions that allocate a tensor from a shape in their arguments (``torch.empty(...)``).
_ALLOCATORS = frozenset({"empty", "zeros", "ones", "full", "randn", "rand", "empty_strided"})
_ALLOCATOR_MODULES = frozenset({"torch", "np", "numpy", "jnp", "tl"})
# Wrappers whose first argument is the tensor they hold (``nn.Parameter(torch.randn(...))``).
_WRAPPERS = frozenset({"Parameter", "Buffer"})
# Arguments of a view or an allocation that are no part of its shape.
_NOT_SHAPE = frozenset({"dtype", "device", "out", "pin_memory", "layout", "requires_grad", "memory_format", "fill_value"})
# Steps that keep a tensor's side when read through: ``k.transpose(1, 2).contiguous()``.
_CHAIN = frozenset({"transpose", "contiguous", "permute", "float", "to", "clone", "detach", "squeeze", "unsqueeze",
                    "flatten", "movedim", "half", "bfloat16", "view", "reshape"})


@dataclass(frozen=True)
class _Site:
    order: int
    # "k" or "v", or "v-dim" for a tensor whose last axis is the value's head dim.
    side: str
    what: str  # words for the tensor: "`key_states`", "the buffer `self.k_cache`"
    shape: tuple[cst.BaseExpression, ...]
    call: cst.Call
    # The K/V name that gives the side (``value_cache``, ``k_proj``); None for a value-dim cut.
    name: str | None = None
    # The tensor given the shape (a view's receiver, ``rearrange``'s first argument); None for
    # an allocation.
    receiver: cst.BaseExpression | None = None
    # The attention output viewed with its heads flattened: its value dim must be read in the
    # site's own branch.
    output: bool = False


@dataclass(frozen=True)
class _Branch:
    """Where a call sits: its innermost branch (an ``if``'s body or ``else``; the function's
    body outside any) and the groups of names the enclosing tests prove equal there
    (``if a == b``, ``if a == 256 and b == 256``; ``else`` of ``if a != b``)."""

    block: cst.CSTNode
    equal: tuple[frozenset[str], ...] = ()

    def proves_equal(self, a: str, b: str) -> bool:
        return any(a in group and b in group for group in self.equal)


def _equal_groups(test: cst.BaseExpression, wanted: type) -> list[frozenset[str]]:
    """The names a test's conjunction of comparisons proves equal: by ``wanted`` between two
    names, or to one same literal. A chain is a conjunction of its links (``a == b == 128``)."""
    groups: list[frozenset[str]] = []
    literals: dict[str, set[str]] = {}
    parts = [test]
    while parts:
        node = parts.pop()
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
            parts += [node.left, node.right]
            continue
        if not isinstance(node, cst.Comparison):
            continue
        lefts = [node.left] + [link.comparator for link in node.comparisons[:-1]]
        for left_node, target in zip(lefts, node.comparisons):
            if not isinstance(target.operator, wanted):
                continue
            left, right = _tail_of(left_node), _tail_of(target.comparator)
            if left is not None and right is not None:
                groups.append(frozenset({left, right}))
            elif wanted is cst.Equal and isinstance(target.comparator, (cst.Integer, cst.SimpleString)) and left is not None:
                literals.setdefault(target.comparator.value, set()).add(left)
    return groups + [frozenset(names) for names in literals.values() if len(names) > 1]


def _branches(node: cst.CSTNode, branch: _Branch, found: dict[int, _Branch]) -> None:
    """Each call below ``node`` with its ``_Branch``."""
    if isinstance(node, cst.Call):
        found[id(node)] = branch
    if isinstance(node, cst.If):
        _branches(node.test, branch, found)
        _branches(node.body, _Branch(node.body, branch.equal + tuple(_equal_groups(node.test, cst.Equal))), found)
        if node.orelse is not None:
            # The ``else`` of ``a != b`` proves them equal; of a chain (``a != b < c``: ``a == b or
            # b >= c``), nothing.
            single = isinstance(node.test, cst.Comparison) and len(node.test.comparisons) == 1
            equal = branch.equal + (tuple(_equal_groups(node.test, cst.NotEqual)) if single else ())
            orelse = node.orelse
            if isinstance(orelse, cst.If):
                _branches(orelse, _Branch(orelse, equal), found)
            else:
                _branches(orelse.body, _Branch(orelse.body, equal), found)
        return
    for child in children(node):
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            _branches(child, branch, found)


def _contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    if outer is inner:
        return True
    return any(_contains(child, inner) for child in children(outer))


def _names(node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode]]:
    """Identifier tails a size expression reads: ``self.num_heads`` gives ``num_heads``, and
    ``getattr(config, "num_key_value_heads", n)`` names what it reads."""
    if isinstance(node, cst.Name):
        if node.value != "self":
            yield node.value, node
        return
    if isinstance(node, cst.Attribute):
        yield node.attr.value, node
        return
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1].value, cst.SimpleString)):
        name = node.args[1].value.evaluated_value
        if isinstance(name, str):
            yield name, node
        for arg in node.args[2:]:
            yield from _names(arg.value)
        return
    for child in children(node):
        yield from _names(child)


def _size_names(node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode]]:
    """``_names`` of the sizes a value is made of, not of the tests that choose among them
    (``BV = 16 if BK > 128 else 32`` is made of numbers)."""
    if isinstance(node, cst.IfExp):
        yield from _size_names(node.body)
        yield from _size_names(node.orelse)
        return
    if isinstance(node, cst.Comparison):
        return
    if isinstance(node, (cst.Name, cst.Attribute)) or (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
                                                       and node.func.value == "getattr"):
        yield from _names(node)
        return
    for child in children(node):
        yield from _size_names(child)


def _base_of(node: cst.CSTNode) -> str:
    """The object a size name is read on: ``""`` for a local name and for ``self.x`` (locals
    copy the object's attributes), ``layer`` for ``layer.head_dim``, ``config`` for
    ``self.config.num_heads``; ``"?"`` where it is no plain name."""
    if not isinstance(node, cst.Attribute):
        return ""
    base = dotted_name(node.value)
    if base is None:
        return "?"
    if base == "self":
        return ""
    return base[5:] if base.startswith("self.") else base


def _reads(node: cst.CSTNode) -> Iterator[tuple[str, str]]:
    """(object, name) of every attribute read below ``node``, and ("", name) of every name."""
    if isinstance(node, cst.Attribute):
        yield _base_of(node), node.attr.value
        yield from _reads(node.value)
        return
    if isinstance(node, cst.Name):
        yield "", node.value
        return
    for child in children(node):
        yield from _reads(child)


def _value_dim_cuts(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """What each subscript below ``node`` that cuts to the value's head dim cuts
    (``x[..., : self.v_head_dim]``: ``x``, through shape-keeping steps)."""
    if isinstance(node, cst.Subscript) and _value_dim_slice(node) is not None:
        yield _strip_chain(node.value)
    for child in children(node):
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            yield from _value_dim_cuts(child)


def _branch_reads(node: cst.CSTNode) -> Iterator[tuple[str, str]]:
    """``_reads`` of a branch's own statements, not of the branches nested in it (each a path
    of its own)."""
    for child in children(node):
        if isinstance(child, (cst.If, cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(child, (cst.Attribute, cst.Name)):
            yield from _reads(child)
        else:
            yield from _branch_reads(child)


def _guarded_equal(node: cst.CSTNode) -> set[str]:
    """Names a guard proves equal to another name: ``assert a == b``, ``if a != b: raise``."""
    found: set[str] = set()
    for child in children(node):
        if isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            continue
        test = None
        if isinstance(child, cst.Assert):
            test, wanted = child.test, cst.Equal
        elif isinstance(child, cst.If) and any(isinstance(s, cst.Raise) for s in _statements(child.body)):
            test, wanted = child.test, cst.NotEqual
        if test is not None:
            for comparison in _comparisons(test):
                left = comparison.left
                for target in comparison.comparisons:
                    right = target.comparator
                    pairs = [(left, right)]
                    if isinstance(left, cst.Tuple) and isinstance(right, cst.Tuple) and len(left.elements) == len(right.elements):
                        # ``if (b2, s2) != (b, s): raise``: element by element.
                        pairs = [(a.value, b.value) for a, b in zip(left.elements, right.elements)]
                    for a, b in pairs:
                        pair = [_tail_of(a), _tail_of(b)]
                        if isinstance(target.operator, wanted) and None not in pair:
                            found |= set(pair)
                    left = right
        if not isinstance(child, cst.BaseExpression):
            found |= _guarded_equal(child)
    return found


def _tail_of(node: cst.BaseExpression) -> str | None:
    name = dotted_name(node)
    return None if name is None else name.rsplit(".", 1)[-1]


def _statements(block: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for child in children(block):
        if isinstance(child, cst.SimpleStatementLine):
            yield from child.body
        else:
            yield child


def _comparisons(node: cst.CSTNode) -> Iterator[cst.Comparison]:
    if isinstance(node, cst.Comparison):
        yield node
        return
    if isinstance(node, (cst.BooleanOperation, cst.UnaryOperation)):
        for child in children(node):
            yield from _comparisons(child)


def _calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    if isinstance(node, cst.Call):
        yield node
    for child in children(node):
        if not isinstance(child, (cst.Lambda, cst.FunctionDef)):
            yield from _calls(child)


def _receiver_side(receiver: cst.BaseExpression, extra_pairs) -> tuple[str | None, str, str | None]:
    """The side of the tensor a method is called on: a K/V name read through shape-keeping
    steps (``key_states.transpose(1, 2)``), or the output of a K/V projection
    (``self.k_proj(x)``). An expression that computes from several tensors (``attn @ v``) has
    none."""
    node = receiver
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHAIN:
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            break
    name = dotted_name(node)
    if name is not None:
        tail = name.rsplit(".", 1)[-1]
        if is_kv_tensor_name(tail, extra_pairs):
            return kv_side(tail, extra_pairs), f"`{name}`", tail
        return None, "", None
    if isinstance(node, cst.Call):
        callee = dotted_name(node.func)
        tail = callee_tail(node)
        if callee is None or tail is None:
            return None, "", None
        side = kv_side(tail, extra_pairs)
        if side is not None and not is_kv_tensor_name(tail, extra_pairs):
            return None, "", None  # ``k_scale(x)``, ``v_len(x)``: bookkeeping, not a tensor of keys or values
        if side is None and callee.startswith("self."):
            # A layer of this module applied to one K/V tensor (``self.w_vs(v)``, ``self.k_norm(k)``).
            tensors = [a.value for a in node.args if a.keyword is None]
            if len(tensors) == 1:
                side, _, tail = _receiver_side(tensors[0], extra_pairs)
        if side is not None:
            return side, f"the output of `{callee}`", tail
    return None, "", None


def _plural(name: str) -> bool:
    return bool({"keys", "values"} & set(name.lower().split("_")))


def _weight_token(name: str) -> bool:
    return bool({"wk", "wv"} & set(name.lower().split("_")))


def _u_twin(name: str) -> str | None:
    parts = name.split("_")
    if parts.count("v") != 1:
        return None
    parts[parts.index("v")] = "u"
    return "_".join(parts)


def _twin(name: str, extra_pairs) -> str | None:
    return value_counterpart(name, extra_pairs) or key_counterpart(name, extra_pairs)


def _root_name(node: cst.BaseExpression) -> str | None:
    """``k`` of ``k.transpose(1, 2)[0]``: the name a tensor expression starts from."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return dotted_name(node)


def _split_source(value: cst.BaseExpression) -> str | None:
    """What a binding cuts its tensor from: ``qkv`` of ``qkv.split(...)``, ``qkv[..., :d]``,
    ``torch.chunk(qkv, 3)``; None for anything else."""
    if isinstance(value, cst.Subscript):
        return _root_name(value)
    if isinstance(value, cst.Call) and callee_tail(value) in _PIECES:
        # ``qkv.split(...)`` cuts its receiver; ``torch.split(qkv, ...)`` its first argument.
        if isinstance(value.func, cst.Attribute) and dotted_name(value.func.value) != "torch":
            return _root_name(value.func.value)
        if value.args:
            return _root_name(value.args[0].value)
    return None


_PIECES = frozenset({"split", "chunk", "unbind", "tensor_split"})


def _made_with_query(model: FunctionModel, site: _Site) -> bool:
    """K or V viewed as they came out of one statement with Q (``q, k, v = project(x)``) or were
    cut from the tensor Q is cut from (``q, k = qkv[..., :d], qkv[..., d:2 * d]``), their own
    views (``k = k.view(...)``) followed back: new tokens, as long as the query. Keys joined
    with a cache (``torch.cat([past_k, k])``) are no longer followed."""
    name = _root_name(site.receiver) if site.receiver is not None else None
    order = site.order
    for _ in range(8):
        if name is None:
            return False
        binding = next((a for a in reversed(model.assignments) if a.order < order and a.name == name), None)
        if binding is None:
            return False
        queries = [a for a in model.assignments
                   if a.order <= binding.order and is_query_name(a.name.rsplit(".", 1)[-1])
                   and not length_name(a.name.rsplit(".", 1)[-1])]
        if any(a.value is binding.value for a in queries):
            return True
        source = _split_source(binding.value)
        if source is not None and source != name and any(_split_source(a.value) == source for a in queries):
            return True
        if _root_name(binding.value) != name:
            return False
        order = binding.order
    return False


def _strip_chain(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHAIN:
        node = node.func.value
    return node


def _value_dim_slice(receiver: cst.BaseExpression) -> str | None:
    """``out[..., : self.v_head_dim]``: a tensor cut to the value's head dim on its last axis
    (attention output before its heads are flattened); the name of that dim."""
    node = receiver
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHAIN:
        node = node.func.value
    if not isinstance(node, cst.Subscript) or not node.slice:
        return None
    last = node.slice[-1].slice
    if not isinstance(last, cst.Slice) or last.lower is not None or last.step is not None or last.upper is None:
        return None
    first = node.slice[0].slice
    if len(node.slice) > 1 and not (isinstance(first, cst.Index) and isinstance(first.value, cst.Ellipsis)):
        return None
    name = dotted_name(last.upper)
    tail = name.rsplit(".", 1)[-1] if name else None
    return tail if tail is not None and value_dim(tail) else None


def _shape_args(call: cst.Call, skip_first: bool = False) -> tuple[cst.BaseExpression, ...]:
    args = [a for a in call.args if a.keyword is None or a.keyword.value not in _NOT_SHAPE]
    if skip_first and args and args[0].keyword is None:
        args = args[1:]
    return tuple(a.value for a in args)


def _allocations(value: cst.BaseExpression) -> Iterator[cst.Call]:
    """The allocation calls an assigned value is made of: the value itself, a method chain on
    one, the elements of a list, tuple or comprehension of them, either branch of a ternary."""
    node = value
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHAIN:
        node = node.func.value
    if isinstance(node, cst.Call) and callee_tail(node) in _WRAPPERS and node.args:
        yield from _allocations(node.args[0].value)
    elif isinstance(node, cst.Call):
        tail = callee_tail(node)
        func = node.func
        root = (dotted_name(func) or "").split(".")[0]
        if (tail in _ALLOCATORS and root in _ALLOCATOR_MODULES) or (
                isinstance(func, cst.Attribute) and tail in _VIEWS and tail.startswith("new_")):
            yield node
    elif isinstance(node, (cst.List, cst.Tuple)):
        for element in node.elements:
            yield from _allocations(element.value)
    elif isinstance(node, (cst.ListComp, cst.GeneratorExp)):
        yield from _allocations(node.elt)
    elif isinstance(node, cst.IfExp):
        yield from _allocations(node.body)
        yield from _allocations(node.orelse)


def _class_expands(owner) -> bool:
    """Does a method of the class repeat or expand a tensor (``repeat_kv``, ``k.expand``)?"""
    return any(expands(callee_tail(call)) for method in owner.methods.values()
               for call in function_model(method).calls)


def _family_modules(node: cst.CSTNode) -> Iterator[str]:
    """The model modules a body reads through (``modeling_llama`` of
    ``transformers.models.llama.modeling_llama.apply_rotary_pos_emb``)."""
    if isinstance(node, cst.Name) and node.value.startswith("modeling_"):
        yield node.value  # a module's name, or an attribute's (``llama.modeling_llama``)
    for child in children(node):
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            yield from _family_modules(child)


def _divided(shape: tuple[cst.BaseExpression, ...], at: cst.CSTNode) -> bool:
    """Is ``at`` divided in its shape (``num_heads // factor``, ``n_heads // groups``)? A
    query head count divided by a ratio counts the groups that share K/V."""
    def walk(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.FloorDivide, cst.Divide)) \
                and _contains(node.left, at):
            return True
        return any(walk(child) for child in children(node))
    return any(walk(element) for element in shape)


def _read_off_tensor(model: FunctionModel, name: str) -> bool:
    """Is ``name`` bound here from a tensor's shape (``b, num_heads, s, d = keys.shape``)? Then
    it counts that tensor's heads, whatever its name says."""
    def reads_shape(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value == "shape":
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
            return True
        return any(reads_shape(child) for child in children(node))
    return any(a.name == name and reads_shape(a.value) for a in model.assignments)


def _with_shape_names(site: _Site, model: FunctionModel) -> Iterator[_Site]:
    """A shape given by a name bound to a tuple (``cache_shape = (b, self.num_heads, s, d)``;
    ``self.k_cache.allocate(..., cache_shape)``): the site once per binding before it (one per
    branch), with that tuple's sizes joined to its own."""
    names = {arg.value for arg in site.shape if isinstance(arg, cst.Name)}
    bindings = [a.value for a in model.assignments
                if a.name in names and a.position is None and a.order < site.order
                and isinstance(a.value, (cst.Tuple, cst.List))]
    if not bindings:
        yield site
    for value in bindings:
        yield replace(site, shape=site.shape + tuple(element.value for element in value.elements))


# Methods that give a tensor another tensor's whole shape.
_AS_QUERY = frozenset({"expand_as", "view_as", "reshape_as"})
# einops calls whose first argument is the tensor they reshape.
_EINOPS = frozenset({"rearrange", "repeat"})


def _query_from_input(model: FunctionModel) -> bool:
    """The query head count from a parameter or a computed value (not a number) here."""
    return any(query_heads(p) for p in model.params) or any(
        query_heads(a.name.rsplit(".", 1)[-1]) and not isinstance(a.value, cst.Integer) for a in model.assignments)


def _strip_einops(node: cst.BaseExpression) -> cst.BaseExpression:
    """``rearrange(k, "b ... -> b 1 ...")``: the tensor einops reshapes."""
    if isinstance(node, cst.Call) and callee_tail(node) in _EINOPS and node.args and node.args[0].keyword is None:
        return node.args[0].value
    return node


def _reads_query_shape(node: cst.CSTNode) -> bool:
    """``query.shape[:2]``, ``q.size(1)``: a read of a query tensor's shape."""
    if isinstance(node, cst.Attribute) and node.attr.value == "shape":
        base = dotted_name(node.value)
        if base is not None and is_query_name(base.rsplit(".", 1)[-1]):
            return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        base = dotted_name(node.func.value)
        if base is not None and is_query_name(base.rsplit(".", 1)[-1]):
            return True
    return any(_reads_query_shape(child) for child in children(node))


def _key_dim_read(node: cst.CSTNode, extra_pairs) -> bool:
    """``key.shape[-1]``, ``k.size(-1)``, ``key_states.shape[3]`` of a 4-D layout: the key's
    head dim read from the key tensor."""
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape":
        base = dotted_name(node.value.value)
        if base is None or len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return False
        index = node.slice[0].slice.value
        last = isinstance(index, cst.UnaryOperation) and isinstance(index.operator, cst.Minus) and \
            isinstance(index.expression, cst.Integer) and index.expression.value == "1"
        return last and kv_side(base.rsplit(".", 1)[-1], extra_pairs) == "k"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        base = dotted_name(node.func.value)
        if base is None or len(node.args) != 1:
            return False
        index = node.args[0].value
        last = isinstance(index, cst.UnaryOperation) and isinstance(index.operator, cst.Minus) and \
            isinstance(index.expression, cst.Integer) and index.expression.value == "1"
        return last and kv_side(base.rsplit(".", 1)[-1], extra_pairs) == "k"
    return False


def _key_dim_reads(node: cst.CSTNode, extra_pairs) -> Iterator[cst.CSTNode]:
    if _key_dim_read(node, extra_pairs):
        yield node
        return
    for child in children(node):
        yield from _key_dim_reads(child, extra_pairs)


class KVSizeRole(OwnerTracking, Rule):
    code = "KV210"
    # A size name of a head count, a head dim or a length (or a Triton kernel's ``constexpr``
    # dims and tiles), in a view, a reshape, an allocation or a block pointer, a buffer helper
    # (``create_kv_cache``), an ``expand_as``, a value-side tile (``BV``), a value keyword
    # (``value_dim=``), or a KV head count written as a number.
    trigger = Trigger(
        AnyCase("head", "dim", "size", "group", "constexpr", "len", "bv", "dv"),
        ("view", "reshape", "unflatten", "empty", "zeros", "ones", "full", "rand", "make_block_ptr", "expand_as",
         "create", "alloc", "init", "make", "build", "new", "BV", "DV", "_V", "value_dim", "vdim", "v_dim", "d_v",
         "head", "Head", "HEAD", "group", "GROUP"),
    )
    name = "kv-size-role"
    summary = "K/V view, reshape or buffer sized with the query's head count or the key's head dim"
    what = (
        "Gives each size in a K or V view, reshape, `rearrange`, buffer allocation or Triton block "
        "pointer a role from where it comes: a query head count (`num_heads`, "
        "`num_attention_heads`, `tp_q_head_num`), a KV head count (`num_key_value_heads`, "
        "`n_kv_heads`, `num_query_groups`, a side's own `tp_k_head_num`), the key's head dim "
        "(`qk_head_dim`, `head_k_dim`, `d_k`, `key.shape[-1]`, a kernel's `K`/`BK`), the value's "
        "(`v_head_dim`, `head_dim_v`, `V`/`BV`) or a shared `head_dim`; assignments carry roles "
        "along (`self.num_kv_heads = max(1, total // tp)`), and a size is only compared with the "
        "names of its own object (`layer.head_dim` with `layer.v_head_dim`, never another "
        "object's). It reports a K or V shape that carries the query head count and no KV head "
        "count where that object has a KV head count that is not the query's by construction, "
        "or, where it holds none, in code named for a model family whose config gives K/V a head "
        "count of their own (`LlamaAttention`, a subclass of `FalconAttention`, `mistral_forward`, "
        "a function that calls into `modeling_llama`: "
        "Llama, Mistral, Mixtral, Qwen2/3, Gemma, Falcon, Starcoder2, Phi-3, InternLM2, ChatGLM, Aquila; "
        "not their vision or audio towers, not a query head count divided by a group ratio, not "
        "a count read off a tensor's shape), "
        "and a V shape (or an attention output cut to the value's head dim) that carries the "
        "key's or the shared head dim where the value has one of its own. The same roles are read "
        "off more places: a shape given by a name bound to a tuple (`shape = (b, heads, s, d)`), "
        "each binding on its own; K/V buffer objects given their shape by a method "
        "(`self.k_cache.allocate(..., shape)`); "
        "K/V caches made by a helper (`k, v = create_kv_cache(b, heads, ...)`); "
        "a buffer made where states are made (`init_state`) whose shape holds the key's own head "
        "dim (a key-slot state); the attention output (`o`, `out`, `attn_output`) flattened with "
        "the key's head dim where its own branch reads the value's; a length read off the "
        "query's shape (`b, seqlen = query.shape[:2]`) in a K/V shape, or K/V shaped `as` the "
        "query (`k.expand_as(q)`), once the keys' own length (`k_len`, `max_seqlen_k`) is bound "
        "(not for new K/V that come out of one statement with Q, `q, k, v = split(qkv)`, or are "
        "cut from the tensor Q is cut from: new tokens are as long as the query); "
        "a kernel's value tile computed from the key's (`BV = min(next_power_of_2(K), 64)`) "
        "where the value's own (`V`) is bound; `value_dim=`/`vdim=` given a model width beside "
        "`key_dim=` given a head dim; and a KV head count written as a number above one where "
        "the query head count comes from a parameter. It stays silent after "
        "K/V are repeated or expanded, for a projection declared with the query's heads, for K/V "
        "named as expanded (`k_full`), under a guard or a branch test that proves the sizes "
        "equal (`if a != b: raise`, `if a == 256 and b == 256:`), in an arm whose test says "
        "multi-query or grouped-query attention is off (`else` of `if "
        "self.multi_query_attention:`), in MLA code "
        "(latent K/V heads follow the path), on rope/nope parts of a latent head dim, on V "
        "padded to the key's dim on purpose and on an output cut to the value's dim after. "
        "In such family code it also reports a KV head count keyword given the query's "
        "(`num_kv_heads=config.num_attention_heads`). "
        "It reports a norm the class applies to K (`self.k_norm(k)`) sized with the query's or "
        "the model's width (`RMSNorm(hidden_size)`) or with the model's width divided by the KV "
        "head count, where the class holds a KV head count (not where a configuration module the "
        "file imports rejects a KV head count other than the query's). "
        "It reads a class's factory methods (`cls(...)`, `ModelConfig(...)` in a per-family "
        "builder): a field that two or more constructions give a KV head count and another gives "
        "the query's bare head count. "
        "It also reads where a KV head count is looked up by name (`hasattr`, `getattr`, `in`, "
        "a loop over candidate names): a lookup that asks for the query head count before the KV "
        "head count (the KV branch is never reached), a loop over KV head count names that reads "
        "one constant name on every pass, and a KV head count looked up on another object than "
        "the query's with the query's count as the fallback. And in a Triton kernel that moves "
        "its value blocks by a tile index (`i_v * BV`), a block pointer of the value's tile left "
        "at offset 0 on that axis and never advanced; and a K/V view whose head dim comes from "
        "the width of the input the query is projected from (`hidden_states.shape[-1]`) while "
        "K and V are projected from another input; and a norm applied to the attention output "
        "just before the output projection (`self.o_proj(self.g_norm(o))`) sized with another "
        "width than the value's width the projection takes. "
        "KV205 (a projection's view), KV206 (a key-named head "
        "dim in a value view or buffer) and the query-head spellings of KV202 are special cases."
    )
    why = (
        "With grouped-query attention K and V hold `num_kv_heads` heads; a cache, view or "
        "buffer sized with the query's head count is either too large (memory wasted, a "
        "`-1` axis that folds heads into tokens) or fails only on checkpoints where the counts "
        "differ. Key and value head dims differ in MLA (192 vs 128), MiMo and several linear "
        "attentions: a value shaped with the key's head dim reinterprets memory exactly on the "
        "models whose config gives the value its own."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.dim // config.n_heads
        self.cache_k = torch.zeros(config.max_batch, config.max_seq, self.n_heads, self.head_dim)
        self.cache_v = torch.zeros(config.max_batch, config.max_seq, self.n_kv_heads, self.head_dim)
"""
    good = bad.replace("config.max_seq, self.n_heads, self.head_dim)", "config.max_seq, self.n_kv_heads, self.head_dim)")
    fix_text = (
        "Size K/V views and buffers with the KV head count (`num_key_value_heads`; or `-1` for "
        "the head axis) and value views and buffers with the value's head dim (`v_head_dim`)."
    )

    VALID = (
        # The view with the query's heads runs only where multi-query attention is off.
        Example("""\
class GLMSelfAttention(nn.Module):
    def forward(self, mixed, cos, sin):
        q, k, v = self.split_qkv(mixed)
        if self.multi_query_attention:
            k = k.view(-1, self.num_key_value_heads, self.head_dim)
        else:
            k = k.view(-1, self.num_attention_heads, self.head_dim)
        v = v.view(-1, self.num_key_value_heads, self.head_dim)
        return rotate(q, k, cos, sin), v
"""),
        Example(good),
        # Multi-head attention by construction: the KV head count is the query's.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = self.num_heads
        self.head_dim = config.head_dim

    def forward(self, key_states, b, s):
        return key_states.view(b, s, self.num_heads, self.head_dim)
"""),
        # K repeated to the query's head count before the view.
        Example("""\
class Attention(nn.Module):
    def forward(self, key_states, b, s):
        key_states = repeat_kv(key_states, self.num_heads // self.num_key_value_heads)
        return key_states.reshape(b * self.num_heads, s, self.head_dim)
"""),
        # V padded to the key's head dim on purpose, for a kernel that needs one size.
        Example("""\
class Attention(nn.Module):
    def __init__(self, heads, qk_head_dim, v_head_dim):
        super().__init__()
        self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim

    def forward(self, value, t):
        value = F.pad(value, [0, self.qk_head_dim - self.v_head_dim])
        return value.view(t, self.heads, self.qk_head_dim)
"""),
        # V zero-filled up to the key's head dim by a concatenation: the filler's width reads
        # both dims.
        Example("""\
class Backend:
    def forward_extend(self, q, k, v, layer):
        if layer.head_dim != layer.v_head_dim:
            zeros = v.new_zeros(v.shape[0], layer.tp_v_head_num, layer.head_dim - layer.v_head_dim)
            v = torch.cat([v, zeros], dim=-1)
        o = self.kernel(q, k, v)
        return o[..., : layer.v_head_dim]
"""),
        # A value head dim that is the key's by construction.
        Example("""\
class Pool:
    def __init__(self, size, heads, head_dim):
        self.head_dim = head_dim
        self.v_head_dim = head_dim
        self.v_buffer = torch.empty(size, heads, self.head_dim)
"""),
        # The attention output (weights times V) has the query's heads.
        Example("""\
class Attention(nn.Module):
    def forward(self, attn, value, b, s):
        out = torch.matmul(attn, value).view(b, s, self.num_heads * self.head_dim)
        return self.o_proj(out)
"""),
        # Linear attention whose key projection is declared with the query's heads.
        Example("""\
class LinearAttention(nn.Module):
    def __init__(self, hidden, feature_dim, num_heads, num_key_value_heads):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.feature_dim = num_heads, num_key_value_heads, feature_dim
        self.k_proj = nn.Linear(hidden, feature_dim * self.num_heads)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        return rearrange(self.k_proj(x), "... (h d) -> ... h d", h=self.num_heads)
"""),
        # A Triton kernel whose V block takes the value's dim and tile.
        Example("""\
@triton.jit
def attn_fwd_kernel(k, v, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_t, i_v = tl.program_id(0), tl.program_id(1)
    p_k = tl.make_block_ptr(k, (T, K), (H * K, 1), (i_t * BT, 0), (BT, BK), (1, 0))
    p_v = tl.make_block_ptr(v, (T, V), (H * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
    b_dv = tl.zeros([BT, BV], dtype=tl.float32)
    return tl.load(p_k), tl.load(p_v), b_dv
"""),
        # Transformer-XL's positional biases u and v belong to the query's heads.
        Example("""\
class RelPositionAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_dim
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
        self.bias_u = nn.Parameter(torch.zeros(config.num_attention_heads, self.head_dim))
        self.bias_v = nn.Parameter(torch.zeros(config.num_attention_heads, self.head_dim))
"""),
        # A probe that builds K expanded to the query's heads beside the grouped K.
        Example("""\
def probe(n_heads, n_kv_heads, head_dim):
    k = torch.empty(1, n_kv_heads, 128, head_dim)
    k_full = torch.empty(1, n_heads, 128, head_dim)
    v = torch.empty(1, n_kv_heads, 128, head_dim)
    return k, k_full, v
"""),
        # A guard proves the counts equal on this path.
        Example("""\
def dense(query, key, value):
    batch, q_len, num_heads, head_dim = query.shape
    kv_batch, kv_len, kv_heads, kv_dim = key.shape
    if kv_heads != num_heads:
        raise ValueError("dense Q/K/V only")
    return key.view(batch * kv_len, num_heads, head_dim), value.view(batch * kv_len, num_heads, head_dim)
"""),
        # MLA's latent caches: the "value" cache holds the rope part of the key.
        Example("""\
class MLAPreprocess:
    def __init__(self, kv_lora_rank, qk_rope_head_dim, v_head_dim):
        self.kv_lora_rank, self.qk_rope_head_dim, self.v_head_dim = kv_lora_rank, qk_rope_head_dim, v_head_dim

    def caches(self, k_cache, v_cache, blocks, heads):
        k_cache = k_cache.view(blocks, heads * self.kv_lora_rank // 16, -1, 16)
        v_cache = v_cache.view(blocks, heads * self.qk_rope_head_dim // 16, -1, 16)
        return k_cache, v_cache
"""),
        # ``values`` without ``keys`` beside it: numbers, not a value tensor.
        Example("""\
def norm(x, qk_head_num_sum, kv_head_num, head_dim):
    normalized_values = x * x
    return normalized_values.reshape(-1, qk_head_num_sum, head_dim)
"""),
        # MLA: K/V head counts follow the path.
        Example("""\
class DeepseekAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = 1
        self.kv_lora_rank = config.kv_lora_rank

    def forward_prefill(self, k, t):
        return k.view(t, self.num_heads, -1)
"""),
        # A forward patched onto a model class from outside it: no class to read its
        # projections from.
        Example("""\
def patched_forward(self, hidden_states):
    bsz, q_len, _ = hidden_states.size()
    key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
    return key_states
"""),
        # V keeps the key's leading axes and its own head dim, inferred or read off its cache.
        Example("""\
class MiMoAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_dim
        self.v_head_dim = config.v_head_dim

    def forward(self, key, value, value_cache, slots):
        value = value.view(*key.shape[:-1], -1)
        value_cache = value_cache.view(*key.size()[:-1], value_cache[0].size(-1))
        past = value_cache.view(-1, value_cache[slots].shape[-1])
        return value, value_cache, past
"""),
        # With no value head dim of its own in scope, the key's last axis is the head dim both share.
        Example("""\
def attend(query, key, value, t):
    value = value.view(t, -1, key.shape[-1])
    return sdpa(query, key, value)
"""),
        # RoPE's result viewed as the key it rotated: the keys' own length.
        Example("""\
def apply_rotary(self, query_states, key_states, position_ids):
    kv_seq_len = key_states.shape[-2]
    cos, sin = self.rotary_emb(key_states, seq_len=kv_seq_len)
    k_rot = key_states.float() * cos + rotate_half(key_states.float()) * sin
    return k_rot.view_as(key_states)
"""),
        # A value head dim assigned from the shared one, and a shared one from the value's.
        Example("""\
class ValuePool:
    def __init__(self, config, size, heads):
        self.head_dim = config.head_dim
        self.v_head_dim = self.head_dim
        self.v_buffer = torch.empty(size, heads, self.head_dim)


class ValueOnlyPool:
    def __init__(self, config, size, heads):
        self.v_head_dim = config.v_head_dim
        self.head_dim = self.v_head_dim
        self.v_buffer = torch.empty(size, heads, self.head_dim)
"""),
        # Linear attention's query-side sizes: a per-head key-dim gate and the query's
        # convolution state, and a keys-by-values recurrent state, all with the query's heads.
        Example("""\
class GatedLinearAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, head_k_dim, head_v_dim, conv_size):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.conv_size = num_heads, num_kv_heads, conv_size
        self.head_k_dim, self.head_v_dim = head_k_dim, head_v_dim
        self.gk_bias = nn.Parameter(torch.zeros(self.num_heads, self.head_k_dim))

    def init_state(self, q, batch):
        conv_q = q.new_zeros(batch, self.num_heads * self.head_k_dim, self.conv_size)
        recurrent = torch.zeros(batch, self.num_heads, self.head_k_dim, self.head_v_dim)
        return conv_q, recurrent
"""),
        # The key and value tiles picked as a pair per device: no one tile computed from K.
        Example("""\
def launch(q, k, v, scale):
    B, T, H, K, V = *k.shape, v.shape[-1]
    BK, BV = (64, 64) if check_shared_mem("hopper") else (min(triton.next_power_of_2(K), 32), 32)
    return kernel[(triton.cdiv(V, BV), B * H)](q, k, v, scale, K=K, V=V, BK=BK, BV=BV)
"""),
        # A projection picked from a module list by index (a low-rank token shift): a callee
        # with no name has no side.
        Example("""\
class TokenShift(nn.Module):
    def forward(self, hidden_states, delta, batch_size, seq_len):
        return self.x_proj[0](hidden_states, delta).view(batch_size, seq_len, -1, self.proj_low_rank_dim)
"""),
        # Relative-position keys (a disentangled attention's position projection) score the
        # query's heads, one per query head: positions, not the keys of the KV heads.
        Example("""\
class DisentangledAttention(nn.Module):
    def forward(self, hidden_states, rel_embeddings, b, s):
        key_states = self.k_proj(hidden_states).view(b, s, self.num_key_value_heads, self.head_dim)
        pos_key = self.pos_key_proj(rel_embeddings).view(1, -1, self.num_attention_heads, self.head_dim)
        return key_states, pos_key
"""),
        # A bias broadcast as one head's scores, after the keys' own length is read: no query
        # named as the shape.
        Example("""\
def add_bias(query, key, bias):
    kv_len = key.shape[-2]
    scores = torch.matmul(query, key.transpose(-1, -2))
    bias = bias[..., :kv_len].expand_as(scores[0])
    return scores + bias
"""),
        # A fused QKV split by column ranges: cuts of many axes, none to the value's head dim.
        Example("""\
class VisionAttention(nn.Module):
    def forward(self, qkv, seq_len):
        q = qkv[:, : self.q_size].reshape(seq_len, self.num_heads, self.head_dim)
        k = qkv[:, self.q_size : self.q_size + self.kv_size].reshape(seq_len, self.num_kv_heads, self.head_dim)
        v = qkv[:, self.q_size + self.kv_size :].reshape(seq_len, self.num_kv_heads, self.head_dim)
        return q, k, v
"""),
        # A buffer helper given the KV head count.
        Example("""\
def step(self, hidden, past, seq_len):
    k = self.k_proj(hidden).view(-1, seq_len, self.num_key_value_heads, self.head_dim)
    if past is None:
        cache_k, cache_v = init_kv_cache(k.size(0), self.num_key_value_heads, self.head_dim, seq_len + 256)
        return cache_k, cache_v
    return past
"""),
        # The query's length in a K view before the keys' own length is read (before a cache
        # joins them, one projection gives both one length).
        Example("""\
def project(self, query, x, past):
    bsz, q_len = query.shape[:2]
    key = self.wk(x).view(bsz, q_len, self.n_kv_heads, self.head_dim)
    kv_seq_len = key.shape[1] + past.shape[1]
    return key, kv_seq_len
"""),
        # New K and V made with Q by one statement: the new tokens are as long as the query,
        # while the cache they are written to counts its own length.
        Example("""\
class FusedAttention:
    def forward(self, hidden, layer_id):
        query, key, value = self._split_heads(self.query_key_value(hidden))
        bsz, seq_len = query.shape[:2]
        k_buf, v_buf, kv_len = self.cache.buffers(layer_id)
        key = key.transpose(1, 2)
        k_buf[:, kv_len : kv_len + seq_len] = key.reshape(bsz, seq_len, -1)
        v_buf[:, kv_len : kv_len + seq_len] = value.transpose(1, 2).reshape(bsz, seq_len, -1)
        return query, k_buf[:, : kv_len + seq_len], v_buf[:, : kv_len + seq_len]
"""),
        # K split by `torch.split` from the fused tensor Q is split from by its method.
        Example("""\
def write_new_tokens_split(mixed, k_cache, kv_len, q_width, kv_width):
    query, _ = mixed.split([q_width, 2 * kv_width], dim=-1)
    _, key, _ = torch.split(mixed, [q_width, kv_width, kv_width], dim=-1)
    bsz, seq_len = query.shape[:2]
    k_cache[:, kv_len : kv_len + seq_len] = key.view(bsz, seq_len, -1)
    return query
"""),
        # K cut from the fused tensor Q is cut from.
        Example("""\
def write_new_tokens(mixed, k_cache, v_cache, kv_len, q_width, kv_width):
    query = mixed[..., :q_width]
    key = mixed[..., q_width : q_width + kv_width]
    bsz, seq_len = query.shape[:2]
    k_cache[:, kv_len : kv_len + seq_len] = key.view(bsz, seq_len, -1)
    return query
"""),
        # K and V proven as long as the query by a guard.
        Example("""\
def rotate(query, key):
    batch, heads, seq_len, dim = query.shape
    kv_batch, kv_heads, kv_seq_len, kv_dim = key.shape
    if (kv_batch, kv_seq_len) != (batch, seq_len):
        raise ValueError("query and key must have one batch and one length")
    return key.reshape(batch, seq_len, kv_heads, dim)
"""),
        # A K/V view with the keys' own length read beside the query's.
        Example("""\
def unpad_kv(query, key, value, kv_heads):
    batch, q_len = query.shape[:2]
    k_len = key.shape[1]
    return key.view(batch, k_len, kv_heads, -1), value.view(batch, k_len, kv_heads, -1)
"""),
        # Heads expanded alone: the keys keep their own length.
        Example("""\
def attend(q, k, v):
    b, h, q_len, k_len = q.shape[0], q.shape[1], q.shape[2], k.shape[-2]
    k = k.unsqueeze(1).expand(-1, h, -1, -1)
    return sdpa(q, k, v)
"""),
        # A value tile that depends on the key's only through the test that picks a number.
        Example("""\
def launch(q, k, v):
    B, T, H, K, V = *k.shape, v.shape[-1]
    BK = triton.next_power_of_2(K)
    BV = 32 if BK > 128 else 64
    return kernel[(triton.cdiv(V, BV), B * H)](q, k, v, K=K, V=V, BK=BK, BV=BV)
"""),
        # Per-head sizes on both keywords.
        Example("""\
class DecoderBlock(keras.layers.Layer):
    def build(self, hidden_dim):
        head_dim = hidden_dim // self.num_heads
        self.cross = keras.layers.MultiHeadAttention(num_heads=self.num_heads, key_dim=head_dim, value_dim=head_dim)
"""),
        # A KV head count of one (multi-query attention) written as a number.
        Example("""\
class FusedBlock(nn.Module):
    def __init__(self, hidden_size, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = 1
"""),
        # A recurrent state of keys by values carries the heads the kernel runs with.
        Example("""\
class SlotAttention(nn.Module):
    def init_state(self, batch):
        param = next(self.parameters())
        return (param.new_zeros(batch, self.num_heads, self.head_k_dim, self.head_v_dim),)
"""),
        # An output whose branch proves the key's head dim equal to the value's.
        Example("""\
class Backend:
    def forward(self, q, k, v, layer):
        if layer.qk_head_dim == 128 and layer.v_head_dim == 128:
            v = v.view(-1, layer.tp_v_head_num, layer.v_head_dim)
            o = fast_kernel(q, k, v)
            return o.view(-1, layer.tp_q_head_num * layer.qk_head_dim)
        return self.slow(q, k, v, layer)
"""),
        # The same proof written as one chained test.
        Example("""\
class Backend:
    def forward(self, q, k, v, layer):
        if layer.qk_head_dim == layer.v_head_dim == 128:
            v = v.view(-1, layer.tp_v_head_num, layer.v_head_dim)
            o = fast_kernel(q, k, v)
            return o.view(-1, layer.tp_q_head_num * layer.qk_head_dim)
        return self.slow(q, k, v, layer)
"""),
        # An output padded to the key's head dim by the kernel, cut to the value's after.
        Example("""\
class Backend:
    def forward(self, q, k, v, layer):
        o = padded_kernel(q, k, v)
        o = o.view(-1, layer.tp_q_head_num, layer.qk_head_dim)
        return o[..., : layer.v_head_dim].reshape(-1, layer.tp_q_head_num * layer.v_head_dim)
"""),
        # An output in a branch that never gives the value its own head dim.
        Example("""\
class Backend:
    def forward(self, q, k, v, layer):
        if layer.qk_head_dim != layer.v_head_dim:
            o = q.new_empty((q.shape[0], layer.tp_q_head_num * layer.v_head_dim))
            return self.split(q, k, v, o)
        o = dense_kernel(q.view(-1, layer.tp_q_head_num, layer.head_dim), k, v)
        return o.view(-1, layer.tp_q_head_num * layer.head_dim)
"""),
        # The output buffer allocated off the value (for its dtype and device) has the query's
        # heads: the receiver lends no shape.
        Example("""\
class Attention(nn.Module):
    def forward(self, hidden):
        q, k, v = self.qkv_proj(hidden).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        out = v.new_empty(v.shape[0], self.num_heads, self.head_dim)
        self.attn(q, k, v, out)
        return out
"""),
        # The KV head count looked up first, the query's the fallback; a loop that reads each
        # candidate name; both counts read on one configuration.
        Example("""\
def kv_heads_of(config):
    if hasattr(config, "num_key_value_heads"):
        return config.num_key_value_heads
    elif hasattr(config, "num_attention_heads"):
        return config.num_attention_heads
    raise KeyError("no head count in the config")


def kv_heads_by_name(config, world_size):
    for name in ("num_key_value_heads", "num_kv_heads", "num_attention_heads"):
        kv_heads = getattr(config, name, None)
        if kv_heads is not None:
            break
    return kv_heads // world_size


class PagedCache:
    def __init__(self, engine_config, model_config):
        self.num_heads = model_config.num_attention_heads
        self.block_size = engine_config.block_size
        if hasattr(model_config, "num_key_value_heads"):
            self.num_kv_heads = model_config.num_key_value_heads
        else:
            self.num_kv_heads = self.num_heads
"""),
        # Every name of the list is read, none first-found-wins: the order says nothing.
        Example("""\
def shard_sizes(module, world_size):
    for name in ["num_attention_heads", "num_key_value_heads", "hidden_size"]:
        if hasattr(module, name):
            setattr(module, name, getattr(module, name) // world_size)
"""),
        # A decoding kernel whose output block moves with the program's value tile; a state
        # block made at the first tile and advanced tile by tile.
        Example("""\
@triton.jit
def decode_kernel(q, v, o, T, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    p_v = tl.make_block_ptr(v + i_bh * T * V, (T, V), (V, 1), (0, i_v * BV), (T, BV), (1, 0))
    p_o = tl.make_block_ptr(o + i_bh * V, (V,), (1,), (i_v * BV,), (BV,), (0,))
    tl.store(p_o, tl.sum(tl.load(p_v), 0).to(p_o.dtype.element_ty))


@triton.jit
def sweep_kernel(v, h, T, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr):
    i_v = tl.program_id(0)
    p_v = tl.make_block_ptr(v, (T, V), (V, 1), (0, i_v * BV), (BT, BV), (1, 0))
    p_h = tl.make_block_ptr(h, (V,), (1,), (0,), (BV,), (0,))
    for _ in range(tl.cdiv(V, BV)):
        tl.store(p_h, tl.sum(tl.load(p_v), 0))
        p_h = tl.advance(p_h, (BV,))
"""),
        # The head dim read off the projected key; and off an input the key is projected from.
        Example("""\
def cross_attention(attn, hidden_states, encoder_hidden_states, batch_size):
    query = attn.to_q(hidden_states)
    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)
    head_dim = key.shape[-1] // attn.heads
    query = query.view(batch_size, -1, attn.heads, head_dim)
    key = key.view(batch_size, -1, attn.heads, head_dim)
    return query, key, value.view(batch_size, -1, attn.heads, head_dim)


def self_attention(attn, hidden_states, batch_size):
    query = attn.to_q(hidden_states)
    key = attn.to_k(hidden_states)
    head_dim = hidden_states.shape[-1] // attn.heads
    return query, key.view(batch_size, -1, attn.heads, head_dim)
"""),
        # The projected query's own width (after its norm) gives the head dim K shares.
        Example("""\
def grouped_cross_attention(attn, hidden_states, encoder_hidden_states, batch_size):
    query = attn.to_q(hidden_states)
    key = attn.to_k(encoder_hidden_states)
    query = attn.norm_q(query)
    head_dim = query.shape[-1] // attn.heads
    kv_heads = key.shape[-1] // head_dim
    return query, key.view(batch_size, -1, kv_heads, head_dim)
"""),
        # An output norm of the value's width before the output projection; and one of the
        # model's width where the value's width is the model's by construction.
        Example("""\
class GatedAttention(nn.Module):
    def __init__(self, hidden_size, expand_v):
        super().__init__()
        self.hidden_size = hidden_size
        self.value_dim = int(hidden_size * expand_v)
        self.g_norm = nn.RMSNorm(self.value_dim)
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def forward(self, o):
        return self.o_proj(self.g_norm(o))


class PlainAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.value_dim = self.hidden_size
        self.g_norm = nn.RMSNorm(self.hidden_size)
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def forward(self, o):
        return self.o_proj(self.g_norm(o))
"""),
        # Code for a family with grouped K/V: a query head count divided by the group ratio is
        # the KV head count.
        Example("""\
def llama_value_states(module, hidden_states):
    b, s, _ = hidden_states.size()
    heads = module.config.num_attention_heads
    ratio = module.k_proj.in_features // module.k_proj.out_features
    return module.v_proj(hidden_states).view(b, s, heads // ratio, module.head_dim)
"""),
        # A head count read off a cached key's shape is the KV head count, whatever its name.
        Example("""\
class MistralBlockAttention(nn.Module):
    def grow(self, cached_keys, cached_values, key_states, value_states):
        batch, num_heads, length, dim = cached_keys.shape
        keys = key_states.new_zeros(batch, num_heads, length + key_states.shape[-2], dim)
        values = value_states.new_zeros(batch, num_heads, length + value_states.shape[-2], dim)
        return keys, values

    def page(self, key_cache, blocks):
        slots, block, num_heads, dim = key_cache.size()
        return key_cache[blocks].view(-1, num_heads, dim)
"""),
        # The vision tower of a multimodal family shares one head count among Q, K and V.
        Example("""\
class Qwen2VisionAttention(nn.Module):
    def forward(self, x):
        s = x.shape[0]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        k = k.view(s, self.num_heads, self.head_dim)
        v = v.view(s, self.num_heads, self.head_dim)
        return self.attend(q.view(s, self.num_heads, self.head_dim), k, v)
"""),
        # A port of a family that holds a KV head count equal to the query's by construction
        # (a multi-head checkpoint only).
        Example("""\
class FalconRWAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = self.num_heads
        self.head_dim = config.hidden_size // self.num_heads

    def forward(self, key_states, b, s):
        return key_states.view(b, s, self.num_heads, self.head_dim)
"""),
        # A factory whose constructions give the head count field the query's count where the
        # model has no other, and a KV count once: one witness is no role.
        Example("""\
@dataclass
class CacheSpec:
    kv_width: int
    n_layers: int
    n_heads: int

    @classmethod
    def from_config(cls, cfg):
        if getattr(cfg, "multi_query", False):
            return cls(cfg.hidden_size // cfg.num_attention_heads, cfg.num_layers, 1)
        if cfg.model_type == "chatglm":
            return cls(cfg.kv_channels * cfg.multi_query_group_num, cfg.num_layers, cfg.multi_query_group_num)
        return cls(cfg.hidden_size, cfg.num_layers, cfg.num_attention_heads)
"""),
        # Layers built in one method for each side take each side's own count: a gate per
        # query head beside projections sized with the KV heads.
        Example("""\
class GatedAttention(nn.Module):
    def __init__(self, config, head_dim):
        super().__init__()
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * head_dim)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * head_dim)
        self.gate = nn.Linear(config.hidden_size, config.num_attention_heads)
        self.beta = nn.Linear(config.hidden_size, config.num_key_value_heads)
        self.alpha = nn.Linear(config.hidden_size, config.num_key_value_heads)
"""),
        # A key norm applied to the cross-attention input before its projection has the
        # input's width.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_key_value_heads = config.num_key_value_heads
        self.k_norm = RMSNorm(config.hidden_size)
        self.k_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * config.head_dim)

    def forward(self, hidden_states, cross_states):
        cross_states = self.k_norm(cross_states)
        return self.k_proj(cross_states)
"""),
        # A key norm over K in a class whose KV head count is the query's by construction.
        Example("""\
class MHAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_heads
        self.k_norm = RMSNorm(hidden_size)

    def forward(self, k):
        return self.k_norm(k.contiguous())
"""),
        # A cache of K/V the class expands to the query's heads before it stores them.
        Example("""\
class Gemma2Attention(nn.Module):
    def setup_cache(self, batch_size, max_seq_len):
        self.kv_cache = KVCache(batch_size, max_seq_len, num_kv_heads=self.num_heads, head_dim=self.head_dim)

    def forward(self, x, b, s):
        k = self.k_proj(x).view(b, s, self.num_kv_heads, 1, self.head_dim)
        v = self.v_proj(x).view(b, s, self.num_kv_heads, 1, self.head_dim)
        k = k.expand(b, s, self.num_kv_heads, self.q_per_kv, self.head_dim).reshape(b, s, -1, self.head_dim)
        v = v.expand(b, s, self.num_kv_heads, self.q_per_kv, self.head_dim).reshape(b, s, -1, self.head_dim)
        return self.kv_cache.update(k, v)
"""),
        # A vision tower of a family passes its one head count to both slots.
        Example("""\
class Qwen2VisionBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attn = Attention(config.embed_dim, num_heads=config.num_heads, num_kv_heads=config.num_heads)
"""),
        # A test that builds a small multi-head config of a grouped family on purpose.
        Example("""\
NUM_HEADS = 4


def check_mixtral_tp(tp_size):
    config = MixtralConfig(hidden_size=32 * NUM_HEADS, num_attention_heads=NUM_HEADS, num_key_value_heads=NUM_HEADS)
    return MixtralForCausalLM(config)
"""),
        # A connector attention named for the family it serves, with its own K/V projections of
        # the query's width: its K has the query's heads.
        Example("""\
class GemmaConnectorAttention(nn.Module):
    def __init__(self, query_dim, heads, dim_head):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.dim_head = heads, dim_head
        self.k_norm = nn.RMSNorm(inner)
        self.to_q = nn.Linear(query_dim, inner)
        self.to_k = nn.Linear(query_dim, inner)
        self.to_v = nn.Linear(query_dim, inner)

    def forward(self, x):
        b, s, _ = x.shape
        k = self.k_norm(self.to_k(x))
        v = self.to_v(x)
        k = k.view(b, s, self.heads, self.dim_head)
        v = v.view(b, s, self.heads, self.dim_head)
        return k, v
"""),
    )
    INVALID = (
        Example(bad, line=7),
        # A decoder layer of a family with grouped K/V builds its attention as multi-head.
        Example("""\
class MistralDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = MistralAttention(
            hidden_size=config.hidden_size,
            num_heads=config.num_attention_heads,
            num_kv_heads=config.num_attention_heads,
        )
""", line=7),
        # A norm over all of K sized with the model's width, in a layer with its own KV heads.
        Example("""\
class MoEAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.num_kv_heads = num_kv_heads
        self.qkv_proj = QKVLinear(hidden_size, self.head_dim, num_heads, num_kv_heads)
        self.q_norm = RMSNorm(hidden_size)
        self.k_norm = RMSNorm(hidden_size)

    def forward(self, x):
        q, k, v = self.qkv_proj(x)
        q, k = self.q_norm(q.contiguous()), self.k_norm(k.contiguous())
        return q, k, v
""", line=8),
        # The model's width divided by the KV head count: neither a head dim nor K's width.
        Example("""\
class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.k_norm = LayerNorm.build(config, size=config.d_model // config.n_kv_heads)
        self.att_proj = nn.Linear(config.d_model, config.d_model + 2 * config.n_kv_heads * config.head_dim)

    def attention(self, q, k, v):
        k = self.k_norm(k).to(dtype=q.dtype)
        return sdpa(q, k, v)
""", line=4),
        # A config record built per model family: two builders give its head count field the KV
        # heads, the default one the query's.
        Example("""\
@dataclass
class EngineModelConfig:
    kv_width: int
    n_layers: int
    n_heads: int

    @classmethod
    def from_hf(cls, hf):
        def for_glm():
            return EngineModelConfig(hf.kv_channels * hf.multi_query_group_num, hf.num_layers,
                                     hf.multi_query_group_num)

        def for_falcon():
            kv_heads = hf.num_kv_heads if hf.new_decoder_architecture else 1
            return EngineModelConfig(hf.hidden_size // hf.num_attention_heads * kv_heads, hf.num_hidden_layers,
                                     kv_heads)

        def default():
            return EngineModelConfig(hf.hidden_size, hf.num_hidden_layers, hf.num_attention_heads)

        return {"chatglm": for_glm, "falcon": for_falcon}.get(hf.model_type, default)()
""", line=19),
        # A forward patched onto a family's attention whose config has grouped K/V heads: no
        # KV head count in the file, the family's config has one.
        Example("""\
def mistral_sdpa_forward(self, hidden_states):
    bsz, q_len, _ = hidden_states.size()
    query = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
    key = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
    value = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim)
    return sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2))
""", line=4),
        # A patched forward that names no family but calls into the family's module.
        Example("""\
def xformers_patched_forward(self, hidden_states, position_ids=None):
    bsz, q_len, _ = hidden_states.size()
    query = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
    key = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
    cos, sin = self.rotary_emb(query, seq_len=q_len)
    return transformers.models.llama.modeling_llama.apply_rotary_pos_emb(query, key, cos, sin, position_ids)
""", line=4),
        # A static cache allocated through a shape tuple, in a subclass of a family's attention.
        Example("""\
class HPUQwen2Attention(Qwen2Attention):
    def allocate_kv_cache(self, batch_size, max_seq_len):
        if self.static_cache:
            shape = (batch_size, self.num_heads, max_seq_len, self.head_dim)
        else:
            shape = (batch_size, self.num_key_value_heads, 0, self.head_dim)
        self.k_cache.allocate(max_seq_len, shape)
        self.v_cache.allocate(max_seq_len, shape)
""", line=4),
        # The query's heads where multi-query attention is on.
        Example("""\
class GLMSelfAttention(nn.Module):
    def forward(self, mixed, cos, sin):
        q, k, v = self.split_qkv(mixed)
        if self.multi_query_attention:
            k = k.view(-1, self.num_attention_heads, self.head_dim)
        else:
            k = k.view(-1, self.num_key_value_heads, self.head_dim)
        v = v.view(-1, self.num_key_value_heads, self.head_dim)
        return rotate(q, k, cos, sin), v
""", line=5),
        # A backend's cascade path views the value cache with the key's head dim, though the
        # same function views it with the value's elsewhere.
        Example("""\
class Backend:
    def forward_extend(self, layer, key_cache, value_cache, cascade):
        value_cache = value_cache.view(-1, self.page_size, layer.tp_v_head_num, layer.v_head_dim)
        if cascade:
            return kernel(
                k_cache=key_cache.view(-1, 1, layer.tp_k_head_num, layer.head_dim),
                v_cache=value_cache.view(-1, 1, layer.tp_v_head_num, layer.head_dim),
            )
        return value_cache
""", line=7),
        # A Triton kernel loads V through a block pointer tiled with the key's block size.
        Example("""\
@triton.jit
def attn_bwd_kernel(q, k, v, do, dq, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_t = tl.program_id(0)
    p_k = tl.make_block_ptr(k, (T, K), (H * K, 1), (i_t * BT, 0), (BT, BK), (1, 0))
    p_v = tl.make_block_ptr(v, (V, T), (1, H * V), (0, i_t * BT), (BK, BT), (0, 1))
    return tl.load(p_k), tl.load(p_v)
""", line=6),
        # Learned memory keys allocated with the query's head count.
        Example("""\
class Attention(nn.Module):
    def __init__(self, dim, heads=8, kv_heads=None, dim_head=64, num_mem_kv=0):
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        self.kv_heads = kv_heads
        self.mem_k = nn.Parameter(torch.randn(heads, num_mem_kv, dim_head))
        self.mem_v = nn.Parameter(torch.randn(kv_heads, num_mem_kv, dim_head))
""", line=6),
        Example("""\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.head_dim = config.hidden_size // self.num_heads

    def forward(self, hidden_states, b, s):
        key_states = self.k_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)
        value_states = self.v_proj(hidden_states).view(b, s, self.num_key_value_heads, self.head_dim)
        return key_states, value_states
""", line=9),
        # A guard that proves the counts equal inside a nested kernel wrapper only.
        Example("""\
class Attention(nn.Module):
    def forward(self, hidden_states, b, s):
        def dense_attention(q, k, v):
            if self.num_key_value_heads != self.num_heads:
                raise ValueError("the dense kernel needs as many KV heads as query heads")
            return F.scaled_dot_product_attention(q, k, v)

        key_states = self.k_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)
        return key_states
""", line=8),
        Example("""\
class MiMoAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_dim
        self.v_head_dim = config.v_head_dim

    def forward(self, key, value, t):
        key = key.view(t, -1, self.head_dim)
        value = value.view(t, -1, key.shape[-1])
        return key, value
""", line=9),
        # A K/V cache made by a helper with the query head count, where K was just viewed with
        # the KV head count.
        Example("""\
def step(self, hidden, past, seq_len):
    k = self.k_proj(hidden).view(-1, seq_len, self.num_key_value_heads, self.head_dim)
    if past is None:
        cache_k, cache_v = init_kv_cache(k.size(0), self.num_heads, self.head_dim, seq_len + 256)
        return cache_k, cache_v
    return past
""", line=4),
        # The KV head count read with `getattr` and a fallback, K viewed with the query's.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = getattr(config, "num_key_value_heads", config.num_attention_heads)
        self.head_dim = config.hidden_size // self.num_heads

    def forward(self, hidden_states, b, s):
        key_states = self.k_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)
        return key_states
""", line=9),
        # A decode path's output flattened with the shared head dim, where V was viewed with
        # the value's (sizes passed as plain arguments).
        Example("""\
def decode(q, k, v, num_heads, num_kv_heads, head_dim, v_head_dim):
    v = v.view(-1, num_kv_heads, v_head_dim)
    o = decode_kernel(q, k, v)
    return o.view(-1, num_heads * head_dim)
""", line=4),
        # The output flattened with the key's head dim in the branch where the dims differ.
        Example("""\
class Backend:
    def forward(self, q, k, v, layer):
        if layer.qk_head_dim != layer.v_head_dim:
            v = v.view(-1, layer.tp_v_head_num, layer.v_head_dim)
            o = split_kernel(q, k, v)
            return o.view(-1, layer.tp_q_head_num * layer.qk_head_dim)
        return self.dense(q, k, v, layer)
""", line=6),
        # The value viewed with the key's last axis read by `size(-1)`.
        Example("""\
class MiMoAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_dim
        self.v_head_dim = config.v_head_dim

    def forward(self, key, value, t):
        key = key.view(t, -1, self.head_dim)
        value = value.view(t, -1, key.size(-1))
        return key, value
""", line=9),
        # A key-slot state kept in a local before it is returned.
        Example("""\
class SlotAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, num_slots):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.num_slots = num_heads, num_kv_heads, num_slots
        self.head_k_dim = hidden_size // num_heads

    def init_state(self, batch):
        param = next(self.parameters())
        slot_state = param.new_zeros(batch, self.num_heads, self.head_k_dim, self.num_slots)
        return (slot_state,)
""", line=9),
        # A single-head K reshaped by einops, then broadcast to the query's whole shape.
        Example("""\
def attend(q, k, v):
    b, h, q_len, k_len = q.shape[0], q.shape[1], q.shape[2], k.shape[-2]
    if k.ndim == 3:
        k = rearrange(k, "b n d -> b 1 n d").expand_as(q)
    return sdpa(q, k, v)
""", line=4),
        # Keys viewed with the query's length read by `size(1)` once the keys' own is bound.
        Example("""\
def varlen_attention(query, key, value, past, kv_heads):
    if past is not None:
        key = torch.cat([past[0], key], dim=1)
    bsz, seqlen = query.size(0), query.size(1)
    key_unpad, cu_seqlens_k, max_seqlen_k = unpad(key)
    key_unpad = key_unpad.view(bsz, seqlen, kv_heads, -1)
    return key_unpad, max_seqlen_k
""", line=6),
        # Keys made with the query, then joined with the cache: no longer the query's length.
        Example("""\
class FusedAttention:
    def forward(self, hidden, past_key):
        query, key, value = self._split_heads(self.query_key_value(hidden))
        bsz, seq_len = query.shape[:2]
        kv_len = past_key.shape[1] + seq_len
        key = torch.cat([past_key, key], dim=1)
        return key.reshape(bsz, seq_len, -1)
""", line=7),
        # Unpadded keys viewed with the query's length after a cache made them longer.
        Example("""\
def varlen_attention(query, key, value, past, n_heads, kv_heads):
    if past is not None:
        key = torch.cat([past[0], key], dim=1)
    bsz, seqlen = query.shape[:2]
    key_unpad, cu_seqlens_k, max_seqlen_k = unpad(key)
    key_unpad = key_unpad.view(bsz, seqlen, kv_heads, -1)
    return key_unpad, max_seqlen_k
""", line=6),
        # A single-head K broadcast to the query's whole shape, length included.
        Example("""\
def attend(q, k, v):
    b, h, q_len, k_len = q.shape[0], q.shape[1], q.shape[2], k.shape[-2]
    if k.ndim == 3:
        k = k.unsqueeze(1).expand_as(q)
    return sdpa(q, k, v)
""", line=4),
        # The value tile sized from the key's head dim, where the value has its own.
        Example("""\
def launch(q, k, v):
    B, T, H, K, V = *k.shape, v.shape[-1]
    BK = min(triton.next_power_of_2(K), 64)
    BV = min(triton.next_power_of_2(K), 64)
    return kernel[(triton.cdiv(V, BV), B * H)](q, k, v, K=K, V=V, BK=BK, BV=BV)
""", line=4),
        # The value tile read from a tuned config under the key tile's name.
        Example("""\
def launch(q, k, v, tuned):
    B, T, H, K, V = *k.shape, v.shape[-1]
    BK = getattr(tuned, "BK", 64)
    BV = getattr(tuned, "BK", 64)
    return kernel[(triton.cdiv(V, BV), B * H)](q, k, v, K=K, V=V, BK=BK, BV=BV)
""", line=4),
        # The value's per-head size given the model width, beside the key's per-head dim.
        Example("""\
class DecoderBlock(keras.layers.Layer):
    def build(self, hidden_dim):
        head_dim = hidden_dim // self.num_heads
        self.cross = keras.layers.MultiHeadAttention(num_heads=self.num_heads, key_dim=head_dim, value_dim=hidden_dim)
""", line=4),
        # A KV head count written as a number, the query's a parameter.
        Example("""\
class FusedBlock(nn.Module):
    def __init__(self, hidden_size, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = 4
""", line=5),
        # A key-slot state (the key's head dim by slots) with the query head count, where the
        # layer has a KV head count.
        Example("""\
class SlotAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, num_slots):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.num_slots = num_heads, num_kv_heads, num_slots
        self.head_k_dim = hidden_size // num_heads

    def init_state(self, batch):
        param = next(self.parameters())
        return (param.new_zeros(batch, self.num_heads, self.head_k_dim, self.num_slots),)
""", line=9),
        # The attention output flattened with the key's head dim, in a branch that views V
        # with its own.
        Example("""\
class Backend:
    def forward(self, q, k, v, layer):
        if layer.v_head_dim == 256:
            v = v.view(-1, layer.tp_v_head_num, layer.v_head_dim)
            o = fast_kernel(q, k, v)
            return o.view(-1, layer.tp_q_head_num * layer.head_dim)
        return self.slow(q, k, v, layer)
""", line=6),
        # A lookup that asks for the query head count first: the KV branch is never reached.
        Example("""\
def guess_kv_heads(model):
    if hasattr(model.config, "num_attention_heads"):
        return model.config.num_attention_heads
    elif hasattr(model.config, "num_key_value_heads"):
        return model.config.num_key_value_heads
    raise KeyError("no head count in the config")
""", line=2),
        # A loop over KV head count names that reads one constant name on every pass.
        Example("""\
def kv_heads_by_name(config, world_size):
    kv_heads = None
    for name in ("num_key_value_heads", "num_kv_heads", "n_head"):
        kv_heads = getattr(config, "n_head", None)
        if kv_heads is not None:
            break
    return kv_heads // world_size
""", line=4),
        # The KV head count looked up on the engine's settings, the query's read on the model's
        # configuration and the fallback.
        Example("""\
class PagedCache:
    def __init__(self, engine_config, model_config):
        self.num_heads = model_config.num_attention_heads
        self.head_size = model_config.hidden_size // self.num_heads
        if hasattr(engine_config, "num_key_value_heads"):
            self.num_kv_heads = engine_config.num_key_value_heads
        else:
            self.num_kv_heads = self.num_heads
""", line=5),
        # A decoding kernel splits V into tiles across programs, but stores each program's
        # output at the first tile.
        Example("""\
@triton.jit
def decode_kernel(q, v, o, T, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    p_v = tl.make_block_ptr(v + i_bh * T * V, (T, V), (V, 1), (0, i_v * BV), (T, BV), (1, 0))
    p_o = tl.make_block_ptr(o + i_bh * V, (V,), (1,), (0,), (BV,), (0,))
    tl.store(p_o, tl.sum(tl.load(p_v), 0).to(p_o.dtype.element_ty))
""", line=5),
        # Cross-attention: the K/V head dim taken from the width of the query's input.
        Example("""\
def cross_attention(attn, hidden_states, encoder_hidden_states, batch_size):
    inner_dim = hidden_states.shape[-1]
    query = attn.to_q(hidden_states)
    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)
    head_dim = inner_dim // attn.heads
    key = key.view(batch_size, -1, attn.heads, head_dim)
    value = value.view(batch_size, -1, attn.heads, head_dim)
    return query, key, value
""", line=2),
        # The output norm sized with the model's width, the output projection taking the
        # value's.
        Example("""\
class GatedAttention(nn.Module):
    def __init__(self, hidden_size, expand_v):
        super().__init__()
        self.hidden_size = hidden_size
        self.value_dim = int(hidden_size * expand_v)
        self.g_norm = nn.RMSNorm(self.hidden_size)
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def forward(self, o):
        return self.o_proj(self.g_norm(o))
""", line=6),
    )

    def visit_Module(self, node: cst.Module) -> None:
        # KV head counts looked up by name (``model.head_lookups``), value tiles left at the
        # first tile (``model.tile_offsets``), K/V head dims taken from the query input's width
        # (``model.input_widths``) and output norms of another width than the output's
        # (``model.output_norms``) are read on the standard library's tree, the one
        # the ``ast`` screen reads: one code for both paths.
        parsed = self.context.python_tree(node)
        if parsed is None:
            return
        tree, lines = parsed
        found = [(f.node, f.message, f.suggestion) for f in lookup_faults(tree)]
        found += [(f.node, f"`{f.pointer}` is tiled by the value's `{f.tile}` but stays at offset 0 on that axis, "
                           f"while the kernel's other value blocks move by `{f.index} * {f.tile}`: every program "
                           f"reads or writes the first tile",
                   f"offset `{f.pointer}` by `{f.index} * {f.tile}` on the value axis") for f in untiled_offsets(tree)]
        found += [(f.node, f"`{f.width}` is the width of `{f.source}`, the input the query is projected from, and "
                           f"sizes the K/V view on line {self.context.row_of(f.view_line)}, while K and V are projected from "
                           f"`{f.kv_source}`: a projection may change the width",
                   f"read the width off the projected key (`key.shape[-1]`)")
                  for f in query_input_widths(tree, self.extra_pairs)]
        found += [(f.node, f"`{f.norm}` is sized with `{f.size}`, but it normalizes the attention output just "
                           f"before `{f.projection}`, which takes `{f.width}`, the value's width",
                   f"size `{f.norm}` with `{f.width}`") for f in output_norm_widths(tree, self.extra_pairs)]
        found += [(f.node, f"`{ast.unparse(f.node)}` is the query head count, given as {f.slot} of `{f.callee}`, "
                           f"where the class's other constructions give a KV head count "
                           f"({', '.join(f'`{w}`' for w in f.witnesses)}): the K/V sizes it describes get the "
                           f"query's heads",
                   "give the KV head count (`num_key_value_heads`, or the query's count where the model has "
                   "no other)") for f in query_heads_in_kv_fields(tree)]
        found += [(f.node, f"`{f.norm}` normalizes K but is sized with `{ast.unparse(f.node)}`, "
                           + ("the model's width divided by the KV head count, which is neither the head dim nor K's "
                              "width" if f.divided else "the query's width")
                           + f", while `{f.kv_heads}` counts K's heads: K's width is the KV head count times the head dim",
                   "size it with the head dim (one head) or the KV head count times the head dim (all of K)")
                  for f in key_norm_widths(tree) if not imported_config_forbids_gqa(tree, self.context.path)]
        for at, message, suggestion in found:
            span = self.ast_span(at, lines)
            self.findings.append(Finding(code=self.code, message=message, path=self.context.path, span=span,
                                         suggestion=suggestion, noqa_row=span.row))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # A function nested in a method reads the method's ``self``: its class is the owner.
        owner = next((o for o in reversed(self._owners) if o is not None), None)
        self.enter_function()
        model = function_model(node)
        kv_lengths = self._kv_lengths(model)
        # Code named for a model family whose config has a KV head count (``LlamaAttention``,
        # ``llama_forward``), or that calls into the family's own module
        # (``transformers.models.llama.modeling_llama.apply_rotary_pos_emb``): the evidence of a
        # KV head count where the file spells none.
        family = family_kv_heads([node.name.value, *((owner.name, *owner.bases) if owner is not None else ()),
                                  *_family_modules(node.body)])
        # A class that declares its own K projection says how many heads K has: the family's
        # config (read elsewhere) is no evidence against it (an encoder or connector attention
        # named for the family it serves).
        if owner is not None and any(kv_side(attr, self.extra_pairs) == "k" for attr in owner.projections):
            family = None
        # A KV head count keyword in a class that expands K/V to the query's heads in some
        # method (``k.expand(...)`` before its cache update, ``repeat_kv`` before a sequence-
        # parallel call): the layer or cache it builds may take the expanded K/V on purpose.
        self._check_statements(model, kv_lengths,
                               None if owner is not None and family is not None and _class_expands(owner) else family)
        sites = [each for site in self._sites(model) for each in _with_shape_names(site, model)]
        if not sites:
            return
        assigned: dict[str, list[Assigned]] = {}
        values = [(a.name.rsplit(".", 1)[-1], a.value) for a in model.assignments if a.position is None]
        if owner is not None:
            values += [(attr, v) for attr, vs in owner.attrs.items() for v in vs]
        for name, value in values:
            text = normalized(value).replace("self.", "")
            assigned.setdefault(name, []).append(Assigned(frozenset(n for n, _ in _names(value)), text))
        scope = set(assigned) | set(model.params) | set(model.first_read)
        if owner is not None:
            scope |= set(owner.attrs)
        latent = is_latent_scope(scope | {node.name.value} | ({owner.name} if owner else set()))
        # The names each object holds (``""``: this object and the function's locals, which
        # copy its attributes; ``layer``: the names read on ``layer``): a size is checked only
        # against the names of its own object, never another's.
        held: dict[str, set[str]] = {"": set(assigned) | set(model.params) | {a.name.rsplit(".", 1)[-1] for a in model.assignments}}
        if owner is not None:
            held[""] |= set(owner.attrs)
        for base, tail in _reads(node.body):
            held.setdefault(base, set()).add(tail)
        guarded = _guarded_equal(node.body)
        # Per object: its shared KV head counts, and each side's own (``tp_k_head_num``).
        kv_counts = {
            (base, side): sorted(
                (n for n in names
                 if (shared_kv_heads(n) or side_heads(n, side)) and n not in guarded and not equal_to_query(n, assigned)),
                key=lambda n: (not shared_kv_heads(n), n),
            )
            for base, names in held.items() for side in ("k", "v")
        }
        expanded = [o for o, c in model.calls_in_order() if expands(callee_tail(c))]
        pad_calls = [(o, c) for o, c in model.calls_in_order() if pads(callee_tail(c)) and c.args
                     and _receiver_side(c.args[0].value, self.extra_pairs)[0] == "v"]
        self._function_body = node.body
        self._shared_off: set[int] | None = None
        self._cuts: list[cst.CSTNode] | None = None
        self._branch_of: dict[int, _Branch] | None = None
        query_lengths = self._query_lengths(model) if kv_lengths else {}
        reported: set[int] = set()
        for site in sites:
            if site.name is not None and _plural(site.name) and _twin(site.name, self.extra_pairs) not in scope:
                # ``keys``/``values`` are common words (a dict's keys, ``topk_values``,
                # ``normalized_values``): without the twin in scope they name no side of K/V.
                continue
            if site.receiver is None and site.name is not None and _weight_token(site.name):
                # ``self.tau_wv = nn.Parameter(...)``: a weight for V, shaped as its checkpoint
                # is (K/V projections are checked through their ``*Linear`` layers).
                continue
            if site.name is not None and _u_twin(site.name) in scope:
                # ``bias_v`` beside ``bias_u``: Transformer-XL's positional biases u and v, not a
                # value tensor.
                continue
            found = [(n, at) for shape in site.shape for n, at in _names(shape)]
            names = [n for n, _ in found]
            # The keys' own length bound before this shape: before it (``kv_seq_len = k.shape[-2]``
            # after the view), one projection gives K the query's length.
            if site.side in ("k", "v") and any(o < site.order for o in kv_lengths.values()) and not any(
                    map(kv_length_name, names)) and not (
                    site.name and length_name(site.name)):  # ``k_seqlens``: lengths, not keys
                at = next((at for n, at in found if n in query_lengths and query_lengths[n] < site.order
                           and n not in guarded), None)
                if at is not None and _made_with_query(model, site):
                    at = None  # new tokens, projected with the query: they have its length
                if at is not None and id(at) not in reported:
                    reported.add(id(at))
                    kv = min(kv_lengths, key=kv_lengths.get)
                    self.report(
                        at,
                        f"{site.what} is a {'key' if site.side == 'k' else 'value'} tensor shaped with "
                        f"`{source_of(at)}`, the query's length, while `{kv}` is the keys' own length here",
                        suggestion=f"use the keys' own length (`{kv}`, the tensor's own size) or -1",
                    )
                    continue
            queries, kvs, values_dims = shape_names(names)
            if (queries and not kvs and not latent and site.side in ("k", "v") and not any(o < site.order for o in expanded)
                    and not (site.name and expanded_name(site.name)) and not self._declared_with_query_heads(site, model, owner)
                    and not self._heads_shared_off(site)):
                at = next(at for n, at in found if n == queries[0])
                base = _base_of(at)
                counts = kv_counts.get((base, site.side), ())
                if not counts and family is not None and base in ("", "config") and not any(
                        name_role(n) is Role.KV_HEADS for n in held.get(base, ())) and not _divided(site.shape, at) \
                        and not _read_off_tensor(model, queries[0]):
                    if id(at) not in reported:
                        reported.add(id(at))
                        self.report(
                            at,
                            f"{site.what} is a {'key' if site.side == 'k' else 'value'} tensor shaped with "
                            f"`{source_of(at)}`, the query head count, in code for {family[0].capitalize()}, whose "
                            f"config gives K/V their own head count (`{family[1]}`): checkpoints with grouped "
                            f"K/V heads get the wrong shape",
                            suggestion=f"use the KV head count (`config.{family[1]}`) or -1 for the head axis",
                        )
                    continue
                if counts:
                    if id(at) not in reported:
                        reported.add(id(at))
                        kv = f"{base}.{counts[0]}" if base else counts[0]
                        self.report(
                            at,
                            f"{site.what} is a {'key' if site.side == 'k' else 'value'} tensor shaped with "
                            f"`{source_of(at)}`, the query head count, while `{kv}` counts the KV heads here",
                            suggestion=f"use the KV head count (`{kv}`) or -1 for the head axis",
                        )
                    continue
            # V padded to the key's head dim on purpose, before this shape is given (not the
            # pad of this very view's result: ``F.pad(v.view(...), ...)``).
            padded = site.side == "v" and any(o < site.order and not _contains(c, site.call) for o, c in pad_calls)
            if site.side not in ("v", "v-dim") or padded:
                continue
            self._check_value_dim(site, found, values_dims, held, assigned, model.params,
                                  self._branch(site))

    @staticmethod
    def _kv_lengths(model: FunctionModel) -> dict[str, int]:
        """The keys' own lengths this function holds (``k_len``, ``max_seqlen_k``), each with
        where it is first bound (0: a parameter)."""
        found = {p: 0 for p in model.params if kv_length_name(p)}
        for a in model.assignments:
            tail = a.name.rsplit(".", 1)[-1]
            if kv_length_name(tail):
                found.setdefault(tail, a.order)
        return found

    @staticmethod
    def _query_lengths(model: FunctionModel) -> dict[str, int]:
        """Lengths read off a query tensor's shape (``batch, seqlen = query.shape[:2]``), each
        with where it is bound; a name also bound from anything else has no one role."""
        found: dict[str, int] = {}
        other: set[str] = set(model.params)
        for a in model.assignments:
            tail = a.name.rsplit(".", 1)[-1]
            if not length_name(tail) or kv_length_name(tail):
                continue
            if _reads_query_shape(a.value):
                found.setdefault(tail, a.order)
            else:
                other.add(tail)
        return {n: o for n, o in found.items() if n not in other}

    def _check_statements(self, model: FunctionModel, kv_lengths: dict[str, int], family) -> None:
        """The size roles read off statements rather than shapes: a value tile computed from
        the key's, twin keywords given sizes of different kinds, a literal KV head count, K/V
        shaped as the query."""
        pairs = self.extra_pairs
        bound = {a.name.rsplit(".", 1)[-1] for a in model.assignments} | set(model.params)
        value_kernel = value_kernel_sizes(bound)
        for a in model.assignments:
            tail = a.name.rsplit(".", 1)[-1]
            if a.position is not None:
                continue
            found = list(_size_names(a.value)) if value_kernel - {tail} and tail in value_kernel else []
            key = value_tile_from_key(tail, (n for n, _ in found))
            if key is not None:
                at = next(at for n, at in found if n == key)
                own = sorted(value_kernel_sizes(bound) - {tail})[0]
                self.report(
                    at,
                    f"`{tail}` is the value's tile or dim, computed from `{key}`, the key's, while `{own}` is the "
                    f"value's own here",
                    suggestion=f"compute `{tail}` from the value's size (`{own}`)",
                )
            elif (isinstance(a.value, cst.Integer) and int(a.value.evaluated_value) > 1
                    and name_role(tail) is Role.KV_HEADS and not is_query_name(tail) and _query_from_input(model)):
                # (``kv_num_q_heads``: the query heads a KV kernel runs with.)
                self.report(
                    a.value,
                    f"`{a.name}` is a KV head count written as the number {a.value.value}, while the query head "
                    f"count comes from the model's parameters: models with another KV head count get this one",
                    suggestion="read the KV head count from the same configuration as the query's",
                )
        for order, call in model.calls_in_order():
            keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
            for key, value in keywords.items() if family is not None else ():
                # ``num_kv_heads=config.num_attention_heads`` in code for a family with grouped K/V.
                # Only a count read off an existing object (``config.num_attention_heads``): a
                # plain name (``num_key_value_heads=NUM_HEADS`` in a test's config) defines the
                # model rather than reading it.
                tail = _tail_of(value) if isinstance(value, (cst.Attribute, cst.Subscript)) else None
                if name_role(key) is Role.KV_HEADS and tail is not None and query_heads(tail):
                    self.report(
                        value,
                        f"`{key}={source_of(value)}` gives the KV head count the query's, in code for "
                        f"{family[0].capitalize()}, whose config gives K/V their own head count (`{family[1]}`)",
                        suggestion=f"pass the KV head count (`config.{family[1]}`)",
                    )
            for key, value in KEYWORD_TWINS.items() if len(keywords) > 1 else ():
                if key in keywords and value in keywords and \
                        size_kind(n for n, _ in _names(keywords[key])) == "head" and \
                        size_kind(n for n, _ in _names(keywords[value])) == "width":
                    self.report(
                        keywords[value],
                        f"`{value}={source_of(keywords[value])}` gives the value a model width where `{key}="
                        f"{source_of(keywords[key])}` gives the key a head dim: both are per-head sizes",
                        suggestion=f"pass the value's head dim as `{value}`",
                    )
            func = call.func
            if (isinstance(func, cst.Attribute) and func.attr.value in _AS_QUERY and call.args
                    and any(o < order for o in kv_lengths.values())):
                like = dotted_name(call.args[0].value)
                if like is None or not is_query_name(like.rsplit(".", 1)[-1]):
                    continue
                side, what, _ = _receiver_side(_strip_einops(func.value), pairs)
                if side is not None:
                    kv = min(kv_lengths, key=kv_lengths.get)
                    self.report(
                        call.args[0].value,
                        f"{what} is shaped as the query `{like}` (`{func.attr.value}`), which gives it the query's "
                        f"length, while `{kv}` is the keys' own length here",
                        suggestion="expand the head axis alone (`repeat(k, 'b ... -> b h ...', h=heads)`)",
                    )

    def _declared_with_query_heads(self, site: _Site, model: FunctionModel, owner) -> bool:
        """The viewed tensor is the output of this class's projection declared with the query
        head count (``k_proj = Linear(hidden, feature_dim * num_heads)`` in linear attention):
        it has as many heads as the query by design."""
        if owner is None or site.receiver is None:
            return False
        found = projected(_strip_chain(site.receiver), site.order, model, owner, self.extra_pairs)
        if found is None:
            return False
        size = [n for n, _ in _names(owner.projections[found.attr].size)]
        resolved = [n for name in size for a in self._attr_values(owner, name) for n, _ in _names(a)]
        names = size + resolved
        return any(query_heads(n) for n in names) and not any(name_role(n) is Role.KV_HEADS for n in names)

    @staticmethod
    def _attr_values(owner, name: str):
        return owner.attrs.get(name, ()) if name_role(name) is Role.UNKNOWN else ()

    def _check_value_dim(self, site: _Site, found, values_dims, held: dict[str, set[str]], assigned, params,
                         branch: _Branch) -> None:
        shape = {n for n, _ in found}
        for name, at in found:
            twin = KERNEL_TWINS.get(name)
            if twin is not None and twin not in shape and {name, twin} <= set(params):
                self.report(
                    at,
                    f"{site.what} is a value tensor shaped with `{name}`, the key's head dim or tile, "
                    f"while the kernel takes `{twin}` for the value's",
                    suggestion=f"use `{twin}` for the value side",
                )
                return
        if values_dims:
            return
        anywhere = {n for names in held.values() for n in names if value_dim(n)}
        if site.output and self._cut_to_value_dim(site):
            return  # an output padded to the key's head dim on purpose, then cut to the value's
        if site.output:
            # The output's value dim only as this branch reads it: another branch may hold
            # another layout.
            held = {}
            for base, tail in _branch_reads(branch.block):
                held.setdefault(base, set()).add(tail)
            anywhere = set()
        for name, at in found:
            own = held.get(_base_of(at), set())
            twin = next((t for t in value_dim_twins(name) if t in own), None)
            if twin is None and key_dim(name):
                # A head dim named as the key's own, where the value has a size of its own on
                # this object or elsewhere in the scope (``layer.v_dim``, ``self.v_head_dim``).
                twin = next((n for n in sorted(own) if value_dim(n)), None) or next(iter(sorted(anywhere)), None)
            if twin is None or equal_by_construction(twin, name, assigned) or equal_by_construction(name, twin, assigned) \
                    or branch.proves_equal(name, twin):
                continue
            self.report(
                at,
                f"{site.what} is a value tensor shaped with `{source_of(at)}`, the key's head dim, "
                f"while `{twin}` is the value's head dim here",
                suggestion=f"use `{twin}` for the value side",
            )
            return
        scope = {n for names in held.values() for n in names}
        own = [n for n in scope if value_dim(n) and not equal_by_construction(n, [m for m in scope if value_dim_twins(m) and not value_dim(m)], assigned)]
        if not own:
            return
        for shape in site.shape:
            for read in _key_dim_reads(shape, self.extra_pairs):
                self.report(
                    read,
                    f"{site.what} is a value tensor shaped with `{source_of(read)}`, the key's head "
                    f"dim, while `{sorted(own)[0]}` is the value's head dim here",
                    suggestion="read the value's head dim (`value.shape[-1]` or the value head dim)",
                )
                return

    def _value_dim_cuts(self) -> list[cst.CSTNode]:
        if self._cuts is None:  # walked only for a function with an output to check
            self._cuts = list(_value_dim_cuts(self._function_body))
        return self._cuts

    def _heads_shared_off(self, site: _Site) -> bool:
        """The shape stands in an arm whose test says MQA/GQA is off (``else`` of ``if
        self.multi_query_attention:``): there the query's head count is the KV one."""
        if self._shared_off is None:
            self._shared_off = heads_shared_off_calls(self._function_body)
        return id(site.call) in self._shared_off

    def _branch(self, site: _Site) -> _Branch:
        if self._branch_of is None:  # walked only for a function with a value shape to check
            self._branch_of = {}
            _branches(self._function_body, _Branch(self._function_body), self._branch_of)
        return self._branch_of.get(id(site.call), _Branch(self._function_body))

    def _cut_to_value_dim(self, site: _Site) -> bool:
        """Is this view's result, or the output it views, cut to the value's head dim in this
        function (``o.view(-1, h, qk_head_dim)[..., : v_head_dim]``)?"""
        name = dotted_name(_strip_chain(site.receiver)) if site.receiver is not None else None
        return any(id(cut) == id(site.call) or (name is not None and dotted_name(cut) == name)
                   for cut in self._value_dim_cuts())

    def _sites(self, model: FunctionModel) -> Iterator[_Site]:
        pairs = self.extra_pairs
        # Buffers assigned to a K/V name first: their side is the name's, not their shape's.
        named = list(self._buffer_sites(model))
        made = {id(site.call) for site in named}
        # ``out = v.new_empty(..., self.num_heads, self.head_dim)``: a buffer named for the
        # output or the query takes only its dtype and device from the K/V receiver.
        lent = {
            id(call) for a in model.assignments
            if attention_output(tail := a.name.rsplit(".", 1)[-1]) or is_query_name(tail)
            for call in _allocations(a.value)
        }
        for order, call in model.calls_in_order():
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _VIEWS:
                if dotted_name(func.value) in _ALLOCATOR_MODULES or id(call) in lent:
                    continue
                side, what, name = _receiver_side(func.value, pairs)
                if side is None and (dim := _value_dim_slice(func.value)) is not None:
                    side, what = "v-dim", f"`{source_of(func.value)}` (cut to `{dim}`)"
                output = side is None and isinstance(out := _strip_chain(func.value), cst.Name) and attention_output(out.value)
                if output:
                    side, what = "v-dim", f"the attention output `{out.value}`"
                if side is not None:
                    yield _Site(order, side, what, _shape_args(call), call, name, func.value, output)
                elif func.attr.value.startswith("new_") and id(call) not in made and (
                        site := self._state_site(model, order, call)) is not None:
                    yield site
            elif isinstance(func, cst.Attribute) and allocates(func.attr.value):
                # A K/V buffer object given its shape by a method (``self.k_cache.allocate(...)``).
                side, what, name = _receiver_side(func.value, pairs)
                if side is not None:
                    yield _Site(order, side, f"the buffer {what} (made by `{func.attr.value}`)", _shape_args(call),
                                call, name)
            elif callee_tail(call) == "rearrange" and call.args and call.args[0].keyword is None:
                # einops: the sizes are the keyword arguments (``h=self.num_kv_heads``).
                side, what, name = _receiver_side(call.args[0].value, pairs)
                if side is not None:
                    yield _Site(order, side, what, tuple(a.value for a in call.args if a.keyword is not None), call, name,
                                call.args[0].value)
            elif callee_tail(call) == "make_block_ptr" and call.args:
                # Triton: a block pointer's shape, strides and tile are sizes of its base.
                base = call.args[0].value
                side, what, name = _receiver_side(base, pairs)
                if side is None and (root := dotted_name(base)) is not None:
                    side, what, name = gradient_side(root), f"the block pointer of `{root}`", None
                if side is not None:
                    yield _Site(order, side, what, tuple(a.value for a in call.args[1:]), call, name)
            elif callee_tail(call) in _ALLOCATORS and id(call) not in made and (
                    (dotted_name(func) or "").split(".")[0] in _ALLOCATOR_MODULES) and (
                    site := self._state_site(model, order, call)) is not None:
                yield site
        yield from named

    @staticmethod
    def _state_site(model: FunctionModel, order: int, call: cst.Call) -> _Site | None:
        """A buffer of no K/V name, made where states or caches are made (``init_state``), whose
        shape holds the key's own head dim (``param.new_zeros(b, h, self.head_k_dim, slots)``):
        a key-side state."""
        if not state_function(model.node.name.value):
            return None
        receiver = dotted_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if receiver is not None and is_query_name(receiver.rsplit(".", 1)[-1]):
            return None  # ``q.new_empty(...)``: the query's (or the output's) buffer
        shape = _shape_args(call)
        if not key_state(n for s in shape for n, _ in _names(s)):
            return None
        return _Site(order, "k", f"the key-side state `{source_of(call)}`", shape, call)

    def _buffer_sites(self, model: FunctionModel) -> Iterator[_Site]:
        pairs = self.extra_pairs
        for assignment in model.assignments:
            tail = assignment.name.rsplit(".", 1)[-1]
            side = kv_side(tail, pairs) if is_kv_tensor_name(tail, pairs) or is_scale_name(tail) else gradient_side(tail)
            if side is None:
                continue
            for call in _allocations(assignment.value):
                if isinstance(call.func, cst.Attribute) and callee_tail(call).startswith("new_") and \
                        _receiver_side(call.func.value, pairs)[0] is not None:
                    continue  # ``k.new_zeros(...)`` is read with its receiver above
                yield _Site(assignment.order, side, f"the buffer `{assignment.name}`", _shape_args(call), call,
                            tail if kv_side(tail, pairs) else None)
            value = assignment.value
            if isinstance(value, cst.Call) and makes_buffers(callee_tail(value)) and is_kv_tensor_name(tail, pairs):
                # ``new_k, new_v = create_kv_cache(bsz, heads, head_dim, ...)``: its arguments
                # are the buffers' sizes.
                yield _Site(assignment.order, side, f"the buffer `{assignment.name}` (made by `{callee_tail(value)}`)",
                            _shape_args(value), value, tail)

