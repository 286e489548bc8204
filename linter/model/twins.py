"""Twin names that ``names.value_counterpart`` does not pair: text only (the pre-filter uses it
without libcst)."""

from __future__ import annotations

from linter.model.names import Role, kv_side, name_role, value_counterpart


def key_head_dim_twin(name: str) -> str | None:
    """``k_head_dim`` -> ``v_head_dim``, ``head_k_dim`` -> ``head_v_dim``, ``qk_head_dim`` ->
    ``v_head_dim``: for a name of the key's head dim, the value's head dim named like it."""
    if name_role(name) is not Role.HEAD_DIM:
        return None
    parts = name.split("_")
    if parts.count("qk") == 1 and kv_side(name) is None:
        parts[parts.index("qk")] = "v"
        return "_".join(parts)
    if kv_side(name) != "k":
        return None
    return value_counterpart(name)


def is_value_head_dim(name: str) -> bool:
    """``v_head_dim``, ``head_v_dim``, ``value_head_dim``, ``v_head_size``: the value's own head dim."""
    low = name.lower()
    if "dim" not in low and "size" not in low:
        return False
    parts = low.split("_")
    # The parts first: most names fail there, and ``name_role`` matches patterns.
    return ("v" in parts or "value" in parts) and not ({"k", "key", "qk"} & set(parts)) and name_role(name) is Role.HEAD_DIM
