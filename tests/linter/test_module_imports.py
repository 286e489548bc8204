"""Every module of the linter imports on its own, first, in a fresh interpreter.

A tool such as ``python -m benchmarks.exemptions`` (or a user's script) may import one rule's
module before anything else; an import cycle that the CLI's import order happens to hide must
not break it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import linter

_PACKAGE = Path(linter.__file__).parent
# One interpreter for all: each module is imported after every ``linter`` module is dropped
# from ``sys.modules``, which is what a fresh interpreter would see.
_SCRIPT = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "linter" or m.startswith("linter.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def _modules() -> list[str]:
    names = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        parts = path.relative_to(_PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_linter_module_imports_first_on_its_own() -> None:
    names = _modules()
    assert "linter.rules.kv107.condition" in names and "linter.model.symmetry" in names
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *names], check=False, capture_output=True, text=True,
        timeout=300,
        cwd=_PACKAGE.parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"modules that fail to import on their own:\n{done.stdout}"
