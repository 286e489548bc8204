"""KV402: no whole head size in config.json."""

from __future__ import annotations

from linter.checkpoint.rules.base import CheckpointRule, Context, whole
from linter.finding import Finding


class HeadDimConfig(CheckpointRule):
    code = "KV402"
    name = "head-dim-config"
    summary = "A head_dim that is not a whole number, or hidden_size not a multiple of the heads when head_dim is absent"
    what = (
        "Finds the head size as vLLM does (`get_head_size`): an explicit `head_dim` (or\n"
        "`hidden_size_per_head`) when present and non-zero, else `hidden_size /\n"
        "num_attention_heads`. Reports an explicit size that is not a whole number >= 1, and a\n"
        "hidden size the heads do not divide when there is no explicit one. MLA configs\n"
        "(`kv_lora_rank`) size heads differently; KV403 checks them."
    )
    why = (
        "The head size sizes every K/V cache block and the Q/K dot product. When it is not whole,\n"
        "code that computes `hidden_size // num_attention_heads` and code that reads `head_dim`\n"
        "disagree about the cache layout; vLLM PR #2622 fixed a cache mis-sized by ignoring\n"
        "`head_dim`."
    )
    bad = '{\n  "hidden_size": 4000,\n  "num_attention_heads": 32\n}'
    good = '{\n  "hidden_size": 4000,\n  "num_attention_heads": 32,\n  "head_dim": 128\n}'
    fix_text = "Add `head_dim` with the size the weights use (`k_proj` rows / KV heads), or fix the head count."

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        if g.head_dim is not None:
            if whole(g.head_dim.value):
                return []
            return [cls.at_key(
                context, g.head_dim, f"{g.head_dim.name} is {g.head_dim.value!r}; expected a whole number >= 1 (the size of one K/V head)",
                f"set {g.head_dim.name} to k_proj rows / KV heads, or remove it to use hidden_size / num_attention_heads",
            )]
        heads, hidden = g.num_heads(), g.hidden
        if g.is_mla or heads is None or hidden is None or not whole(hidden.value) or hidden.value % heads == 0:
            return []
        return [cls.at_key(
            context, hidden, f"{hidden.name} = {hidden.value} is not a multiple of {g.heads.name} = {heads} and there is no head_dim: the head size {hidden.value} / {heads} = {hidden.value / heads:g} is not whole; expected a multiple of {heads}",
            "add head_dim with the size the weights use (k_proj rows / KV heads)",
        )]
