"""KV209 kv-view-heads-through-helper: K and V reshaped to different head counts, one of them by
a helper it is passed to (KV202 carried through a call)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from linter.model.functions import FunctionModel, function_model
from linter.model.hierarchy import function_at, import_sources
from linter.model.names import SAME_TENSOR_METHODS, SEE_THROUGH, kv_side, value_counterpart
from linter.model.pairs import dotted_name, source_of
from linter.rules.base import Example
from linter.rules.kv202.rule import (
    KVViewHeadsMismatch,
    View,
    _Scope,
    first_size_mismatch,
    view_parts,
)
from linter.model.sizes import Aliases, HeadsMismatch, describe
from linter.model.tensor_roots import tensor_root
from linter.plan.triggers import PAIRED, Trigger

_SHAPE_METHODS = frozenset({"view", "reshape"})


@dataclass(frozen=True)
class _Summary:
    """What a helper returns: its first parameter viewed with ``sizes`` (helper-scope
    expressions) in ``form``."""

    params: tuple[str, ...]  # the parameters a call's arguments bind, the tensor first
    defaults: dict[str, cst.BaseExpression]
    form: tuple
    sizes: dict[str, cst.BaseExpression]
    # Names read in ``sizes`` that mean something only inside the helper (its locals; every
    # free name of an imported helper): never resolved in the caller's scope.
    private: frozenset[str]
    locals: dict[str, cst.BaseExpression]  # single-assigned locals the sizes may be read through


@dataclass
class _View(View):
    helper: str | None = None  # the callee's text, for a view made by a helper


def _tail_sizes(form: tuple, sizes: dict[str, cst.BaseExpression]) -> dict[str, cst.BaseExpression] | None:
    """The sizes keyed by their axis counted from the end (``-1`` for the last): how a view
    of a known rank compares with one that keeps an unknown prefix (``x.size()[:-1] + (h, d)``)."""
    if form[0] == "suffix":
        return sizes
    if form[0] == "shape":
        rank = form[1]
        return {str(int(axis) - rank): size for axis, size in sizes.items()}
    if form[0] == "unflatten" and form[1] == "-1":
        rank = form[2]
        return {str(int(axis) - rank): size for axis, size in sizes.items()}
    return None


def _is_size_prefix(node: cst.BaseExpression) -> bool:
    """``x.size()[:-1]``, ``x.shape[:-2]``, ``tuple(x.shape[:-1])``: the leading axes of a
    tensor's own shape."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("tuple", "list") and len(node.args) == 1:
        node = node.args[0].value
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Slice):
        return False
    inner = node.value
    if isinstance(inner, cst.Call) and not inner.args:
        inner = inner.func
    return isinstance(inner, cst.Attribute) and inner.attr.value in ("shape", "size")


def suffix_parts(call: cst.Call, bound: Callable[[str], cst.BaseExpression | None] = lambda _: None):
    """(("suffix", n), axis from the end -> size, receiver) of a view that keeps a prefix of
    the tensor's own axes and names the last ``n >= 2``: ``x.view(*x.shape[:-1], h, d)``,
    ``x.view(x.size()[:-1] + (h, d))``, ``x.view(new_shape)`` with ``new_shape`` bound to
    such a sum (``bound`` looks the name up)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in _SHAPE_METHODS or not call.args:
        return None
    args = list(call.args)
    if any(a.keyword is not None for a in args):
        return None
    trailing: list[cst.BaseExpression] | None = None
    if args[0].star == "*" and all(not a.star for a in args[1:]):
        trailing = [a.value for a in args[1:]]
    elif len(args) == 1:
        shape = args[0].value
        if isinstance(shape, cst.Name):
            shape = bound(shape.value)
        if (
            isinstance(shape, cst.BinaryOperation) and isinstance(shape.operator, cst.Add)
            and _is_size_prefix(shape.left) and isinstance(shape.right, (cst.Tuple, cst.List))
            and not any(isinstance(e, cst.StarredElement) for e in shape.right.elements)
        ):
            trailing = [e.value for e in shape.right.elements]
    if trailing is None or len(trailing) < 2:
        return None
    n = len(trailing)
    return ("suffix", n), {str(i - n): size for i, size in enumerate(trailing)}, func.value


class _Substitute(cst.CSTTransformer):
    """A helper's size expression as the caller sees it: parameters replaced by the call's
    arguments, private names by placeholders that resolve to nothing."""

    def __init__(self, replace: Callable[[str], cst.BaseExpression | None]) -> None:
        super().__init__()
        self._replace = replace
        self._kept: set[int] = set()  # attribute and keyword names are no variables

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self._kept.add(id(node.attr))
        return True

    def visit_Arg(self, node: cst.Arg) -> bool:
        if node.keyword is not None:
            self._kept.add(id(node.keyword))
        return True

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if id(original_node) in self._kept:
            return updated_node
        new = self._replace(original_node.value)
        return updated_node if new is None else new


class KVViewHeadsThroughHelper(KVViewHeadsMismatch):
    code = "KV209"
    name = "kv-view-heads-through-helper"
    summary = "K and V reshaped to different head counts, one of them by a helper it is passed to"
    # A helper (``def``, or one imported) called with a K of a pair.
    trigger = Trigger(("def", "import"), PAIRED)
    what = (
        "KV202 through a call. A helper whose every `return` is its first parameter viewed into "
        "heads (`view`, `reshape`, `unflatten`, `einops.rearrange`, or a view keeping the "
        "tensor's leading axes, `x.view(*x.shape[:-1], n, d)` / `x.size()[:-1] + (n, d)`; "
        "transposes and `contiguous()` after it kept) makes, at each call, a view of the "
        "argument passed first (a K or V name, or a chain of names ending in one: `k`, "
        "`self.k_proj(x)`), with the helper's parameters replaced by the call's arguments and "
        "its own locals read through their single binding. Helpers are the module's functions, "
        "functions nested in the caller, methods of the caller's class called on `self`/`cls`, "
        "and functions imported from a module of the linted tree (a relative import, or an "
        "absolute one naming the file's own package). Reported when such a view of the key and a view of its value (made by a "
        "helper or inline) name different head counts at the same axis, as KV202 judges them: "
        "`num_kv_heads` against `num_heads`, MQA's `1` against `num_heads`, two integers. A "
        "helper that flattens its result back (a per-head norm), one that reads the head count "
        "off the tensor, and calls passing the same counts are silent."
    )
    why = (
        "The helper hides the head count from the line that reshapes the value: the key is "
        "split into the heads the call passes, the value into others. Attention kernels read "
        "both with one head count, so the call fails at run time or, when the element counts "
        "happen to divide, pairs each key head with a slice of the wrong value head."
    )
    bad = """\
def split_heads(x, heads, head_dim):
    b, s, _ = x.shape
    return x.view(b, s, heads, head_dim).transpose(1, 2)


class Attention(nn.Module):
    def forward(self, hidden):
        b, s, _ = hidden.shape
        k = split_heads(self.k_proj(hidden), self.num_heads, self.head_dim)
        v = self.v_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return self.attn(self.q(hidden), k, v)
"""
    good = """\
def split_heads(x, heads, head_dim):
    b, s, _ = x.shape
    return x.view(b, s, heads, head_dim).transpose(1, 2)


class Attention(nn.Module):
    def forward(self, hidden):
        b, s, _ = hidden.shape
        k = split_heads(self.k_proj(hidden), self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return self.attn(self.q(hidden), k, v)
"""
    fix_text = (
        "No automatic fix: the rule cannot know which side holds the right head count. Pass "
        "the key's helper the KV head count the value is viewed with (or view both through "
        "the helper with the same arguments)."
    )

    VALID = (
        Example(good),
        # The same helper, the same counts (transformers' classic ``_split_heads``).
        Example("""\
class Attention(nn.Module):
    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def forward(self, hidden):
        key = self._split_heads(self.k_proj(hidden), self.num_heads, self.head_dim)
        value = self._split_heads(self.v_proj(hidden), self.num_heads, self.head_dim)
        return self.attn(self.q_proj(hidden), key, value)
"""),
        # A per-head K norm: the helper views K and flattens it back; V stays flat.
        Example("""\
class Attention(nn.Module):
    def _norm_heads(self, x):
        shape = x.shape
        x = x.view(-1, self.num_heads, self.head_dim)
        x = self.k_norm(x)
        return x.view(shape)

    def forward(self, hidden):
        qkv = self.qkv_proj(hidden)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        k = self._norm_heads(k)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        return self.attn(q, k, v)
"""),
        # MLA: K and V share the head count, their head dims differ.
        Example("""\
def heads(x, n, d):
    return x.view(-1, n, d)


def mla_forward(self, kv):
    k = heads(kv[..., : self.qk_head_dim * self.num_heads], self.num_heads, self.qk_head_dim)
    v = heads(kv[..., self.qk_head_dim * self.num_heads:], self.num_heads, self.v_head_dim)
    return self.attn(self.q, k, v)
"""),
        # The head count read off the tensor inside the helper: no count is passed.
        Example("""\
def to_heads(x, head_dim):
    b, s, width = x.shape
    n = width // head_dim
    return x.view(b, s, n, head_dim)


def forward(self, q, k, v):
    k = to_heads(k, self.head_dim)
    v = v.view(q.shape[0], q.shape[1], self.num_kv_heads, self.head_dim)
    return sdpa(q, k, v)
"""),
        # GQA: K and V split alike, then both repeated to the query heads.
        Example("""\
def split(x, n):
    return x.unflatten(-1, (n, -1))


def forward(self, q, k, v):
    k = repeat_kv(split(k, self.num_kv_heads), self.num_kv_groups)
    v = repeat_kv(split(v, self.num_kv_heads), self.num_kv_groups)
    return sdpa(q, k, v)
"""),
        # A K-only indexer cache: the key is viewed for scoring, no value beside it.
        Example("""\
def per_head(x, n):
    return x.view(x.shape[0], n, -1)


def index_scores(self, q, k):
    k = per_head(k, self.index_n_heads)
    return torch.einsum("thd,shd->ths", q, k)
"""),
        # Linear attention: a key and a value each on its own head count.
        Example("""\
def heads(x, n, d):
    return x.view(x.shape[0], x.shape[1], n, d)


def gated_delta(self, k, v):
    k = heads(k, self.num_k_heads, self.head_k_dim)
    v = heads(v, self.num_v_heads, self.head_v_dim)
    return chunk_gated_delta_rule(k, v)
"""),
        # A module function that returns nothing (a shape check) called on a viewed key, and a
        # helper taking the head shape as *args.
        Example("""\
def _check_heads(tensor, num_heads):
    assert tensor.shape[-2] == num_heads, tensor.shape


def split_heads(tensor, *head_shape):
    return tensor.view(*tensor.shape[:-1], *head_shape)


class Attention(nn.Module):
    def forward(self, hidden):
        key = self.k_proj(hidden).view(*hidden.shape[:-1], self.num_kv_heads, self.head_dim)
        _check_heads(key, self.num_kv_heads)
        value = split_heads(self.v_proj(hidden), self.num_kv_heads, self.head_dim)
        return self.attn(self.q_proj(hidden), key, value)
"""),
        # A helper called with keywords only, and one building the shape from a prefix held
        # in a local (``lead + (n, d)``): the same counts on both sides.
        Example("""\
def split_heads(x, n, d):
    lead = x.shape[:-1]
    return x.view(lead + (n, d))


class Attention(nn.Module):
    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_kv_heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden, bsz):
        key = self._shape(tensor=self.k_proj(hidden), seq_len=-1, bsz=bsz)
        value = self._shape(tensor=self.v_proj(hidden), seq_len=-1, bsz=bsz)
        k_rot = split_heads(self.k_rot(hidden), self.num_kv_heads, self.rope_dim)
        return self.attn(self.q_proj(hidden), key, value, k_rot)
"""),
        # A helper returning a window of the cache rather than a view: nothing to compare.
        Example("""\
def last_tokens(cache, n):
    return cache[:, -n:]


def decode(self, q, k_cache, v_cache, n):
    k = last_tokens(k_cache, n)
    v = v_cache[:, -n:].view(v_cache.shape[0], n, self.num_kv_heads, self.head_dim)
    return sdpa(q, k, v)
"""),
        # A helper whose returns view into different counts (one K/V head for multi-query,
        # the passed count otherwise): which one a call gets is known only at run time.
        Example("""\
def split_kv_heads(x, num_heads, head_dim, multi_query):
    b, s, _ = x.shape
    if multi_query:
        return x.view(b, s, 1, head_dim)
    return x.view(b, s, num_heads, head_dim)


class Attention(nn.Module):
    def forward(self, hidden):
        b, s, _ = hidden.shape
        key = split_kv_heads(self.k_proj(hidden), self.num_heads, self.head_dim, self.multi_query)
        value = self.v_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim)
        return self.attn(self.q_proj(hidden), key, value)
"""),
        # Multi-query through a helper whose head count defaults to one, the query scaled
        # before it is split (no K/V name to follow), and a method taking only ``self``.
        Example("""\
def split_heads(x, head_dim, num_heads=1):
    return x.view(x.shape[0], x.shape[1], num_heads, head_dim).transpose(1, 2)


class MultiQueryAttention(nn.Module):
    def _softmax_scale(self):
        return self.head_dim**-0.5

    def forward(self, hidden):
        b, s, _ = hidden.shape
        query = split_heads(self.q_proj(hidden) * self.q_gain, self.head_dim, self.num_heads)
        key = split_heads(self.k_proj(hidden), self.head_dim)
        value = self.v_proj(hidden).view(b, s, 1, self.head_dim).transpose(1, 2)
        return F.scaled_dot_product_attention(query, key, value, scale=self._softmax_scale())
"""),
        # A helper reading the counts off the config into locals named like the config's own
        # fields, and per-KV-head scales broadcast by a shape built from lists.
        Example("""\
def split_kv_heads(x, config):
    num_key_value_heads = config.num_key_value_heads
    head_dim = config.head_dim
    return x.view(x.shape[0], x.shape[1], num_key_value_heads, head_dim).transpose(1, 2)


class Attention(nn.Module):
    def forward(self, hidden):
        b, s, _ = hidden.shape
        key = split_kv_heads(self.k_proj(hidden), self.config)
        value = self.v_proj(hidden).view(b, s, self.config.num_key_value_heads, self.config.head_dim)
        key = key * self.k_scale.view([1, -1] + [1] * (key.dim() - 2))
        return self.attn(self.q_proj(hidden), key, value.transpose(1, 2))
"""),
        # Multi-query with literal sizes (71 query heads of 64, one K/V head), the batch and
        # sequence passed to the helper as a starred prefix: its positions are not read.
        Example("""\
def split_heads(x, batch, seq, num_heads, head_dim):
    return x.view(batch, seq, num_heads, head_dim).transpose(1, 2)


class FalconAttention(nn.Module):
    def forward(self, hidden):
        query = split_heads(self.q_proj(hidden), *hidden.shape[:2], 71, 64)
        key = split_heads(self.k_proj(hidden), *hidden.shape[:2], 1, 64)
        value = self.v_proj(hidden).view(*hidden.shape[:2], 1, 64).transpose(1, 2)
        return F.scaled_dot_product_attention(query, key, value)
"""),
        # The output allocated off the flat value (its dtype and token count) with a row per
        # query head: `new_empty` keeping the leading axes is no view of the value.
        Example("""\
def split_heads(x, n, d):
    return x.view(*x.shape[:-1], n, d)


class Attention(nn.Module):
    def forward(self, positions, hidden):
        q, k, v = self.qkv_proj(hidden).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = split_heads(q, self.num_heads, self.head_dim)
        k = split_heads(k, self.num_kv_heads, self.head_dim)
        q, k = self.rotary_emb(positions, q, k)
        out = v.new_empty(*v.shape[:-1], self.num_heads, self.head_dim)
        self.attn(q, k, v, out)
        return out
"""),
        # A KV store writer: the store's memory block hands out its buffer with a no-argument
        # `view()` (as numpy's `ndarray.view()` does), which reshapes nothing.
        Example("""\
def to_heads(x, n, d):
    return x.view(x.shape[0], n, d)


class KVStoreWriter:
    def put_layer(self, name, k, v):
        k = to_heads(k, self.num_kv_heads, self.head_dim)
        v = to_heads(v, self.num_kv_heads, self.head_dim)
        block = self.store.allocate(k.nbytes + v.nbytes)
        block.as_ref()[: k.nbytes] = k.view(torch.uint8).flatten()
        block.as_ref()[k.nbytes :] = v.view(torch.uint8).flatten()
        return self.store.put(name, block.view())
"""),
    )
    INVALID = (
        Example(bad, line=9),
        # Both through one helper, with different head counts.
        Example("""\
class Attention(nn.Module):
    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def forward(self, hidden):
        key = self._split_heads(self.k_proj(hidden), self.num_key_value_heads, self.head_dim)
        value = self._split_heads(self.v_proj(hidden), self.num_heads, self.head_dim)
        return self.attn(self.q_proj(hidden), key, value)
""", line=8),
        # A method helper on the query's head count, the value viewed inline on the KV one.
        Example("""\
class CrossAttention(nn.Module):
    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden, bsz):
        key_states = self._shape(self.k_proj(hidden), -1, bsz)
        value_states = self.v_proj(hidden).view(bsz, -1, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return self.attn(key_states, value_states)
""", line=6),
        # MQA: one K head passed, the value split per query head by a helper nested in the caller.
        Example("""\
def forward(self, k, v):
    def heads(x, n):
        return rearrange(x, "b s (h d) -> b h s d", h=n)

    k = heads(k, 1)
    v = heads(v, self.n_heads)
    return sdpa(self.q, k, v)
""", line=5),
        # A fused K/V projection: the key sliced off and viewed inline (known as a key by the
        # name it is assigned to), the value split by an ``unflatten`` helper on another count.
        Example("""\
def split_heads(x, num_heads, head_dim):
    return x.unflatten(-1, (num_heads, head_dim)).transpose(1, 2)


class Attention(nn.Module):
    def forward(self, hidden):
        b, s, _ = hidden.shape
        mixed_kv = self.kv_proj(hidden)
        key = mixed_kv[..., : self.kv_size].view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        value = mixed_kv[..., self.kv_size :]
        value = split_heads(value, self.num_kv_heads, self.head_dim)
        return self.attn(self.q_proj(hidden), key, value)
""", line=9),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._functions: dict[str, cst.FunctionDef] = {}
        self._classes: list[dict[str, cst.FunctionDef]] = []
        self._nested: list[dict[str, cst.FunctionDef]] = []
        self._summaries: dict[tuple[int, bool], _Summary | None] = {}
        # (helper, local) -> its placeholder: the same local of one helper reads the same at
        # every call, and never as a name of the caller.
        self._private: dict[tuple[int, str], cst.Name] = {}
        self._sources: dict[str, tuple[str, str]] | None = None

    def visit_Module(self, node: cst.Module) -> None:
        super().visit_Module(node)
        self._functions = _defs(node.body)
        self._module = node
        self._sources = None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(_defs(node.body.body if isinstance(node.body, cst.IndentedBlock) else ()))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self._nested.append(_defs(node.body.body if isinstance(node.body, cst.IndentedBlock) else ()))
        # A method body sees its class's methods through ``self``; a function nested in it too.
        self._classes.append(self._classes[-1] if self._classes else {})

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(original_node)
        self._nested.pop()
        self._classes.pop()

    # -- which calls are views --------------------------------------------------------------

    def _view(self, call: cst.Call) -> _View | None:
        parts = view_parts(call) or suffix_parts(call)
        helper = None
        if parts is None:
            found = self._through_helper(call)
            if found is None:
                return None
            parts, helper = found
        form, sizes, receiver = parts
        if helper is None and view_parts(call) is not None:
            base = super()._view(call)  # KV202's reading: the receiver, or the target assigned
            return None if base is None else _View(call, base.ids, form, sizes)
        root = tensor_root(receiver) if helper is None else first_root(receiver)
        if root is None or not kv_side(root, self.extra_pairs):
            return None
        return _View(call, frozenset({root}), form, sizes, helper)

    def _helper(self, call: cst.Call) -> tuple[cst.FunctionDef, bool, bool] | None:
        """(the helper, is it bound to ``self``/``cls``, is it from another module)."""
        func = call.func
        if isinstance(func, cst.Name):
            name = func.value
            for nested in reversed(self._nested):
                if name in nested:
                    return nested[name], False, False
            if name in self._functions:
                return self._functions[name], False, False
            if self._sources is None:
                # Read once per module, on the first call that may reach an imported helper.
                self._sources = import_sources(self._module, self.context.path, absolute=True)
            source = self._sources.get(name)
            if source is not None:
                fn = function_at(*source)
                return None if fn is None else (fn, False, True)
            return None
        if (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and func.value.value in ("self", "cls") and self._classes
        ):
            method = self._classes[-1].get(func.attr.value)
            if method is None:
                return None
            static = any(dotted_name(d.decorator) == "staticmethod" for d in method.decorators)
            return method, not static, False
        return None

    def _through_helper(self, call: cst.Call):
        found = self._helper(call)
        if found is None:
            return None
        fn, bound, imported = found
        key = (id(fn), bound)
        if key not in self._summaries:
            self._summaries[key] = _summarize(fn, bound, imported)
        summary = self._summaries[key]
        if summary is None or any(a.star for a in call.args):
            return None
        arguments: dict[str, cst.BaseExpression] = {}
        positional = [a.value for a in call.args if a.keyword is None]
        if not positional or len(positional) > len(summary.params):
            return None
        arguments.update(zip(summary.params, positional))
        for a in call.args:
            if a.keyword is not None:
                arguments[a.keyword.value] = a.value

        def replace(name: str, depth: int = 0) -> cst.BaseExpression | None:
            if name in arguments:
                return arguments[name]
            if name in summary.defaults:
                return summary.defaults[name]
            if name in summary.locals and depth < 3:
                return summary.locals[name].visit(_Substitute(lambda n: replace(n, depth + 1)))
            if name in summary.private or name in summary.locals:
                return self._private.setdefault((id(fn), name), cst.Name(f"_private{len(self._private)}"))
            return None

        # ``_Substitute`` only swaps names for expressions, so every size stays an expression.
        sizes = {axis: size.visit(_Substitute(replace)) for axis, size in summary.sizes.items()}
        return (summary.form, sizes, positional[0]), source_of(call.func)

    # -- comparing ---------------------------------------------------------------------------

    def _check(self, scope: _Scope) -> None:
        views = scope.views
        reported: set[int] = set()
        for k in views:
            # A view whose every id is K-side has a V partner for each of them.
            if any(kv_side(i, self.extra_pairs) != "k" for i in k.ids):
                continue
            partners = {value_counterpart(i, self.extra_pairs) for i in k.ids}
            candidates = [v for v in views if v.ids & partners and _comparable(k, v)]
            verdicts = [(v, _first_mismatch(k, v, scope.aliases)) for v in candidates]
            if any(found is None for _, found in verdicts):
                continue
            # Views made inline on both sides are KV202's.
            chosen = next(((v, found) for v, found in verdicts if k.helper or v.helper), None)
            if chosen is None:
                continue
            v, found = chosen
            if id(v) not in reported:
                reported.add(id(v))
                self._report_helper(k, v, *found)

    def _report_helper(self, k: _View, v: _View, axis: str, mismatch: HeadsMismatch,
                       k_size: str, v_size: str) -> None:
        where = f"`{axis}=`" if k.form[0] == "rearrange" and k.form == v.form else f"axis {axis}"
        k_how = f"through `{k.helper}(...)`" if k.helper else "inline"
        v_how = f"through `{v.helper}(...)`" if v.helper else "inline"
        linear = mismatch.linear
        rule = (
            "in linear attention K keeps the query/key head count and V its own"
            if linear else "K and V must have the same number of heads"
        )
        helper = k.helper or v.helper
        self.report(
            k.call,
            f"K is viewed {k_how} with `{k_size}` ({describe(mismatch.left, linear)}) at {where} "
            f"but V {v_how} with `{v_size}` ({describe(mismatch.right, linear)}): {rule}",
            suggestion=f"pass `{helper}` the same head count for K and V",
            related=[(v.call, f"V viewed with `{v_size}` at {where}")],
        )


def first_root(expr: cst.BaseExpression) -> str | None:
    """``tensor_root`` of a helper's first argument, when the root is a name or ends a chain of
    names (``k``, ``self.k_proj(x)``, ``kv.k_cache[i].float()``): what the text pre-filter
    finds right after a call's bracket."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Attribute):
            return expr.attr.value if dotted_name(expr.value) is not None else None
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            func = expr.func
            expr = func.value if isinstance(func, cst.Attribute) and func.attr.value in SAME_TENSOR_METHODS else func
        else:
            return None


def _comparable(k: _View, v: _View) -> bool:
    if k.form == v.form:
        return True
    return _tail_sizes(k.form, k.sizes) is not None and _tail_sizes(v.form, v.sizes) is not None and (
        k.form[0] == "suffix" or v.form[0] == "suffix" or k.form[0] != v.form[0]
    )


def _first_mismatch(k: _View, v: _View, aliases: Aliases) -> tuple[str, HeadsMismatch, str, str] | None:
    """(axis, mismatch, K's size, V's size as the caller would write them) at the first axis
    where K and V name different head counts; views of one form compare axis by axis, others
    from the end."""
    if k.form == v.form:
        k_sizes, v_sizes = k.sizes, v.sizes
    else:
        k_sizes, v_sizes = _tail_sizes(k.form, k.sizes) or {}, _tail_sizes(v.form, v.sizes) or {}
    found = first_size_mismatch(k_sizes, v_sizes, aliases)
    if found is None:
        return None
    axis, mismatch = found
    return axis, mismatch, source_of(k_sizes[axis]), source_of(v_sizes[axis])


def _defs(body) -> dict[str, cst.FunctionDef]:
    """The functions defined directly in ``body`` by name; a name defined twice keeps neither
    (which one a call reaches depends on order and control flow)."""
    found: dict[str, cst.FunctionDef | None] = {}
    for statement in body:
        if isinstance(statement, cst.FunctionDef):
            name = statement.name.value
            found[name] = None if name in found else statement
    return {name: fn for name, fn in found.items() if fn is not None}


def _summarize(fn: cst.FunctionDef, bound: bool, imported: bool) -> _Summary | None:
    """What ``fn`` returns when every return is its first parameter (after ``self``/``cls``
    for a bound method) viewed into heads, through one view call."""
    params = fn.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if bound:
        positional = positional[1:]
    if not positional or isinstance(params.star_arg, cst.Param):
        return None
    tensor = positional[0]
    model = function_model(fn)
    if not model.returns:
        return None
    assigned: dict[str, list[cst.BaseExpression]] = {}
    for a in model.assignments:
        assigned.setdefault(a.name, []).append(a.value if a.position is None else None)
    single = {n: values[0] for n, values in assigned.items() if len(values) == 1 and values[0] is not None}
    found = None
    for statement in model.returns:
        view = None if statement.value is None else _returned_view(statement.value, model, tensor, single)
        if view is None or (found is not None and view[0] is not found[0]):
            return None
        found = view
    _, form, sizes = found
    defaults = {
        p.name.value: p.default for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        if p.default is not None
    }
    names = positional + [p.name.value for p in params.kwonly_params]
    # Locals read off the tensor itself (``n = x.shape[2]``) stay private: the caller's own
    # names say nothing about them.
    locals_ = {n: value for n, value in single.items() if n not in names and "." not in n and tensor not in _names(value)}
    private = set(assigned) - set(locals_)
    if imported:
        read = set().union(*(_names(s) for s in sizes.values()))
        private |= read - set(names) - {"self", "cls"}
    return _Summary(tuple(names), defaults, form, sizes, frozenset(private - set(names)), locals_)


def _names(node: cst.CSTNode) -> set[str]:
    """Every variable (no attribute name) read in ``node``."""
    found: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(_Collect())
    return found


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` of ``x.transpose(1, 2).contiguous()``: steps that keep the heads where they are."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SEE_THROUGH:
        expr = expr.func.value
    return expr


_LATER = 1 << 60


def _returned_view(expr: cst.BaseExpression, model: FunctionModel, tensor: str, single: dict[str, cst.BaseExpression]):
    """(the view call, its form, its sizes) when ``expr`` is the parameter ``tensor`` viewed,
    directly or through names assigned before (``t = t.view(s); t = t.permute(...); return
    t``); None when the last view-like step is no such view (a flatten back, a call)."""
    order = _LATER
    for _ in range(8):
        expr = _strip(expr)
        if isinstance(expr, cst.Name):
            binding = model.binding_before(expr.value, order)
            if binding is None:
                return None  # the parameter itself, unviewed, or an unpacked name
            expr, order = binding.value, binding.order
            continue
        if not isinstance(expr, cst.Call):
            return None
        parts = view_parts(expr) or suffix_parts(expr, lambda name, before=order: _bound(model, name, before))
        if parts is None:
            return None
        form, sizes, receiver = parts
        if not _is_parameter(receiver, model, tensor, order):
            return None
        return expr, form, sizes
    return None


def _bound(model: FunctionModel, name: str, order: int) -> cst.BaseExpression | None:
    binding = model.binding_before(name, order)
    return None if binding is None else binding.value


def _is_parameter(expr: cst.BaseExpression, model: FunctionModel, tensor: str, order: int) -> bool:
    """Is ``expr`` the helper's tensor parameter as passed (through axis-keeping steps and
    names bound to them)?"""
    for _ in range(8):
        expr = _strip(expr)
        if not isinstance(expr, cst.Name):
            return False
        binding = model.binding_before(expr.value, order)
        if binding is None:
            return expr.value == tensor and not any(
                a.name == tensor and a.order < order for a in model.assignments
            )
        expr, order = binding.value, binding.order
    return False
