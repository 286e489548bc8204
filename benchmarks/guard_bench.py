"""Added cost per guarded TND ``npu_fusion_attention`` call, through the torch_npu test double.

Run in a fresh interpreter (``run.py`` does): it puts the test double on ``sys.path``.
Prints one JSON object: per batch size, the median call time unguarded, guarded, guarded with the
pure-Python length check (what a build without a C compiler runs), and through two hand-written
validators, a tight one (the guard's checks, each attribute read once) and a slack one, and the
added costs (``guarded_added``, ``guarded_py_added``, ``tight_added``, ``baseline_added``: the
median of per-round differences to the unguarded call), in microseconds;
under ``"lengths_check"``, which length check ``guarded`` used.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

DOUBLE = Path(__file__).resolve().parent.parent / "tests" / "runtime_guard" / "double"
BATCHES = (1, 8, 64, 256, 1024)
HEADS, KV_HEADS, DIM, SEQ = 8, 2, 16, 2
REPEATS = 2000
# The target's batch gets four times the rounds: under load the double's op jitters by tens of
# microseconds, and two identical wrappers measured 1.2 us apart over 1,500 rounds (load average
# 10 on 2 cores), more than the guard and the tight validator differ by.
TARGET_BATCH, TARGET_REPEATS = 64, 8000


def baseline_validator(q, k, v, head_num, layout, actual_seq_qlen, actual_seq_kvlen):
    """A slack hand-written validator: basic K/V/Q shape and cu_seqlens checks, reading ``.shape``
    12 times and ``.dim()`` 3 times (kept as an information row; the target is tight_validator)."""
    if layout != "TND" or q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise ValueError("TND tensors must be 3-D")
    if k.shape[0] != v.shape[0] or k.shape[1] != v.shape[1]:
        raise ValueError(f"K {tuple(k.shape)} and V {tuple(v.shape)} disagree on tokens or heads")
    if q.shape[2] != k.shape[2] or q.shape[1] % k.shape[1] or q.shape[1] != head_num:
        raise ValueError("Q/K heads or head dim disagree")
    if len(actual_seq_qlen) != len(actual_seq_kvlen):
        raise ValueError("cu_seqlens batch sizes differ")
    previous = 0
    for end in actual_seq_kvlen:
        if end < previous:
            raise ValueError("cu_seqlens must not decrease")
        previous = end
    if actual_seq_qlen[-1] != q.shape[0] or previous != k.shape[0]:
        raise ValueError("cu_seqlens do not end at the token count")


_npu_device = None


def tight_validator(q, k, v, head_num, layout, actual_seq_qlen, actual_seq_kvlen):
    """The guard's checks of this call written by hand, each tensor's device, dtype and shape read
    once: one npu device, one dtype, TND, K/V tokens and heads, Q/K head dims, head_num, GQA, and
    cumulative lengths from >= 0, never decreasing, ending at the token count (one list judged
    once when both sides pass it), the same batch. It trusts the entries to be ints (sorted()
    would compare a tensor entry), which the guard checks too."""
    global _npu_device
    device = q.device
    if device != _npu_device:  # device.type costs more than comparing with the last npu device seen
        if device.type != "npu":
            raise ValueError("Q, K and V must be on one npu device")
        _npu_device = device
    if k.device != device or v.device != device:
        raise ValueError("Q, K and V must be on one npu device")
    dtype = q.dtype
    if k.dtype != dtype or v.dtype != dtype:
        raise ValueError("Q, K and V must share one dtype")
    if layout != "TND":
        raise ValueError("layout must be TND")
    q_tokens, q_heads, q_dim = q.shape
    k_tokens, k_heads, k_dim = k.shape
    v_tokens, v_heads, _ = v.shape
    if k_tokens != v_tokens or k_heads != v_heads or q_dim != k_dim or head_num != q_heads or k_heads <= 0 or q_heads % k_heads:
        raise ValueError("Q/K/V heads, tokens or head dims disagree")
    lists = ((actual_seq_qlen, q_tokens),) if actual_seq_kvlen is actual_seq_qlen and q_tokens == k_tokens else ((actual_seq_qlen, q_tokens), (actual_seq_kvlen, k_tokens))
    for ends, total in lists:
        if not ends or ends[0] < 0 or ends[-1] != total or ends != sorted(ends):
            raise ValueError("cu_seqlens must be cumulative and end at the token count")
    if len(actual_seq_qlen) != len(actual_seq_kvlen):
        raise ValueError("cu_seqlens batch sizes differ")


def _measure(torch, torch_npu, op, guarded_op, guarded_py, batch: int) -> dict:
    tokens = batch * SEQ
    q = torch_npu.npu(torch.zeros(tokens, HEADS, DIM, dtype=torch.float16))
    k = torch_npu.npu(torch.zeros(tokens, KV_HEADS, DIM, dtype=torch.float16))
    v = torch_npu.npu(torch.zeros(tokens, KV_HEADS, DIM, dtype=torch.float16))
    ends = list(range(SEQ, tokens + 1, SEQ))

    def unguarded():
        return op(q, k, v, HEADS, "TND", actual_seq_qlen=ends, actual_seq_kvlen=ends, scale=0.5)

    def baseline():
        baseline_validator(q, k, v, HEADS, "TND", ends, ends)
        return op(q, k, v, HEADS, "TND", actual_seq_qlen=ends, actual_seq_kvlen=ends, scale=0.5)

    def tight():
        tight_validator(q, k, v, HEADS, "TND", ends, ends)
        return op(q, k, v, HEADS, "TND", actual_seq_qlen=ends, actual_seq_kvlen=ends, scale=0.5)

    def guarded():
        return guarded_op(q, k, v, HEADS, "TND", actual_seq_qlen=ends, actual_seq_kvlen=ends, scale=0.5)

    def guarded_pure_python():
        return guarded_py(q, k, v, HEADS, "TND", actual_seq_qlen=ends, actual_seq_kvlen=ends, scale=0.5)

    calls = [("unguarded", unguarded), ("baseline", baseline), ("tight", tight), ("guarded", guarded), ("guarded_py", guarded_pure_python)]
    times: dict[str, list[int]] = {name: [] for name, _ in calls}
    # Every variant once per round, so load drifting during the run hits them alike, in an order
    # shuffled each round (seeded): in a fixed order the call right after the unguarded one ran
    # about 1 us cheaper, whichever variant it was.
    rng = random.Random(batch)
    rounds = TARGET_REPEATS if batch == TARGET_BATCH else REPEATS
    for _ in range(rounds):
        rng.shuffle(calls)
        for name, call in calls:
            start = time.perf_counter_ns()
            call()
            times[name].append(time.perf_counter_ns() - start)
        torch_npu.calls.clear()
    kept = slice(rounds // 10, None)  # warm-up rounds dropped
    medians = {name: statistics.median(t[kept]) / 1000 for name, t in times.items()}
    # Added cost: the median of each round's difference to that round's unguarded call, so a
    # slow stretch (another process, the kernel's allocator) hits both sides of a difference.
    for name in ("baseline", "tight", "guarded", "guarded_py"):
        pairs = zip(times[name][kept], times["unguarded"][kept])
        medians[f"{name}_added"] = statistics.median(a - b for a, b in pairs) / 1000
    return medians


def main() -> None:
    sys.path.insert(0, str(DOUBLE))
    import torch
    import torch_npu

    import runtime_guard
    from runtime_guard import fast_paths, patching

    # The double computes real packed attention for TND; the guard's cost is what is measured,
    # so the double's kernel is made trivial (the dispatcher round trip stays).
    torch_npu.reference_packed_attention = lambda q, k, v, q_ends, kv_ends, scale: q.new_zeros(q.shape[0], q.shape[1], v.shape[2])
    # That zero fill runs on torch's thread pool from batch 256 up; with the other core busy its
    # barrier stalls for milliseconds and drowns the microseconds measured here.
    torch.set_num_threads(1)
    op = torch_npu.npu_fusion_attention
    runtime_guard.install("raise")
    guarded_op = torch_npu.npu_fusion_attention
    assert guarded_op is not op, "the guard did not patch npu_fusion_attention"
    # The same wrapper with the pure-Python length check in its fast path (made while it stands in for the C one).
    compiled, fast_paths.cumulative = fast_paths.cumulative, fast_paths.cumulative_py
    try:
        guarded_py = patching.GuardedOp(op, guarded_op._row, guarded_op._label)
    finally:
        fast_paths.cumulative = compiled
    rows: dict = {}
    try:
        for batch in BATCHES:
            rows[batch] = _measure(torch, torch_npu, op, guarded_op, guarded_py, batch)
    finally:
        runtime_guard.uninstall()
    rows["lengths_check"] = "compiled (runtime_guard._lengths)" if fast_paths.cumulative is not fast_paths.cumulative_py else "pure Python (not built)"
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
