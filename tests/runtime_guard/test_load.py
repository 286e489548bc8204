"""Load: eight threads call guarded ops while a ninth installs and uninstalls the guard over and over.

Every call either reaches the kernel exactly once or is stopped by a KVConsistencyError (and then
never reaches it); nothing else may be raised, and the last uninstall leaves the original objects.
"""

from __future__ import annotations

import sys
import threading

import pytest
import torch
import torch_npu

import runtime_guard
from runtime_guard import KVConsistencyError, ops, patching
from tests.runtime_guard.calls import AttentionCase, narrowed
from tests.runtime_guard.conftest import npu
from tests.runtime_guard.hypothesis_profiles import count, note

CALLERS = 8
CALLS_PER_CALLER = 150


def originals() -> dict:
    """Every guarded name in torch_npu and torch.ops.<ns>, with its overloads."""
    found = {}
    for row in ops.ROWS:
        home = torch_npu.atb if row.name in torch_npu.ATB_MODULE_OPS else torch_npu  # torch_npu.atb.X for ATB-only ops
        for where, owner in (("torch_npu", home), (row.namespace, getattr(torch.ops, row.namespace))):
            packet = getattr(owner, row.name)
            found[(where, row.name)] = packet
            for overload in packet.overloads():
                found[(where, row.name, overload)] = getattr(packet, overload)
    return found


def caller_calls(index: int) -> list:
    """(call, a tensor only that call passes) for one thread: valid and drifted calls of several ops."""
    valid = AttentionCase("npu_fusion_attention", "TND")
    drifted = AttentionCase("npu_prompt_flash_attention", "BSND")
    drifted.k = narrowed(drifted.k, 1, 3)
    out_case = AttentionCase("npu_fused_infer_attention_score", "BSND")
    out_args, out_kwargs = out_case.arguments()
    out, lse = npu(*out_case.q.shape), npu(1)
    key, value, cache, slots = npu(5, 2, 8), npu(5, 2, 8), npu(6, 4, 2, 8), npu(5, dtype=torch.int32)
    other_key, short_slots = npu(5, 2, 8), npu(4, dtype=torch.int32)
    v_args, v_kwargs = valid.arguments()
    d_args, d_kwargs = drifted.arguments()
    calls = [
        (lambda: torch_npu.npu_fusion_attention(*v_args, **v_kwargs), valid.q),
        (lambda: torch.ops.npu.npu_fusion_attention.default(*v_args, **v_kwargs), valid.q),
        (lambda: torch_npu.npu_prompt_flash_attention(*d_args, **d_kwargs), drifted.q),
        (lambda: torch_npu.npu_fused_infer_attention_score.out(*out_args, **out_kwargs, out=[out, lse]), out_case.q),
        (lambda: torch_npu._npu_reshape_and_cache(key, value, cache, cache, slots), key),
        (lambda: torch.ops.npu.npu_scatter_pa_kv_cache(other_key, value, cache, cache, short_slots), short_slots),
    ]
    return calls[index % 2 :] + calls[: index % 2]


def reached(marker: torch.Tensor, calls: list) -> int:
    return sum(1 for call in calls if any(arg is marker for arg in (*call.args, *call.kwargs.values())))


@pytest.mark.filterwarnings("ignore::runtime_guard.KVConsistencyWarning")
def test_calls_are_neither_lost_nor_doubled_while_the_guard_comes_and_goes(fresh_reporter):
    torch_npu.load_atb_now()
    runtime_guard.install("raise")  # the first install imports torch._dynamo (seconds); pay that before the race
    runtime_guard.uninstall()
    before = originals()
    module_class, namespace_class = type(torch_npu), type(torch.ops.npu)
    start = len(torch_npu.calls)
    made: dict = {}  # marker id -> calls made
    stopped: dict = {}  # marker id -> calls the guard stopped
    markers: dict = {}
    unexpected: list = []
    lock = threading.Lock()
    callers_done = threading.Event()
    toggles = [0]

    def caller(index: int) -> None:
        calls = caller_calls(index)
        try:
            for n in range(CALLS_PER_CALLER):
                call, marker = calls[n % len(calls)]
                key = id(marker)
                with lock:
                    markers[key] = marker
                    made[key] = made.get(key, 0) + 1
                try:
                    call()
                except KVConsistencyError:
                    with lock:
                        stopped[key] = stopped.get(key, 0) + 1
        except BaseException as exc:  # noqa: BLE001 - anything else fails the test below
            unexpected.append(exc)

    def installer() -> None:
        try:
            while not callers_done.is_set():
                runtime_guard.install("raise" if toggles[0] % 3 else "warn")
                runtime_guard.uninstall()
                toggles[0] += 1
        except BaseException as exc:  # noqa: BLE001 - fails the test below
            unexpected.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so installs land between a caller's steps
    try:
        threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
        toggler = threading.Thread(target=installer)
        toggler.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        callers_done.set()
        toggler.join()
    finally:
        sys.setswitchinterval(interval)
        runtime_guard.uninstall()

    assert unexpected == []
    seen = torch_npu.calls[start:]
    for key, marker in markers.items():
        assert reached(marker, seen) == made[key] - stopped.get(key, 0), "every call that was not stopped reached the kernel exactly once"
    assert sum(made.values()) == CALLERS * CALLS_PER_CALLER
    assert toggles[0] > 1 and stopped, "the guard came and went while the calls ran"
    after = originals()
    assert after.keys() == before.keys() and all(after[key] is before[key] for key in before)
    assert not any(isinstance(value, patching.GuardedOp) for value in after.values())
    assert type(torch_npu) is module_class and type(torch.ops.npu) is namespace_class
    prop = "load: 8 calling threads under install/uninstall"
    count(prop)
    note(prop, "calls made", sum(made.values()))
    note(prop, "stopped as violations", sum(stopped.values()))
    note(prop, "install/uninstall cycles", toggles[0])

