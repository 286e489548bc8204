"""KV404: attention projection weights whose output size is not what config.json says."""

from __future__ import annotations

from collections import defaultdict

from linter.checkpoint.resolve import Geometry
from linter.checkpoint.rules.base import CheckpointRule, Context, whole
from linter.checkpoint.weights import (
    FUSED,
    Projection,
    attention_projections,
    shape_text,
)
from linter.finding import Finding


def expected_rows(g: Geometry) -> dict[str, tuple[int, str]]:
    """Projection -> (rows, how the config gives them), for every projection the config sizes."""
    heads = g.num_heads()
    if heads is None:
        return {}
    if g.is_mla:
        m = {k: v.value for k, v in g.mla.items()}
        nope, rope, v_dim, rank = (m.get(k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"))
        if not (all(whole(x) for x in (v_dim, rank)) and all(isinstance(x, int) and x >= 0 for x in (nope, rope))):
            return {}  # KV403 reports the config itself
        h = g.heads.name
        q = (heads * (nope + rope), f"{h} x (qk_nope_head_dim + qk_rope_head_dim) = {heads} x ({nope} + {rope})")
        return {
            "q_proj": q, "q_b_proj": q,
            "kv_a_proj_with_mqa": (rank + rope, f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope}"),
            "kv_b_proj": (heads * (nope + v_dim), f"{h} x (qk_nope_head_dim + v_head_dim) = {heads} x ({nope} + {v_dim})"),
        }
    size = g.head_size()
    kv = g.num_kv_heads()
    if size is None or kv is None or heads % kv:
        return {}  # KV401/KV402 report the config itself
    hd, hd_how = size
    kv_how = g.kv_description()
    fused = ((heads + 2 * kv) * hd, f"({g.heads.name} + 2 x KV heads) x head size = ({heads} + 2 x {kv}) x {hd}, KV heads {kv_how}, head size {hd_how}")
    return {
        "q_proj": (heads * hd, f"{g.heads.name} x head size = {heads} x {hd}, head size {hd_how}"),
        "k_proj": (kv * hd, f"KV heads x head size = {kv} x {hd}, KV heads {kv_how}, head size {hd_how}"),
        "v_proj": (kv * hd, f"KV heads x head size = {kv} x {hd}, KV heads {kv_how}, head size {hd_how}"),
        **{name: fused for name in FUSED},
    }


class WeightsVsConfig(CheckpointRule):
    code = "KV404"
    name = "weights-vs-config"
    summary = "A q/k/v (or fused qkv, or MLA) projection weight whose output size differs from what config.json gives"
    what = (
        "Reads the safetensors headers (shapes only; no tensor data) of every layer's attention\n"
        "projections and compares each output size with the config: `q_proj` = heads x head size,\n"
        "`k_proj`/`v_proj` = KV heads x head size, fused `qkv_proj`/`W_pack`/`query_key_value` =\n"
        "(heads + 2 x KV heads) x head size, and for MLA `q_proj`/`q_b_proj`, `kv_a_proj_with_mqa`,\n"
        "`kv_b_proj`. Layers that differ the same way are reported once, with their count.\n"
        "A layer's `per_layer_config` entry (Gemma 4's full-attention layers) overrides the\n"
        "top-level sizes for that layer; configs with per-layer geometry in other forms\n"
        "(`swa_num_key_value_heads`, `*_per_layer` lists, `kv_source_layers`, `block_configs`)\n"
        "are not compared.\n"
        "Sharded checkpoints are read through `model.safetensors.index.json`."
    )
    why = (
        "The runtime sizes the KV cache and splits the fused projection from the config, then\n"
        "loads weights of another size: a load error at best, K and V heads read from the wrong\n"
        "rows at worst. A subclass that redeclares `v_proj` with the query's head count (found in\n"
        "transformers 5.25.0's Nemotron diarization model) saves exactly such a checkpoint."
    )
    bad = (
        '// config.json: "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64\n'
        '// model.safetensors header:\n'
        '{\n  "model.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.0.self_attn.v_proj.weight": {"dtype": "BF16", "shape": [512, 512]}\n}'
    )
    good = (
        '{\n  "model.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [128, 512]},\n'
        '  "model.layers.0.self_attn.v_proj.weight": {"dtype": "BF16", "shape": [128, 512]}\n}'
    )
    fix_text = (
        "Decide which is right. If the weights are, set the config's head counts / head_dim to\n"
        "them; if the config is, the model class that saved the weights declares the projection\n"
        "with the wrong head count: fix it and re-export."
    )

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        if g.per_layer_sizes is not None:
            return []  # layers with other heads than the top-level keys say, not read per layer
        by_layer: dict[int, dict[str, tuple[int, str]]] = {}
        wrong: dict[tuple[str, tuple[int, ...], tuple[int, str]], list[Projection]] = defaultdict(list)
        layers: dict[str, set[int]] = defaultdict(set)
        for p in attention_projections(context.model.tensors):
            if p.layer not in by_layer:
                by_layer[p.layer] = expected_rows(g.for_layer(p.layer))
            expected = by_layer[p.layer].get(p.proj)
            if expected is None:
                continue
            layers[p.proj].add(p.layer)
            if p.rows != expected[0]:
                wrong[(p.proj, p.tensor.shape, expected)].append(p)
        findings = []
        for (proj, shape, (rows, how)), found in wrong.items():
            first = found[0].tensor
            where = f" (and the same in {len(found) - 1} more of {len(layers[proj])} layers)" if len(found) > 1 else ""
            findings.append(cls.at_tensor(
                context, first.name,
                f"{first.name} has shape {shape_text(shape)}, expected {shape_text((rows, *shape[1:]))}: {rows} rows = {how}{where}",
                "make the config's head counts/head size match the weights, or re-export the weights from a model class that declares this projection with the config's heads",
            ))
        return findings
