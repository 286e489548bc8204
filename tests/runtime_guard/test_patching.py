"""Where the wrappers live, how they come off, and what they never break."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import types
import warnings

import pytest
import torch
import torch_npu
from torch.utils._python_dispatch import TorchDispatchMode

import runtime_guard
from runtime_guard import (
    KVConsistencyError,
    KVGuardInternalWarning,
    ops,
    patching,
)
from tests.runtime_guard.calls import AttentionCase
from tests.runtime_guard.conftest import DOUBLE_DIR, npu

GUARDED = [(row.name, row.namespace) for row in ops.ROWS]


def current_objects() -> dict:
    torch_npu._load_atb()
    python_home = lambda name: torch_npu.atb if name in torch_npu.ATB_MODULE_OPS else torch_npu  # noqa: E731 - torch_npu.atb.X for ATB-only ops
    return {(name, where): (getattr(python_home(name), name) if where == "torch_npu" else getattr(getattr(torch.ops, ns), name)) for name, ns in GUARDED for where in ("torch_npu", ns)}


def test_uninstall_restores_the_exact_original_objects(fresh_reporter):
    torch_npu.load_atb_now()
    before, module_class, ns_class = current_objects(), type(torch_npu), type(torch.ops.npu)
    runtime_guard.install("raise")
    assert all(isinstance(obj, patching.GuardedOp) for obj in current_objects().values())
    runtime_guard.uninstall()
    after = current_objects()
    assert all(after[key] is before[key] for key in before)
    assert type(torch_npu) is module_class and type(torch.ops.npu) is ns_class


def test_install_twice_wraps_once_and_uninstall_twice_is_harmless(fresh_reporter):
    raw = torch_npu.npu_fusion_attention
    runtime_guard.install("raise")
    first = torch_npu.npu_fusion_attention
    runtime_guard.install("warn")
    assert torch_npu.npu_fusion_attention is first and first._kvguard_original is raw
    assert runtime_guard.mode() == "warn"
    runtime_guard.uninstall()
    runtime_guard.uninstall()
    assert torch_npu.npu_fusion_attention is raw and runtime_guard.mode() is None


def test_guarded_block_restores_the_previous_state(fresh_reporter):
    raw = torch_npu.npu_fusion_attention
    with runtime_guard.guarded("raise"):
        assert isinstance(torch_npu.npu_fusion_attention, patching.GuardedOp)
    assert torch_npu.npu_fusion_attention is raw


def test_a_wrapper_kept_after_uninstall_passes_calls_through_unchecked(fresh_reporter):
    runtime_guard.install("raise")
    kept = torch_npu.npu_prompt_flash_attention
    runtime_guard.uninstall()
    case = AttentionCase("npu_prompt_flash_attention", "BSND")
    case.heads = 8
    args, kwargs = case.arguments()
    kept(*args, **kwargs)
    assert torch_npu.calls[-1].args[0] is case.q


def test_python_dispatch_sees_the_raw_op_overload(guard):
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    case = AttentionCase("npu_fusion_attention", "TND")
    with Record():
        case.call()
    raw = patching.unwrap(torch.ops.npu.npu_fusion_attention).default
    assert raw in seen and all(isinstance(f, torch._ops.OpOverload) for f in seen)


FRESH_INSTALL = """
import sys
import torch
import torch_npu
from torch.utils._python_dispatch import TorchDispatchMode
import runtime_guard
from runtime_guard import patching

runtime_guard.install("raise")
print("dynamo imported by install:", "torch._dynamo" in sys.modules)
seen = []

class Record(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        seen.append(func)
        raise RuntimeError("recorded")

q, kv = torch_npu.npu(torch.randn(8, 4, 8)), torch_npu.npu(torch.randn(8, 2, 8))
try:
    with Record():
        torch.ops.npu.npu_fusion_attention.default(q, kv, kv, 4, "TND", actual_seq_qlen=[8], actual_seq_kvlen=[8])
except RuntimeError:
    pass
print("dispatch saw the raw overload:", seen == [patching.unwrap(torch.ops.npu.npu_fusion_attention).default])
"""


def test_first_install_in_a_fresh_process_pins_the_raw_overloads_without_importing_dynamo(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVGUARD")}
    env["PYTHONPATH"] = str(DOUBLE_DIR)
    result = subprocess.run([sys.executable, "-c", FRESH_INSTALL], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "dynamo imported by install: False" in result.stdout
    assert "dispatch saw the raw overload: True" in result.stdout


def test_lazy_atb_wrapper_overwritten_after_install_stays_guarded(guard):
    name = "_npu_reshape_and_cache"
    torch_npu.__dict__[name] = torch_npu._lazy_atb(name)  # back to the lazy state, bypassing the watcher
    with pytest.raises(KVConsistencyError):
        getattr(torch_npu, name)(npu(5, 2, 8), npu(4, 2, 8), npu(6, 4, 2, 8), npu(6, 4, 2, 8), npu(5, dtype=torch.int32))
    assert isinstance(getattr(torch_npu, name), patching.GuardedOp)
    assert getattr(torch_npu, name) is torch.ops.atb._npu_reshape_and_cache


def test_torch_npu_assigning_a_raw_packet_later_gets_it_wrapped(guard):
    raw = patching.unwrap(torch.ops.atb._npu_paged_attention)
    torch_npu._npu_paged_attention = raw
    assert isinstance(torch_npu._npu_paged_attention, patching.GuardedOp)
    assert torch_npu._npu_paged_attention._kvguard_original is raw


def test_early_bound_original_is_reported_once(fresh_reporter):
    user = types.ModuleType("user_model")
    user.npu_fusion_attention = torch_npu.npu_fusion_attention
    sys.modules["user_model"] = user
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runtime_guard.install("raise")
            runtime_guard.uninstall()
            runtime_guard.install("raise")
        early = [w for w in caught if "user_model.npu_fusion_attention" in str(w.message)]
        assert len(early) == 1 and "not checked" in str(early[0].message)
    finally:
        runtime_guard.uninstall()
        del sys.modules["user_model"]


@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_a_guard_bug_never_replaces_the_call_in_either_mode(fresh_reporter, monkeypatch, mode):
    def broken(*values):
        raise ZeroDivisionError("bug")

    case = AttentionCase("npu_fusion_attention", "BSND")  # BSND: judged by the validator, not the TND fast path
    with runtime_guard.guarded(mode), warnings.catch_warnings(record=True) as caught:
        wrapper = torch_npu.npu_fusion_attention
        monkeypatch.setattr(wrapper, "_row", wrapper._row._replace(validate=broken))
        warnings.simplefilter("always")
        case.call()
        case.call()
    assert torch_npu.calls[-1].args[0] is case.q  # the call reached the op both times
    internal = [w for w in caught if issubclass(w.category, KVGuardInternalWarning)]
    assert len(internal) == 1, "said once per op and error type"
    message = str(internal[0].message)
    assert "ZeroDivisionError" in message and "please report" in message and "went to the kernel unchecked" in message
    assert internal[0].filename.endswith("calls.py")  # the line that called the op (AttentionCase.call), not the guard
    assert fresh_reporter.not_judged_rows()[0][:3] == ("torch_npu.npu_fusion_attention", "the guard failed: ZeroDivisionError", 2)


def test_a_guard_bug_in_warn_mode_warns_and_lets_the_call_through(warn_guard, monkeypatch):
    def broken(*values):
        raise ZeroDivisionError("bug")

    wrapper = torch_npu.npu_fusion_attention
    monkeypatch.setattr(wrapper, "_row", wrapper._row._replace(validate=broken))
    case = AttentionCase("npu_fusion_attention", "BSND")  # judged by the validator, not the TND fast path
    with pytest.warns(KVGuardInternalWarning):
        case.call()
    assert torch_npu.calls[-1].args[0] is case.q


def test_garbage_arguments_in_raise_mode_get_our_clear_error(guard):
    with pytest.raises(KVConsistencyError) as info:
        torch_npu.npu_fusion_attention(None, npu(4, 2, 8), npu(4, 2, 8), 2, "TND")
    assert info.value.check == "arguments_are_tensors" and "query=NoneType" in str(info.value)


def test_garbage_arguments_in_warn_mode_reach_the_kernel_whose_error_surfaces(warn_guard):
    with pytest.warns(runtime_guard.KVConsistencyWarning), pytest.raises(Exception) as info:
        torch_npu.npu_fusion_attention(None, npu(4, 2, 8), npu(4, 2, 8), 2, "TND")
    assert not isinstance(info.value, KVConsistencyError)


def test_a_layout_that_is_not_a_string_is_our_error_in_raise_mode(guard):
    with pytest.raises(KVConsistencyError) as info:
        torch_npu.npu_fusion_attention(npu(4, 2, 8), npu(4, 2, 8), npu(4, 2, 8), "TND", 2)
    assert info.value.check == "layout_is_text"


def test_missing_required_argument_is_named(guard):
    with pytest.raises(KVConsistencyError) as info:
        torch_npu.npu_fusion_attention(npu(4, 2, 8), npu(4, 2, 8))
    assert "value missing" in str(info.value)


def test_concurrent_calls_survive_install_and_uninstall(fresh_reporter):
    case = AttentionCase("npu_fusion_attention", "TND")
    args, kwargs = case.arguments()
    errors, done = [], []
    start = len(torch_npu.calls)

    def caller():
        try:
            for _ in range(40):
                torch_npu.npu_fusion_attention(*args, **kwargs)
                done.append(1)
        except Exception as exc:  # noqa: BLE001 - any exception fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(20):
        runtime_guard.install("raise")
        runtime_guard.uninstall()
    for thread in threads:
        thread.join()
    assert errors == [] and len(done) == 160
    assert sum(1 for call in torch_npu.calls[start:] if call.op == "npu_fusion_attention.default") == 160


def test_torch_compile_traces_through_the_guard_and_the_graph_is_checked_when_it_runs(warn_guard):
    def attention(q, k, v):
        return torch.ops.npu.npu_fusion_attention(q, k, v, 2, "TND", actual_seq_qlen=[4], actual_seq_kvlen=[4])[0]

    q, k, v = torch.randn(4, 2, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8)
    compiled = torch.compile(attention, backend="eager", fullgraph=True)
    with pytest.warns(runtime_guard.KVConsistencyWarning, match="one npu device"):
        out = compiled(q, k, v)  # host tensors for an npu kernel: flagged at run time, not during tracing
    assert out.shape == (4, 2, 8)
    assert [row[1] for row in warn_guard.summary_rows()] == ["one_device_of_type"]


def test_a_call_traced_by_non_strict_export_goes_to_the_original_unchecked(guard, monkeypatch):
    # Non-strict export runs the wrapper's Python with torch.compiler's compiling flag set (Dynamo
    # is not involved): the call must go to the raw op, as under torch.compile.
    q, k, v = torch.randn(4, 2, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8)  # host tensors for an npu kernel
    call = lambda: torch_npu.npu_fusion_attention(q, k, v, 2, "TND", actual_seq_qlen=[4], actual_seq_kvlen=[4])
    with pytest.raises(KVConsistencyError, match="one npu device"):
        call()
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)
    assert call()[0].shape == (4, 2, 8)  # not raised: handed to the op unchecked
