"""Fixtures: the torch_npu test double, a guard installed per test, and tensor builders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

DOUBLE_DIR = Path(__file__).parent / "double"
sys.path.insert(0, str(DOUBLE_DIR))

import torch
import torch_npu

import runtime_guard
from runtime_guard import patching
from runtime_guard.reporting import Reporter
from tests.runtime_guard.hypothesis_profiles import pytest_terminal_summary  # noqa: F401 - prints property case counts

assert torch_npu.__file__.startswith(str(DOUBLE_DIR)), "the real torch_npu must never be imported by these tests"


@pytest.fixture
def fresh_reporter(monkeypatch: pytest.MonkeyPatch) -> Reporter:
    reporter = Reporter(None)
    monkeypatch.setattr(patching.STATE, "reporter", reporter)
    return reporter


@pytest.fixture
def guard(fresh_reporter: Reporter):
    """The guard in raise mode for one test; uninstalled afterwards."""
    runtime_guard.install("raise")
    yield runtime_guard
    runtime_guard.uninstall()


@pytest.fixture
def warn_guard(fresh_reporter: Reporter):
    runtime_guard.install("warn")
    yield fresh_reporter
    runtime_guard.uninstall()


def npu(*shape: int, dtype: torch.dtype = torch.float16, index: int = 0) -> torch.Tensor:
    return torch_npu.npu(torch.randn(*shape).to(dtype), index)


def ends(*lengths: int) -> list:
    """Cumulative sequence ends, as actual_seq_qlen/actual_seq_kvlen take them."""
    out, total = [], 0
    for length in lengths:
        total += length
        out.append(total)
    return out


def last_call() -> torch_npu.Call:
    return torch_npu.calls[-1]
