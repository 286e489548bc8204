"""The real torch_npu under the guard, tensors that stop before the kernel, and the two verdicts.

Importing this module loads the stub CANN libraries, installs the guard in raise mode (what
KVGUARD=raise does at start-up) and then imports torch the way an Ascend machine does: torch
autoloads the real torch_npu, whose ops the guard's import hook wraps on the way in.
The contract tests use is in README.md next to this file.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

from tests.real_npu import stubs
from tests.real_npu.environment import STUBS, WHY_NOT

assert WHY_NOT is None, WHY_NOT
_STUB_HANDLES = stubs.load(STUBS)

import runtime_guard  # noqa: E402 - the guard must be armed before torch autoloads torch_npu

runtime_guard.install("raise")

import pytest  # noqa: E402
import torch  # noqa: E402 - autoloads torch_npu (torch's device-backend entry point)
import torch_npu  # noqa: E402
from torch.utils._pytree import tree_map  # noqa: E402

from runtime_guard import KVConsistencyError, patching  # noqa: E402
from runtime_guard.checks import NotJudged  # noqa: E402
from runtime_guard.reporting import Reporter  # noqa: E402

assert "site-packages" in torch_npu.__file__, f"not the real torch_npu: {torch_npu.__file__}"
assert isinstance(torch_npu.npu_fusion_attention, patching.GuardedOp), "the guard did not wrap the real torch_npu on import"

__all__ = [
    "KernelCall",
    "NotJudged",
    "kernel_calls",
    "not_judged",
    "npu_tensor",
    "passes",
    "rejected",
    "torch",
    "torch_npu",
]


class KernelCall(NamedTuple):
    """One call that reached a torch_npu kernel: what the dispatcher handed it."""

    op: str  # "npu::npu_fusion_attention" (the OpOverloadPacket's qualified name)
    overload: str  # "default", "out", ...
    args: tuple
    kwargs: dict
    meta_error: BaseException | None  # the real meta kernel's own complaint, if it had one


_calls: list = []
# torch_npu's own namespaces and those of the packages whose K/V ops the guard wraps (package_schemas.py).
KERNEL_NAMESPACES = ("npu", "atb", "_C_ascend", "custom")


def kernel_calls() -> list:
    """Every call that has reached an npu/atb kernel since the current test started."""
    return list(_calls)


class NpuTensor(torch.Tensor):
    """Reports device npu:<index>, holds no data, and never runs a kernel.

    Every op on it (aten included: slicing, views) is computed by the real meta kernels, so
    shapes, strides and dtypes come out right; an npu/atb op is recorded as a KernelCall first.
    """

    @staticmethod
    def __new__(cls, meta: torch.Tensor, index: int = 0) -> NpuTensor:  # noqa: PYI034 - a wrapper subclass
        tensor = torch.Tensor._make_wrapper_subclass(cls, meta.shape, strides=meta.stride(), storage_offset=meta.storage_offset(), dtype=meta.dtype, device=torch.device("npu", index))
        tensor._meta = meta
        return tensor

    def __getitem__(self, index: Any) -> NpuTensor:
        # Tensor.__getitem__ takes a device guard for npu before dispatching, and with no NPU that
        # aborts the process; index the meta tensor instead (the same view, as the kernel would see it).
        return NpuTensor(self._meta[tree_map(_to_meta, index)], self.device.index or 0)

    def __repr__(self) -> str:  # the default repr reads values
        return f"npu_tensor{tuple(self.shape)} {self.dtype} on {self.device}"

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        index = next((a.device.index for a in (*args, *kwargs.values()) if isinstance(a, NpuTensor)), 0)
        kernel = func.namespace in KERNEL_NAMESPACES
        error = None
        try:
            out = func(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs))
        except Exception as exc:  # noqa: BLE001 - an npu op's meta kernel may refuse; the call still reached it
            if not kernel:
                raise
            out, error = _placeholder_result(func, args, kwargs), exc
        if kernel:
            _calls.append(KernelCall(f"{func.namespace}::{func._opname}", func._overloadname, args, kwargs, error))
        return tree_map(lambda x: NpuTensor(x, index) if isinstance(x, torch.Tensor) and x.device.type == "meta" else x, out)


def _placeholder_result(func: Any, args: tuple, kwargs: dict) -> Any:
    """What an op returns when its meta kernel refused: empty meta tensors and zeros, per its schema."""
    first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
    dtype = first.dtype if first is not None else torch.float32

    def one(type_text: str) -> Any:
        if type_text.startswith("Tensor[]"):
            return []
        if type_text.startswith("Tensor"):
            return torch.empty(0, dtype=dtype, device="meta")
        return {"int": 0, "SymInt": 0, "float": 0.0, "bool": False}.get(type_text.rstrip("?"))

    returns = [one(str(r.type)) for r in func._schema.returns]
    return None if not returns else returns[0] if len(returns) == 1 else tuple(returns)


def _to_meta(value: Any) -> Any:
    return value._meta if isinstance(value, NpuTensor) else value


def npu_tensor(*shape: int, dtype: torch.dtype = torch.float16, index: int = 0) -> NpuTensor:
    """A tensor on npu:<index> with this shape and dtype (no data; see NpuTensor)."""
    return NpuTensor(torch.empty(shape, dtype=dtype, device="meta"), index)


def _same(left: Any, right: Any) -> bool:
    """Tensors by identity (the kernel gets the caller's own tensor), everything else by value."""
    if isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
        return left is right
    if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


def _one_kernel_call(op: Any, args: tuple, kwargs: dict) -> KernelCall:
    __tracebackhide__ = True
    start = len(_calls)
    op(*args, **kwargs)
    reached = _calls[start:]
    assert len(reached) == 1, f"expected one kernel call, got {len(reached)}: {reached}"
    return reached[0]


def _require_guarded(op: Any) -> None:
    __tracebackhide__ = True
    assert isinstance(op, patching.GuardedOp), f"{op!r} is not wrapped by the guard: the test would prove nothing"


def _reached_unchanged(op: Any, args: tuple, kwargs: dict) -> KernelCall:
    __tracebackhide__ = True
    expected = _one_kernel_call(patching.unwrap(op), args, kwargs)
    got = _one_kernel_call(op, args, kwargs)
    assert (got.op, got.overload) == (expected.op, expected.overload), f"reached {got.op}.{got.overload}, unguarded reaches {expected.op}.{expected.overload}"
    assert _same(got.args, expected.args) and _same(got.kwargs, expected.kwargs), f"the kernel got\n  {got}\nunguarded it gets\n  {expected}"
    return got


def passes(op: Any, *args: Any, **kwargs: Any) -> KernelCall:
    """The guard judged this call valid: it reached the kernel exactly as without the guard.

    Fails if the guard rejects the call, leaves it unjudged (see not_judged), fails itself, or
    hands the kernel anything other than what the unguarded op hands it.
    """
    __tracebackhide__ = True
    _require_guarded(op)
    reporter = patching.reporter()
    before = reporter.not_judged_rows()
    with warnings.catch_warnings():
        warnings.simplefilter("error", runtime_guard.KVGuardInternalWarning)
        call = _reached_unchanged(op, args, kwargs)
    after = reporter.not_judged_rows()
    assert after == before, f"the guard did not judge this call: {[row for row in after if row not in before]}"
    return call


def rejected(op: Any, check: str, *args: Any, **kwargs: Any) -> KVConsistencyError:
    """The guard (in raise mode) stopped this call before the kernel, naming ``check``."""
    __tracebackhide__ = True
    _require_guarded(op)
    start = len(_calls)
    with pytest.raises(KVConsistencyError) as caught:
        op(*args, **kwargs)
    assert caught.value.check == check, f"rejected by {caught.value.check!r}, expected {check!r}:\n{caught.value}"
    assert _calls[start:] == [], "a rejected call must not reach the kernel"
    return caught.value


def not_judged(op: Any, reason: str, *args: Any, **kwargs: Any) -> KernelCall:
    """The guard did not understand this call: it reached the kernel unchanged, and the guard
    noted a not-judged reason containing ``reason`` (what KVGUARD=warn reports once per op)."""
    __tracebackhide__ = True
    _require_guarded(op)
    reporter = patching.reporter()
    before = set(reporter.not_judged_rows())
    call = _reached_unchanged(op, args, kwargs)
    new = [row for row in reporter.not_judged_rows() if row not in before or reason in row[1]]
    assert any(reason in row[1] for row in new), f"expected a not-judged note containing {reason!r}; noted: {reporter.not_judged_rows()}"
    return call


@pytest.fixture
def fresh_reporter(monkeypatch: pytest.MonkeyPatch) -> Reporter:
    """A reporter of its own for one test (no log file); kernel_calls() starts empty."""
    reporter = Reporter(None)
    monkeypatch.setattr(patching.STATE, "reporter", reporter)
    _calls.clear()
    return reporter


@pytest.fixture
def guard(fresh_reporter: Reporter) -> Iterator[Reporter]:
    """The guard in raise mode (the session default), with a fresh reporter."""
    runtime_guard.install("raise")
    yield fresh_reporter
    runtime_guard.install("raise")


@pytest.fixture
def warn_guard(fresh_reporter: Reporter) -> Iterator[Reporter]:
    runtime_guard.install("warn")
    yield fresh_reporter
    runtime_guard.install("raise")


@contextlib.contextmanager
def _without_guard() -> Iterator[None]:
    runtime_guard.uninstall()
    try:
        yield
    finally:
        runtime_guard.install("raise")


@pytest.fixture
def unguarded(fresh_reporter: Reporter) -> Iterator[None]:
    """No guard at all for one test (the raw torch_npu, as without kvlint); raise mode afterwards."""
    with _without_guard():
        yield
