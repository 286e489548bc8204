"""KV401: the config's query/KV head counts cannot describe grouped attention."""

from __future__ import annotations

from linter.checkpoint.resolve import KV_HEADS_KEYS
from linter.checkpoint.rules.base import CheckpointRule, Context, whole
from linter.finding import Finding


class KvHeadsConfig(CheckpointRule):
    code = "KV401"
    name = "kv-heads-config"
    summary = "Query and KV head counts in config.json that no attention layout can use, or that loaders read differently"
    what = (
        "Reads the language model's head counts from config.json (under `text_config` for\n"
        "multimodal models) by every name real configs use: `num_attention_heads`, `n_head`,\n"
        "`n_heads`, `num_heads`; `num_key_value_heads`, `n_head_kv`, `num_kv_heads`,\n"
        "`multi_query_group_num`, `attn_config.kv_n_heads`, and `multi_query` (one KV head). It\n"
        "reports a count that is not a whole number >= 1, more KV heads than query heads, query\n"
        "heads that do not split into equal groups per KV head, and two KV-head keys that disagree."
    )
    why = (
        "Grouped-query attention repeats each KV head for `num_attention_heads / num_key_value_heads`\n"
        "query heads; with a remainder the repeat and the KV cache are sized wrong, which on an NPU\n"
        "is an opaque kernel error or silently wrong output. Two KV-head keys that disagree are\n"
        "read differently by different loaders: vLLM takes the first of `n_head_kv`,\n"
        "`num_kv_heads`, `num_key_value_heads`, ... (vllm/transformers_utils/config.py); Falcon-40B\n"
        "produced gibberish when vLLM read the wrong one (vLLM PR #1164)."
    )
    bad = '{\n  "num_attention_heads": 12,\n  "num_key_value_heads": 5\n}'
    good = '{\n  "num_attention_heads": 12,\n  "num_key_value_heads": 4\n}'
    fix_text = (
        "Set the KV-head count to the number of K/V heads the weights hold (`k_proj` rows /\n"
        "head size); it must divide the query heads. Keep one KV-head key, or make all agree."
    )

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        if g.heads is None:
            return []  # not an attention config (a CNN, a tokenizer, ...)
        findings = []
        heads = g.heads.value
        if not whole(heads):
            findings.append(cls.at_key(
                context, g.heads, f"{g.heads.name} is {heads!r}; expected a whole number of query heads >= 1",
                f"set {g.heads.name} to the number of attention heads the model has",
            ))
        if g.kv_forced_by is not None:
            return findings  # multi_query: one KV head, whatever the count keys say
        kv = g.kv_heads
        if kv is not None and not whole(kv.value):
            findings.append(cls.at_key(
                context, kv, f"{kv.name} is {kv.value!r}; expected a whole number of KV heads >= 1 that divides {g.heads.name} = {heads!r}",
                f"set {kv.name} to the number of K/V heads (k_proj rows / head size)",
            ))
        elif kv is not None and whole(heads):
            if kv.value > heads:
                findings.append(cls.at_key(
                    context, kv, f"{kv.name} = {kv.value} is more than {g.heads.name} = {heads}; expected at most {heads} KV heads",
                    f"set {kv.name} to a divisor of {heads} (the number of K/V heads the weights hold)",
                ))
            elif heads % kv.value:
                divisors = [d for d in range(1, heads + 1) if heads % d == 0]
                findings.append(cls.at_key(
                    context, kv, f"{g.heads.name} = {heads} is not a multiple of {kv.name} = {kv.value}: query heads do not split into equal groups per KV head; expected one of {divisors}",
                    f"set {kv.name} to the number of K/V heads the weights hold; it must divide {heads}",
                ))
        for other in g.kv_aliases[1:]:
            if kv is not None and other.value != kv.value:
                order = ", ".join(KV_HEADS_KEYS)
                findings.append(cls.at_key(
                    context, other, f"{other.name} = {other.value!r} disagrees with {kv.name} = {kv.value!r}: vLLM reads the first of {order} and uses {kv.value!r}; a loader reading {other.name} uses {other.value!r}",
                    f"keep one KV-head key, or set {other.name} to {kv.value!r} (or {kv.name} to {other.value!r}): whichever the weights hold",
                ))
        return findings
