"""Hatchling build hook: compile kvlint's C helpers when a C compiler is at hand.

``runtime_guard/_lengths.c`` speeds up the runtime guard's check of length lists;
``linter/_identifiers.c`` the pre-filter's identifier sets and the K-side candidates among
them; ``linter/_code_only.c`` its code-only text and that text's top-level statements. None is
ever required. Without a compiler, on a platform this hook does not know how to drive
(Windows), with KVLINT_PURE_PYTHON set, or on any build error, the wheel stays pure Python (a
helper that fails alone is left out alone) and the Python code it stands for gives the same
answers: ``runtime_guard.fast_paths.cumulative_py``, ``linter.plan.words.identifier_set``,
``linter.plan.file._k_candidates_searched``, ``linter.plan.code_only.code_only`` and
``linter.plan.segments._top_level_cuts``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Each C source, and what its helper speeds up (for the message when it cannot be built).
SOURCES = {
    Path("runtime_guard", "_lengths.c"): "the guard's length-list check (the pure-Python check is used instead)",
    Path("linter", "_identifiers.c"): "the pre-filter's identifier sets and K-side candidates (read in Python instead)",
    Path("linter", "_code_only.c"): "the pre-filter's code-only text and top-level statements (read in Python instead)",
}


def compile_extension(source: Path, target: Path) -> str | None:
    """Build ``target`` from ``source``; None on success, else why not."""
    linker = sysconfig.get_config_var("LDSHARED")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not linker or not suffix or sys.platform == "win32":
        return "no Unix-style shared-library command for this Python"
    command = shlex.split(linker)
    if shutil.which(command[0]) is None:
        return f"no C compiler ({command[0]} not found)"
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    command += [*flags, "-O2", f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(target)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{command[0]} failed to run: {exc}"
    if result.returncode != 0:
        return f"{' '.join(command)} exited {result.returncode}:\n{result.stderr.strip()}"
    return None


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("KVLINT_PURE_PYTHON"):
            return
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        if version != "editable":
            self._scratch = tempfile.mkdtemp(prefix="kvlint-build-")
        for source, helps in SOURCES.items():
            name = source.stem + suffix
            # Editable: beside its source, imported from the source tree.
            target = Path(self.root, source.parent, name) if version == "editable" else Path(self._scratch, name)
            why_not = compile_extension(Path(self.root, source), target)
            if why_not is not None:
                print(f"kvlint: building without the compiled helper for {helps} ({why_not})", file=sys.stderr)
                continue
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
            if version != "editable":
                build_data["force_include"][str(target)] = f"{source.parent.as_posix()}/{name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
