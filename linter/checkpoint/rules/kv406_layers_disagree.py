"""KV406: an attention projection whose shape differs from the same projection in other layers."""

from __future__ import annotations

from collections import Counter, defaultdict

from linter.checkpoint.rules.base import CheckpointRule, Context
from linter.checkpoint.rules.kv404_weights_vs_config import expected_rows
from linter.checkpoint.weights import Projection, attention_projections, shape_text
from linter.finding import Finding


class LayersDisagree(CheckpointRule):
    code = "KV406"
    name = "layers-disagree"
    summary = "One layer's attention projection shaped differently from the other layers', where config.json cannot size it"
    what = (
        "For each projection (`q_proj`, `k_proj`, `v_proj`, fused and MLA ones) that the config\n"
        "does not size, takes the shape most layers share and reports the layers that differ.\n"
        "When the config sizes the projection, KV404 reports every layer that differs from it."
    )
    why = (
        "Serving frameworks allocate one KV cache shape for every layer from one set of head\n"
        "counts; a layer with other K/V heads overruns or under-fills it."
    )
    bad = (
        '{\n  "model.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.1.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [256, 512]},\n'
        '  "model.layers.2.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]}\n}'
    )
    good = (
        '{\n  "model.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.1.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.2.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]}\n}'
    )
    fix_text = "Re-export the odd layer with the shape of the others (or describe per-layer heads in config.json)."

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        if g.per_layer_sizes is not None or g.section.get("per_layer_config"):
            return []  # layers that differ on purpose
        sized = expected_rows(g)
        by_proj: dict[str, list[Projection]] = defaultdict(list)
        for p in attention_projections(context.model.tensors):
            if p.proj not in sized:
                by_proj[p.proj].append(p)
        findings = []
        for projections in by_proj.values():
            shapes = Counter(p.tensor.shape for p in projections)
            (common, count), *others = shapes.most_common()
            if not others or others[0][1] == count:
                continue  # no clear majority: nothing to call the odd one out
            for p in projections:
                if p.tensor.shape != common:
                    findings.append(cls.at_tensor(
                        context, p.tensor.name,
                        f"{p.tensor.name} has shape {shape_text(p.tensor.shape)}, expected {shape_text(common)} like {count} of the {len(projections)} layers",
                        "re-export this layer with the shape the other layers have",
                    ))
        return findings
