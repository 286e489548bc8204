"""KV405: one layer's k_proj and v_proj weights with different output sizes."""

from __future__ import annotations

from collections import defaultdict

from linter.checkpoint.rules.base import CheckpointRule, Context
from linter.checkpoint.rules.kv404_weights_vs_config import expected_rows
from linter.checkpoint.weights import Projection, attention_projections, shape_text
from linter.finding import Finding


class KvWeightsDisagree(CheckpointRule):
    code = "KV405"
    name = "kv-weights-disagree"
    summary = "k_proj and v_proj of one layer with different output sizes, where config.json cannot say which is right"
    what = (
        "Compares each layer's `k_proj` and `v_proj` weight shapes (from the safetensors headers)\n"
        "with each other. It runs when the config does not size them (no usable head counts or\n"
        "head size); otherwise KV404 compares both with the config and says which one is wrong.\n"
        "Layers that differ the same way are reported once, with their count."
    )
    why = (
        "Packed attention kernels need K and V with the same heads (`k.shape[:2] == v.shape[:2]`\n"
        "for `npu_fusion_attention` in TND layout); projections of different sizes cannot produce\n"
        "that, whatever the config says."
    )
    bad = (
        '{\n  "model.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.0.self_attn.v_proj.weight": {"dtype": "BF16", "shape": [512, 512]}\n}'
    )
    good = (
        '{\n  "model.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.0.self_attn.v_proj.weight": {"dtype": "BF16", "shape": [128, 512]}\n}'
    )
    fix_text = "Re-export from a model class whose `v_proj` has the KV heads of `k_proj`."

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        if "k_proj" in expected_rows(g) or g.is_mla or g.per_layer_sizes is not None:
            return []
        by_layer: dict[int, dict[str, Projection]] = defaultdict(dict)
        for p in attention_projections(context.model.tensors):
            by_layer[p.layer][p.proj] = p
        pairs: dict[tuple, list[tuple[Projection, Projection]]] = defaultdict(list)
        for layer in sorted(by_layer):
            k, v = by_layer[layer].get("k_proj"), by_layer[layer].get("v_proj")
            if k is not None and v is not None and k.rows != v.rows:
                pairs[(k.tensor.shape, v.tensor.shape)].append((k, v))
        findings = []
        for found in pairs.values():
            k, v = found[0]
            more = f" (and the same in {len(found) - 1} more of {len(by_layer)} layers)" if len(found) > 1 else ""
            findings.append(cls.at_tensor(
                context, v.tensor.name,
                f"{v.tensor.name} has shape {shape_text(v.tensor.shape)} but {k.tensor.name} has {shape_text(k.tensor.shape)}; expected {shape_text((k.rows, *v.tensor.shape[1:]))}: K and V must have the same heads{more}",
                "give v_proj the KV heads of k_proj (or add the head counts to config.json so KV404 can say which is wrong)",
            ))
        return findings
