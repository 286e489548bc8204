"""KV205: a K or V projection declared with the KV head count, viewed with the query's."""

from __future__ import annotations

import libcst as cst

from linter.model.classes import ClassModel, OwnerTracking
from linter.model.flows import projected
from linter.model.functions import function_model
from linter.model.names import Role
from linter.model.pairs import source_of
from linter.rules.base import Example, Rule
from linter.model.sizes import factors
from linter.plan.triggers import AnyCase, Trigger

_VIEWS = frozenset({"view", "reshape"})
_KV_ROLES = (Role.KV_HEADS, Role.KV_WIDTH)
_Q_ROLES = (Role.Q_HEADS, Role.Q_WIDTH)


def _shape_elements(call: cst.Call) -> list[cst.BaseExpression]:
    """``view(b, s, h, d)`` and ``view((b, s, h, d))`` alike."""
    values = [a.value for a in call.args if not a.star]
    if len(values) == 1 and isinstance(values[0], (cst.Tuple, cst.List)):
        return [e.value for e in values[0].elements if not isinstance(e, cst.StarredElement)]
    return values


class KVViewQueryHeads(OwnerTracking, Rule):
    code = "KV205"
    # A class's ``*Linear`` projection viewed with a query head count (its name has "head").
    trigger = Trigger(("class",), ("Linear",), ("view", "reshape"), AnyCase("head"))
    name = "kv-view-query-heads"
    summary = "K or V projection declared with the KV head count but viewed with the query head count"
    what = (
        "Finds a class whose K or V projection (`k_proj`, `v_proj`, `wk`, `key`: a `*Linear` "
        "layer) is declared with an output size that names the KV head count "
        "(`num_key_value_heads * head_dim`, `kv_dim`), and a method that views or reshapes that "
        "projection's output with the query head count (`num_heads`, `num_attention_heads`) "
        "and no KV head count."
    )
    why = (
        "With grouped-query attention the K/V projection produces `num_kv_heads * head_dim` "
        "features per token. Viewing that with `num_heads` either fails, or, where a `-1` "
        "stands in another axis, folds heads into the token axis and attends over garbage. "
        "Models converted from multi-head code keep the old `num_heads` in the K/V view and work "
        "only for checkpoints where the two counts happen to be equal."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.k_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
        return k
"""
    good = bad.replace("view(bsz, q_len, self.num_heads,", "view(bsz, q_len, self.num_key_value_heads,")
    fix_text = (
        "View K and V with the KV head count (`num_key_value_heads`), or with `-1` for the head "
        "axis; repeat K/V to the query head count afterwards (`repeat_kv`) where the kernel "
        "needs it."
    )

    VALID = (
        Example(good),
        # After repeat_kv the K heads do match the query's.
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)

    def forward(self, x, b, s):
        k = self.k_proj(x)
        k = repeat_kv(k, self.num_heads // self.num_kv_heads)
        return k.view(b, s, self.num_heads, self.head_dim)
"""),
        # Linear attention with separate K and V head counts: both are KV-side.
        Example("""\
class GatedDeltaNet(nn.Module):
    def __init__(self, hidden, num_k_heads, num_v_heads, head_k_dim, head_v_dim):
        super().__init__()
        self.num_v_heads, self.head_v_dim = num_v_heads, head_v_dim
        self.v_proj = nn.Linear(hidden, num_v_heads * head_v_dim)

    def forward(self, x, b, s):
        return self.v_proj(x).view(b, s, self.num_v_heads, self.head_v_dim)
"""),
        # A KV head count that is the query's by construction (multi-head attention).
        Example("""\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = self.num_heads
        self.head_dim = config.head_dim
        self.k_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim)

    def forward(self, x, b, s):
        return self.k_proj(x).view(b, s, self.num_heads, self.head_dim)
"""),
        # A module-level helper, a key viewed with -1 heads, and K repeated to the query's heads
        # before its view (repeat_kv written inline).
        Example("""\
def shape_heads(x, bsz, seqlen, head_dim):
    return x.view(bsz, seqlen, -1, head_dim)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = ColumnParallelLinear(dim, n_heads * self.head_dim)
        self.wk = ColumnParallelLinear(dim, n_kv_heads * self.head_dim)

    def forward(self, x, bsz, seqlen):
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, -1, self.head_dim)
        # Each KV head repeated for its query group before the kernel.
        xk = xk.unsqueeze(3).expand(bsz, seqlen, self.n_kv_heads, self.n_rep, self.head_dim)
        return xq, xk.reshape(bsz, seqlen, self.n_heads, self.head_dim)
"""),
        # Multi-query attention: the single KV head copied across the query's heads (a repeat,
        # no view), then split as the query is.
        Example("""\
class MultiQueryAttention(nn.Module):
    def __init__(self, hidden, num_heads, head_dim):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, 1, head_dim
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * head_dim)

    def forward(self, x, b, s):
        k = self.k_proj(x)
        k = k.repeat(1, 1, self.num_heads)
        return k.view(b, s, self.num_heads, self.head_dim)
"""),
        # Grouped-query self-attention and multi-head cross-attention in one module: each
        # projection is judged by its own declared size.
        Example("""\
class DecoderBlockAttention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim)
        self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim)
        self.cross_k_proj = nn.Linear(hidden, num_heads * head_dim)
        self.cross_v_proj = nn.Linear(hidden, num_heads * head_dim)

    def forward(self, hidden_states, encoder_hidden_states, b, s, t):
        k = self.k_proj(hidden_states).view(b, s, self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden_states).view(b, s, self.num_kv_heads, self.head_dim)
        cross_k = self.cross_k_proj(encoder_hidden_states).view(b, t, self.num_heads, self.head_dim)
        cross_v = self.cross_v_proj(encoder_hidden_states).view(b, t, self.num_heads, self.head_dim)
        return k, v, cross_k, cross_v
"""),
    )
    INVALID = (
        Example(bad, line=11),
        Example("""\
class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wv = ColumnParallelLinear(dim, n_kv_heads * self.head_dim)

    def forward(self, x, bsz, seqlen):
        xv = self.wv(x)
        xv = xv.view(bsz, seqlen, self.n_heads, self.head_dim)
        return xv
""", line=9),
        # The shape passed as one tuple.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        value_states = self.v_proj(hidden_states).view((bsz, q_len, self.num_heads, self.head_dim))
        return value_states
""", line=10),
    )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = self.enter_function()
        if owner is None:
            return
        kv_sized = {attr for attr, p in owner.projections.items() if self._names_kv_heads(p.size, owner)}
        if not kv_sized:
            return
        model = function_model(node)
        for order, call in model.calls_in_order():
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in _VIEWS):
                continue
            found = projected(func.value, order, model, owner, self.extra_pairs)
            if found is None or found.attr not in kv_sized:
                continue
            roles = [[f.role for f in factors(e)] for e in _shape_elements(call)]
            if any(r in _KV_ROLES for rs in roles for r in rs):
                continue
            query = [e for e, rs in zip(_shape_elements(call), roles) if rs == [Role.Q_HEADS]]
            if not query:
                continue
            declared = owner.projections[found.attr]
            self.report(
                call,
                f"`self.{found.attr}` is declared with output size `{source_of(declared.size)}` "
                f"(KV heads) but its output is viewed with `{source_of(query[0])}`, the query head count",
                suggestion="view it with the KV head count, or with -1 for the head axis",
                related=[(declared.call, f"`self.{found.attr}` declared here")],
            )

    @staticmethod
    def _names_kv_heads(size: cst.BaseExpression, owner: ClassModel) -> bool:
        """The size names a KV head count or width that is not the query's in disguise
        (``self.num_key_value_heads = self.num_heads`` is multi-head attention)."""
        found = False
        for factor in factors(size):
            if factor.role in _Q_ROLES:
                return False
            if factor.role in _KV_ROLES:
                for value in owner.attrs.get(factor.key, ()):
                    if any(f.role in _Q_ROLES for f in factors(value)):
                        return False
                found = True
        return found
