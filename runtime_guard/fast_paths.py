"""Accept-only fast paths for the hottest call shape, so a valid call skips the general validator.

A fast path answers one question: would the general validator certainly find nothing? It never
rejects and never words anything: on anything unusual or invalid it answers False and the general
path judges the call, so every message stays the general path's. Each test below is the general
path's own test, or one that implies it for exact ints and lists, so the fast path accepts nothing
the general path rejects (tests/runtime_guard/test_fast_paths.py checks that differentially).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import countOf

from runtime_guard import validators
from runtime_guard.checks import ABSENT, MISSING
from runtime_guard.ops import OpRow

# npu_fusion_attention's calling convention: query, key, value, head_num, input_layout by
# position (as its callers pass them) and the cumulative lengths by keyword.
_POSITIONAL_ROLES = ("input_layout", "query", "key", "value", "head_num")
_FIXED_ROLES = ((-1, "", ABSENT), (-1, "", None), (-1, "", 0))  # KV heads, block table, block size
_SHORT = 128  # length lists up to this long are checked in one Python loop (measured on the 2-core box)


def none(args: tuple, kwargs: dict) -> bool:
    """For ops without a fast path: every call takes the general path."""
    return False


def for_op(row: OpRow, slots: tuple, lengths_check: Callable | None = None) -> Callable:
    """The fast path for an op row bound by ``slots`` (ops.Binder's): ``accepts(args, kwargs) -> bool``.

    ``lengths_check`` replaces ``cumulative`` (the benchmark measures the pure-Python one too).
    """
    if row.validate is not validators.attention or len(slots) != 10:
        return none
    layout, q, k, v, heads, kv_heads, q_lens, kv_lens, block_table, block_size = slots
    positional = (layout, q, k, v, heads)
    if tuple(s[0] for s in positional) != (4, 0, 1, 2, 3) or tuple(s[1] for s in positional) != _POSITIONAL_ROLES or any(s[2] is not MISSING for s in positional):
        return none
    # With exactly five positional arguments the lengths can only come by keyword (or stay None).
    by_keyword = all((s[0] == -1 or s[0] >= 5) and s[2] is None for s in (q_lens, kv_lens))
    if (kv_heads, block_table, block_size) != _FIXED_ROLES or not by_keyword:
        return none
    return _packed_attention(q_lens[1], kv_lens[1], lengths_check or cumulative)


def _packed_attention(q_name: str, kv_name: str, cumulative: Callable) -> Callable:
    import torch

    device_class = torch.device
    device_type = validators.DEVICE_TYPE
    npu_device = None  # the last device seen to be of device_type: reading .type costs more than comparing

    def accepts(args: tuple, kwargs: dict) -> bool:
        """TND, host length lists without trailing EOD zeros, every rule of validators.attention holding.

        Every tensor attribute is read once.
        """
        nonlocal npu_device
        try:
            q, k, v, heads, layout = args
            device = q.device
            if type(device) is not device_class:
                return False
            if device != npu_device:
                if device.type != device_type:
                    return False
                npu_device = device
            if k.device != device or v.device != device:
                return False
            dtype = q.dtype
            if k.dtype is not dtype or v.dtype is not dtype or type(layout) is not str or layout != "TND":
                return False
            q_tokens, q_heads, q_dim = q.shape
            k_tokens, k_heads, k_dim = k.shape
            v_tokens, v_heads, _ = v.shape
            if k_tokens != v_tokens or k_heads != v_heads or q_dim != k_dim or type(heads) is not int or heads != q_heads or k_heads <= 0 or q_heads % k_heads:
                return False
            q_lens = kwargs.get(q_name)
            kv_lens = kwargs.get(kv_name)
            if kv_lens is q_lens:  # self-attention passes one list twice: judge it once
                return q_lens is None or (k_tokens == q_tokens and cumulative(q_lens, q_tokens))
            return cumulative(q_lens, q_tokens) and cumulative(kv_lens, k_tokens) and len(q_lens) == len(kv_lens)
        except Exception:  # noqa: BLE001 - not sure is not valid: the general path judges (and reports) it
            return False

    return accepts


def cumulative_py(lengths: object, total: int) -> bool:
    """A list of exact ints, from >= 0, non-decreasing, ending (non-zero: no EOD padding) at ``total``.

    Each entry's type is checked before it is compared, so no entry's own code runs (a tensor
    entry would be read back from the device). A short list costs least as one loop, a long one
    as C-level passes (about 13 ns an entry against 19). The compiled ``runtime_guard._lengths``
    answers the same question at about 1 ns an entry; this is its reference and its stand-in
    where it was not built.
    """
    if type(lengths) is not list:
        return False
    if len(lengths) > _SHORT:
        return countOf(map(type, lengths), int) == len(lengths) and lengths[0] >= 0 and 0 != lengths[-1] == total and sorted(lengths) == lengths
    previous = 0
    for end in lengths:
        if type(end) is not int or end < previous:
            return False
        previous = end
    return previous != 0 and previous == total


try:
    from runtime_guard._lengths import cumulative
except ImportError:  # built without a C compiler (hatch_build.py): the same answers, slower
    cumulative = cumulative_py
