"""python -m runtime_guard [--mode raise|warn] script.py args...: run a script under the guard."""

from __future__ import annotations

import os
import runpy
import sys

from runtime_guard import install
from runtime_guard.activation import mode_from_env

USAGE = "usage: python -m runtime_guard [--mode raise|warn] script.py [args...]"


def main(argv: list) -> int:
    mode = mode_from_env(os.environ.get("KVGUARD")) or "raise"
    if argv[:1] == ["--mode"] and len(argv) >= 2:
        mode, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--mode="):
        mode, argv = argv[0].partition("=")[2], argv[1:]
    if not argv or mode not in ("raise", "warn"):
        print(USAGE, file=sys.stderr)
        return 2
    install(mode)
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
