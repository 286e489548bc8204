"""Turning the guard on without touching user code: KVGUARD in a fresh process, python -m, the .pth hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from runtime_guard.__main__ import main as runtime_guard_main
from runtime_guard.activation import mode_from_env
from tests.runtime_guard.conftest import DOUBLE_DIR

USER_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    import torch_npu  # the test double, found on PYTHONPATH; this script never imports runtime_guard

    q = torch_npu.npu(torch.randn(8, 4, 8))
    k = torch_npu.npu(torch.randn(8, 2, 8))
    v = torch_npu.npu(torch.randn(8, 2, 8))
    out = torch_npu.npu_fusion_attention(q, k, v, 4, "TND", actual_seq_qlen=[3, 8], actual_seq_kvlen=[3, 8])
    call = torch_npu.calls[-1]
    same = call.args[0] is q and call.args[1] is k and call.args[2] is v and call.result[0] is out[0]
    print("valid call reached the op with identical arguments:", same, call.args[3:5], flush=True)
    print("argv:", sys.argv[1:], flush=True)
    short_k = torch_npu.npu(torch.randn(7, 2, 8))
    torch_npu.npu_fusion_attention(q, short_k, v, 4, "TND", actual_seq_qlen=[3, 8], actual_seq_kvlen=[3, 8])
    print("truncated call went through", flush=True)
    """
)


def run(tmp_path: Path, *args: str, env: dict | None = None, script: str = USER_SCRIPT) -> subprocess.CompletedProcess:
    path = tmp_path / "user_script.py"
    path.write_text(script)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KVGUARD")}
    environment.update({"PYTHONPATH": str(DOUBLE_DIR), **(env or {})})
    command = [sys.executable, *args] if args else [sys.executable, str(path)]
    return subprocess.run([c.replace("SCRIPT", str(path)) for c in command], check=False, capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("value,mode", [("raise", "raise"), ("1", "raise"), ("ON", "raise"), ("warn", "warn"), ("off", None), ("0", None), (None, None)])
def test_kvguard_values(value, mode):
    assert mode_from_env(value) == mode


def test_unknown_kvguard_value_warns_naming_the_accepted_values():
    with pytest.warns(RuntimeWarning, match="accepted values: raise, 1, on, warn, off, 0"):
        assert mode_from_env("strict") is None


def test_kvguard_raise_in_a_fresh_process_stops_the_truncated_call_and_passes_the_valid_one(tmp_path):
    result = run(tmp_path, env={"KVGUARD": "raise"})
    assert "valid call reached the op with identical arguments: True (4, 'TND')" in result.stdout
    assert "runtime_guard.KVConsistencyError" in result.stderr
    assert "key (7, 2, 8) and value (8, 2, 8) must describe the same tokens" in result.stderr
    assert "user_script.py:15" in result.stderr
    assert "truncated call went through" not in result.stdout and result.returncode == 1


def test_lazily_loaded_atb_ops_are_guarded_in_a_fresh_process(tmp_path):
    script = textwrap.dedent(
        """
        import torch, torch_npu
        assert not torch_npu._atb, "ATB must still be unloaded here"
        key = torch_npu.npu(torch.randn(5, 2, 8))
        value = torch_npu.npu(torch.randn(4, 2, 8))
        cache = torch_npu.npu(torch.zeros(6, 4, 2, 8))
        torch_npu._npu_reshape_and_cache(key, value, cache, cache, torch_npu.npu(torch.zeros(5, dtype=torch.int32)))
        """
    )
    result = run(tmp_path, env={"KVGUARD": "raise"}, script=script)
    assert "KVConsistencyError" in result.stderr and "torch_npu._npu_reshape_and_cache" in result.stderr


def test_kvguard_unset_loads_neither_the_guard_nor_torch(tmp_path):
    probe = "import sys; print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'runtime_guard'}))"
    assert run(tmp_path, "-c", probe).stdout.strip() == "[]"
    assert run(tmp_path, "-c", probe, env={"KVGUARD": "off"}).stdout.strip() == "[]"


def test_kvguard_unset_leaves_torch_npu_untouched(tmp_path):
    result = run(tmp_path)
    assert "truncated call went through" in result.stdout or "RuntimeError" in result.stderr
    assert "KVConsistencyError" not in result.stderr


def test_unknown_kvguard_value_gives_one_line_and_no_guard(tmp_path):
    result = run(tmp_path, "-c", "pass", env={"KVGUARD": "yes please"})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "accepted values" in lines[0] and result.returncode == 0


def test_kvguard_warn_logs_jsonl_and_prints_an_exit_summary(tmp_path):
    script = textwrap.dedent(
        """
        import torch, torch_npu
        q = torch_npu.npu(torch.randn(2, 4, 4, 8))
        k = torch_npu.npu(torch.randn(2, 3, 2, 8))
        v = torch_npu.npu(torch.randn(2, 4, 2, 8))
        for _ in range(3):
            torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BSND")
        print("finished")
        """
    )
    log = tmp_path / "guard.jsonl"
    result = run(tmp_path, env={"KVGUARD": "warn", "KVGUARD_LOG": str(log), "RANK": "0"}, script=script)
    assert "finished" in result.stdout
    assert "KVConsistencyWarning" in result.stderr
    assert "3  torch_npu.npu_prompt_flash_attention / k_v_token_counts_match / " in result.stderr
    record = json.loads(log.read_text().splitlines()[0])
    assert record["check"] == "k_v_token_counts_match" and record["rank"] == "0"


def test_python_m_runtime_guard_runs_a_script_with_its_arguments_under_the_guard(tmp_path):
    result = run(tmp_path, "-m", "runtime_guard", "SCRIPT", "--flag", "x")
    assert "argv: ['--flag', 'x']" in result.stdout
    assert "KVConsistencyError" in result.stderr and "truncated call went through" not in result.stdout


def test_python_m_runtime_guard_without_a_script_prints_usage(capsys):
    assert runtime_guard_main([]) == 2
    assert "usage: python -m runtime_guard" in capsys.readouterr().err


def test_the_start_up_hook_is_installed_at_the_site_packages_root():
    hook = Path(sysconfig.get_paths()["purelib"]) / "kvlint_guard.pth"
    assert hook.is_file(), "pip install -e . (or the wheel) must place kvlint_guard.pth in site-packages"
    assert hook.read_text() == (Path(__file__).parents[2] / "runtime_guard" / "kvlint_guard.pth").read_text()


THREE_VIOLATIONS = textwrap.dedent(
    """
    import torch, torch_npu
    q = torch_npu.npu(torch.randn(2, 4, 4, 8))
    k = torch_npu.npu(torch.randn(2, 3, 2, 8))
    v = torch_npu.npu(torch.randn(2, 4, 2, 8))
    print("started", flush=True)
    for _ in range(3):
        torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BSND")
    print("finished")
    """
)


def log_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if "KVGUARD_LOG" in line]


def test_a_warn_run_with_three_violations_writes_three_log_lines(tmp_path):
    log = tmp_path / "guard.jsonl"
    result = run(tmp_path, env={"KVGUARD": "warn", "KVGUARD_LOG": str(log)}, script=THREE_VIOLATIONS)
    assert "finished" in result.stdout
    assert result.stderr.count("KVConsistencyWarning") == 1  # shown once for the call site
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 3 and {r["check"] for r in records} == {"k_v_token_counts_match"}


def test_kvguard_log_alone_turns_on_warn_mode_and_logs_every_violation(tmp_path):
    log = tmp_path / "guard.jsonl"
    result = run(tmp_path, env={"KVGUARD_LOG": str(log)}, script=THREE_VIOLATIONS)
    assert "finished" in result.stdout and result.returncode == 0
    assert "KVConsistencyWarning" in result.stderr
    assert "3  torch_npu.npu_prompt_flash_attention / k_v_token_counts_match" in result.stderr
    assert [json.loads(line)["mode"] for line in log.read_text().splitlines()] == ["warn"] * 3


def test_kvguard_off_wins_over_kvguard_log(tmp_path):
    log = tmp_path / "guard.jsonl"
    result = run(tmp_path, env={"KVGUARD": "off", "KVGUARD_LOG": str(log)}, script=THREE_VIOLATIONS)
    assert "KVConsistency" not in result.stderr and not log.exists()


@pytest.mark.parametrize(
    "bad,problem",
    [("missing-dir/guard.jsonl", "is in a directory that does not exist"), (".", "is a directory")],
)
def test_a_bad_kvguard_log_is_said_once_at_start_and_raise_mode_still_raises_the_violation(tmp_path, bad, problem):
    result = run(tmp_path, env={"KVGUARD": "raise", "KVGUARD_LOG": bad}, script=THREE_VIOLATIONS)
    said = log_lines(result.stderr)
    assert len(said) == 1 and problem in said[0] and "the guard still checks every call" in said[0]
    assert "mkdir -p" in said[0] or "name a file in it" in said[0]  # how to fix it
    assert result.stderr.index(said[0]) < result.stderr.index("Traceback")  # at start, before the first call
    assert "runtime_guard.KVConsistencyError" in result.stderr and "k_v_token_counts_match" in result.stderr
    assert "KVGuardInternal" not in result.stderr and "finished" not in result.stdout


def test_a_bad_kvguard_log_in_warn_mode_still_warns_and_summarises(tmp_path):
    result = run(tmp_path, env={"KVGUARD": "warn", "KVGUARD_LOG": "missing-dir/guard.jsonl"}, script=THREE_VIOLATIONS)
    assert len(log_lines(result.stderr)) == 1
    assert "KVConsistencyWarning" in result.stderr and "KVGuardInternal" not in result.stderr
    assert "3  torch_npu.npu_prompt_flash_attention / k_v_token_counts_match" in result.stderr
    assert "finished" in result.stdout


def test_a_bad_kvguard_log_is_reported_even_when_no_call_is_made(tmp_path):
    result = run(tmp_path, "-c", "import torch_npu", env={"KVGUARD": "raise", "KVGUARD_LOG": "missing-dir/x.jsonl"})
    assert len(log_lines(result.stderr)) == 1 and result.returncode == 0


def test_the_example_honours_kvguard_warn(tmp_path):
    example = Path(__file__).parents[2] / "examples" / "run_guarded.py"
    warned = run(tmp_path, str(example), env={"KVGUARD": "warn"})
    assert warned.returncode == 0, warned.stderr
    assert "KVGUARD=warn: the call ran, and the guard warned" in warned.stdout
    assert "caught KVConsistencyError" not in warned.stdout and "fixed call ran" in warned.stdout
    assert "1  varlen_attention / k_v_token_counts_match" in warned.stderr
    raised = run(tmp_path, str(example))
    assert "caught KVConsistencyError" in raised.stdout and raised.returncode == 0


def test_python_m_runtime_guard_help_prints_usage_and_exits_0(tmp_path):
    result = run(tmp_path, "-m", "runtime_guard", "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: python -m runtime_guard")
    assert "-m module" in result.stdout and "KVGUARD_LOG" in result.stdout


def test_python_m_runtime_guard_runs_a_module_like_python_m(tmp_path):
    package = tmp_path / "serving"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "entry.py").write_text(USER_SCRIPT)
    result = run(tmp_path, "-m", "runtime_guard", "-m", "serving.entry", "--port", "8")
    assert "argv: ['--port', '8']" in result.stdout
    assert "KVConsistencyError" in result.stderr and "entry.py:15" in result.stderr
    assert "truncated call went through" not in result.stdout
    warned = run(tmp_path, "-m", "runtime_guard", "--mode", "warn", "-m", "serving.entry")
    assert "KVConsistencyWarning" in warned.stderr and "KVConsistencyError" not in warned.stderr  # the call went on to the op


@pytest.mark.parametrize(
    "args,message,code",
    [(["--mode", "strict", "x.py"], "--mode must be raise or warn", 2), (["--frobnicate"], "unknown option --frobnicate", 2), (["missing.py"], "can't open file", 2), (["-m", "no_such_module_here"], "no module named 'no_such_module_here'", 1)],
)
def test_python_m_runtime_guard_bad_usage_says_what_is_wrong(tmp_path, args, message, code):
    result = run(tmp_path, "-m", "runtime_guard", *args)
    assert result.returncode == code and message in result.stderr and "Traceback" not in result.stderr


def _this_checkout() -> str:
    # The double torch_npu, then this checkout's runtime_guard ahead of any installed copy.
    return os.pathsep.join([str(DOUBLE_DIR), str(Path(__file__).resolve().parents[2])])


@pytest.mark.parametrize(
    "env,line",
    [
        ({"KVGUARD": "strict"}, "KVGUARD: RuntimeWarning: KVGUARD='strict' is not understood"),
        ({"KVGUARD": "warn", "KVGUARD_LOG": "missing-dir/x.jsonl"}, "KVGUARD_LOG: KVGuardLogWarning: kvlint runtime guard: KVGUARD_LOG='missing-dir/x.jsonl' is in a directory"),
    ],
)
def test_a_bad_environment_value_is_reported_at_the_variable_not_a_fake_row(tmp_path, env, line):
    result = run(tmp_path, "-c", "import torch_npu", env={**env, "PYTHONPATH": _this_checkout()})
    said = [text for text in result.stderr.splitlines() if "Warning" in text]
    assert len(said) == 1 and said[0].startswith(line), result.stderr
    assert ":0:" not in result.stderr


def test_a_bad_environment_value_still_obeys_warning_filters(tmp_path):
    result = run(tmp_path, "-W", "error::RuntimeWarning", "-c", "import runtime_guard.activation as a; a.mode_from_env('strict')",
                 env={"PYTHONPATH": _this_checkout()})
    assert result.returncode == 1 and "RuntimeWarning: KVGUARD='strict' is not understood" in result.stderr
