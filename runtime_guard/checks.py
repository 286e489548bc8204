"""Pure checks over shapes, dtypes, devices and host integer lists.

Each check returns None when its rule holds, or a Violation that says what must hold.
No check ever reads a tensor's values: only ``.shape``, ``.dtype`` and ``.device``.
"""

from __future__ import annotations

from numbers import Integral
from operator import countOf
from typing import Any, NamedTuple

KV_SLICED = "K was sliced without V (or V without K): ring chunking, window trimming, paging"
HEAD_CONFIG = "K/V projections built with different head counts (e.g. v_proj sized with the query heads)"
LENGTHS_STALE = "sequence lengths computed for a different batch, or K/V trimmed after the lengths were built"
CACHE_POOLS = "K and V caches allocated or indexed differently (two pools, two slot tensors)"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()  # a required argument the call did not pass


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()  # a head count the op (or a guard()-decorated function) has no argument for


# Every name a Violation's ``check`` can carry: what messages, warnings and JSONL records call the
# rule. docs/runtime_guard.md describes each; a test keeps this set, the code and the docs equal.
CHECKS = frozenset(
    {
        "arguments_are_tensors",
        "argument_types",
        "block_size_matches",
        "block_table_shape",
        "caches_match",
        "cumulative_lengths_valid",
        "head_count_matches",
        "k_v_head_counts_match",
        "k_v_token_counts_match",
        "kv_heads_divide_q_heads",
        "layout_is_text",
        "length_tensor_shape",
        "one_device_of_type",
        "one_dtype",
        "per_sequence_lengths_fit",
        "q_k_head_dims_match",
        "q_kv_batches_match",
        "rank_matches_layout",
        "same_batch",
        "slot_count_matches",
    }
)


class Violation(NamedTuple):
    check: str
    requirement: str
    cause: str
    tensors: tuple  # (name, value) pairs shown in reports by shape/dtype/device only


def describe(name: str, value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is None:
        return f"{name}={type(value).__name__}"
    return f"{name} {tuple(shape)}"


TENSOR_TYPES: set = set()


def is_tensor_like(value: Any) -> bool:
    """Has shape, dtype and device; the answer is remembered per type, as this runs on every call.

    NumPy arrays and scalars have all three too (NumPy 2's array API) but are host values: a
    length list built with np.cumsum is read as a list, never judged as a device tensor.
    """
    kind = type(value)
    if kind in TENSOR_TYPES:
        return True
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "device") and not kind.__module__.startswith("numpy"):
        TENSOR_TYPES.add(kind)
        return True
    return False


class NotJudged(NamedTuple):
    """A call the guard does not understand (an unknown layout, cache format, mode or argument
    type): it goes to the kernel unjudged; warn mode notes the reason once per op."""

    reason: str


def arguments_are_tensors(named: tuple) -> Violation | None:
    for _, value in named:
        if type(value) not in TENSOR_TYPES and not is_tensor_like(value):
            break
    else:
        return None
    bad = [(n, v) for n, v in named if not is_tensor_like(v)]
    got = ", ".join(f"{n} missing" if v is MISSING else f"{n}={type(v).__name__}" for n, v in bad)
    return Violation("arguments_are_tensors", f"{got}: these arguments must be tensors", "a wrong argument order or a missing tensor", ())


def layout_is_text(layout: Any) -> Violation | None:
    if isinstance(layout, str):
        return None
    return Violation("layout_is_text", f"input_layout={layout!r} must be a layout string such as 'TND' or 'BSND'", "a wrong argument order or a missing layout", ())


def rank_matches_layout(name: str, tensor: Any, layout: str, rank: int) -> Violation | None:
    if len(tensor.shape) == rank:
        return None
    return Violation(
        "rank_matches_layout",
        f"{describe(name, tensor)} must be {rank}-D for layout {layout}",
        "the tensor was not reshaped to the declared input_layout",
        ((name, tensor),),
    )


def one_device_of_type(named: tuple, device_type: str | None) -> Violation | None:
    """One device for all; of the kernel's device type unless ``device_type`` is None.

    Meta tensors (shape inference, tracing, torch_npu's own meta kernels) carry real shapes and no
    device: where any is meta the devices are not judged, the shapes still are.
    """
    if any(tensor.device.type == "meta" for _, tensor in named):
        return None
    first = named[0][1].device
    if device_type is not None and first.type != device_type:
        first = None
    for _, tensor in named:
        if tensor.device != first:
            devices = ", ".join(f"{n} on {t.device}" for n, t in named)
            return Violation(
                "one_device_of_type",
                f"all of them must be on one {device_type or 'single'} device: {devices}",
                "a tensor left on the host or on another card (missing .to(device))",
                named,
            )
    return None


def one_dtype(named: tuple) -> Violation | None:
    first = named[0][1].dtype
    for _, tensor in named:
        if tensor.dtype != first:
            dtypes = ", ".join(f"{n} {t.dtype}" for n, t in named)
            return Violation("one_dtype", f"all of them must share one dtype: {dtypes}", "one side cast (or quantised) without the other", named)
    return None


def k_v_token_counts_match(key_name: str, key: Any, key_tokens: tuple, value_name: str, value: Any, value_tokens: tuple) -> Violation | None:
    if key_tokens == value_tokens:
        return None
    return Violation(
        "k_v_token_counts_match",
        f"{describe(key_name, key)} and {describe(value_name, value)} must describe the same tokens: {key_tokens} != {value_tokens}",
        KV_SLICED,
        ((key_name, key), (value_name, value)),
    )


def k_v_head_counts_match(key_name: str, key: Any, key_heads: int, value_name: str, value: Any, value_heads: int) -> Violation | None:
    if key_heads == value_heads:
        return None
    return Violation(
        "k_v_head_counts_match",
        f"{describe(key_name, key)} and {describe(value_name, value)} must have the same KV heads: {key_heads} != {value_heads}",
        HEAD_CONFIG,
        ((key_name, key), (value_name, value)),
    )


def q_k_head_dims_match(query: Any, q_dim: int, key_name: str, key: Any, k_dim: int, query_name: str = "query") -> Violation | None:
    if q_dim == k_dim:
        return None
    return Violation(
        "q_k_head_dims_match",
        f"{describe(query_name, query)} and {describe(key_name, key)} must have equal head dims: {q_dim} != {k_dim}",
        "Q and K projected to different head sizes, or a rotary/nope split applied to one side only",
        ((query_name, query), (key_name, key)),
    )


def divides(check: str, what: str, whole: int, part: int, named: tuple, cause: str) -> Violation | None:
    """``part`` must be positive and divide ``whole`` (hidden size by heads, Q heads by KV heads)."""
    if type(part) is int and type(whole) is int and part > 0 and whole % part == 0:
        return None
    return Violation(check, f"{what}: {part} must be positive and divide {whole}", cause, named)


def kv_heads_divide_q_heads(q_heads: int, kv_heads: int, query: Any, key_name: str, key: Any, query_name: str = "query") -> Violation | None:
    if type(kv_heads) is int and kv_heads > 0 and type(q_heads) is int and q_heads % kv_heads == 0:
        return None
    return divides(
        "kv_heads_divide_q_heads",
        f"KV heads of {describe(key_name, key)} must divide the query heads of {describe(query_name, query)}",
        q_heads,
        kv_heads,
        ((query_name, query), (key_name, key)),
        HEAD_CONFIG,
    )


def _shown(value: Any) -> str:
    """A host argument as a message shows it: tensors by shape only, long reprs cut."""
    if value is MISSING:
        return "missing"
    if is_tensor_like(value):
        return f"a tensor {tuple(value.shape)}"
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({type(value).__name__})"


def is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool) and not is_tensor_like(value)


def int_argument(arg: str, value: Any, meaning: str) -> Violation | None:
    """A host integer the guard reads (a head count, a block size) that is not an int at all."""
    if is_int(value):
        return None
    return Violation(
        "argument_types",
        f"{arg} is {_shown(value)}; it must be an int: {meaning} (pass {arg}=<int>)",
        "a wrong argument order, a value read from the wrong config field, or a missing argument",
        (),
    )


def lengths_argument(arg: str, value: Any, optional: bool) -> Violation:
    """A length argument that is neither a host list of ints nor a tensor (nor None where allowed)."""
    got = _shown(value)
    if type(value) in (list, tuple):
        got += next((f", whose entry {_shown(v)} is not an int" for v in value if not is_int(v)), "")
    allowed = "a list of ints or a 1-D integer tensor" + (", or None" if optional else "")
    return Violation(
        "argument_types",
        f"{arg} is {got}; it must be {allowed} (pass {arg}=[...] with one int per entry)",
        "lengths built from the wrong object (a string, a float division, an unset entry)",
        (),
    )


def head_count_matches(arg: str, declared: Any, actual: int, tensor_name: str, tensor: Any) -> Violation | None:
    if type(declared) is int and declared == actual:
        return None
    if not is_int(declared):
        return int_argument(arg, declared, f"{actual}, the head axis of {describe(tensor_name, tensor)}")
    if declared == actual:
        return None
    return Violation(
        "head_count_matches",
        f"{arg}={declared!r} must equal the head axis of {describe(tensor_name, tensor)} ({actual})",
        "a head count taken from the model config that does not match this tensor (TP split, GQA, MLA)",
        ((tensor_name, tensor),),
    )


def axis_matches(check: str, what: Any, left: Any, right: Any, named: tuple, cause: str) -> Violation | None:
    """``what`` is a description, or a function building one (called only when the check fails)."""
    if left == right:
        return None
    return Violation(check, f"{what() if callable(what) else what}: {left} != {right}", cause, named)


def host_ints(value: Any) -> list | tuple | None:
    """Return a host list/tuple of integers, or None if the values live elsewhere (never read).

    Host values are: a list or tuple of ints (NumPy integers too: sglang builds lengths with
    np.cumsum), a 1-D integer NumPy array, and a 1-D integer torch tensor on the CPU (the ATB ops
    take seq_len/context_lens as host tensors; vllm-ascend's sink path passes a CPU cumsum).
    Reading a CPU tensor is a host memory read, never a device sync; a device tensor, a tensor
    subclass (FakeTensor, functional wrappers) or anything else is never read.
    """
    kind = type(value)
    if kind is list or kind is tuple:
        if countOf(map(type, value), int) == len(value):
            return value
        if all(isinstance(v, Integral) and not isinstance(v, bool) and not is_tensor_like(v) for v in value):
            return [int(v) for v in value]
        return None
    module = kind.__module__
    if kind.__name__ == "ndarray" and module == "numpy":
        # An empty array is an empty list whatever its dtype: np.cumsum([]) is float64, and the
        # dispatcher takes it for an int[] (a batch with no tokens).
        return value.tolist() if value.ndim == 1 and (value.dtype.kind in "iu" or not value.size) else None
    if kind.__name__ == "Tensor" and module == "torch" and value.device.type == "cpu" and value.dim() == 1:
        dtype = value.dtype
        if dtype.is_floating_point or dtype.is_complex or str(dtype) == "torch.bool":
            return None
        try:
            return value.tolist()
        except Exception:  # noqa: BLE001 - a tensor that cannot be read on the host (a mode active): not read
            return None
    return None


def cumulative_lengths_valid(arg: str, lengths: list | tuple, total: int, tensor_name: str, tensor: Any) -> Violation | None:
    """Cumulative ends: start >= 0, never decrease, end at the packed token count.

    Trailing zeros are EOD padding: the tokens after the last non-zero end are tail padding, so
    that end may fall short of the token count (torch_npu's npu_fusion_attention doc example
    ``actual_seq_qlen=[2,5,9,0,0]`` over 20 tokens; vllm-ascend's encoder path appends a 0 when
    ``query.shape[0] > actual_seq_qlen[-1]``). Without a trailing zero the last end must equal it.
    """
    end = len(lengths)
    while end and lengths[end - 1] == 0:
        end -= 1
    padded = end != len(lengths)
    body = lengths[:end] if padded else lengths
    if not body:
        if total == 0:
            return None
        problem = "are all zero"
    elif body[0] < 0:
        problem = f"start at {body[0]} < 0"
    elif sorted(body) != (body if type(body) is list else list(body)):
        problem = "decrease"
    elif body[-1] > total or (body[-1] != total and not padded):
        problem = f"end at {body[-1]}"
    else:
        return None
    return Violation(
        "cumulative_lengths_valid",
        f"{arg} {_short(lengths)} {problem}; they must be cumulative, non-decreasing, start >= 0 and end at "
        f"{describe(tensor_name, tensor)}'s token count {total} (or, followed by trailing zeros of EOD padding, at most {total})",
        LENGTHS_STALE,
        ((tensor_name, tensor),),
    )


def batch_counts(lengths: list | tuple) -> int:
    """Number of sequences in a cumulative list, not counting trailing EOD zeros."""
    end = len(lengths)
    while end and lengths[end - 1] == 0:
        end -= 1
    return end


def same_batch(q_arg: str, q_lengths: list | tuple, kv_arg: str, kv_lengths: list | tuple) -> Violation | None:
    q_batch, kv_batch = batch_counts(q_lengths), batch_counts(kv_lengths)
    if q_batch == kv_batch:
        return None
    return Violation(
        "same_batch",
        f"{q_arg} ({q_batch} sequences) and {kv_arg} ({kv_batch} sequences) must describe the same batch",
        LENGTHS_STALE,
        (),
    )


def per_sequence_lengths_fit(arg: str, lengths: list | tuple, capacity: int, batch: int | None, where: str, owner: str = "") -> Violation | None:
    """Per-sequence lengths: one per sequence (or one for all), each in [0, capacity] (``owner + where``, worded on failure)."""
    if batch is not None and len(lengths) not in (batch, 1):
        problem = f"has {len(lengths)} entries for a batch of {batch}"
    elif lengths and min(lengths) < 0:
        problem = f"has a negative entry {min(lengths)}"
    elif lengths and max(lengths) > capacity:
        problem = f"has {max(lengths)} > {capacity}"
    else:
        return None
    return Violation(
        "per_sequence_lengths_fit",
        f"{arg} {_short(lengths)} {problem}; each length must be >= 0 and fit {owner}{where} ({capacity})",
        LENGTHS_STALE,
        (),
    )


def length_tensor_shape(arg: str, tensor: Any, entries: tuple | None) -> Violation | None:
    """A device-resident length tensor: only its shape and dtype can be checked without a sync."""
    shape = tensor.shape
    dtype = tensor.dtype
    integral = not dtype.is_floating_point and not dtype.is_complex and str(dtype) != "torch.bool"  # a mask is no length
    if len(shape) == 1 and integral and (entries is None or shape[0] in entries):
        return None
    want = "a 1-D integer tensor" + (f" with {' or '.join(map(str, entries))} entries" if entries else "")
    return Violation("length_tensor_shape", f"{describe(arg, tensor)} {dtype} must be {want}", LENGTHS_STALE, ((arg, tensor),))


def slot_count_matches(slot_name: str, slots: Any, tokens: int, key: Any) -> Violation | None:
    count = len(slots) if not is_tensor_like(slots) else (slots.shape[0] if len(slots.shape) == 1 else None)
    if count == tokens:
        return None
    return Violation(
        "slot_count_matches",
        f"{describe(slot_name, slots)} must hold one slot per token of {describe('key', key)} ({tokens})",
        "slots computed for a different set of tokens than the K/V being written",
        ((slot_name, slots), ("key", key)),
    )


def caches_match(key_cache: Any, value_cache: Any, axes: tuple, key_name: str = "key_cache", value_name: str = "value_cache") -> Violation | None:
    """Both caches: same number of blocks, block size and KV heads (the given axes)."""
    k_shape, v_shape = key_cache.shape, value_cache.shape
    if len(k_shape) == len(v_shape) and all(k_shape[a] == v_shape[a] for a in axes):
        return None
    return Violation(
        "caches_match",
        f"{describe(key_name, key_cache)} and {describe(value_name, value_cache)} must agree on blocks, block size and KV heads",
        CACHE_POOLS,
        ((key_name, key_cache), (value_name, value_cache)),
    )


def _short(values: list | tuple) -> str:
    return str(list(values)) if len(values) <= 8 else f"[{', '.join(map(str, values[:4]))}, ..., {', '.join(map(str, values[-2:]))}] ({len(values)} entries)"
