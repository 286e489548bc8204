"""KV403: an MLA (multi-head latent attention) config with missing or incoherent sizes."""

from __future__ import annotations

from linter.checkpoint.resolve import MLA_KEYS, Value
from linter.checkpoint.rules.base import CheckpointRule, Context, whole
from linter.finding import Finding

# GLM-5-Next's DSA layers are NoPE (qk_rope_head_dim = 0, its config class insists); a head
# without a non-positional part is as legitimate. Their sum must still be >= 1.
_MAY_BE_ZERO = frozenset({"qk_nope_head_dim", "qk_rope_head_dim"})


class MlaConfig(CheckpointRule):
    code = "KV403"
    name = "mla-config"
    summary = "An MLA config (kv_lora_rank) whose latent, rope, nope or V head sizes are missing, zero or incoherent"
    what = (
        "For configs with a `kv_lora_rank` (DeepSeek-V2/V3 and their relatives), checks that\n"
        "`kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim` and `v_head_dim` are all present\n"
        "and whole numbers >= 1 (the nope or rope part may be 0: GLM-5-Next's layers are NoPE),\n"
        "and that `qk_head_dim`, when given, is `qk_nope_head_dim + qk_rope_head_dim`."
    )
    why = (
        "MLA caches one latent of `kv_lora_rank + qk_rope_head_dim` per token and expands it to\n"
        "per-head K (`qk_nope_head_dim`) and V (`v_head_dim`) through `kv_b_proj`. A missing or\n"
        "zero `v_head_dim` sizes the V side and its cache as nothing (sglang #29889: `v_head_dim`\n"
        "of 0 or missing in an MLA config)."
    )
    bad = '{\n  "kv_lora_rank": 512,\n  "qk_nope_head_dim": 128,\n  "qk_rope_head_dim": 64,\n  "v_head_dim": 0\n}'
    good = '{\n  "kv_lora_rank": 512,\n  "qk_nope_head_dim": 128,\n  "qk_rope_head_dim": 64,\n  "v_head_dim": 128\n}'
    fix_text = "Set each MLA size to what the weights hold: `kv_b_proj` rows are heads x (qk_nope_head_dim + v_head_dim)."

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        g = context.geometry
        if not g.is_mla:
            return []
        rank = g.mla["kv_lora_rank"]
        findings = []
        for key in MLA_KEYS:
            value = g.mla.get(key)
            if value is None:
                findings.append(cls.at_key(
                    context, rank, f"MLA config ({rank.name} = {rank.value!r}) has no {key}; expected a whole number >= 1",
                    f"add {key} next to {rank.name}, with the size the weights use",
                ))
            elif not (whole(value.value) or key in _MAY_BE_ZERO and value.value == 0):
                least = 0 if key in _MAY_BE_ZERO else 1
                findings.append(cls.at_key(
                    context, value, f"{value.name} is {value.value!r} in an MLA config; expected a whole number >= {least}",
                    f"set {value.name} to the size the weights use",
                ))
        nope, rope = g.mla.get("qk_nope_head_dim"), g.mla.get("qk_rope_head_dim")
        section = context.model.config.data if context.model.config else {}
        for key in g.base:
            section = section.get(key, {})
        qk = section.get("qk_head_dim")
        if nope is not None and rope is not None and _size(nope.value) and _size(rope.value) and qk is not None and qk != nope.value + rope.value:
            where = Value(qk, (*g.base, "qk_head_dim"))
            findings.append(cls.at_key(
                context, where, f"{where.name} = {qk!r} but {nope.name} + {rope.name} = {nope.value} + {rope.value} = {nope.value + rope.value}; expected {nope.value + rope.value}",
                "make qk_head_dim the sum of the nope and rope parts, or remove it",
            ))
        return findings


def _size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
