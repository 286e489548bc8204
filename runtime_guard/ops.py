"""One row per guarded op: where it lives, and which of its arguments each validator role reads.

Roles name the op's own schema arguments; argument positions and defaults are read from the
dispatcher schema once, when the op is wrapped, so a call only indexes a tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from runtime_guard import validators
from runtime_guard.checks import ABSENT, MISSING


class Fixed(NamedTuple):
    """A role the op has no argument for."""

    value: Any


class AnyOf(NamedTuple):
    """A role several keyword-only arguments can fill: the first of them passed (not None)."""

    names: tuple


class OpRow(NamedTuple):
    name: str
    namespace: str  # torch.ops.<namespace>; every op is also an attribute of torch_npu
    roles: tuple
    validate: Callable
    layout: str  # the role holding the layout string, or a fixed description


ATTENTION_LAYOUT = "input_layout"

# The dequantisation scales that make int8 K/V with a float query valid (validators._attention_dtypes).
FIA_SCALES = AnyOf(("antiquant_scale", "key_antiquant_scale", "value_antiquant_scale"))
FIA_V2_SCALES = AnyOf(("dequant_scale_key", "dequant_scale_value"))
IFA_SCALES = AnyOf(("antiquant_scale",))
NPU = Fixed(validators.DEVICE_TYPE)

ROWS = (
    OpRow("npu_fusion_attention", "npu", ("input_layout", "query", "key", "value", "head_num", Fixed(ABSENT), "actual_seq_qlen", "actual_seq_kvlen", Fixed(None), Fixed(0)), validators.attention, ATTENTION_LAYOUT),
    OpRow("npu_fused_infer_attention_score", "npu", ("input_layout", "query", "key", "value", "num_heads", "num_key_value_heads", "actual_seq_lengths", "actual_seq_lengths_kv", "block_table", "block_size", NPU, FIA_SCALES), validators.attention, ATTENTION_LAYOUT),
    OpRow("npu_fused_infer_attention_score_v2", "npu", ("input_layout", "query", "key", "value", "num_query_heads", "num_key_value_heads", "actual_seq_qlen", "actual_seq_kvlen", "block_table", "block_size", NPU, FIA_V2_SCALES), validators.attention, ATTENTION_LAYOUT),
    OpRow("npu_prompt_flash_attention", "npu", ("input_layout", "query", "key", "value", "num_heads", "num_key_value_heads", "actual_seq_lengths", "actual_seq_lengths_kv", Fixed(None), Fixed(0)), validators.attention, ATTENTION_LAYOUT),
    # Incremental (decode) attention: its actual_seq_lengths are the K/V lengths.
    OpRow("npu_incre_flash_attention", "npu", ("input_layout", "query", "key", "value", "num_heads", "num_key_value_heads", Fixed(None), "actual_seq_lengths", "block_table", "block_size", NPU, IFA_SCALES), validators.attention, ATTENTION_LAYOUT),
    OpRow("_npu_flash_attention", "atb", ("query", "key", "value", "seq_len", "num_heads", "num_kv_heads"), validators.atb_flash_attention, "packed (T, N, D)"),
    OpRow("_npu_paged_attention", "atb", ("query", "key_cache", "value_cache", "num_heads", "num_kv_heads", "block_table", "context_lens"), validators.atb_paged_attention, "paged (blocks, block_size, N, D)"),
    OpRow("_npu_reshape_and_cache", "atb", ("key", "value", "key_cache", "value_cache", "slot_indices", Fixed("slot_indices")), validators.cache_write, "paged ND or NZ caches"),
    OpRow("npu_scatter_pa_kv_cache", "npu", ("key", "value", "key_cache", "value_cache", "slot_mapping", Fixed("slot_mapping"), "cache_mode"), validators.cache_write, "paged caches by cache_mode"),
    # The ATB prefill variants vllm-ascend's 310P and encoder paths call: _npu_flash_attention's arguments.
    OpRow("_npu_flash_attention_unpad", "atb", ("query", "key", "value", "seq_len", "num_heads", "num_kv_heads"), validators.atb_flash_attention, "packed (T, N, D)"),
    OpRow("_npu_flash_attention_unpad_v2", "atb", ("query", "key", "value", "seq_len", "num_heads", "num_kv_heads"), validators.atb_flash_attention, "packed (T, N, D)"),
    OpRow("_npu_flash_attention_v3", "atb", ("query", "key", "value", "seq_len", "num_heads", "num_kv_heads"), validators.atb_flash_attention, "packed (T, N, D)"),
    # Chunked prefill over paged caches: packed query tokens, seq_len per sequence (vllm-ascend 310P, sglang).
    OpRow("_npu_paged_attention_splitfuse", "atb", ("query", "key_cache", "value_cache", "num_heads", "num_kv_heads", "block_table", "context_lens", "seq_len"), validators.atb_chunked_paged, "paged ND or NZ caches"),
    OpRow("_npu_paged_attention_splitfuse_v2", "atb", ("query", "key_cache", "value_cache", "num_heads", "num_kv_heads", "block_table", "context_lens", "seq_len"), validators.atb_chunked_paged, "paged ND or NZ caches"),
    OpRow("_npu_flash_attention_qlens", "atb", ("query", "key_cache", "value_cache", "num_heads", "num_kv_heads", "block_table", "context_lens", "seq_len"), validators.atb_chunked_paged, "paged ND or NZ caches"),
    OpRow("_npu_paged_attention_quant", "atb", ("query", "key_cache", "value_cache", "num_heads", "num_kv_heads", "block_table", "context_lens"), validators.atb_paged_quant, "paged ND or NZ caches"),
    # Where two caches meet: read together, written at the same slots.
    OpRow("npu_gather_pa_kv_cache", "npu", ("key_cache", "value_cache", "block_tables", "seq_lens", "key", "value"), validators.gather_cache, "paged caches"),
    OpRow("npu_paged_cache_load", "atb", ("key_cache", "value_cache", "block_table", "context_lens", "key", "value"), validators.gather_cache, "paged caches"),
    OpRow("npu_kv_rmsnorm_rope_cache", "npu", ("k_cache", "ckv_cache", "cache_mode"), validators.rope_cache_write, "MLA caches by cache_mode"),
    OpRow("npu_kv_rmsnorm_rope_cache_v2", "npu", ("k_cache", "ckv_cache", "cache_mode"), validators.rope_cache_write, "MLA caches by cache_mode"),
    OpRow("npu_mla_prolog_v2", "npu", ("kv_cache", "kr_cache", "cache_mode"), validators.mla_prolog, "MLA caches by cache_mode"),
    OpRow("npu_mla_prolog_v3", "npu", ("kv_cache", "kr_cache", "cache_mode", "ckvkr_repo_mode"), validators.mla_prolog, "MLA caches by cache_mode"),
    OpRow("npu_kv_quant_sparse_flash_attention", "npu", ("query", "key", "value", "layout_kv"), validators.sparse_kv_attention, "layout_kv"),
    OpRow("npu_scatter_pa_cache", "npu", ("key", "key_cache", "slot_mapping"), validators.single_cache_write, "one paged cache"),
    OpRow("_npu_reshape_and_cache_siso", "atb", ("key", "key_cache", "slot_indices"), validators.single_cache_write, "one paged cache"),
    OpRow("npu_sparse_flash_attention", "npu", ("query", "key", "value", "layout_kv", "key_rope"), validators.sparse_attention, "layout_kv"),
    OpRow("_npu_paged_attention_mla", "atb", ("query", "key_cache", "num_heads", "num_kv_heads", "block_table", "context_lens"), validators.atb_paged_mla, "paged (blocks, block_size, N, D) latent cache"),
    # torch_npu.atb only (no caller in vllm-ascend or sglang today); judged from their docstrings' shapes.
    OpRow("npu_ring_mla", "atb", ("k_nope", "k_rope", "value"), validators.ring_mla, "(tokens, heads, D)"),
    OpRow("npu_multi_head_latent_attention", "atb", ("ctkv", "k_rope", "cache_mode", "block_tables", "context_lens"), validators.latent_caches, "MLA caches by cache_mode"),
    OpRow("npu_self_attention_prefix_encoder", "atb", ("key", "value", "block_tables", "kv_seqlen"), validators.prefix_encoder, "paged caches"),
)

ROWS_BY_NAME = {row.name: row for row in ROWS}

# K/V ops other packages register in namespaces of their own, wrapped once the package has loaded
# them (torch.ops.<namespace>.X resolving is what the guard waits for, as for ATB). Schemas and their
# sources: tests/runtime_guard/double/torch_npu/package_schemas.py; the roles bind by name as above.
#   _C_ascend: vllm-ascend (csrc/torch_binding.cpp; its sparse/SFA and DSA indexer paths)
#   custom:    custom_ops from cann-recipes-infer's torch_ops_extension (sglang's NPU sparse paths)
SPARSE = ("query", "key", "value", "layout_kv")
INDEXER = ("query", "key", "layout_query", "layout_key", "block_table")
PACKAGE_ROWS = (
    OpRow("npu_sparse_flash_attention", "_C_ascend", (*SPARSE, "key_rope"), validators.sparse_attention, "layout_kv"),
    OpRow("npu_kv_quant_sparse_flash_attention", "_C_ascend", SPARSE, validators.sparse_kv_attention, "layout_kv"),
    OpRow("npu_lightning_indexer", "_C_ascend", INDEXER, validators.lightning_indexer, "layout_key"),
    OpRow("npu_lightning_indexer_quant", "_C_ascend", INDEXER, validators.lightning_indexer, "layout_key"),
    OpRow("npu_sparse_flash_attention", "custom", (*SPARSE, "key_rope"), validators.sparse_attention, "layout_kv"),
    OpRow("npu_sparse_flash_attention_antiquant", "custom", SPARSE, validators.sparse_kv_attention, "layout_kv"),
    OpRow("npu_lightning_indexer", "custom", INDEXER, validators.lightning_indexer, "layout_key"),
    OpRow("npu_lightning_indexer_quant", "custom", INDEXER, validators.lightning_indexer, "layout_key"),
)

# Head counts an older op version lacks are ABSENT (not judged); None there would be the user's.
HEAD_ROLES = {"head_num", "num_heads", "num_query_heads", "num_key_value_heads"}


def role_names(row: OpRow) -> tuple:
    """The op's own name for each role (None where it has no argument): what messages call them."""
    return tuple(None if isinstance(role, Fixed) else "/".join(role.names) if isinstance(role, AnyOf) else role for role in row.roles)


class Binder:
    """Picks each role's value out of (args, kwargs) by the positions the schema gives."""

    __slots__ = ("any_of", "layout_index", "missing", "slots")

    def __init__(self, row: OpRow, params: list) -> None:
        by_name = {name: (index, kwarg_only, default) for index, (name, kwarg_only, default) in enumerate(params)}
        slots = []
        any_of = []
        missing = []
        for position, role in enumerate(row.roles):
            if isinstance(role, AnyOf):
                present = tuple(name for name in role.names if name in by_name)
                slots.append((-1, "", None if present else ABSENT))  # ABSENT: an op version without them
                if present:
                    any_of.append((position, present))
                continue
            if isinstance(role, Fixed):
                slots.append((-1, "", role.value))
                continue
            if role not in by_name:
                slots.append((-1, "", ABSENT if role in HEAD_ROLES else None))  # an older op version without this argument
                if role not in HEAD_ROLES:
                    missing.append(role)
                continue
            index, kwarg_only, default = by_name[role]
            slots.append((-1 if kwarg_only else index, role, default))
        self.slots = tuple(slots)
        self.any_of = tuple(any_of)
        # Roles this op version has no argument for (head counts aside): its calls are not judged,
        # never judged with a role read from nowhere (benchmarks/guard_versions.py lists them per release).
        self.missing = tuple(missing)
        self.layout_index = row.roles.index(row.layout) if row.layout in row.roles else -1

    def bind(self, args: tuple, kwargs: dict) -> list:
        n = len(args)
        values = [args[i] if -1 < i < n else kwargs.get(name, default) for i, name, default in self.slots]
        for position, names in self.any_of:  # keyword-only arguments in every schema that has them
            values[position] = next((kwargs[name] for name in names if kwargs.get(name) is not None), None)
        return values


def schema_params(op: Any) -> list:
    """(name, keyword-only, default) of a packet's .default overload or of one overload.

    A packet call with keywords only another overload takes (npu_paged_cache_load(..., key=k,
    value=v) resolves to .out) is that overload's call: those keyword-only arguments are read from
    the keywords too (None when not passed), so a role the .default schema lacks is still judged.
    """
    schema = getattr(op, "_schema", None)
    if schema is not None:
        return _params(schema)
    overloads = op.overloads()  # a packet: its .default, or its only overload (npu_scatter_pa_cache has just .value)
    first = "default" if "default" in overloads else overloads[0]
    params = _params(getattr(op, first)._schema)
    known = {name for name, _, _ in params}
    for name in overloads:
        for arg, kwarg_only, _ in _params(getattr(op, name)._schema) if name != first else ():
            if kwarg_only and arg not in known:
                params.append((arg, True, None))
                known.add(arg)
    return params


def _params(schema: Any) -> list:
    return [(a.name, a.kwarg_only, a.default_value if a.has_default_value() else MISSING) for a in schema.arguments]


def signature_params(function: Callable) -> list:
    """(name, keyword-only, default) of a Python function, for guard()-decorated wrappers."""
    import inspect

    params = []
    for p in inspect.signature(function).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = MISSING if p.default is p.empty else p.default
        params.append((p.name, p.kind is p.KEYWORD_ONLY, default))
    return params
