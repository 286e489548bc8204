"""KV202: K and V viewed or reshaped to different head counts in one scope."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from linter.model.mqa_branches import heads_shared_off_calls
from linter.model.names import is_query_name, kv_side, value_counterpart
from linter.model.pairs import dotted_name, normalized, source_of
from linter.rules.base import Example, Rule
from linter.model.sizes import Aliases, HeadsMismatch, describe, heads_mismatch
from linter.model.tensor_roots import tensor_root
from linter.plan.triggers import PAIRED, Trigger

_SHAPE_METHODS = frozenset({"view", "reshape"})
_REARRANGE = frozenset({"rearrange", "einops.rearrange"})


def _sequence(args: list[cst.Arg]) -> list[cst.BaseExpression] | None:
    """Shape arguments as a list: ``view(b, s, h, d)`` and ``reshape((b, s, h, d))`` alike."""
    if any(a.star or a.keyword is not None for a in args):
        return None
    if len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)):
        elements = args[0].value.elements
        if any(isinstance(e, cst.StarredElement) for e in elements):
            return None
        return [e.value for e in elements]
    return [a.value for a in args]


def view_parts(call: cst.Call) -> tuple[tuple, dict[str, cst.BaseExpression], cst.BaseExpression] | None:
    """(form, axis -> size, receiver) of a call read as a view: ``x.view(b, s, h, d)``,
    ``x.reshape((...))``, ``torch.reshape(x, ...)``, ``x.unflatten(dim, (...))``,
    ``einops.rearrange(x, pattern, h=...)``; None for anything else."""
    func = call.func
    args = list(call.args)
    tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    full = dotted_name(func)
    if tail is None:
        return None
    receiver: cst.BaseExpression
    if full in _REARRANGE:
        if len(args) < 2 or not isinstance(args[1].value, cst.SimpleString):
            return None
        receiver = args[0].value
        sizes = {a.keyword.value: a.value for a in args[2:] if a.keyword is not None}
        form: tuple = ("rearrange", normalized(args[1].value))
        if not sizes:
            return None
        return form, sizes, receiver
    if full in ("torch.reshape", "torch.unflatten"):
        if not args:
            return None
        receiver, args = args[0].value, args[1:]
    elif isinstance(func, cst.Attribute) and tail in (*_SHAPE_METHODS, "unflatten"):
        receiver = func.value
    else:
        return None
    if tail == "unflatten":
        if len(args) != 2:
            return None
        shape = _sequence(args[1:])
        form = ("unflatten", normalized(args[0].value), len(shape or ()))
        minimum = 2
    else:
        shape = _sequence(args)
        form = ("shape", len(shape or ()))
        minimum = 3
    if shape is None or len(shape) < minimum:
        return None
    return form, {str(i): size for i, size in enumerate(shape)}, receiver


def first_size_mismatch(
    k_sizes: dict[str, cst.BaseExpression], v_sizes: dict[str, cst.BaseExpression], aliases: Aliases
) -> tuple[str, HeadsMismatch] | None:
    """The first axis where a K and a V view name different head counts (an inferred ``-1``
    compares with nothing), and how they differ."""
    for axis, k_size in k_sizes.items():
        v_size = v_sizes.get(axis)
        if v_size is None or normalized(k_size) == "-1" or normalized(v_size) == "-1":
            continue
        found = heads_mismatch(k_size, v_size, resolve=aliases.resolve)
        if found is not None:
            return axis, found
    return None


@dataclass
class View:
    call: cst.Call
    ids: frozenset[str]
    # Views are comparable only with the same form: ("shape", rank), ("unflatten", dim, rank),
    # ("rearrange", pattern).
    form: tuple
    sizes: dict[str, cst.BaseExpression]


@dataclass
class _Scope:
    views: list[View] = field(default_factory=list)
    aliases: Aliases = field(default_factory=Aliases)
    # Calls in an arm whose test says MQA/GQA is off: there K/V have the query's heads.
    shared_off: set[int] = field(default_factory=set)


class KVViewHeadsMismatch(Rule):
    code = "KV202"
    name = "kv-view-heads-mismatch"
    summary = "K and V viewed or reshaped to different head counts in one scope"
    # A view, reshape, unflatten or rearrange call, of K and of V.
    trigger = Trigger(("view", "reshape", "unflatten", "rearrange"), PAIRED)
    what = (
        "Finds a function where the key and the value (`k`/`v`, `key_states`/`value_states`, "
        "`self.k_proj(x)`/`self.v_proj(x)`, paged `key_cache`/`value_cache`) are passed "
        "through `view`, `reshape`, `unflatten` or `einops.rearrange` with shapes of the same "
        "rank that name different head counts at the same axis: `num_kv_heads` against "
        "`num_heads`, MQA's `1` against `num_heads`, or two different integers. `-1` matches "
        "anything, head-dim factors are ignored (MLA's K and V head dims differ legitimately), "
        "an axis whose size cannot be classified keeps the rule silent, and a view in an arm whose "
        "test says multi-query or grouped-query attention is off (`else` of `if "
        "self.multi_query_attention:`, `if not use_gqa:`) is not compared: there the counts "
        "are equal."
    )
    why = (
        "K and V carry one head per KV head; every attention kernel reads both with one head "
        "count. Viewing V with the query head count either fails at run time (the element "
        "count does not divide) or, when it happens to divide, silently pairs each key head "
        "with a slice of the wrong value head."
    )
    bad = """\
def forward(self, hidden_states):
    b, s, _ = hidden_states.shape
    k = self.k_proj(hidden_states).view(b, s, self.num_key_value_heads, self.head_dim)
    v = self.v_proj(hidden_states).view(b, s, self.num_heads, self.head_dim)
"""
    good = """\
def forward(self, hidden_states):
    b, s, _ = hidden_states.shape
    k = self.k_proj(hidden_states).view(b, s, self.num_key_value_heads, self.head_dim)
    v = self.v_proj(hidden_states).view(b, s, self.num_key_value_heads, self.head_dim)
"""
    fix_text = (
        "No automatic fix: the rule cannot know which side holds the right head count. View "
        "K and V with the same KV head count (`num_key_value_heads`, or 1 for multi-query "
        "attention); repeat K and V to the query head count afterwards if the kernel needs it."
    )

    VALID = (
        Example(good),
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
        # MLA: the head dims differ, the head counts agree.
        Example("""\
def forward(self, kv):
    k = kv.view(-1, self.num_heads, self.qk_head_dim)
    v = kv.view(-1, self.num_heads, self.v_head_dim)
"""),
        Example("""\
def forward(self, k, v):
    k = k.view(b, s, -1, self.head_dim)
    v = v.view(b, s, self.num_heads, self.head_dim)
"""),
        Example("""\
def forward(self, k, v):
    k = k.view(b, s, self.num_kv_heads, d).transpose(1, 2)
    v = v.transpose(1, 2)
"""),
        # Linear attention (Gated DeltaNet, Kimi Delta Attention): Q/K heads and V heads differ by
        # design, [.., H, K] keys beside [.., HV, V] values.
        Example("""\
def forward_decode(self, q, k, v, b):
    num_heads, head_k_dim = q.shape[2], q.shape[3]
    num_v_heads, head_v_dim = v.shape[2], v.shape[3]
    query = q.view(b, 1, num_heads, head_k_dim)
    key = k.view(b, 1, num_heads, head_k_dim)
    value = v.view(b, 1, num_v_heads, head_v_dim)
"""),
        # A K-named view of the query's storage (a launch dummy) is no key.
        Example("""\
def decode_dummies(q, k, v, head_dim, tokens):
    k_pair = q.reshape(2, 1, 128, head_dim)
    v_pair = v.reshape(-1, 1, head_dim)[:tokens].reshape(-1, 1, 64, head_dim)
    return k_pair, v_pair
"""),
        Example("""\
def chunk_delta_rule(self, k, v, t):
    k = k.reshape(1, t, self.num_k_heads, self.head_k_dim)
    v = v.reshape(1, t, self.num_value_heads, self.head_v_dim)
"""),
        # Leading axes unpacked from the input's shape: the view's axes cannot be placed.
        Example("""\
class Attention(nn.Module):
    def forward(self, hidden_states, position_embeddings):
        # The leading axes read off the input: a starred shape the rule cannot place.
        k = self.k_proj(hidden_states).view(*hidden_states.shape[:-1], self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden_states).view(*hidden_states.shape[:-1], self.num_kv_heads, self.head_dim)
        return self.attn(self.q, k, v)
"""),
        # An inferred head count (-1) beside a literal one: -1 compares with nothing.
        Example("""\
class TinyAttention(nn.Module):
    # 8 heads of 64 on both sides; one view infers the head count, the other spells it out.
    def forward(self, x, bsz, seqlen):
        k = self.k_proj(x).view(bsz, seqlen, -1, 64)
        v = self.v_proj(x).view(bsz, seqlen, 8, 64)
        return F.scaled_dot_product_attention(self.q_proj(x), k, v)

    def decode(self, x, bsz):
        k = self.k_proj(x).view(bsz, 1, 8, 64)
        v = self.v_proj(x).view(bsz, 1, -1, 64)
        return F.scaled_dot_product_attention(self.q_proj(x), k, v)
"""),
    )
    INVALID = (
        Example(bad, line=3),
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
        # Linear attention with the head counts swapped: K viewed with the value's own count.
        Example("""\
def forward_decode(self, q, k, v, b):
    num_heads, num_v_heads = q.shape[2], v.shape[2]
    key = k.view(b, 1, num_v_heads, self.head_k_dim)
    value = v.view(b, 1, num_heads, self.head_v_dim)
""", line=3),
        Example("""\
def write(key_cache, value_cache, num_blocks, block_size, num_kv_heads, num_heads, head_size):
    key_cache = key_cache.view(num_blocks, block_size, num_kv_heads, head_size)
    value_cache = value_cache.view(num_blocks, block_size, num_heads, head_size)
""", line=2),
        # MQA: one K head, V reshaped per query head.
        Example("""\
def forward(self, k, v, b, s):
    k = k.reshape((b, s, 1, self.head_dim))
    v = v.reshape((b, s, self.n_heads, self.head_dim))
""", line=2),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._scopes: list[_Scope] = []
        # Per enclosing assignment: its side-named target and the calls of its method chain.
        self._targets: list[tuple[str | None, set[int]]] = []

    def visit_Module(self, node: cst.Module) -> None:
        self._scopes.append(_Scope(shared_off=heads_shared_off_calls(node)))

    def leave_Module(self, original_node: cst.Module) -> None:
        self._check(self._scopes.pop())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(_Scope(shared_off=heads_shared_off_calls(node.body)))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._check(self._scopes.pop())

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        if target is not None:
            self._scopes[-1].aliases.record(target, node.value)
        name = tensor_root(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        chain: set[int] = set()
        if name is not None and kv_side(name, self.extra_pairs):
            expr: cst.BaseExpression = node.value
            while isinstance(expr, cst.Call):
                chain.add(id(expr))
                if not isinstance(expr.func, cst.Attribute):
                    break
                expr = expr.func.value
        self._targets.append((name, chain))

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._targets.pop()

    def visit_Call(self, node: cst.Call) -> None:
        view = self._view(node)
        if view is not None and id(node) not in self._scopes[-1].shared_off:
            self._scopes[-1].views.append(view)

    def _view(self, call: cst.Call) -> View | None:
        parts = view_parts(call)
        if parts is None:
            return None
        form, sizes, receiver = parts
        ids = set()
        root = tensor_root(receiver)
        if root is not None and kv_side(root, self.extra_pairs):
            ids.add(root)
        target, chain = self._targets[-1] if self._targets else (None, set())
        if target is not None and id(call) in chain and not is_query_name(root):
            ids.add(target)
        if not ids:
            return None
        return View(call, frozenset(ids), form, sizes)

    def _check(self, scope: _Scope) -> None:
        views = scope.views
        reported: set[int] = set()  # one finding per mismatched V view, however many K views
        for k in views:
            partners = {value_counterpart(i, self.extra_pairs) for i in k.ids} - {None}
            if not partners or any(kv_side(i, self.extra_pairs) != "k" for i in k.ids):
                continue
            candidates = [v for v in views if v.form == k.form and v.ids & partners]
            if not candidates:
                continue
            verdicts = [(v, self._first_mismatch(k, v, scope.aliases)) for v in candidates]
            if any(found is None for _, found in verdicts):
                continue
            v, (axis, mismatch) = verdicts[0]
            if id(v) not in reported:
                reported.add(id(v))
                self._report(k, v, axis, mismatch)

    @staticmethod
    def _first_mismatch(k: View, v: View, aliases: Aliases) -> tuple[str, HeadsMismatch] | None:
        return first_size_mismatch(k.sizes, v.sizes, aliases)

    def _report(self, k: View, v: View, axis: str, mismatch: HeadsMismatch) -> None:
        k_size, v_size = source_of(k.sizes[axis]), source_of(v.sizes[axis])
        where = f"`{axis}=`" if k.form[0] == "rearrange" else f"axis {axis}"
        linear = mismatch.linear
        if linear and mismatch.left == "v":
            suggestion = f"view the key with its own (query/key) head count, not the value's `{k_size}`, at {where}"
        elif linear and mismatch.right == "k":
            suggestion = f"view the value with its own head count, not the key's `{v_size}`, at {where}"
        elif mismatch.left in ("kv", 1):
            suggestion = f"view the value with `{k_size}` at {where}, as the key is"
        elif mismatch.right in ("kv", 1):
            suggestion = f"view the key with `{v_size}` at {where}, as the value is"
        else:
            suggestion = f"view K and V with the same head count at {where}"
        rule = (
            "in linear attention K keeps the query/key head count and V its own"
            if linear else "K and V must have the same number of heads"
        )
        self.report(
            k.call,
            f"K is viewed with `{k_size}` ({describe(mismatch.left, linear)}) at {where} but V with "
            f"`{v_size}` ({describe(mismatch.right, linear)}): {rule}",
            suggestion=suggestion,
            related=[(v.call, f"V viewed with `{v_size}` at {where}")],
        )
