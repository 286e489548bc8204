"""The test double may not disagree with the real torch_npu on any schema: argument names,
defaults, keyword-only markers, `.out` signatures, return types. The double registers
tests/runtime_guard/double/torch_npu/schemas.py, so comparing that file is comparing the double."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from runtime_guard import ops, patching
from tests.real_npu.harness import torch, torch_npu

SCHEMAS_FILE = Path(__file__).resolve().parents[1] / "runtime_guard" / "double" / "torch_npu" / "schemas.py"


def double_schemas() -> tuple:
    # Loaded by path: importing the double's package would register its ops beside the real ones.
    spec = importlib.util.spec_from_file_location("double_schemas", SCHEMAS_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SCHEMAS


def real_schemas() -> list:
    torch_npu._npu_paged_attention  # noqa: B018 - ATB ops registered
    found = []
    for row in ops.ROWS:
        packet = patching.unwrap(getattr(getattr(torch.ops, row.namespace), row.name))
        found += [str(getattr(packet, name)._schema) for name in sorted(packet.overloads(), key=lambda n: (n != "default", n))]
    return found


def test_the_double_declares_every_guarded_overload_exactly_as_the_real_package():
    real, double = real_schemas(), double_schemas()
    missing = [s for s in real if s not in double]
    assert not missing, f"put these lines into {SCHEMAS_FILE.name} (the double lacks or misdeclares them):\n" + "\n".join(f"    {s!r}," for s in missing)


def test_the_double_declares_nothing_the_real_package_does_not():
    real = set(real_schemas())
    stale = [s for s in double_schemas() if s not in real]
    assert not stale, "the double declares schemas the real package does not have (an old signature?):\n" + "\n".join(stale)


def test_the_drift_check_can_fail():
    """The FIA .out form the double used to declare (attention_out/softmax_lse) is not the real one."""
    fia_out = next(s for s in real_schemas() if s.startswith("npu::npu_fused_infer_attention_score.out("))
    old = fia_out.replace("Tensor[] out)", "Tensor(a!) attention_out, Tensor(b!) softmax_lse)")
    assert "npu_fused_infer_attention_score.out" in old and old not in real_schemas()
