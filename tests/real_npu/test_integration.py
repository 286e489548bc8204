"""The guard inside the real torch_npu: overload pinning, FakeTensorMode, torchair, op metadata,
calls it does not understand, its own faults, and the KVGUARD start-up path (issue 11, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import runtime_guard
from runtime_guard import KVGuardInternalWarning, KVGuardNotJudgedWarning, ops, patching
from runtime_guard.reporting import format_summary
from tests.real_npu.harness import kernel_calls, not_judged, npu_tensor, passes, torch, torch_npu

ROOT = Path(__file__).resolve().parents[2]


def packets() -> list:
    """(row, raw packet) for every guarded op the real package registers."""
    torch_npu._npu_paged_attention  # noqa: B018 - the ATB ops are registered by the time the guard resolves them
    found = []
    for row in ops.ROWS:
        wrapper = getattr(getattr(torch.ops, row.namespace), row.name)
        assert isinstance(wrapper, patching.GuardedOp), f"torch.ops.{row.namespace}.{row.name} is not guarded"
        found.append((row, patching.unwrap(wrapper)))
    return found


def fresh(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run code in a new interpreter of this venv, stubs loaded first, KVGUARD etc. from env."""
    prelude = "from tests.real_npu import environment, stubs; stubs.load(environment.STUBS)\n"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KVGUARD")}
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=600, check=False)


class _Stop(Exception):
    pass


class _FirstPythonDispatch(TorchDispatchMode):
    """Records the op object Python-level dispatch is handed, then stops before any kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        self.seen.append(func)
        raise _Stop


def test_every_overload_of_every_guarded_op_reaches_python_dispatch_as_the_raw_op(guard):
    """FakeTensor, torch.compile and subclasses get the op object the dispatcher cached for
    torch.ops.<ns>.<op>.<overload>; the guard pins the raw one before its wrapper takes the name.
    Fails on the guard that could not pin FIA/FIA_v2 .out (their ``Tensor[] out``)."""
    checked = []
    for row, raw in packets():
        for name in raw.overloads():
            overload = getattr(raw, name)
            args, kwargs = patching._placeholder_arguments(overload._schema)
            mode = _FirstPythonDispatch()
            with mode, pytest.raises(_Stop):
                overload(*args, **kwargs)
            assert mode.seen[0] is overload, f"{overload} reached Python dispatch as {mode.seen[0]!r}"
            checked.append(f"{row.name}.{name}")
    assert "npu_fused_infer_attention_score.out" in checked and "npu_fused_infer_attention_score_v2.out" in checked


def test_a_guarded_import_of_torch_npu_warns_about_nothing():
    """KVGUARD=raise, then `import torch` (which autoloads torch_npu, as on an Ascend machine)."""
    run = fresh(
        "import warnings; warnings.simplefilter('always')\n"
        "import torch, torch_npu\n"
        "from runtime_guard.patching import GuardedOp\n"
        "assert isinstance(torch_npu.npu_fused_infer_attention_score, GuardedOp)\n"
        "assert isinstance(torch.ops.npu.npu_fused_infer_attention_score_v2.out, GuardedOp)\n"
        "print('guarded')\n",
        KVGUARD="raise",
    )
    assert run.returncode == 0 and "guarded" in run.stdout, run.stderr[-3000:]
    assert "could not pin" not in run.stderr and "Warning" not in run.stderr, run.stderr[-3000:]


def _fake_fia_out() -> tuple:
    mode = FakeTensorMode()

    def fake(*shape: int, dtype: torch.dtype = torch.float16) -> FakeTensor:
        return FakeTensor(mode, torch.empty(shape, dtype=dtype, device="meta"), torch.device("npu", 0))

    q = fake(1, 8, 128)
    out = [fake(1, 8, 128), fake(1, 8, 1, dtype=torch.float32)]
    with mode:
        try:
            result = torch.ops.npu.npu_fused_infer_attention_score.out(q, q, q, num_heads=1, input_layout="BSH", out=out)
        except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
            return ("raised", type(exc).__name__, str(exc).splitlines()[0])
    return ("returned", repr(result))


@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_fia_out_under_fake_tensor_mode_behaves_exactly_as_unguarded(fresh_reporter, mode):
    """Was: `func must be an OpOverload, got GuardedOp` (works unguarded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runtime_guard.install(mode)
        try:
            guarded = _fake_fia_out()
        finally:
            runtime_guard.uninstall()
        unguarded = _fake_fia_out()
        runtime_guard.install("raise")
    assert guarded == unguarded
    assert "GuardedOp" not in str(guarded)


def test_torchair_registers_its_fia_converter_on_the_real_op_under_the_guard():
    """torchair sets ``op._ge_converter`` on the op object it names; the graph later holds the raw op."""
    run = fresh(
        "import torch, torch_npu\n"
        "from runtime_guard.patching import GuardedOp, unwrap\n"
        "import torch_npu.dynamo.torchair\n"
        "import importlib\n"
        "importlib.import_module('torchair._ge_concrete_graph.ge_converter.custom.fused_infer_attention_score')\n"
        "wrapper = torch.ops.npu.npu_fused_infer_attention_score.default\n"
        "assert isinstance(wrapper, GuardedOp)\n"
        "raw = unwrap(wrapper)\n"
        "assert '_ge_converter' not in vars(wrapper), 'the converter stuck to the guard'\n"
        "assert raw._ge_converter is wrapper._ge_converter\n"
        "print('attached to', raw)\n",
        KVGUARD="raise",
    )
    assert run.returncode == 0 and "attached to npu.npu_fused_infer_attention_score.default" in run.stdout, run.stderr[-3000:]


def test_wrappers_keep_the_ops_doc_name_and_wrapped(guard):
    """help(torch_npu.npu_fused_infer_attention_score) shows torch_npu's own documentation."""
    for row, raw in packets():
        wrapper = getattr(getattr(torch.ops, row.namespace), row.name)
        assert wrapper.__wrapped__ is raw and wrapper.__doc__ == raw.__doc__ and wrapper.__name__ == raw.__name__, row.name
        for name in raw.overloads():
            overload = getattr(wrapper, name)
            assert overload.__wrapped__ is getattr(raw, name) and overload.__doc__ == getattr(raw, name).__doc__, f"{row.name}.{name}"
    doc = torch_npu.npu_fused_infer_attention_score.__doc__
    assert doc and "npu_fused_infer_attention_score" in doc and "kvlint" not in doc


def test_torch_npu_atb_ops_are_guarded_once_loaded(guard):
    """torch_npu.atb.X (ATB-only ops such as npu_paged_cache_load) is replaced by torch.ops.atb.X on the first ATB call."""
    torch_npu._npu_paged_attention  # noqa: B018
    torch_npu.atb.npu_paged_cache_load  # noqa: B018
    key_cache = npu_tensor(4, 16, 2, 64)
    block_table = npu_tensor(2, 4, dtype=torch.int32)
    lens = npu_tensor(2, dtype=torch.int32)
    # The first call goes through the lazy function, which loads ATB and calls torch.ops.atb.X (guarded).
    torch_npu.atb.npu_paged_cache_load(key_cache, key_cache, block_table, lens)
    assert isinstance(torch_npu.atb.npu_paged_cache_load, patching.GuardedOp)
    assert torch_npu.atb.npu_paged_cache_load._label == "torch_npu.atb.npu_paged_cache_load"


def test_a_call_the_guard_does_not_understand_goes_through_and_is_noted_once_per_op_and_reason(warn_guard):
    key = npu_tensor(6, 2, 64)
    caches = npu_tensor(4, 16, 2, 64), npu_tensor(4, 16, 2, 64)
    slots = npu_tensor(6, dtype=torch.int32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch_npu.npu_scatter_pa_kv_cache(key, key, *caches, slots, cache_mode="A_FUTURE_MODE")
    assert len(kernel_calls()) == 3
    notes = [w for w in caught if issubclass(w.category, KVGuardNotJudgedWarning)]
    assert len(notes) == 1 and "A_FUTURE_MODE" in str(notes[0].message) and notes[0].filename == __file__
    (op, reason, count, site), = warn_guard.not_judged_rows()
    assert op == "torch_npu.npu_scatter_pa_kv_cache" and count == 3 and __file__ in site
    assert "3 call(s) not judged" in format_summary(warn_guard.summary_rows(), warn_guard.not_judged_rows())


def test_not_judged_in_raise_mode_reaches_the_kernel_unchanged(guard):
    key = npu_tensor(6, 2, 64)
    not_judged(torch_npu.npu_scatter_pa_kv_cache, "A_FUTURE_MODE", key, key, npu_tensor(4, 16, 2, 64), npu_tensor(4, 16, 2, 64), npu_tensor(6, dtype=torch.int32), cache_mode="A_FUTURE_MODE")


@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_a_fault_of_the_guard_never_replaces_the_ops_own_behaviour(fresh_reporter, monkeypatch, mode):
    """Was: raise mode turned a guard bug into KVGuardInternalError instead of the call."""

    def broken(*values):
        raise ZeroDivisionError("a bug in a validator")

    runtime_guard.install(mode)
    try:
        wrapper = torch_npu.npu_fused_infer_attention_score
        monkeypatch.setattr(wrapper, "_row", wrapper._row._replace(validate=broken))
        q = npu_tensor(1, 8, 128)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            wrapper(q, q, q, num_heads=1, input_layout="BSH")
            wrapper(q, q, q, num_heads=1, input_layout="BSH")
    finally:
        runtime_guard.install("raise")
    assert [c.op for c in kernel_calls()] == ["npu::npu_fused_infer_attention_score"] * 2
    internal = [w for w in caught if issubclass(w.category, KVGuardInternalWarning)]
    assert len(internal) == 1 and "please report" in str(internal[0].message) and internal[0].filename == __file__


def test_valid_calls_through_every_entry_point_reach_the_kernel_unchanged(guard):
    q = npu_tensor(9, 4, 64)
    for entry in (torch_npu.npu_fusion_attention, torch.ops.npu.npu_fusion_attention, torch.ops.npu.npu_fusion_attention.default):
        passes(entry, q, q, q, 4, "TND", actual_seq_qlen=[4, 9], actual_seq_kvlen=[4, 9])
