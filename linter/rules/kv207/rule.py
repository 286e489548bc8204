"""KV207 inherited-proj-heads-mismatch: a subclass redeclares one K/V projection with a head
count that differs from the twin it inherits."""

from __future__ import annotations

import libcst as cst

from linter.model.hierarchy import (
    calls_parent_init,
    imported_classes,
    inherited_projection,
    module_classes,
    resolver,
)
from linter.model.names import key_counterpart, kv_side, value_counterpart
from linter.model.pairs import source_of
from linter.rules.base import Example, Rule
from linter.model.sizes import describe, heads_mismatch
from linter.plan.triggers import Trigger


class InheritedProjHeadsMismatch(Rule):
    code = "KV207"
    # A class redeclaring a ``*Linear`` projection after calling its parent's ``__init__``.
    trigger = Trigger(("class",), ("Linear",), ("__init__",))
    name = "inherited-proj-heads-mismatch"
    summary = "A subclass redeclares its K or V projection with a head count its inherited twin does not share"
    what = (
        "Finds a class that redeclares one projection of a K/V pair (`self.v_proj = "
        "nn.Linear(...)`, or `k_proj`, `wv`, `to_v` ...) after calling its parent's `__init__`, "
        "while the twin (`k_proj`) is inherited from a base class defined in the same module, or "
        "in another module of the linted tree that it imports, read from that file: relatively "
        "(`from ..llama.modeling_llama import LlamaAttention`, as transformers' modular files "
        "do) or by an absolute name in the file's own package (`from transformers.models.llama."
        "modeling_llama import LlamaAttention` inside `transformers/`). "
        "The two output sizes are compared as KV201 compares the projections of one class: "
        "factor by factor, head-dim factors dropped, aliases of the two classes resolved; only "
        "provably different head counts (`num_attention_heads` against `num_key_value_heads`) "
        "are reported."
    )
    why = (
        "Redeclaring one side of a pair in a subclass is how modular model files customise a "
        "layer (to change a bias, say); copying the size from the query projection instead of "
        "the inherited key projection leaves K and V with different head counts. Grouped-query "
        "checkpoints then fail to load, or the model runs with mismatched heads when the sizes "
        "divide."
    )
    bad = """\
class EncoderAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)


class SpeakerAttention(EncoderAttention):
    def __init__(self, config):
        super().__init__(config)
        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=False)
"""
    good = """\
class EncoderAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)


class SpeakerAttention(EncoderAttention):
    def __init__(self, config):
        super().__init__(config)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
"""
    fix_text = (
        "No automatic fix: declare the redeclared projection with the head count of the twin "
        "it inherits (`num_key_value_heads * head_dim` for grouped-query attention), or "
        "redeclare both."
    )

    VALID = (
        Example(good),
        # Both sides redeclared together: KV201's business, not an inherited twin.
        Example(bad.replace(
            "        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=False)\n",
            "        self.k_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)\n"
            "        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)\n")),
        # MLA subclass: a different value head dim, the same head count.
        Example("class LatentAttention(nn.Module):\n    def __init__(self, dim, n_heads, qk_head_dim):\n"
                "        super().__init__()\n        self.wk = nn.Linear(dim, n_heads * qk_head_dim)\n"
                "        self.wv = nn.Linear(dim, n_heads * qk_head_dim)\n\n\n"
                "class WideValueAttention(LatentAttention):\n    def __init__(self, dim, n_heads, qk_head_dim, v_head_dim):\n"
                "        super().__init__(dim, n_heads, qk_head_dim)\n        self.wv = nn.Linear(dim, n_heads * v_head_dim)\n"),
        # Linear attention: the subclass gives V heads of their own, by design.
        Example("class DeltaNet(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
                "        self.k_proj = nn.Linear(config.hidden_size, config.num_k_heads * config.head_k_dim)\n"
                "        self.v_proj = nn.Linear(config.hidden_size, config.num_k_heads * config.head_v_dim)\n\n\n"
                "class GatedDeltaNet(DeltaNet):\n    def __init__(self, config):\n        super().__init__(config)\n"
                "        self.v_proj = nn.Linear(config.hidden_size, config.num_v_heads * config.head_v_dim)\n"),
        # A base from a module that is not beside this file: its projections are unknown here.
        Example("from .llama import LlamaAttention\n\n\nclass MyAttention(LlamaAttention):\n"
                "    def __init__(self, config):\n        super().__init__(config)\n"
                "        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)\n"),
        # A constructor that never runs its parent's builds only its own layers: the key-only
        # indexer has no inherited value projection to disagree with.
        Example("""\
class LayerProjections:
    def __init__(self, config):
        head_dim = config.hidden_size // config.num_attention_heads
        self.k_proj = ColumnParallelLinear(config.hidden_size, config.num_key_value_heads * head_dim)
        self.v_proj = ColumnParallelLinear(config.hidden_size, config.num_key_value_heads * head_dim)


class IndexerProjections(LayerProjections):
    def __init__(self, config):
        head_dim = config.hidden_size // config.num_attention_heads
        self.k_proj = ColumnParallelLinear(config.hidden_size, config.num_attention_heads * head_dim)
"""),
    )
    INVALID = (
        Example(bad, line=12),
        # The key side redeclared, through a grandparent and a local alias.
        Example("class Base(nn.Module):\n    def __init__(self, hidden, heads, kv_heads, head_dim):\n"
                "        super().__init__()\n        kv_size = kv_heads * head_dim\n"
                "        self.k_proj = ColumnParallelLinear(hidden, kv_size)\n"
                "        self.v_proj = ColumnParallelLinear(hidden, kv_size)\n\n\n"
                "class Middle(Base):\n    pass\n\n\n"
                "class Child(Middle):\n    def __init__(self, hidden, heads, kv_heads, head_dim):\n"
                "        Base.__init__(self, hidden, heads, kv_heads, head_dim)\n"
                "        self.k_proj = ColumnParallelLinear(hidden, heads * head_dim, bias=False)\n", line=16),
    )

    def visit_Module(self, node: cst.Module) -> None:
        own = module_classes(node)
        classes = own
        # Bases imported from another module of the tree (``from ..llama.modeling_llama import
        # X``, ``from transformers.models.llama.modeling_llama import X``) are read from that
        # file, only when some class redeclares one side of a pair.
        outside = {b for model in own.values() if self._redeclares_one_side(model) for b in model.bases if b not in own}
        if outside:
            classes = {**imported_classes(node, self.context.path, outside, absolute=True), **own}
        for model in own.values():
            if not model.bases:
                continue
            for attr, projection in model.projections.items():
                side = kv_side(attr, self.extra_pairs)
                twin = (value_counterpart if side == "k" else key_counterpart)(attr, self.extra_pairs) if side else None
                if twin is None or not calls_parent_init(projection.method):
                    continue
                found = inherited_projection(model, twin, classes)
                if found is None:
                    continue
                base, inherited = found
                resolve = resolver((model, projection.method), (base, inherited.method))
                k, v = (projection, inherited) if side == "k" else (inherited, projection)
                mismatch = heads_mismatch(k.size, v.size, resolve=resolve, implicit_one=True)
                if mismatch is None:
                    continue
                mine, theirs = (mismatch.left, mismatch.right) if side == "k" else (mismatch.right, mismatch.left)
                self.report(
                    projection.call,
                    f"`{model.name}` redeclares `{attr}` with output size `{source_of(projection.size)}` "
                    f"({describe(mine, mismatch.linear)}) but inherits `{twin}` from `{base.name}` with "
                    f"`{source_of(inherited.size)}` ({describe(theirs, mismatch.linear)}): K and V must "
                    "have the same number of heads",
                    suggestion=f"declare `{attr}` with the head count of the inherited `{twin}` "
                               f"(`{source_of(inherited.size)}`), or redeclare both",
                    related=[(inherited.call, f"`{base.name}.{twin}` declared with output size `{source_of(inherited.size)}`")]
                    if base.name in own and own[base.name] is base else (),
                )

    def _redeclares_one_side(self, model) -> bool:
        for attr in model.projections:
            side = kv_side(attr, self.extra_pairs)
            twin = (value_counterpart if side == "k" else key_counterpart)(attr, self.extra_pairs) if side else None
            if twin is not None and not model.defines(twin):
                return True
        return False
