"""KV204: K or V of cross-attention viewed with a shape built from the query's length."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.classes import OwnerTracking
from linter.model.flows import projected
from linter.model.functions import FunctionModel, function_model
from linter.model.walk import children
from linter.model.names import kv_side
from linter.rules.base import Example, Rule
from linter.model.sizes import int_value
from linter.plan.triggers import Trigger

_VIEWS = frozenset({"view", "reshape"})


def _names(node: cst.CSTNode) -> Iterator[str]:
    if isinstance(node, cst.Name):
        yield node.value
        return
    if isinstance(node, cst.Attribute):
        yield from _names(node.value)  # ``self.x`` names ``self``, never ``x``
        return
    for child in children(node):
        yield from _names(child)


def _length_sources(value: cst.CSTNode, position: int | None, width: int | None,
                    shaped: dict[str, frozenset[str]]) -> frozenset[str]:
    """The tensors whose token length ``value`` carries: ``x.shape[:-1]``, ``x.size(1)``,
    the second of ``b, s, h = x.shape``, or a name that already carries one (but not its
    first element: ``input_shape[0]`` is the batch)."""
    read = _shape_read(value)
    if read is not None:
        tensor, index = read
        return frozenset({tensor}) if _keeps_length(index, position, width) else frozenset()
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and value.value.value in shaped:
        return frozenset() if _first_only(value.slice) else shaped[value.value.value]
    if isinstance(value, cst.Name):
        return shaped.get(value.value, frozenset())
    found: frozenset[str] = frozenset()
    for child in children(value):
        found |= _length_sources(child, None, None, shaped)
    return found


def _shape_read(node: cst.CSTNode):
    """(``x``, index) for ``x.shape``, ``x.shape[...]``, ``x.size(...)``, ``x.size()[...]``;
    index is the subscript elements or the size() arguments (empty for the whole shape)."""
    if isinstance(node, cst.Subscript):
        inner = _shape_read(node.value)
        if inner is None or inner[1]:
            return None
        return inner[0], node.slice
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        tensor, index = node.func.value, node.args
    elif isinstance(node, cst.Attribute) and node.attr.value == "shape":
        tensor, index = node.value, ()
    else:
        return None
    return (tensor.value, index) if isinstance(tensor, cst.Name) else None


def _first_only(index) -> bool:
    return len(index) == 1 and isinstance(index[0].slice, cst.Index) and int_value(index[0].slice.value) == 0


def _keeps_length(index, position: int | None, width: int | None) -> bool:
    if not index:
        # The whole shape: unpacked as ``b, s, h``, only the middle one is the length.
        return position is None or (position == 1 and width == 3)
    if position is not None:
        return False  # ``b, p = x.shape[:2]``: which axes these are depends on the rank
    if len(index) != 1:
        return False
    element = index[0]
    inner = element.slice if isinstance(element, cst.SubscriptElement) else element
    if isinstance(inner, (cst.Index, cst.Arg)):
        # One axis: only axis 1 (``x.size(1)``, ``x.shape[1]``) is the token length.
        return int_value(inner.value) == 1
    return isinstance(inner, cst.Slice)  # ``shape[:-1]``, ``size()[:2]`` keep the token axis


class KVViewQueryLength(OwnerTracking, Rule):
    code = "KV204"
    # A class's ``*Linear`` projection viewed with a shape read off a tensor, where the states
    # may be an optional (``= None``) cross-attention input.
    trigger = Trigger(("class",), ("Linear",), ("view", "reshape"), ("shape", "size"), ("None",))
    name = "kv-view-query-length"
    summary = "Cross-attention K or V viewed with a shape built from the query's length"
    what = (
        "Finds a K or V projection (`self.k_proj(...)`, `self.key(...)`, a `*Linear` layer of "
        "the class) applied to states other than the query's input, where those states may be "
        "the encoder's (`current_states = encoder_hidden_states if is_cross_attention else "
        "hidden_states`, or a separate `key_value_states` parameter), then viewed or reshaped "
        "with a shape derived from the query input's length (`hidden_shape = (*hidden_states."
        "shape[:-1], -1, head_dim)`, or `tgt_len` unpacked from `hidden_states.size()`)."
    )
    why = (
        "The query and the encoder states have different lengths in cross-attention. Viewing K "
        "or V with the query's length either fails (`RuntimeError: shape ... is invalid`), or, "
        "when a `-1` takes the head axis, silently folds the length difference into the head "
        "count, so attention runs with the wrong heads or fails later in the matmul. Test "
        "suites that pass encoder states as long as the query never see it."
    )
    bad = """\
class SelfAttention(nn.Module):
    def __init__(self, hidden, head_dim):
        super().__init__()
        self.head_dim = head_dim
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, encoder_hidden_states=None):
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query = self.query(hidden_states).view(hidden_shape)
        current = encoder_hidden_states if encoder_hidden_states is not None else hidden_states
        key = self.key(current).view(hidden_shape)
        value = self.value(current).view(hidden_shape)
        return query, key, value
"""
    good = bad.replace(
        "        key = self.key(current).view(hidden_shape)\n",
        "        kv_shape = (*current.shape[:-1], -1, self.head_dim)\n"
        "        key = self.key(current).view(kv_shape)\n",
    ).replace("value = self.value(current).view(hidden_shape)", "value = self.value(current).view(kv_shape)")
    fix_text = (
        "Build the K/V shape from the states K and V are projected from "
        "(`kv_shape = (*current_states.shape[:-1], -1, head_dim)`), or use `-1` for their "
        "length and name the head count explicitly."
    )

    VALID = (
        Example(good),
        # Self-attention: K, V and Q all come from the states the shape was taken from.
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden, head_dim):
        super().__init__()
        self.head_dim = head_dim
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, position_embeddings=None):
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        keyed = hidden_states + position_embeddings if position_embeddings is not None else hidden_states
        k = self.k_proj(keyed).view(hidden_shape)
        v = self.v_proj(hidden_states).view(hidden_shape)
        return k, v
"""),
        # Only the batch comes from the query; the encoder's length is left to -1.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, key_value_states=None):
        bsz, tgt_len, _ = hidden_states.size()
        k = self.k_proj(key_value_states).view(bsz, -1, self.heads, self.head_dim)
        v = self.v_proj(key_value_states).view(bsz, -1, self.heads, self.head_dim)
        return k, v
"""),
        # Only the batch is read off the query's shape (by index), the length is left to -1.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, encoder_hidden_states=None):
        input_shape = hidden_states.shape[:-1]
        kv_shape = (input_shape[0], -1, self.heads, self.head_dim)
        current = encoder_hidden_states if encoder_hidden_states is not None else hidden_states
        return self.key(current).view(kv_shape), self.value(current).view(kv_shape)
"""),
        # The length is read off the key side, and the positional input has the key's length.
        Example("""\
class DetrCrossAttention(nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.key_content_proj = nn.Linear(hidden, hidden)
        self.key_pos_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, encoder_hidden_states=None, encoder_pos=None):
        key_content = self.key_content_proj(encoder_hidden_states)
        bsz, src_len, _ = key_content.shape
        key_pos = self.key_pos_proj(encoder_pos)
        return key_pos.view(bsz, src_len, self.heads, self.head_dim)
"""),
        # Only the batch taken from the query (BART's shape[:2]), a module-level helper, and
        # self-attention over a normed copy of the query's input.
        Example("""\
def split_heads(tensor, bsz, num_heads, head_dim):
    return tensor.view(bsz, -1, num_heads, head_dim).transpose(1, 2)


class DecoderAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.head_dim = embed_dim // num_heads
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.kv_norm = nn.LayerNorm(embed_dim)

    def forward(self, hidden_states, key_value_states=None):
        # The batch, not the length, is taken from the query side: K/V keep their own length.
        bsz, tgt_len = hidden_states.shape[:2]
        q = self.q_proj(hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim)
        if key_value_states is None:
            key_value_states = hidden_states
        k = self.k_proj(key_value_states).view(bsz, -1, self.num_heads, self.head_dim)
        v = self.v_proj(key_value_states).view(bsz, -1, self.num_heads, self.head_dim)
        return F.scaled_dot_product_attention(q, k, v)

    def self_attention(self, hidden_states):
        bsz, seq_len, _ = hidden_states.size()
        normed = self.kv_norm(hidden_states)
        k = self.k_proj(normed).view(bsz, seq_len, self.num_heads, self.head_dim)
        v = self.v_proj(normed).view(bsz, seq_len, self.num_heads, self.head_dim)
        return k, v
"""),
        # The encoder states cast to the query's dtype (a non-view call naming `q`) and viewed
        # with their own length left to -1; the output viewed back with the query's.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden, num_heads * head_dim)
        self.v_proj = nn.Linear(hidden, num_heads * head_dim)

    def forward(self, hidden_states, encoder_hidden_states=None):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
        k = self.k_proj(encoder_hidden_states).type_as(q).view(bsz, -1, self.num_heads, self.head_dim)
        v = self.v_proj(encoder_hidden_states).type_as(q).view(bsz, -1, self.num_heads, self.head_dim)
        out = eager_attention_forward(self, q, k, v)
        return out.reshape(bsz, q_len, -1)
"""),
        # The query's shape kept whole as `shape`; K and V read the encoder's own length
        # through an attribute chain (`encoder_hidden_states.shape[1]`) whose last name is no
        # local of that name.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden, num_heads * head_dim)
        self.v_proj = nn.Linear(hidden, num_heads * head_dim)

    def forward(self, hidden_states, encoder_hidden_states=None):
        shape = hidden_states.shape
        bsz = shape[0]
        q = self.q_proj(hidden_states).view(bsz, shape[1], self.num_heads, self.head_dim)
        k = self.k_proj(encoder_hidden_states).view(bsz, encoder_hidden_states.shape[1], self.num_heads, self.head_dim)
        v = self.v_proj(encoder_hidden_states).view(bsz, encoder_hidden_states.shape[1], self.num_heads, self.head_dim)
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
"""),
        # A forward written at module level and patched onto the class: no class owns it
        # here, so its `self` has no projections to read.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden, num_heads * head_dim)
        self.v_proj = nn.Linear(hidden, num_heads * head_dim)


def cross_attention_forward(self, hidden_states, encoder_hidden_states=None):
    bsz, tgt_len, _ = hidden_states.size()
    q = self.q_proj(hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim)
    k = self.k_proj(encoder_hidden_states).view(bsz, -1, self.num_heads, self.head_dim)
    v = self.v_proj(encoder_hidden_states).view(bsz, -1, self.num_heads, self.head_dim)
    return F.scaled_dot_product_attention(q, k, v)


CrossAttention.forward = cross_attention_forward
"""),
        # Keys projected per channel group in a comprehension: the projected states are bound
        # by it, not before the view, and are the query's own tokens.
        Example("""\
class GroupedKeyAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim, groups):
        super().__init__()
        self.num_heads, self.head_dim, self.groups = num_heads, head_dim, groups
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden // groups, num_heads * head_dim // groups)

    def forward(self, hidden_states, attention_mask=None):
        bsz, tgt_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim)
        keys = [self.k_proj(part).view(bsz, tgt_len, -1, self.head_dim)
                for part in hidden_states.chunk(self.groups, dim=-1)]
        return q, torch.cat(keys, dim=2)
"""),
    )
    INVALID = (
        Example(bad, line=13),
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, key_value_states=None):
        bsz, tgt_len, _ = hidden_states.size()
        current = hidden_states if key_value_states is None else key_value_states
        k = self.k_proj(current)
        k = k.view(bsz, tgt_len, self.heads, self.head_dim)
        v = self.v_proj(current).view(bsz, -1, self.heads, self.head_dim)
        return k, v
""", line=12),
        # The query's shape kept in a tuple (`(*input_shape, -1, d)`) and reused for the encoder
        # states: -1 then takes their length into the head axis.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden, num_heads * head_dim)
        self.v_proj = nn.Linear(hidden, num_heads * head_dim)

    def forward(self, hidden_states, encoder_hidden_states=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape)
        k = self.k_proj(encoder_hidden_states).view(hidden_shape)
        v = self.v_proj(encoder_hidden_states).view(hidden_shape)
        return q, k, v
""", line=13),
        # The query's length read as `size(1)`.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.k_proj = nn.Linear(hidden, num_heads * head_dim)
        self.v_proj = nn.Linear(hidden, num_heads * head_dim)

    def forward(self, hidden_states, encoder_hidden_states=None):
        bsz = hidden_states.size(0)
        tgt_len = hidden_states.size(1)
        k = self.k_proj(encoder_hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim)
        v = self.v_proj(encoder_hidden_states).view(bsz, -1, self.num_heads, self.head_dim)
        return k, v
""", line=12),
    )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = self.enter_function()
        if owner is None or not any(kv_side(a, self.extra_pairs) for a in owner.projections):
            return
        model = function_model(node)
        shaped = self._shaped(model)
        if not shaped:
            return
        for order, call in model.calls_in_order():
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in _VIEWS):
                continue
            found = projected(func.value, order, model, owner, self.extra_pairs)
            if found is None:
                continue
            projection, source = f"self.{found.attr}", found.states
            for name in {n for arg in call.args for n in _names(arg.value)}:
                lengths = shaped.get(name, frozenset())
                if lengths and source not in lengths and self._may_differ(source, lengths, order, model):
                    query = min(lengths)
                    self.report(
                        call,
                        f"`{projection}` of `{source}` is viewed with `{name}`, which carries the "
                        f"length of `{query}`: in cross-attention `{source}` has its own length",
                        suggestion=f"build the shape from `{source}.shape` (or leave its length to -1)",
                    )
                    break

    @staticmethod
    def _shaped(model: FunctionModel) -> dict[str, frozenset[str]]:
        shaped: dict[str, frozenset[str]] = {}
        widths: dict[int, int] = {}
        for a in model.assignments:
            if "." in a.name:
                continue
            width = None
            if a.position is not None:
                width = widths.setdefault(id(a.value), 1 + max(
                    (b.position for b in model.assignments if b.value is a.value and b.position is not None),
                    default=0,
                ))
            sources = _length_sources(a.value, a.position, width, shaped)
            if sources:
                shaped[a.name] = sources
        return shaped

    @staticmethod
    def _origins(name: str, order: int, model: FunctionModel, depth: int = 0) -> frozenset[str]:
        """The parameters ``name`` is computed from (itself, for a parameter)."""
        bound = model.binding_before(name, order)
        if bound is None:
            return frozenset({name}) if name in model.params else frozenset()
        if depth > 4:
            return frozenset()
        found: frozenset[str] = frozenset()
        for used in set(_names(bound.value)) - {"self"}:
            found |= KVViewQueryLength._origins(used, bound.order, model, depth + 1)
        return found

    def _may_differ(self, source: str, lengths: frozenset[str], order: int, model: FunctionModel) -> bool:
        """Is ``source`` the cross-attention input while the shape came from the query's: an
        optional parameter (``encoder_hidden_states=None``) the query does not come from, or a
        choice between such a parameter and the query's input (``enc if cross else hidden``)?"""
        if any(kv_side(n, self.extra_pairs) for n in lengths):
            return False  # the length was read off the key or value side itself
        query = frozenset().union(*(self._origins(n, order, model) for n in lengths))
        if source in model.params:
            return source in model.optional and source not in query
        bound = model.binding_before(source, order)
        if bound is None or not isinstance(bound.value, cst.IfExp):
            return False
        branches = [b.value for b in (bound.value.body, bound.value.orelse) if isinstance(b, cst.Name)]
        return len(branches) == 2 and any(b in query for b in branches) and any(
            b in model.optional and b not in query for b in branches
        )
