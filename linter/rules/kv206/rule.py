"""KV206: the value viewed or allocated with the key's head dim while a value head dim exists."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.classes import ClassModel, OwnerTracking
from linter.model.flows import projected
from linter.model.functions import FunctionModel, function_model
from linter.model.twins import key_head_dim_twin
from linter.model.walk import children
from linter.model.names import is_kv_tensor_name, kv_side
from linter.model.pairs import callee_tail, dotted_name, source_of
from linter.rules.base import Example, Rule
from linter.plan.triggers import AnyCase, Trigger

_VIEWS = frozenset({"view", "reshape", "unflatten"})
# Calls that allocate a tensor from a shape given in their arguments.
_ALLOCATORS = frozenset({
    "empty", "zeros", "ones", "full", "randn", "rand", "new_empty", "new_zeros", "new_ones", "new_full",
})

# Keywords that carry the shape: ``torch.empty(size=...)``, ``reshape(shape=...)``,
# ``unflatten(dim, sizes=...)``.
_SHAPE_KEYWORDS = ("size", "shape", "sizes")


def _tails(node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode]]:
    if isinstance(node, cst.Name):
        yield node.value, node
        return
    if isinstance(node, cst.Attribute):
        yield node.attr.value, node
        return
    for child in children(node):
        yield from _tails(child)


def _calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    if isinstance(node, cst.Call):
        yield node
    for child in children(node):
        yield from _calls(child)


class ValueHeadDimFromKey(OwnerTracking, Rule):
    code = "KV206"
    # A head-dim name (``names.name_role``: dim, size, head, channels, rope, rotary, d_k) used
    # in a view or an allocation.
    trigger = Trigger(
        AnyCase("dim", "size", "head", "channels", "rope", "rotary", "d_k", "dk"),
        ("view", "reshape", "unflatten", "empty", "zeros", "ones", "full", "rand"),
    )
    name = "value-head-dim-from-key"
    summary = "Value viewed or allocated with the key's head dim while a value head dim exists"
    what = (
        "Finds the value side shaped with the key side's head dim where the value has its own: "
        "the output of a V projection viewed with `qk_head_dim`, `k_head_dim` or `head_k_dim`, "
        "or a V-side buffer (`v_cache`, `value_buffer`) allocated with `torch.empty`/`zeros`/... "
        "from a shape that names the key's head dim, while the class or function defines the "
        "value's twin (`v_head_dim`, `head_v_dim`) and the shape does not use it."
    )
    why = (
        "Key and value head dims differ in multi-head latent attention (DeepSeek's 192 vs 128), "
        "MiMo and linear attention. Code written for models where they are equal takes the key's "
        "head dim for both sides and breaks, or silently pads memory, exactly on the models whose "
        "config gives the value its own head dim."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, hidden, heads, qk_head_dim, v_head_dim):
        super().__init__()
        self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim
        self.v_proj = nn.Linear(hidden, heads * v_head_dim)

    def forward(self, x, b, s):
        return self.v_proj(x).view(b, s, self.heads, self.qk_head_dim)
"""
    good = bad.replace("self.heads, self.qk_head_dim)", "self.heads, self.v_head_dim)")
    fix_text = "Use the value's head dim (`v_head_dim`) for every value-side view and buffer."

    VALID = (
        Example(good),
        # K-only buffers may use the key's head dim.
        Example("""\
class Pool:
    def __init__(self, size, heads, k_head_dim, v_head_dim):
        self.k_buffer = torch.empty(size, heads, k_head_dim)
        self.v_buffer = torch.empty(size, heads, v_head_dim)
"""),
        # No value head dim defined: key and value share one.
        Example("""\
class Pool:
    def __init__(self, size, heads, qk_head_dim):
        self.k_buffer = torch.empty(size, heads, qk_head_dim)
        self.v_buffer = torch.empty(size, heads, qk_head_dim)
"""),
        # MLA's fused K/V output: the key's part and the value's are both named.
        Example("""\
class MLA(nn.Module):
    def __init__(self, rank, heads, qk_nope_head_dim, v_head_dim):
        super().__init__()
        self.heads, self.qk_nope_head_dim, self.v_head_dim = heads, qk_nope_head_dim, v_head_dim
        self.kv_b_proj = nn.Linear(rank, heads * (qk_nope_head_dim + v_head_dim))

    def forward(self, c, t):
        return self.kv_b_proj(c).view(t, self.heads, self.qk_nope_head_dim + self.v_head_dim)
"""),
        # The value padded up to the larger head dim for a kernel that takes one head size: the
        # value's own head dim is in the shape too.
        Example("""\
def pad_value(value, qk_head_dim, v_head_dim):
    value_padded = value.new_zeros(value.shape[0], value.shape[1], max(qk_head_dim, v_head_dim))
    value_padded[..., :v_head_dim] = value
    return value_padded
"""),
        # Per-channel scales of a value padded to the key's head dim for a quantised kernel:
        # the scale follows the padded width and is no value buffer of its own.
        Example("""\
def quantize_value_per_channel(value, qk_head_dim, v_head_dim):
    b, h, s, _ = value.shape
    v_padded = F.pad(value, (0, qk_head_dim - v_head_dim))
    v_fp8 = torch.empty_like(v_padded, dtype=torch.float8_e4m3fn)
    v_scale = torch.empty(b, h, qk_head_dim, dtype=torch.float32, device=value.device)
    quant_per_channel(v_padded, v_fp8, v_scale)
    return v_fp8, v_scale
"""),
        # One stacked buffer unpacked into both sides (V padded to the key's head dim): the
        # allocation is no value-side one of its own.
        Example("""\
def allocate_kv(size, heads, qk_head_dim, v_head_dim):
    k_cache, v_cache = torch.zeros(2, size, heads, qk_head_dim).unbind(0)
    return k_cache, v_cache[..., :v_head_dim]
"""),
    )
    INVALID = (
        Example(bad, line=8),
        Example("""\
class Pool:
    def __init__(self, layers, size, heads, head_k_dim, head_v_dim):
        self.k_buffer = [torch.zeros(size, heads, head_k_dim) for _ in range(layers)]
        self.v_buffer = [torch.zeros(size, heads, head_k_dim) for _ in range(layers)]
""", line=4),
        # unflatten's shape given by keyword.
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden, heads, qk_head_dim, v_head_dim):
        super().__init__()
        self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim
        self.v_proj = nn.Linear(hidden, heads * v_head_dim)

    def forward(self, x):
        return self.v_proj(x).unflatten(dim=-1, sizes=(self.heads, self.qk_head_dim))
""", line=8),
    )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = self.enter_function()
        model = function_model(node)
        if owner is not None:
            for order, call in model.calls_in_order():
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in _VIEWS:
                    found = projected(func.value, order, model, owner, self.extra_pairs)
                    if found is not None and kv_side(found.attr, self.extra_pairs) == "v":
                        self._check_shape(call, call.args, f"the output of `self.{found.attr}`", owner, model)
        for assignment in model.assignments:
            target = assignment.name.rsplit(".", 1)[-1]
            if assignment.position is not None or kv_side(target, self.extra_pairs) != "v":
                continue
            if not is_kv_tensor_name(target, self.extra_pairs):
                continue
            for call in _calls(assignment.value):
                if callee_tail(call) in _ALLOCATORS and (
                    dotted_name(call.func) or "").split(".")[0] in ("torch", "np", "jnp") or (
                        isinstance(call.func, cst.Attribute) and call.func.attr.value.startswith("new_")):
                    self._check_shape(call, call.args, f"`{assignment.name}`", owner, model)
                    break

    def _check_shape(self, call: cst.Call, args, what: str, owner: ClassModel | None, model: FunctionModel) -> None:
        used = {name for arg in args if arg.keyword is None or arg.keyword.value in _SHAPE_KEYWORDS
                for name, _ in _tails(arg.value)}
        for arg in args:
            if arg.keyword is not None and arg.keyword.value not in _SHAPE_KEYWORDS:
                continue  # dtype=, device=: not the shape
            for name, node in _tails(arg.value):
                twin = key_head_dim_twin(name)
                if twin is None or twin in used or not self._defined(twin, owner, model):
                    continue
                self.report(
                    node,
                    f"{what} is shaped with the key's head dim `{source_of(node)}` although the "
                    f"value's head dim `{twin}` is defined",
                    suggestion=f"use `{twin}` for the value side",
                )
                return

    @staticmethod
    def _defined(twin: str, owner: ClassModel | None, model: FunctionModel) -> bool:
        return (
            (owner is not None and owner.defines(twin)) or twin in model.params
            or any(a.name.rsplit(".", 1)[-1] == twin for a in model.assignments)
        )
