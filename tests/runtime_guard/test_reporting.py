"""What a user sees: the message, warn-once per call site, the JSONL log, the summary."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import runtime_guard
from runtime_guard import KVConsistencyError, KVConsistencyWarning, patching
from runtime_guard.reporting import Reporter, format_summary
from tests.runtime_guard.calls import AttentionCase, narrowed
from tests.runtime_guard.conftest import npu


def truncated_key_case() -> AttentionCase:
    case = AttentionCase("npu_fusion_attention", "TND")
    case.k = narrowed(case.k, 0, 7)
    return case


def drifted_prompt_case() -> AttentionCase:
    """K one token short; the double's prompt-attention kernel still runs, as warn mode needs."""
    case = AttentionCase("npu_prompt_flash_attention", "BSND")
    case.k = narrowed(case.k, 1, 3)
    return case


def test_message_names_op_layout_tensors_requirement_cause_and_the_user_line(guard):
    case = truncated_key_case()
    with pytest.raises(KVConsistencyError) as info:
        case.call()
    message = str(info.value)
    assert "torch_npu.npu_fusion_attention (layout TND)" in message
    assert "key (7, 2, 8) and value (8, 2, 8) must describe the same tokens" in message
    assert "likely cause: K was sliced without V" in message
    assert f"{__file__.replace('test_reporting', 'calls')}:" in message  # AttentionCase.call made the call
    assert "runtime_guard/patching.py" not in message and "runtime_guard/reporting.py" not in message


def test_the_error_is_a_value_error_carrying_op_and_check(guard):
    with pytest.raises(ValueError) as info:
        truncated_key_case().call()
    assert info.value.op == "torch_npu.npu_fusion_attention" and info.value.check == "k_v_token_counts_match"


def test_warn_mode_warns_once_per_call_site_and_counts_every_call(warn_guard):
    case = drifted_prompt_case()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            case.call()
    assert len([w for w in caught if w.category is KVConsistencyWarning]) == 1
    assert warn_guard.summary_rows()[0][:3] == ("torch_npu.npu_prompt_flash_attention", "k_v_token_counts_match", 3)


def test_warn_mode_warns_again_at_another_call_site(warn_guard):
    case = drifted_prompt_case()
    args, kwargs = case.arguments()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.ops.npu.npu_prompt_flash_attention(*args, **kwargs)
        torch.ops.npu.npu_prompt_flash_attention(*args, **kwargs)
    assert len([w for w in caught if w.category is KVConsistencyWarning]) == 2


def test_warning_points_at_the_user_line(warn_guard):
    args, kwargs = drifted_prompt_case().arguments()
    with pytest.warns(KVConsistencyWarning) as record:
        torch.ops.npu.npu_prompt_flash_attention(*args, **kwargs)
    assert record[0].filename == __file__


def test_jsonl_log_has_one_line_per_reported_violation_with_facts_and_rank(tmp_path, monkeypatch):
    log = tmp_path / "guard.jsonl"
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(patching.STATE, "reporter", Reporter(str(log)))
    runtime_guard.install("warn")
    try:
        case = drifted_prompt_case()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            for _ in range(2):
                case.call()
    finally:
        runtime_guard.uninstall()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 2  # one line per violation, though warn mode shows the call site once
    assert records[0]["call_site"] == records[1]["call_site"]
    record = records[0]
    assert record["op"] == "torch_npu.npu_prompt_flash_attention" and record["check"] == "k_v_token_counts_match"
    assert record["rank"] == "3" and record["local_rank"] == "1"
    assert record["tensors"] == [
        {"name": "key", "shape": [2, 3, 2, 8], "dtype": "torch.float16", "device": "npu:0"},
        {"name": "value", "shape": [2, 4, 2, 8], "dtype": "torch.float16", "device": "npu:0"},
    ]
    assert record["call_site"]["file"].endswith("calls.py")


def test_reports_never_carry_tensor_values(tmp_path, monkeypatch):
    import torch_npu

    planted = torch_npu.npu(torch.full((7, 2, 8), 4242.5).half())
    case = truncated_key_case()
    case.k = planted
    log = tmp_path / "guard.jsonl"
    monkeypatch.setattr(patching.STATE, "reporter", Reporter(str(log)))
    runtime_guard.install("raise")
    try:
        with pytest.raises(KVConsistencyError) as info:
            case.call()
    finally:
        runtime_guard.uninstall()
    assert "4242" not in str(info.value) and "4242" not in log.read_text()


def test_summary_lists_op_check_count_and_first_call_site():
    rows = [("torch_npu.npu_fusion_attention", "k_v_token_counts_match", 3, "model.py:12 in forward")]
    text = format_summary(rows)
    assert "3 K/V consistency violation(s)" in text
    assert "torch_npu.npu_fusion_attention / k_v_token_counts_match / model.py:12 in forward" in text


def test_install_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="raise, warn"):
        runtime_guard.install("loud")


def test_device_of_a_planted_tensor_is_reported_without_reading_it(guard):
    case = AttentionCase("npu_fusion_attention", "TND")
    case.v = npu(*case.v.shape, index=3)
    with pytest.raises(KVConsistencyError, match="value on npu:3"):
        case.call()
