"""Is this interpreter the real-package tier's (torch-npu installed, stub CANN libraries built)?

Imported by conftest.py in every environment, so it imports neither torch nor torch_npu.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

# .ci/setup-npu builds the stubs inside the venv; KVLINT_NPU_STUBS points elsewhere (an
# exploration env whose stubs were built with `python tests/real_npu/stubs.py build DIR`).
STUBS = Path(os.environ.get("KVLINT_NPU_STUBS") or Path(sys.prefix) / "cann-stubs")


def _why_not() -> str | None:
    try:
        version = metadata.version("torch-npu")
    except metadata.PackageNotFoundError:
        return f"torch-npu is not installed in {sys.prefix} (the tier runs in .venv-npu, made by .ci/setup-npu)"
    if version.partition("+")[0] != "2.13.0":
        return f"torch-npu {version} is installed; the tier is written against 2.13.0"
    if not any((STUBS / "lib").glob("*.so")):
        return f"no stub CANN libraries in {STUBS}/lib (python tests/real_npu/stubs.py build {STUBS})"
    return None


WHY_NOT = _why_not()
REAL = WHY_NOT is None
