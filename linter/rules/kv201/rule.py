"""KV201: the K and V projections of one class declared with different head counts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from linter.model.classes import linear_layer, output_size
from linter.model.names import kv_side, value_counterpart
from linter.model.pairs import callee_tail, dotted_name, source_of
from linter.rules.base import Example, Rule
from linter.model.sizes import Aliases, describe, heads_mismatch
from linter.plan.triggers import PAIRED, Trigger


@dataclass
class _Declaration:
    attr: str
    call: cst.Call
    size: cst.BaseExpression
    block: cst.CSTNode
    aliases: Aliases


@dataclass
class _ClassFacts:
    attrs: dict[str, cst.BaseExpression | None] = field(default_factory=dict)
    declarations: list[_Declaration] = field(default_factory=list)
    # The sides (``"k"``, ``"v"``) some method repeats across heads: ``repeat(k, "... h d ->
    # ... (n h) d", n=heads)``, ``v.expand(...)``, ``repeat_kv(k, groups)``.
    repeated: set[str] = field(default_factory=set)


class KVProjHeadsMismatch(Rule):
    code = "KV201"
    name = "kv-proj-heads-mismatch"
    summary = "K and V projections of one class declared with different head counts"
    # K and V projections declared in a class by a ``*Linear`` constructor.
    trigger = Trigger(("class",), ("Linear",), PAIRED)
    what = (
        "Finds a class whose K projection (`k_proj`, `wk`, `to_k`, `key`) and V projection "
        "(`v_proj`, `wv`, `to_v`, `value`) are `Linear` layers (`nn.Linear`, "
        "`ColumnParallelLinear`, `ReplicatedLinear`, any `*Linear`) declared with output sizes "
        "that name different head counts, such as `num_key_value_heads * head_dim` against "
        "`num_heads * head_dim`, or `head_dim` (one MQA head) against `hidden_size`. Sizes are "
        "compared factor by factor after dropping head-dim factors, with simple aliases "
        "(`kv_out = self.num_kv_heads * self.head_dim`) resolved within the class."
    )
    why = (
        "K and V describe the same tokens for the same KV heads: every attention kernel reads "
        "them with one head count. A V projection built with the query head count produces a "
        "tensor that cannot be viewed to the KV head layout; grouped-query checkpoints then "
        "fail to load, or the model runs with silently mismatched heads when the sizes happen "
        "to divide. Different head *dims* (MLA's `qk_head_dim` vs `v_head_dim`), different "
        "input sizes (cross-attention `kdim`/`vdim`) and different `bias` are legitimate and "
        "not reported."
    )
    bad = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)
"""
    good = """\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
"""
    fix_text = (
        "No automatic fix: which side is wrong depends on the checkpoint. Declare both "
        "projections with the KV head count (`num_key_value_heads * head_dim`) for "
        "grouped-query or multi-query attention, or both with `num_heads * head_dim` for plain "
        "multi-head attention."
    )

    VALID = (
        Example(bad.replace("num_attention_heads", "num_key_value_heads")),
        # MLA: K and V differ only in head dim.
        Example("""\
class MLA(nn.Module):
    def __init__(self, dim, num_heads, qk_head_dim, v_head_dim):
        super().__init__()
        self.wk = nn.Linear(dim, num_heads * qk_head_dim)
        self.wv = nn.Linear(dim, num_heads * v_head_dim)
"""),
        # Cross-attention: only the input sizes differ; bias differs too.
        Example("""\
class CrossAttention(nn.Module):
    def __init__(self, embed_dim, kdim, vdim):
        super().__init__()
        self.k_proj = nn.Linear(kdim, embed_dim, bias=False)
        self.v_proj = nn.Linear(vdim, embed_dim)
"""),
        Example("""\
class FusedAttention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        self.q_proj = nn.Linear(hidden, num_heads * head_dim)
        self.kv_proj = nn.Linear(hidden, 2 * num_kv_heads * head_dim)
"""),
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden, num_kv_heads, head_dim):
        super().__init__()
        kv_out = num_kv_heads * head_dim
        self.k_proj = ColumnParallelLinear(hidden, kv_out, bias=False)
        self.v_proj = ColumnParallelLinear(input_size=hidden, output_size=self.num_kv_heads * head_dim)
"""),
        # Linear attention: value heads are their own count, by design.
        Example("""\
class GatedDeltaNet(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_k_heads, self.num_v_heads = config.linear_num_key_heads, config.linear_num_value_heads
        self.k_proj = nn.Linear(config.hidden_size, self.num_k_heads * config.head_k_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_v_heads * config.head_v_dim, bias=False)
"""),
        # Module constants, a layer bound to a local first, and one built from keyword arguments
        # whose size is unknown.
        Example("""\
NUM_KV_HEADS = 8
HEAD_DIM = 128


class Attention(nn.Module):
    def __init__(self, hidden_size, linear_kwargs):
        super().__init__()
        q_proj = nn.Linear(hidden_size, 4 * NUM_KV_HEADS * HEAD_DIM)
        self.q_proj = q_proj
        self.k_proj = nn.Linear(hidden_size, NUM_KV_HEADS * HEAD_DIM)
        self.v_proj = nn.Linear(**linear_kwargs)
"""),
        # One key head shared by every query head, repeated before the kernel; V keeps its heads.
        Example("""\
class SharedKeyAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.k_proj = nn.Linear(hidden_size, self.head_dim)
        self.v_proj = nn.Linear(hidden_size, hidden_size)

    def _shared_key(self, x):
        k = rearrange(self.k_proj(x), "b t (h d) -> b t h d", d=self.head_dim)
        return repeat(k, "b t h d -> b t (n h) d", n=self.num_heads)

    def forward(self, x):
        v = rearrange(self.v_proj(x), "b t (h d) -> b t h d", d=self.head_dim)
        return flash_attn_func(self.q(x), self._shared_key(x), v)
"""),
    )
    INVALID = (
        Example(bad, line=4),
        Example("""\
class Attention(nn.Module):
    def __init__(self, hidden, num_heads, num_kv_heads, head_dim):
        super().__init__()
        kv_out = num_kv_heads * head_dim
        self.wk = ColumnParallelLinear(hidden, kv_out, bias=False)
        self.wv = ColumnParallelLinear(input_size=hidden, output_size=hidden, bias=False)
""", line=5),
        # MQA: one K head, but V built for every query head.
        Example("""\
class MultiQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.head_dim = d_model // n_heads
        self.to_k = nn.Linear(d_model, self.head_dim)
        self.to_v = nn.Linear(d_model, d_model)
""", line=5),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._generated_from: str | None = None
        self._classes: list[_ClassFacts] = []
        self._aliases: list[Aliases] = []
        self._blocks: list[cst.CSTNode] = []

    def visit_Module(self, node: cst.Module) -> None:
        self._generated_from = generated_from(node)

    # Scopes: a class collects declarations; each function has its own local aliases.
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(_ClassFacts())
        self._aliases.append(Aliases(self._classes[-1].attrs))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._aliases.pop()
        self._check(self._classes.pop())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        attrs = self._classes[-1].attrs if self._classes else {}
        self._aliases.append(Aliases(attrs))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._aliases.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if self._classes:
            name = _repeated_name(node)
            side = None if name is None else kv_side(name, self.extra_pairs)
            if side is not None:
                self._classes[-1].repeated.add(side)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._assigned(node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assigned(node.target, node.value)

    def _assigned(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if not self._classes or not self._aliases:
            return
        aliases = self._aliases[-1]
        aliases.record(target, value)
        # ``None if shared_kv else nn.Linear(...)`` and ``weight_norm(nn.Linear(...))`` declare too.
        layer = linear_layer(value)
        if not isinstance(target, cst.Attribute) or layer is None:
            return
        size = output_size(layer)
        if size is None:
            return
        attr = target.attr.value
        if kv_side(attr, self.extra_pairs) is None:
            return
        self._classes[-1].declarations.append(
            _Declaration(attr, layer, size, self._blocks[-1] if self._blocks else layer, aliases)
        )

    def _check(self, facts: _ClassFacts) -> None:
        # One side alone repeated to another head count (a key shared by every head, repeated
        # before the kernel) is built with fewer heads on purpose.
        if len(facts.repeated) == 1:
            return
        decls = facts.declarations
        for k in decls:
            v_name = value_counterpart(k.attr, self.extra_pairs)
            if v_name is None:
                continue
            v_all = [d for d in decls if d.attr == v_name]
            same_block = [d for d in v_all if d.block is k.block]
            candidates = same_block or (v_all if len(v_all) == 1 else [])
            if not candidates:
                continue
            v = candidates[-1]
            resolve = _chain(k.aliases, v.aliases)
            mismatch = heads_mismatch(k.size, v.size, resolve=resolve, implicit_one=True)
            if mismatch is None:
                continue
            k_text, v_text = source_of(k.size), source_of(v.size)
            kv_text = None if mismatch.linear else (
                k_text if mismatch.left in ("kv", 1) else v_text if mismatch.right in ("kv", 1) else None
            )
            callee = dotted_name(k.call.func) or callee_tail(k.call)
            linear = mismatch.linear
            rule = (
                "in linear attention K keeps the query/key head count and V its own"
                if linear else "K and V must have the same number of heads"
            )
            self.report(
                k.call,
                f"K projection `{k.attr}` is declared with output size `{k_text}` "
                f"({describe(mismatch.left, linear)}) but V projection `{v.attr}` with `{v_text}` "
                f"({describe(mismatch.right, linear)}): {rule}"
                + ("" if self._generated_from is None else f" (generated from `{self._generated_from}`)"),
                suggestion=(
                    f"declare both `{k.attr}` and `{v.attr}` with output size `{kv_text}`"
                    if kv_text is not None
                    else f"declare both `{k.attr}` and `{v.attr}` ({callee}) with the same head count"
                ) + self._source_of_truth(),
                related=[(v.call, f"V projection `{v.attr}` declared with output size `{v_text}`")],
            )


    def _source_of_truth(self) -> str:
        if self._generated_from is None:
            return ""
        return (f"; this file is generated from `{self._generated_from}`: make the change there "
                "(or in the class it inherits the projection from), then regenerate")


# transformers' modular converter heads every file it writes with "This file was automatically
# generated from src/transformers/models/x/modular_x.py"; an edit to the generated file is lost.
_GENERATED = re.compile(r"generated from\s+(\S*modular_\w+\.py)", re.IGNORECASE)


def generated_from(module: cst.Module) -> str | None:
    """The ``modular_*.py`` file a generated ``modeling_*.py`` names in its header comment."""
    for line in module.header:
        if line.comment is not None:
            match = _GENERATED.search(line.comment.value)
            if match:
                return match.group(1)
    return None


_REPEATS = frozenset({"repeat", "repeat_interleave", "expand", "repeat_kv"})


def _repeated_name(call: cst.Call) -> str | None:
    """The plain name a call repeats across heads: ``k.expand(...)``, ``k.repeat_interleave(n,
    dim=2)``, ``repeat_kv(k, n)``, einops' ``repeat(k, pattern, n=h)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _REPEATS and isinstance(func.value, cst.Name) and func.value.value not in ("torch", "einops"):
        return func.value.value
    tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if tail in _REPEATS and call.args and call.args[0].keyword is None and isinstance(call.args[0].value, cst.Name):
        return call.args[0].value.value
    return None


def _chain(first: Aliases, second: Aliases):
    def resolve(node: cst.BaseExpression) -> cst.BaseExpression | None:
        found = first.resolve(node)
        return found if found is not None else second.resolve(node)

    return resolve
