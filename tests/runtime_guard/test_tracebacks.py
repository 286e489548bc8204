"""A violation's traceback ends at the user's call: at most one guard frame in plain Python, none under pytest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.runtime_guard.conftest import DOUBLE_DIR

ROOT = Path(__file__).parents[2]

OP_CALL = textwrap.dedent(
    """
    import torch, torch_npu
    q = torch_npu.npu(torch.randn(8, 4, 8))
    k = torch_npu.npu(torch.randn(7, 2, 8))
    v = torch_npu.npu(torch.randn(8, 2, 8))

    def attend():
        return torch_npu.npu_fusion_attention(q, k, v, 4, "TND", actual_seq_qlen=[3, 8], actual_seq_kvlen=[3, 8])

    attend()
    """
)

DECORATED_CALL = textwrap.dedent(
    """
    import torch
    import runtime_guard

    @runtime_guard.guard(seq_lens_q="cu_q", seq_lens_kv="cu_k", mode="raise")
    def varlen(q, k, v, cu_q, cu_k):
        return q

    def attend():
        return varlen(torch.randn(8, 4, 8), torch.randn(7, 2, 8), torch.randn(8, 2, 8), [3, 8], [3, 8])

    attend()
    """
)


def run(tmp_path: Path, command: list, env: dict) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KVGUARD")}
    environment.update(PYTHONPATH=os.pathsep.join((str(DOUBLE_DIR), str(ROOT))), **env)
    return subprocess.run(command, check=False, capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120)


def frames(stderr: str) -> list:
    """(file, function) of each frame of the last traceback printed."""
    tail = stderr[stderr.rindex("Traceback (most recent call last):") :]
    return re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', tail, re.M)


def guard_frames_after_the_user(stderr: str, user_file: Path) -> list:
    found = frames(stderr)
    last_user = max(i for i, (file, _) in enumerate(found) if Path(file) == user_file)
    return found[last_user + 1 :]


def test_a_patched_op_raises_with_one_guard_frame_after_the_users_call(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(OP_CALL)
    result = run(tmp_path, [sys.executable, str(script)], {"KVGUARD": "raise"})
    assert "runtime_guard.KVConsistencyError" in result.stderr
    after = guard_frames_after_the_user(result.stderr, script)
    assert frames(result.stderr)[-len(after) - 1] == (str(script), "attend")
    assert len(after) <= 1 and all("runtime_guard" in file for file, _ in after), after


def test_a_guard_decorated_function_raises_with_one_guard_frame_after_the_users_call(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(DECORATED_CALL)
    result = run(tmp_path, [sys.executable, str(script)], {})
    assert "runtime_guard.KVConsistencyError" in result.stderr
    after = guard_frames_after_the_user(result.stderr, script)
    assert len(after) <= 1 and all("runtime_guard" in file for file, _ in after), after


def test_pytest_hides_the_guard_frames(tmp_path):
    test_file = tmp_path / "test_user.py"
    body = textwrap.indent(OP_CALL.replace("attend()\n", ""), "    ")
    test_file.write_text(f"import runtime_guard\n\ndef test_call():\n    runtime_guard.install('raise')\n{body}\n    attend()\n")
    result = run(tmp_path, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--tb=long", str(test_file)], {})
    assert "KVConsistencyError" in result.stdout and "1 failed" in result.stdout
    assert "runtime_guard/patching.py" not in result.stdout and "runtime_guard/__init__.py" not in result.stdout
    # The last entry pytest shows is the user's call into the op.
    assert re.search(r"test_user\.py:\d+: KVConsistencyError", result.stdout), result.stdout[-2000:]
