"""The version matrix (benchmarks/guard_versions.py) reads each torch_npu release's schemas from
committed extracts; these tests hold it to the live binding and to the guard's own behaviour when a
release moves or lacks a role."""

from __future__ import annotations

import torch
import torch_npu

import pytest

from benchmarks import guard_versions
from runtime_guard import ops, patching
from runtime_guard.checks import NotJudged
from runtime_guard.reporting import KVGuardNotJudgedWarning


def test_the_extract_of_the_tier_release_binds_every_role_where_the_live_schema_does():
    """2.13.0 is the release the double copies (and the real tier checks the double against): every
    op read from its wheel's schema text must bind each role at the position the live op does."""
    torch_npu.load_atb_now()
    schemas = guard_versions.load("2.13.0")
    compared = 0
    for row in ops.ROWS:
        overloads = schemas[f"{row.namespace}::{row.name}"]
        default = next((o for o in overloads if o[0] == "default"), overloads[0])
        if default[2] != "schema":
            continue
        packet = getattr(getattr(torch.ops, row.namespace), row.name)
        overload = getattr(packet, default[0])
        live = [(a.name, a.kwarg_only) for a in overload._schema.arguments]
        assert default[1] == live, row.name
        compared += 1
    assert compared >= sum(row.namespace == "npu" for row in ops.ROWS)  # every npu op: its text is whole in the wheel


def test_every_committed_release_judges_or_explains_every_guarded_op():
    rows = guard_versions.matrix(guard_versions.versions_committed())
    assert {"2.10.0.post4", "2.13.0", "2.14.0"} <= {r[0] for r in rows}
    for version, op, status, detail, _ in rows:
        assert status in ("judged", "by name at run time", "not judged", "absent"), (version, op)
        assert detail, (version, op)


def test_a_role_a_release_moved_is_read_from_its_new_position():
    row = ops.ROWS_BY_NAME["_npu_reshape_and_cache"]
    moved = [("value", False, None), ("key", False, None), ("key_cache", False, None), ("value_cache", False, None), ("slot_indices", False, None)]
    key, value = object(), object()
    values = ops.Binder(row, moved).bind((value, key, "kc", "vc", "slots"), {})
    assert values[:2] == [key, value]


def test_a_role_a_release_lacks_leaves_the_op_not_judged_instead_of_reading_nothing(fresh_reporter):
    """A release whose schema lacks a role the validator needs: the guard sends every call to the
    op unjudged (warn mode notes why), never judging with that role missing."""
    calls = []

    def old_reshape_and_cache(key, key_cache, value_cache, slot_indices):  # no value argument
        calls.append(key)

    row = ops.ROWS_BY_NAME["_npu_reshape_and_cache"]
    wrapper = patching.GuardedOp(old_reshape_and_cache, row, "torch_npu._npu_reshape_and_cache", params=ops.signature_params(old_reshape_and_cache), mode="warn")
    assert wrapper._binder.missing == ("value",)
    k = torch_npu.npu(torch.zeros(4, 2, 8))
    with pytest.warns(KVGuardNotJudgedWarning, match="no argument value"):
        wrapper(k, torch_npu.npu(torch.zeros(2, 16, 2, 8)), torch_npu.npu(torch.zeros(2, 16, 2, 8)), torch_npu.npu(torch.zeros(4, dtype=torch.int32)))
    assert calls == [k]
    reasons = [reason for _, reason, _, _ in fresh_reporter.not_judged_rows()]
    assert any("no argument value" in reason for reason in reasons), reasons
    assert isinstance(wrapper._row.validate(), NotJudged)
