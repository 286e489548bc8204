"""Which names count shards of a tensor-parallel group, and which count the KV heads split over
them: the words KV211 reads on both its paths (the libcst rule and its ``ast`` screen).

A per-rank KV head count is ``kv_heads // tp_size``. Under MQA (one KV head) or a small GQA
group (two, four, eight KV heads) a group wider than the KV head count leaves that quotient 0,
so the rank has no KV heads, no cache and a view it cannot make; code that supports such groups
replicates the KV heads instead (``max(1, kv_heads // tp_size)``).
"""

from __future__ import annotations

from functools import lru_cache

from linter.model.names import Role, head_count_side, name_role

# Calls that divide with a divisibility check of their own (Megatron's ``divide`` asserts
# ``numerator % denominator == 0``).
CHECKED_DIVISIONS = frozenset({"divide", "exact_div", "exact_divide", "ensure_divisibility", "safe_divide"})


@lru_cache(maxsize=1 << 12)
def shard_count(tail: str) -> bool:
    """``tp_size``, ``tp_world_size_``, ``attn_tp_size``, ``world_size``,
    ``tensor_parallel_size``, ``get_tensor_model_parallel_world_size`` (a callee's tail): the
    number of ranks a tensor-parallel group splits heads over."""
    words = [w for w in tail.lower().split("_") if w]
    if words[:1] == ["get"]:
        words = words[1:]
    found = set(words)
    if words == ["tp"] or {"world", "size"} <= found:
        return True
    if found & {"tp", "mp"} and found & {"size", "degree", "world"}:
        return True
    return "parallel" in found and bool(found & {"size", "degree"})


@lru_cache(maxsize=1 << 12)
def kv_head_count(tail: str) -> bool:
    """``num_key_value_heads``, ``total_num_kv_heads``, ``num_query_groups``: the KV heads K
    and V share (a linear-attention layer's ``num_k_heads`` is one side's own, which no rule
    here reads)."""
    return name_role(tail) is Role.KV_HEADS and head_count_side(tail) is None


def group_size_call(callee_tail: str, receiver_tail: str | None, has_arguments: bool) -> bool:
    """``self.process_group.size()``, ``tp_group.size()``: a process group's rank count."""
    if callee_tail != "size" or has_arguments or receiver_tail is None:
        return False
    words = set(receiver_tail.lower().split("_"))
    return bool(words & {"group", "pg"})
