"""KV203: a fused QKV output cut into three equal parts where K and V have their own head count."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from linter.model.heads import equal_to_query
from linter.model.names import SAME_TENSOR_METHODS, Role, head_count_side, is_kv_head_count_name, kv_side, name_role
from linter.model.pairs import dotted_name, normalized, source_of
from linter.rules.base import Example, Rule
from linter.model.sizes import Aliases, factors, int_value
from linter.model.tensor_roots import tensor_root
from linter.plan.triggers import Trigger

_SPLITS = frozenset({"chunk", "tensor_split", "split"})
_SHAPE_METHODS = frozenset({"view", "reshape", "unflatten"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _argument(call_args: list[cst.Arg], index: int, keyword: str) -> cst.BaseExpression | None:
    positional = [a.value for a in call_args if a.keyword is None]
    for arg in call_args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return positional[index] if index < len(positional) else None


def _has_stacked_axis(expr: cst.BaseExpression) -> bool:
    """``x.view(b, s, 3, h, d)`` (anywhere in a method chain) gives Q, K and V their own axis."""
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
            continue
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        if dotted_name(func) in ("torch.stack", "stack"):
            return True
        if isinstance(func, cst.Attribute):
            if func.attr.value in _SHAPE_METHODS and any(_stacked_arg(a.value) for a in expr.args):
                return True
            expr = func.value
        else:
            return False


def _stacked_arg(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Tuple, cst.List)):
        return any(int_value(e.value) == 3 for e in value.elements)
    return int_value(value) == 3


def _unpacked_names(target: cst.BaseExpression | None) -> list[str] | None:
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    names = []
    for element in target.elements:
        value = element.value
        if isinstance(value, cst.Name):
            names.append(value.value)
        elif isinstance(value, cst.Attribute):
            names.append(value.attr.value)
        else:
            return None
    return names


def _names_qkv(name: str) -> bool:
    low = name.lower()
    return "qkv" in low or "query_key_value" in low


def _is_qkv(receiver_root: str | None, targets: list[str] | None) -> bool:
    if receiver_root is not None and _names_qkv(receiver_root):
        return True
    return (
        targets is not None
        and len(targets) == 3
        and kv_side(targets[1]) == "k"
        and kv_side(targets[2]) == "v"
    )


# Name parts of a weight or bias (``qkv_proj.weight``, ``in_proj_bias``, ``wq``, ``q_proj``).
_WEIGHT_PARTS = frozenset({"weight", "weights", "bias", "biases", "proj", "w", "wq", "wk", "wv", "wqkv"})


def _weight_named(name: str) -> bool:
    return not _WEIGHT_PARTS.isdisjoint(name.lower().split("_"))


def _is_weight(receiver: cst.BaseExpression, targets: list[str] | None) -> bool:
    """Is the split tensor a fused QKV weight or bias: a name in the receiver says so
    (``self.qkv_proj.weight``, ``loaded_weight``), or the three parts it is unpacked into do
    (``q_proj, k_proj, v_proj``, ``wq, wk, wv``)?"""
    if targets is not None and len(targets) == 3 and all(_weight_named(t) for t in targets[1:]):
        return True
    return any(_weight_named(name) for name in _receiver_names(receiver))


def _self_attr(expr: cst.BaseExpression) -> str | None:
    """``self.to_qkv`` -> ``to_qkv``."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


_OUT_WIDTH = ("out_features", "output_size", "out_dim", "out_channels")


def _three_equal_widths(call: cst.Call) -> bool:
    """``Linear(dim, dim * 3)`` or ``Linear(dim, out_features=3 * inner)``: three equal widths out."""
    width = next((a.value for a in call.args if a.keyword is not None and a.keyword.value in _OUT_WIDTH), None)
    if width is None:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        width = positional[1] if len(positional) > 1 else None
    return (
        isinstance(width, cst.BinaryOperation)
        and isinstance(width.operator, cst.Multiply)
        and 3 in (int_value(width.left), int_value(width.right))
    )


def _receiver_names(expr: cst.BaseExpression) -> list[str]:
    """The names along a receiver's chain of attributes, subscripts and shape-keeping calls
    (``self.qkv.weight.data[rank]`` -> data, weight, qkv, self); not its arguments or strings."""
    names = []
    while True:
        if isinstance(expr, cst.Name):
            return [*names, expr.value]
        if isinstance(expr, cst.Attribute):
            names.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and (
            expr.func.attr.value in SAME_TENSOR_METHODS
        ):
            expr = expr.func.value
        else:
            return names


# Flags that switch between MHA and MQA/GQA layouts (GPTBigCode's ``multi_query``).
_LAYOUT_FLAG = re.compile(r"multi_query|mqa|gqa", re.IGNORECASE)


def _switches_layout(test: cst.BaseExpression) -> bool:
    """Does a branch or assert test the KV head count (or a ``multi_query`` flag) for itself,
    not only as a tensor's expected shape?"""
    return any(is_kv_head_count_name(word) or _LAYOUT_FLAG.search(word) for word in _test_words(test))


# A read of a tensor's shape: ``k.shape[1]``, ``k.size(1)``.
_SHAPE_READ = re.compile(r"\.\s*(shape|size|dim|numel)\b")


def _test_words(test: cst.BaseExpression) -> list[str]:
    """The words of a test, less the comparisons that check a tensor's shape against the head
    counts (``k_cache.shape[1:] != (self.num_kv_heads, self.head_dim)``): they validate
    the input of a path that may well be GQA, not choose between MHA and GQA layouts."""
    text = source_of(test)
    checks = _ShapeChecks()
    test.visit(checks)
    for check in checks.found:
        text = text.replace(check, " ")
    return _IDENTIFIER.findall(text)


class _ShapeChecks(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[str] = []

    def visit_Comparison(self, node: cst.Comparison) -> None:
        sides = (node.left, *(c.comparator for c in node.comparisons))
        if any(isinstance(side, (cst.Tuple, cst.List)) or _SHAPE_READ.search(source_of(side)) for side in sides):
            self.found.append(source_of(node))


@dataclass
class _Candidate:
    call: cst.Call
    receiver: str
    # Split on dim 0: a fused weight or bias, not a projection's output.
    weight: bool = False
    # ``self.X`` layers the split tensor comes from (its output, or its weight's chain).
    layers: frozenset[str] = frozenset()


@dataclass
class _Owner:
    """A class (or the module): where a KV head count is declared and splits are collected."""

    # Every KV head count named here (first occurrence), outside keyword names.
    kv_heads: dict[str, cst.Name] = field(default_factory=dict)
    candidates: list[_Candidate] = field(default_factory=list)
    # Head-count names each assignment of a name reads (``self.num_kv_heads = max(1,
    # self.total_num_kv_heads // tp_size)`` reads ``total_num_kv_heads``), for proving a KV head
    # count equal to the query head count.
    assigned: dict[str, list[set[str]]] = field(default_factory=dict)
    # ``self.x = ...`` attributes: names a suggestion may use in any method.
    self_attrs: set[str] = field(default_factory=set)
    # Layers built three equal widths wide (``self.to_qkv = Linear(dim, dim * 3)``): Q, K and V
    # get one width each by construction, so equal thirds read them right.
    equal_layers: set[str] = field(default_factory=set)

    def record(self, targets: list[str], value: cst.BaseExpression) -> None:
        """``a = b = value``: each target reads the value's head counts and the other targets'."""
        heads = {w for w in _IDENTIFIER.findall(source_of(value)) if name_role(w) in _HEAD_ROLES}
        for target in targets:
            self.assigned.setdefault(target, []).append(heads | {t for t in targets if t != target})

    def equal_to_query(self) -> set[str]:
        """KV head counts that provably equal the query head count (no GQA): every assignment
        reads a query head count or another such name, and no other KV head count
        (``self.total_num_kv_heads = self.total_num_heads``)."""
        return equal_to_query(self.assigned)


_HEAD_ROLES = (Role.Q_HEADS, Role.KV_HEADS)


@dataclass
class _Function:
    candidates: list[_Candidate] = field(default_factory=list)
    stacked: dict[str, bool] = field(default_factory=dict)
    aliases: Aliases = field(default_factory=Aliases)
    # A branch or assert on the KV head count means the author handles GQA explicitly here.
    guarded: bool = False
    # ``qkv, _ = self.to_qkv(x)``: name -> the ``self`` layer whose output it is.
    made_by: dict[str, str] = field(default_factory=dict)


class GqaEqualQkvSplit(Rule):
    code = "KV203"
    name = "gqa-equal-qkv-split"
    summary = "Fused QKV output split into three equal parts although K/V have their own head count"
    # A chunk/split/tensor_split call, and a KV head count (its name has "head" or "group").
    trigger = Trigger(("chunk", "split"), ("head", "group"))
    what = (
        "Finds a fused QKV projection output cut into three equal parts "
        "(`qkv.chunk(3, dim=-1)`, `torch.chunk(qkv, 3, -1)`, `qkv.tensor_split(3, -1)`, "
        "`q, k, v = qkv.split(self.hidden_size, dim=-1)`, `qkv.split([h, h, h], -1)`) inside a "
        "class (or, outside classes, a module) that has a separate KV head count such as "
        "`num_key_value_heads`, `num_kv_heads`, `n_kv_heads` or `num_query_groups`; and a "
        "fused QKV weight or bias cut into equal thirds along its output features, dim 0 "
        "(`self.qkv_proj.weight.chunk(3, dim=0)`, `wq, wk, wv = loaded_weight.chunk(3)`), "
        "in such a class. A split on dim 0 counts only where a name along the split "
        "tensor's chain or the K and V parts it is unpacked into reads as a weight, a bias "
        "or a projection (`weight`, `bias`, `proj`, `wk`): an activation's dim 0 is its "
        "tokens. Silent "
        "when the function branches on or asserts the KV head count (or a `multi_query` "
        "flag), other than as a tensor's expected shape (`k_cache.shape[1] != "
        "self.num_kv_heads` validates a path, it does not pick a layout), when Q, K and V already sit on their own axis (`view(b, s, 3, h, d)`), and "
        "when the KV head count only appears as a keyword name (`total_num_kv_heads=num_heads`)."
    )
    why = (
        "With grouped-query or multi-query attention the fused output is "
        "`(num_heads + 2 * num_kv_heads) * head_dim` wide: Q is wider than K and V. Equal "
        "thirds put the tail of Q into K and part of K into V. `chunk(3)` itself never "
        "fails; the later view to heads does, or, when the sizes still divide, the model "
        "attends with the wrong slices."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_key_value_heads = config.num_key_value_heads

    def forward(self, x):
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
"""
    good = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_key_value_heads = config.num_key_value_heads

    def forward(self, x):
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
"""
    fix_text = (
        "No automatic fix: the Q and KV widths are not spelled in the split. Split by sizes, "
        "`qkv.split([num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], "
        "dim=-1)`, or, if the module is only ever plain multi-head attention, assert "
        "`num_kv_heads == num_heads` next to the split."
    )

    VALID = (
        Example(good),
        # The fused projection is built three equal widths wide (self-attention only; cross
        # attention has its own K/V projection): equal thirds read it right.
        Example("""\
class CrossOrSelfAttention(nn.Module):
    def __init__(self, dim, head_dim, context_dim=None):
        self.num_heads = dim // head_dim
        self.kv_heads = (context_dim or dim) // head_dim
        if context_dim is None:
            self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        else:
            self.to_q = nn.Linear(dim, dim, bias=False)
            self.to_kv = nn.Linear(context_dim, context_dim * 2, bias=False)

    def forward(self, x, context=None):
        if context is None:
            qkv, _ = self.to_qkv(x)
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            q = self.to_q(x)
            k, v = self.to_kv(context).chunk(2, dim=-1)
        return attend(q, k, v, self.num_heads, self.kv_heads)
"""),
        # The same, its weight cut on dim 0 when loading a checkpoint.
        Example("""\
class Block(nn.Module):
    def __init__(self, dim, num_kv_heads):
        self.num_kv_heads = num_kv_heads
        self.qkv = nn.Linear(dim, out_features=3 * dim)

    def load(self, state):
        wq, wk, wv = self.qkv.weight.chunk(3, dim=0)
"""),
        # Plain multi-head attention: no KV head count anywhere.
        Example("""\
class Attention(nn.Module):
    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
"""),
        # Q, K and V stacked on their own axis first.
        Example("""\
class Attention(nn.Module):
    num_kv_heads = 8

    def forward(self, x, b, s):
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.chunk(3, dim=2)
"""),
        Example("""\
class Attention(nn.Module):
    def __init__(self, num_kv_heads):
        self.num_kv_heads = num_kv_heads

    def forward(self, kv):
        k, v = kv.chunk(2, dim=-1)
"""),
        Example("""\
class Attention(nn.Module):
    def forward(self, qkv):
        if self.num_kv_heads == self.num_heads:
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
"""),
        # Dim 0 of an activation is its tokens: Q, K and V stacked there by a cat, not a
        # fused projection's features.
        Example("""\
class PackedAttention(nn.Module):
    def __init__(self, num_kv_heads):
        self.num_kv_heads = num_kv_heads

    def forward(self, q, k, v):
        qkv = torch.cat([q, k, v], dim=0)
        qkv = self.rotary(qkv)
        q, k, v = qkv.chunk(3, dim=0)
        return q, k, v
"""),
        # Stacked on axis 2 by a view, then cut to the last tokens: the thirds are Q, K, V.
        Example("""\
class PrefixAttention(nn.Module):
    def __init__(self, config):
        self.num_key_value_heads = config.num_key_value_heads

    def forward(self, x, b, s, n):
        q, k, v = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim)[:, -n:].chunk(3, dim=2)
        return q, k, v
"""),
        # The stacked shape given as one tuple.
        Example("""\
class ViTAttention(nn.Module):
    def __init__(self, config):
        self.num_key_value_heads = config.num_key_value_heads

    def forward(self, x, b, s):
        qkv = self.qkv(x).reshape((b, s, 3, self.num_heads, self.head_dim))
        q, k, v = qkv.chunk(3, dim=2)
        return q, k, v
"""),
        # A helper for plain multi-head attention: its KV head count is the query's.
        Example("""\
def encoder_attention(qkv, num_heads, head_dim):
    num_kv_heads = num_heads
    q, k, v = qkv.chunk(3, dim=-1)
    return q.unflatten(-1, (num_heads, head_dim)), k.unflatten(-1, (num_kv_heads, head_dim)), v
"""),
        # Head counts made equal by assignment: no GQA, so equal thirds are right.
        Example("""\
class EncoderAttention(nn.Module):
    def __init__(self, config, tp_size):
        self.total_num_heads = self.total_num_kv_heads = config.num_heads
        self.inner_dim = config.num_heads // tp_size * config.d_kv
        self.qkv_proj = QKVParallelLinear(config.d_model, config.d_kv, self.total_num_heads, self.total_num_kv_heads)

    def forward(self, x):
        qkv, _ = self.qkv_proj(x)
        q, k, v = qkv.split(self.inner_dim, dim=-1)
"""),
        Example("""\
class LegacyAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, tp_size):
        self.total_num_heads = num_heads
        self.total_num_kv_heads = self.total_num_heads
        self.num_kv_heads = max(1, self.total_num_kv_heads // tp_size)
        self.num_heads = self.num_kv_heads

    def forward(self, x):
        qkv, _ = self.W_pack(x)
        q, k, v = qkv.chunk(chunks=3, dim=-1)
"""),
        # The fused projection's per-shard scales viewed as three rows: one scale each for Q,
        # K and V, whatever the head counts; only chunk, split and tensor_split cut widths.
        Example("""\
class QKVFp8Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.num_kv_heads = num_kv_heads
        self.q_size = num_heads * head_dim
        self.kv_size = num_kv_heads * head_dim
        self.qkv_proj = QKVParallelLinear(hidden_size, head_dim, num_heads, num_kv_heads)

    def dequantized_weights(self):
        # Per-tensor FP8 checkpoints keep one weight scale per shard of the fused projection.
        q_scale, k_scale, v_scale = self.qkv_proj.weight_scale.view(3, 1)
        weight = self.qkv_proj.weight.to(torch.float32)
        q_w, k_w, v_w = weight.split([self.q_size, self.kv_size, self.kv_size], dim=0)
        return q_w * q_scale, k_w * k_scale, v_w * v_scale
"""),
    )
    INVALID = (
        Example(bad, line=7),
        # The parts handed straight to the attention call, never unpacked.
        Example("""\
class CoreAttention(nn.Module):
    def __init__(self, config):
        self.num_query_groups = config.num_query_groups

    def forward(self, hidden_states, mask):
        qkv = self.linear_qkv(hidden_states)
        return self.core_attention(*qkv.chunk(3, dim=-1), mask)
""", line=7),
        # A checkpoint loader: only the parts' names say they are weights.
        Example("""\
class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        self.num_key_value_heads = config.num_key_value_heads

    def load_weights(self, weights):
        for name, tensor in weights:
            if name.endswith("qkv.weight"):
                q_w, k_w, v_w = tensor.chunk(3, dim=0)
                self.stage(name, q_w, k_w, v_w)
""", line=8),
        # Only the fused tensor's own name says it is a weight.
        Example("""\
class GQAttention(nn.Module):
    def __init__(self, num_kv_heads):
        self.num_kv_heads = num_kv_heads

    def split_weight(self, qkv_weight):
        q, k, v = qkv_weight.chunk(3, dim=0)
        return q, k, v
""", line=6),
        # A fused fast path checks the cache's shape against the KV head count, then splits
        # the packed QKV into thirds all the same.
        Example("""\
class FusedRopeAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim

    def fused_forward(self, packed_qkv, k_cache):
        if k_cache.dim() != 3 or k_cache.shape[1:] != (self.num_kv_heads, self.head_dim):
            return None
        _, k, v = packed_qkv.chunk(3, dim=-1)
        return k, v
""", line=10),
        # A checkpoint's fused weight and bias cut into thirds on dim 0 (their output features).
        Example("""\
class Qwen2VisionBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_key_value_heads = config.num_key_value_heads
        self.qkv_proj = nn.Linear(config.hidden_size, self.qkv_width, bias=True)

    def load_fused(self, loaded_weight, loaded_bias):
        wq, wk, wv = loaded_weight.chunk(3)
        q_bias, k_bias, v_bias = torch.split(loaded_bias, self.head_dim * self.num_heads, dim=0)
        return (wq, wk, wv), (q_bias, k_bias, v_bias)
""", line=8),
        Example("""\
class GQAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads):
        super().__init__()
        self.num_kv_heads = num_kv_heads
        self.qkv_proj = nn.Linear(hidden_size, (num_heads + 2 * num_kv_heads) * 64)

    def unfuse(self):
        q_w, k_w, v_w = self.qkv_proj.weight.chunk(3, dim=0)
        return q_w, k_w, v_w
""", line=8),
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden_size, n_kv_heads):
        self.hidden_size = hidden_size
        self.n_kv_heads = n_kv_heads

    def forward(self, x):
        qkv = self.wqkv(x)
        query, key, value = qkv.split(self.hidden_size, dim=-1)
""", line=8),
        Example("""\
def attention(qkv, num_kv_heads):
    q, k, v = torch.tensor_split(qkv, 3, -1)
    return q, k, v
""", line=2),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._owners: list[_Owner] = []
        self._functions: list[_Function] = []
        self._targets: list[cst.BaseExpression | None] = []
        self._keywords: set[int] = set()

    def visit_Module(self, node: cst.Module) -> None:
        self._owners.append(_Owner())

    def leave_Module(self, original_node: cst.Module) -> None:
        self._settle(self._owners.pop())

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._owners.append(_Owner())

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._settle(self._owners.pop())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(_Function())

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        function = self._functions.pop()
        if not function.guarded:
            self._owners[-1].candidates.extend(function.candidates)

    def visit_Arg(self, node: cst.Arg) -> None:
        # ``QKVParallelLinear(..., total_num_kv_heads=num_heads)`` names the callee's parameter;
        # only the value passed says anything about this class.
        if node.keyword is not None:
            self._keywords.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        owner = self._owners[-1]
        if is_kv_head_count_name(node.value) and id(node) not in self._keywords:
            owner.kv_heads.setdefault(node.value, node)

    def visit_If(self, node: cst.If) -> None:
        self._guard(node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._guard(node.test)

    def _guard(self, test: cst.BaseExpression) -> None:
        if self._functions and _switches_layout(test):
            self._functions[-1].guarded = True

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        self._targets.append(target)
        names = [_target_name(t.target) for t in node.targets]
        owner = self._owners[-1]
        if all(names):
            owner.record(names, node.value)  # type: ignore[arg-type]
        owner.self_attrs.update(
            t.target.attr.value for t in node.targets
            if isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) == "self"
        )
        if self._functions and isinstance(target, cst.Name):
            self._functions[-1].stacked[target.value] = _has_stacked_axis(node.value)
            self._functions[-1].aliases.record(target, node.value)
        if isinstance(node.value, cst.Call):
            layer = _self_attr(node.value.func)
            first = target.elements[0].value if isinstance(target, (cst.Tuple, cst.List)) and target.elements else target
            if self._functions and layer and isinstance(first, cst.Name):
                self._functions[-1].made_by[first.value] = layer
            if isinstance(target, cst.Attribute) and _self_attr(target) and _three_equal_widths(node.value):
                owner.equal_layers.add(target.attr.value)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._targets.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else None
        if tail not in _SPLITS:
            return
        args = list(node.args)
        if dotted_name(func) in ("torch.chunk", "torch.tensor_split", "torch.split"):
            if not args or args[0].keyword is not None:
                return
            receiver, args = args[0].value, args[1:]
        else:
            receiver = func.value  # type: ignore[union-attr]
        if any(a.star for a in args):
            return
        first = _argument(args, 0, "split_size_or_sections" if tail == "split" else (
            "chunks" if tail == "chunk" else "indices_or_sections"))
        dim_arg = _argument(args, 1, "dim")
        dim = 0 if dim_arg is None else int_value(dim_arg)  # torch splits dim 0 by default
        if first is None or dim is None:
            return
        target = self._targets[-1] if self._targets else None
        targets = _unpacked_names(target)
        # An activation's dim 0 is its tokens (or Q, K and V already stacked there); a fused
        # weight or bias keeps its output features, Q then K then V, on dim 0.
        if dim == 0 and not _is_weight(receiver, targets):
            return
        # A weight is named by its layer: ``self.qkv_proj.weight``.
        chain = _receiver_names(receiver) if dim == 0 else []
        if not self._equal_thirds(tail, first, targets):
            return
        root = tensor_root(receiver)
        if not (_is_qkv(root, targets) or any(map(_names_qkv, chain))) or _has_stacked_axis(receiver):
            return
        function = self._functions[-1] if self._functions else None
        if function is not None and root is not None and function.stacked.get(root):
            return
        # A weight's root (``weight``) says less than its chain (``self.qkv_proj.weight``).
        shown = source_of(receiver) if dim == 0 or root is None else root
        made_by = function.made_by.get(root) if function is not None and root is not None else None
        layers = frozenset(chain) if dim == 0 else frozenset({made_by} if made_by else ())
        candidate = _Candidate(node, shown, weight=dim == 0, layers=layers)
        if function is None:
            self._owners[-1].candidates.append(candidate)
        else:
            function.candidates.append(candidate)

    def _equal_thirds(self, tail: str, first: cst.BaseExpression, targets: list[str] | None) -> bool:
        if tail != "split":
            return int_value(first) == 3
        if isinstance(first, cst.Name) and self._functions:
            # sizes = [q_size, kv_size, kv_size]; qkv.split(sizes, -1)
            first = self._functions[-1].aliases.resolve(first) or first
        if isinstance(first, (cst.List, cst.Tuple)):
            sizes = {normalized(e.value) for e in first.elements}
            return len(first.elements) == 3 and len(sizes) == 1
        if isinstance(first, cst.BinaryOperation) and isinstance(first.operator, cst.Multiply):
            # [head_dim] * 3 and 3 * [head_dim]
            sides = (first.left, first.right)
            return any(int_value(n) == 3 for n in sides) and any(
                isinstance(n, (cst.List, cst.Tuple)) and len(n.elements) == 1 for n in sides
            )
        # One int size for every part: three parts only when unpacked into three names, and
        # only when the size reads as a width (self.split_sizes may well be a list).
        return (
            targets is not None
            and len(targets) == 3
            and all(f.role is not Role.UNKNOWN or f.value is not None for f in factors(first))
        )

    def _settle(self, owner: _Owner) -> None:
        counts = [name for name in owner.kv_heads if name not in owner.equal_to_query()]
        if not counts:
            return
        heads = counts[0]
        for candidate in owner.candidates:
            if candidate.layers & owner.equal_layers:
                continue
            text = source_of(candidate.call)
            self.report(
                candidate.call,
                f"fused QKV {'weight' if candidate.weight else 'output'} `{candidate.receiver}` "
                f"is split into three equal parts by "
                f"`{text}`, but this code has a separate KV head count `{heads}`: when it is "
                "smaller than the query head count, equal thirds cut through Q, K and V",
                suggestion=_suggestion(owner, heads, "0" if candidate.weight else "-1"),
                related=[(owner.kv_heads[heads], f"KV head count `{heads}` used here")],
            )


# Names of the tensor-parallel world size: where they appear, declared head counts are global and
# a split needs the per-rank ones.
_TP_SIZE = re.compile(r"(^|_)tp(_|$)|tensor_parallel|world_size")


def _suggestion(owner: _Owner, heads: str, axis: str) -> str:
    """A split by sizes that names only what the class defines on ``self`` (in scope in every
    method), with per-rank sizes where the counts are divided across tensor-parallel ranks;
    ``<...>`` placeholders stand for what the class does not name."""
    attrs = owner.self_attrs
    if {"q_size", "kv_size"} <= attrs:
        return f"split by sizes: `.split([self.q_size, self.kv_size, self.kv_size], dim={axis})`"
    tp = any(_TP_SIZE.search(name) for name in attrs | set(owner.kv_heads) | set(owner.assigned))
    # Under tensor parallelism ``total_*`` counts are global; the split needs this rank's.
    usable = sorted(a for a in attrs if not (tp and a.startswith("total")))
    per_rank = " per rank" if tp else ""
    q = next((f"self.{a}" for a in usable if name_role(a) is Role.Q_HEADS), f"<query heads{per_rank}>")
    kv = next((f"self.{a}" for a in usable if name_role(a) is Role.KV_HEADS and not head_count_side(a)),
              f"<KV heads{per_rank}>")
    dim = next((f"self.{a}" for a in usable if a in ("head_dim", "head_size")), "<head dim>")
    return f"split by sizes: `.split([{q} * {dim}, {kv} * {dim}, {kv} * {dim}], dim={axis})`"


def _target_name(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute) and dotted_name(target.value) == "self":
        return target.attr.value
    return None
