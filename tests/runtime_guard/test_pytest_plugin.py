"""pytest --kvguard=raise|warn runs a test session under the guard; without it the plugin is inert."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.runtime_guard.conftest import DOUBLE_DIR

TEST_FILE = textwrap.dedent(
    """
    import torch
    import torch_npu

    def attention(key_tokens):
        q = torch_npu.npu(torch.randn(2, 4, 4, 8))
        k = torch_npu.npu(torch.randn(2, key_tokens, 2, 8))
        v = torch_npu.npu(torch.randn(2, 4, 2, 8))
        torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BSND")

    def test_truncated_key():
        attention(3)

    def test_fixed_key():
        attention(4)
    """
)


def pytest_run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_user.py").write_text(TEST_FILE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVGUARD")}
    # The double torch_npu, then this checkout's runtime_guard (not an installed copy's plugin).
    env["PYTHONPATH"] = os.pathsep.join([str(DOUBLE_DIR), str(Path(__file__).resolve().parents[2])])
    command = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "test_user.py", *options]
    return subprocess.run(command, check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_kvguard_raise_fails_the_truncated_test_with_kvconsistencyerror_and_passes_the_fixed_one(tmp_path):
    result = pytest_run(tmp_path, "--kvguard=raise")
    assert result.returncode == 1 and "1 failed, 1 passed" in result.stdout
    assert "FAILED test_user.py::test_truncated_key" in result.stdout
    assert "KVConsistencyError: KV consistency violation in torch_npu.npu_prompt_flash_attention" in result.stdout
    # The hint names the option the user typed, not an environment variable they never set.
    assert "--kvguard=warn logs instead of raising" in result.stdout and "KVGUARD=warn" not in result.stdout


def test_kvguard_warn_passes_and_summarises_violations(tmp_path):
    result = pytest_run(tmp_path, "--kvguard=warn")
    assert result.returncode == 0 and "2 passed" in result.stdout
    assert "kvlint runtime guard" in result.stdout
    assert "1  torch_npu.npu_prompt_flash_attention / k_v_token_counts_match / " in result.stdout
    assert "test_user.py:9 in attention" in result.stdout


def test_without_the_option_the_plugin_does_nothing(tmp_path):
    result = pytest_run(tmp_path)
    assert result.returncode == 0 and "2 passed" in result.stdout and "kvlint runtime guard" not in result.stdout
