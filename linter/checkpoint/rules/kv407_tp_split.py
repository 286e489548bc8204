"""KV407: a tensor-parallel size that cannot split the heads (--tp N)."""

from __future__ import annotations

from linter.checkpoint.rules.base import CheckpointRule, Context
from linter.finding import Finding

VLLM_HEADS = "vllm/config/model.py, ModelConfig.verify_with_parallel_config"
REPLICATION = "QKVParallelLinear in vllm/model_executor/layers/linear.py and sglang/srt/layers/linear.py"


class TpSplit(CheckpointRule):
    code = "KV407"
    name = "tp-split"
    summary = "With --tp N: N does not divide the query heads, or neither divides the other with the KV heads"
    what = (
        "Runs for each `--tp N` given to `kvlint check`. Reports query heads that N does not\n"
        "divide, and (for non-MLA models) KV heads that are neither a multiple of N nor a divisor\n"
        "of it. vLLM and sglang shard KV heads when N divides them and replicate each KV head N /\n"
        "KV times when KV divides N (`QKVParallelLinear`: `divide(tp_size, total_num_kv_heads)`);\n"
        "any other pair fails their divisibility assertion. MLA caches one shared latent, so only\n"
        "the query heads are checked."
    )
    why = (
        "vLLM refuses to start when the query heads do not divide by the tensor-parallel size\n"
        "(`verify_with_parallel_config`); with KV heads that neither shard nor replicate evenly\n"
        "the load fails in an assertion deep in the linear layer, after the weights have been\n"
        "read, or (for frameworks without the check) each rank gets a fraction of a head."
    )
    bad = '// kvlint check --tp 4 model/\n{\n  "num_attention_heads": 12,\n  "num_key_value_heads": 6\n}'
    good = '// kvlint check --tp 4 model/\n{\n  "num_attention_heads": 12,\n  "num_key_value_heads": 4\n}'
    fix_text = "Deploy with a tensor-parallel size that divides the query heads and either divides or is a multiple of the KV heads."

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        heads, kv = g.num_heads(), g.num_kv_heads()
        if heads is None:
            return []
        findings = []
        for tp in context.tp_sizes:
            if heads % tp:
                findings.append(cls.at_key(
                    context, g.heads,
                    f"{g.heads.name} = {heads} is not divisible by --tp {tp}; expected {_expected(heads, kv, g.is_mla)}: vLLM refuses to start ({VLLM_HEADS})",
                    f"deploy with a tensor-parallel size in {serving_sizes(heads, kv, g.is_mla)[0]}",
                ))
            elif not g.is_mla and kv is not None and kv % tp and tp % kv:
                findings.append(cls.at_key(
                    context, g.kv_heads or g.kv_forced_by or g.heads,
                    f"{kv} KV heads ({g.kv_description()}) and --tp {tp}: neither divides the other; vLLM and sglang shard KV heads when tp divides them and replicate them when they divide tp ({REPLICATION}), and assert otherwise; expected {_expected(heads, kv, g.is_mla)}",
                    f"deploy with a tensor-parallel size in {serving_sizes(heads, kv, g.is_mla)[0]}",
                ))
        return findings


def serving_sizes(heads: int, kv: int | None, is_mla: bool) -> tuple[list[int], list[int]]:
    """(tensor-parallel sizes that pass every checkpoint rule, sizes that serve only by
    replicating KV heads, KV408's warning). Both divide the query heads; MLA shares one latent
    across ranks, so its KV heads constrain nothing."""
    divisors = [d for d in range(1, heads + 1) if heads % d == 0]
    if is_mla or kv is None:
        return divisors, []
    return [d for d in divisors if kv % d == 0], [d for d in divisors if d > kv and d % kv == 0]


def _expected(heads: int, kv: int | None, is_mla: bool) -> str:
    clean, replicating = serving_sizes(heads, kv, is_mla)
    text = f"a tensor-parallel size in {clean}"
    if replicating:
        also = ", ".join(f"{d} ({d // kv}x)" for d in replicating)
        text += f" (also served by replicating each KV head: {also}; KV408)"
    return text
