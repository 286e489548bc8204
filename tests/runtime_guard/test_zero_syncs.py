"""Zero syncs: the guard never reads a tensor argument's values, so it never forces a device-to-host copy.

Two traps watch every call, valid and violating, in raise and warn mode: a TorchFunctionMode that
records the Python-level ways to read values (.item(), .tolist(), .cpu(), .numpy(), .to(),
bool/int/float/index conversions, formatting), and a TorchDispatchMode that records every aten op
run on the call's tensors (a sync needs one, e.g. _local_scalar_dense or _to_copy). Python-level reads
must stay at zero; the guard may add no aten op to those of the same call with the guard in place but
not checking (what torch itself does to parse its arguments).
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import pytest
import torch
import torch_npu
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import runtime_guard
from runtime_guard import KVConsistencyError, patching
from tests.runtime_guard.hypothesis_profiles import PROFILE, count
from tests.runtime_guard.strategies import MUTATION_KINDS, Attention, valid_cases

torch_npu.load_atb_now()

READS_VALUES = {
    "item", "tolist", "cpu", "numpy", "to", "__bool__", "__index__", "__int__", "__float__", "__complex__",
    "__format__", "__repr__", "__str__", "__array__", "__iter__", "unbind", "__getitem__", "__eq__", "eq",
}


class Traps(TorchFunctionMode):
    """Records value reads on the watched tensors, at the Python level."""

    def __init__(self, watched: list) -> None:
        super().__init__()
        self.watched = watched
        self.reads: Counter = Counter()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = getattr(func, "__name__", str(func))
        if name in READS_VALUES and any(arg is tensor for arg in args[:1] for tensor in self.watched):
            self.reads[name] += 1
        return func(*args, **(kwargs or {}))


class DispatchTrap(TorchDispatchMode):
    """Records every op other than the kernel's own (npu/atb) that runs on a watched tensor."""

    def __init__(self, watched: list) -> None:
        super().__init__()
        self.watched = watched
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func.namespace not in ("npu", "atb") and any(value is tensor for value in (*args, *kwargs.values()) for tensor in self.watched):
            self.ops[str(func)] += 1
        return func(*args, **kwargs)


def tensors_of(case: Any) -> list:
    return [value for value in vars(case).values() if isinstance(value, torch.Tensor)]


def trapped(call: Any, args: tuple, kwargs: dict, watched: list, checking: str | None) -> tuple:
    """(Python-level value reads, aten ops) seen while making one call with the guard checking in
    ``checking`` mode (None: in place but not checking); the call's own errors are expected."""
    functions, dispatch = Traps(watched), DispatchTrap(watched)
    patching.STATE.mode = checking
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with functions, dispatch:
            try:
                call(*args, **kwargs)
            except (KVConsistencyError, RuntimeError, TypeError, ValueError, IndexError):
                pass
    return functions.reads, dispatch.ops


def lengths_on_the_device(case: Any) -> None:
    """Attention lengths as device tensors: the guard may check their shape only."""
    for name in ("q_lens", "kv_lens"):
        lengths = getattr(case, name)
        if lengths is not None:
            setattr(case, name, torch_npu.npu(torch.tensor(lengths, dtype=torch.int32)))


@pytest.mark.parametrize("mode", ["raise", "warn"])
@pytest.mark.parametrize("family", MUTATION_KINDS)
def test_the_guard_reads_no_tensor_values(fresh_reporter, family, mode):
    @settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 2))
    @given(case=valid_cases(family), data=st.data())
    def no_syncs(case, data):
        kind = data.draw(st.sampled_from(("none", *sorted(case.mutations()))), label="mutation")
        if kind != "none":
            case.mutations()[kind][0](data.draw)
        if isinstance(case, Attention) and data.draw(st.booleans(), label="lengths as device tensors"):
            lengths_on_the_device(case)
        args, kwargs = case.arguments()
        watched = tensors_of(case)
        unguarded = trapped(getattr(torch_npu, case.op), args, kwargs, watched, checking=None)
        guarded = trapped(getattr(torch_npu, case.op), args, kwargs, watched, checking=mode)
        assert guarded[0] == unguarded[0] == Counter(), f"{kind}: {case!r}"
        assert guarded[1] - unguarded[1] == Counter(), f"{kind}: {case!r}"  # fewer when a violation stops the call
        count("zero syncs: no value reads added by the guard", f"{mode} {family}")

    with runtime_guard.guarded(mode):
        assert isinstance(torch_npu.npu_fusion_attention, patching.GuardedOp)
        no_syncs()


@pytest.mark.parametrize("read", [
    lambda t: t.item(), lambda t: t.tolist(), lambda t: t.cpu(), lambda t: t.to("cpu"), bool, int, float,
    lambda t: [0, 1][t], lambda t: f"{t}", lambda t: list(t),
])
def test_the_traps_see_each_way_of_reading_values(read):
    tensor = torch_npu.npu(torch.ones(1, dtype=torch.int32))
    functions, dispatch = Traps([tensor]), DispatchTrap([tensor])
    with functions, dispatch:
        try:
            read(tensor)
        except (RuntimeError, TypeError):
            pass
    assert functions.reads or dispatch.ops
