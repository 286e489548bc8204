"""The fast path for TND npu_fusion_attention: it accepts only what the general validator accepts.

Differential, property-based: generated valid calls, each also broken by one mutation (the
differential test's own, or an unusual but well-formed argument), are judged by the fast path and
by the general validator. Whenever the fast path accepts, the general validator must find nothing
(and must not fail). The fast path must also accept every valid call of the shape it is for, or it
would never run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch_npu
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from runtime_guard import fast_paths, ops, patching
from runtime_guard.checks import MISSING
from tests.runtime_guard.calls import AttentionCase
from tests.runtime_guard.conftest import ends, npu
from tests.runtime_guard.hypothesis_profiles import PROFILE, count
from tests.runtime_guard.strategies import DTYPES, Attention, target

pytestmark = pytest.mark.usefixtures("guard")

VIAS = ("torch_npu", "default")


def judged_by_both(op: Any, args: tuple, kwargs: dict) -> tuple:
    """(fast path's answer, general validator's answer: None, a Violation, or the exception it raised)."""
    accepted = op._accepts(args, kwargs)
    try:
        found = op._row.validate(*op._binder.bind(args, kwargs))
    except Exception as exc:  # noqa: BLE001 - the general path's failure is a verdict the fast path must not overrule
        found = exc
    return accepted, found


@st.composite
def tnd_calls(draw: Callable) -> Attention:
    """Valid TND npu_fusion_attention calls, GQA and MLA included, short and long length lists."""
    kv_heads, groups = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dim = draw(st.sampled_from((2, 4, 8)))
    v_dim = draw(st.sampled_from((dim, dim, 2, 6)))
    batch = draw(st.integers(1, 5) | st.integers(fast_paths._SHORT - 2, fast_paths._SHORT + 30))  # long lists take the C-level checks
    seqs = st.lists(st.integers(0, 5), min_size=batch, max_size=batch).filter(any)
    q_seqs = draw(seqs)
    kv_seqs = q_seqs if draw(st.booleans()) else draw(seqs)
    case = Attention("npu_fusion_attention", "TND", kv_heads * groups, kv_heads, dim, v_dim, draw(st.sampled_from(DTYPES)), (1, sum(q_seqs)), (1, sum(kv_seqs)))
    case.q_lens = ends(*q_seqs)
    case.kv_lens = case.q_lens if kv_seqs is q_seqs and draw(st.booleans()) else ends(*kv_seqs)  # self-attention passes one list twice
    if v_dim == dim and draw(st.booleans()):
        case.v = case.k
    return case


def _replace_entry(name: str, make: Callable) -> Callable:
    def apply(case: Attention, draw: Callable) -> None:
        lens = list(getattr(case, name))
        i = draw(st.integers(0, len(lens) - 1))
        lens[i] = make(lens[i])
        setattr(case, name, lens)

    return apply


def _arguments_changed(change: Callable) -> Callable:
    def apply(case: Attention, draw: Callable) -> None:
        arguments = case.arguments
        case.arguments = lambda: change(*arguments())

    return apply


# Unusual but well-formed calls, valid or not, that the fast path must hand to the general path
# unless it is sure.
UNUSUAL: dict = {
    "EOD zeros after the ends": lambda case, draw: setattr(case, "q_lens", [*case.q_lens, *[0] * draw(st.integers(1, 2))]),
    "lengths as a tuple": lambda case, draw: setattr(case, "kv_lens", tuple(case.kv_lens)),
    "a bool entry": _replace_entry("q_lens", lambda end: bool(end)),
    "a float entry": _replace_entry("kv_lens", float),
    "a tensor entry": _replace_entry("q_lens", lambda end: npu(1).new_full((), end, dtype=torch.int64)),
    "a negative first end": lambda case, draw: setattr(case, "q_lens", [-1, *case.q_lens[1:]]),
    "no lengths on one side": lambda case, draw: setattr(case, draw(st.sampled_from(("q_lens", "kv_lens"))), None),
    "no lengths at all": lambda case, draw: (setattr(case, "q_lens", None), setattr(case, "kv_lens", None)),
    "head_num as a bool or a float": lambda case, draw: setattr(case, "heads", draw(st.sampled_from((True, float(case.heads))))),
    "a compound layout": lambda case, draw: setattr(case, "layout", "TND_TND"),
    "a sixth positional argument": _arguments_changed(lambda args, kwargs: ((*args, None), kwargs)),
    "every argument by keyword": _arguments_changed(lambda args, kwargs: ((), {**dict(zip(("query", "key", "value", "head_num", "input_layout"), args)), **kwargs})),
    "an unknown keyword": _arguments_changed(lambda args, kwargs: (args, {**kwargs, "actual_seq_len": [1]})),
}


@pytest.mark.parametrize("via", VIAS)
def test_the_fast_path_serves_the_hot_call(via):
    op = target("npu_fusion_attention", "npu", via)
    args, kwargs = AttentionCase("npu_fusion_attention", "TND", batch=3).arguments()
    assert op._accepts is not fast_paths.none and op._accepts(args, kwargs) is True


def test_other_ops_and_layouts_have_no_fast_path():
    assert torch_npu.npu_fused_infer_attention_score._accepts is fast_paths.none and torch_npu.npu_scatter_pa_kv_cache._accepts is fast_paths.none
    args, kwargs = AttentionCase("npu_fusion_attention", "BSND").arguments()
    assert torch_npu.npu_fusion_attention._accepts(args, kwargs) is False


def test_a_row_whose_arguments_sit_elsewhere_gets_no_fast_path():
    params = [("key", False, MISSING), ("query", False, MISSING), *ops.schema_params(patching.unwrap(torch_npu.npu_fusion_attention))[2:]]
    assert fast_paths.for_op(ops.ROWS_BY_NAME["npu_fusion_attention"], ops.Binder(ops.ROWS_BY_NAME["npu_fusion_attention"], params).slots) is fast_paths.none


@settings(PROFILE)
@given(case=tnd_calls(), via=st.sampled_from(VIAS))
def test_every_valid_hot_call_is_accepted_by_the_fast_path(case, via):
    accepted, found = judged_by_both(target("npu_fusion_attention", "npu", via), *case.arguments())
    assert found is None and accepted is True, case
    count("fast path: valid TND calls accepted", "long lists" if len(case.q_lens) > fast_paths._SHORT else "short lists")


OWN_KINDS = ("change a dtype", "move a tensor to another device", "truncate K tokens", "change V heads", "wrong head_num", "non-divisible GQA", "wrong rank", "make lengths decrease", "end lengths at the wrong total", "different batch counts")
PER_KIND = settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 5))


@pytest.mark.parametrize("kind", [*OWN_KINDS, *UNUSUAL])
def test_the_fast_path_accepts_nothing_the_general_validator_rejects(kind):
    @PER_KIND
    @given(case=tnd_calls(), via=st.sampled_from(VIAS), data=st.data())
    def one_change(case, via, data):
        own = case.mutations()  # the differential test's: each breaks one rule
        assume(kind in own or kind in UNUSUAL)
        if kind in own:
            own[kind][0](data.draw)
        else:
            UNUSUAL[kind](case, data.draw)
        accepted, found = judged_by_both(target("npu_fusion_attention", "npu", via), *case.arguments())
        assert accepted is False or found is None, f"{kind}: fast path accepted what the general path judged {found!r}: {case!r}"
        count("fast path vs general path, one change", f"{kind}: {'both accept' if accepted else 'general path judges'}")

    one_change()
