"""KV408: a tensor-parallel size larger than the KV heads (--tp N): heads replicated, or split."""

from __future__ import annotations

from linter.checkpoint.rules.base import CheckpointRule, Context
from linter.checkpoint.rules.kv407_tp_split import REPLICATION, serving_sizes
from linter.finding import Finding


class TpReplicatesKv(CheckpointRule):
    code = "KV408"
    name = "tp-replicates-kv"
    severity = "warning"
    summary = "With --tp N: N is a multiple of the KV heads, so each KV head is replicated (vLLM, sglang) or split below one head"
    what = (
        "Runs for each `--tp N`. Reports a non-MLA model whose KV heads are fewer than N and divide\n"
        "it. vLLM and sglang then give every rank one KV head, replicated N / KV times\n"
        "(`num_kv_head_replicas` in `QKVParallelLinear`): it works, with N / KV copies of the KV\n"
        "projections and cache. transformers' own tensor parallelism does not replicate:\n"
        "`get_kv_heads_per_rank` (transformers/distributed/tensor_parallel.py) has no whole number\n"
        "of KV heads per rank, and a column-wise `k_proj` shards below one head\n"
        "(transformers #48307). A warning: reported in every format, but the exit status stays 0\n"
        "unless `--warnings-as-errors` (or `warnings-as-errors = true`) is set."
    )
    why = (
        "Splitting `k_proj` below one head gives each rank a slice of a head: attention runs on\n"
        "the wrong K/V without any error. Replication is correct but multiplies KV memory; both\n"
        "are worth knowing before the model is deployed."
    )
    bad = '// kvlint check --tp 8 model/\n{\n  "num_attention_heads": 32,\n  "num_key_value_heads": 4\n}'
    good = '// kvlint check --tp 4 model/\n{\n  "num_attention_heads": 32,\n  "num_key_value_heads": 4\n}'
    fix_text = (
        "Serve with vLLM or sglang (which replicate) knowing the memory cost, use a tensor-parallel\n"
        "size up to the KV heads, or ignore KV408 where replication is intended."
    )

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        heads, kv = g.num_heads(), g.num_kv_heads()
        if heads is None or kv is None or g.is_mla:
            return []
        return [
            cls.at_key(
                context, g.kv_heads or g.kv_forced_by or g.heads,
                f"{kv} KV heads ({g.kv_description()}) with --tp {tp}: vLLM and sglang replicate each KV head {tp // kv} times ({REPLICATION}), {tp // kv}x the KV cache and K/V projection memory; transformers' tensor parallelism splits k_proj below one head (get_kv_heads_per_rank has no whole number of KV heads per rank); tensor-parallel sizes that shard without copies: {serving_sizes(heads, kv, False)[0]}",
                f"serve with a tensor-parallel size in {serving_sizes(heads, kv, False)[0]} to shard KV heads, or accept {tp // kv}x KV memory in vLLM/sglang",
            )
            for tp in context.tp_sizes
            if tp > kv and tp % kv == 0 and heads % tp == 0
        ]
