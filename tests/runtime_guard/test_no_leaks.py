"""No leaks: what the guard says (errors, warnings, the JSONL log, summaries) carries shapes, dtypes,
devices and call sites, never a tensor's values.

Every tensor of every violating call is filled with a distinctive value and made to print its
values the way a real NPU tensor does; no trace of those values may appear in any output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
import torch_npu
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime_guard
from runtime_guard import KVConsistencyError, patching
from runtime_guard.reporting import Reporter, format_summary
from tests.runtime_guard.conftest import DOUBLE_DIR
from tests.runtime_guard.hypothesis_profiles import PROFILE, count
from tests.runtime_guard.strategies import MUTATION_KINDS, valid_cases

torch_npu.load_atb_now()

FLOAT_MARK, INT_MARK = 12345.678, 987654321
# How the planted values print in each dtype, plain and in scientific notation.
TRACES = ("12345", "1.2346e+04", "12344", "1.2344e+04", "12352", "1.2352e+04", "98765", "9.8765e+08")


class ValueShowingTensor(torch_npu.NpuTensor):
    """Prints its values, as a real NPU tensor does (after copying them to the host)."""

    def __repr__(self) -> str:
        return repr(torch_npu.host(self))

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)


def planted(tensor: torch.Tensor) -> torch.Tensor:
    mark = FLOAT_MARK if tensor.dtype.is_floating_point else INT_MARK
    data = torch.full(tensor.shape, mark, dtype=tensor.dtype if tensor.dtype.is_floating_point else torch.int64).to(tensor.dtype)
    if tensor.device.type != "npu":
        return data
    return ValueShowingTensor(data, tensor.device.index)


def plant(case) -> None:
    """Replace every tensor of the case with a planted one, keeping K-is-V sharing."""
    replaced: dict = {}
    for name, value in list(vars(case).items()):
        if isinstance(value, torch.Tensor):
            if id(value) not in replaced:
                replaced[id(value)] = planted(value)
            setattr(case, name, replaced[id(value)])


def leaks(text: str) -> list:
    return [trace for trace in TRACES if trace in text]


def log_text(path: Path) -> str:
    """The JSONL log without the fields that are clock or process numbers."""
    if not path.exists():
        return ""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return json.dumps([{k: v for k, v in record.items() if k not in ("time", "pid")} for record in records])


def test_a_planted_tensor_shows_its_values_when_printed():
    tensor = planted(torch_npu.npu(torch.zeros(2, 3)))
    assert leaks(repr(tensor)) and leaks(f"{tensor}") and leaks(str(tensor))


FAMILY_KINDS = [pytest.param(family, kind, id=f"{family}-{kind}") for family, kinds in MUTATION_KINDS.items() for kind in kinds]


@pytest.mark.parametrize("family,kind", FAMILY_KINDS)
def test_no_element_value_reaches_any_output(fresh_reporter, tmp_path, family, kind):
    log = tmp_path / "guard.jsonl"

    @settings(PROFILE, max_examples=max(1, PROFILE.max_examples // 15))
    @given(case=valid_cases(family, kind), data=st.data())
    def no_leaks(case, data):
        case.mutations()[kind][0](data.draw)
        plant(case)
        args, kwargs = case.arguments()
        log.unlink(missing_ok=True)
        outputs = []
        for mode in ("raise", "warn"):
            patching.STATE.reporter = Reporter(str(log))  # fresh: warn mode warns once per call site
            runtime_guard.install(mode)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    getattr(torch_npu, case.op)(*args, **kwargs)
                except KVConsistencyError as error:
                    outputs += [str(error), repr(error.args)]
                except (RuntimeError, TypeError, ValueError, IndexError):
                    pass  # the kernel's own error after a warn-mode violation is not the guard's output
            outputs += [str(w.message) for w in caught]
            outputs.append(format_summary(runtime_guard.summary()))
        outputs.append(log_text(log))
        assert len(outputs) >= 4 and log.exists(), "the violation was reported in both modes"
        found = [(trace, text) for text in outputs for trace in leaks(text)]
        assert found == [], f"{kind}: {case!r}"
        count("no leaks: violations with planted values, raise and warn", f"{family} {kind}")

    try:
        no_leaks()
    finally:
        runtime_guard.uninstall()


USER_TESTS = textwrap.dedent(
    """
    import torch
    import torch_npu

    def planted(*shape):
        return torch_npu.npu(torch.full(shape, 12345.678))

    def test_truncated_key():
        q, k, v = planted(8, 4, 8), planted(8, 2, 8), planted(8, 2, 8)
        k = torch_npu.npu(torch_npu.host(k)[:7])
        torch_npu.npu_prompt_flash_attention(q.view(1, 8, 4, 8), k.view(1, 7, 2, 8), v.view(1, 8, 2, 8), num_heads=4, input_layout="BSND")

    def test_slots_for_other_tokens():
        key = planted(5, 2, 8)
        cache = planted(6, 4, 2, 8)
        slots = torch_npu.npu(torch.full((4,), 987654321, dtype=torch.int32))
        torch_npu.npu_scatter_pa_kv_cache(key, key, cache, cache, slots)
    """
)


def test_no_element_value_reaches_the_pytest_plugin_summary_or_the_log(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    log = tmp_path / "guard.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVGUARD")}
    env.update(PYTHONPATH=str(DOUBLE_DIR), KVGUARD_LOG=str(log))
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--kvguard=warn", "test_user.py"]
    result = subprocess.run(command, check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "npu_prompt_flash_attention / k_v_token_counts_match" in result.stdout
    assert "npu_scatter_pa_kv_cache / slot_count_matches" in result.stdout
    assert len(log.read_text().splitlines()) == 2
    assert leaks(result.stdout + result.stderr) == [] and leaks(log_text(log)) == []
    count("no leaks: pytest --kvguard=warn session, terminal summary and log")
