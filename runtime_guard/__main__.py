"""python -m runtime_guard [--mode raise|warn] (script.py | -m module) [args...]: run a program under the guard."""

from __future__ import annotations

import os
import runpy
import sys

from runtime_guard import install
from runtime_guard.activation import mode_from_env

USAGE = "usage: python -m runtime_guard [-h] [--mode raise|warn] (script.py | -m module) [args...]"

HELP = f"""{USAGE}

Run a Python script, or a module as `python -m module` would, with the kvlint runtime guard
checking every torch_npu attention and KV-cache call for K/V consistency.

options:
  -h, --help           show this message and exit
  --mode raise|warn    raise: stop at the first violation with runtime_guard.KVConsistencyError;
                       warn: warn once per call site, let the call through, print a summary at exit.
                       Default: the KVGUARD environment variable, else raise.
  -m module            run a library module as a script (like python -m); the arguments after it
                       are its own

environment:
  KVGUARD=raise|warn|off   the mode when --mode is not given
  KVGUARD_LOG=path.jsonl   append one JSON line per violation to this file

Everything after the script name (or after -m module) is passed to the program as sys.argv[1:].
"""


def _usage_error(message: str) -> int:
    print(f"{USAGE}\npython -m runtime_guard: error: {message}", file=sys.stderr)
    return 2


def _find_module(name: str) -> object:
    import importlib.util

    sys.path.insert(0, os.getcwd())  # where python -m looks first
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path.pop(0)


def main(argv: list) -> int:
    mode = mode_from_env(os.environ.get("KVGUARD")) or "raise"
    module = None
    while argv:
        arg = argv[0]
        if arg in ("-h", "--help"):
            print(HELP, end="")
            return 0
        if arg == "--mode":
            if len(argv) < 2:
                return _usage_error("--mode needs a value: raise or warn")
            mode, argv = argv[1], argv[2:]
        elif arg.startswith("--mode="):
            mode, argv = arg.partition("=")[2], argv[1:]
        elif arg == "-m":
            if len(argv) < 2:
                return _usage_error("-m needs a module name")
            module, argv = argv[1], argv[2:]
            break
        elif arg.startswith("-m") and len(arg) > 2:  # -mpackage.module, as python accepts
            module, argv = arg[2:], argv[1:]
            break
        elif arg.startswith("-"):
            return _usage_error(f"unknown option {arg} (options go before the script; see --help)")
        else:
            break
    if mode not in ("raise", "warn"):
        return _usage_error(f"--mode must be raise or warn, not {mode!r}")
    if module is None and not argv:
        return _usage_error("name a script to run, or -m module")
    if module is None and not os.path.isfile(argv[0]):
        print(f"python -m runtime_guard: can't open file {os.path.abspath(argv[0])!r}: no such file", file=sys.stderr)
        return 2
    if module is not None and _find_module(module) is None:
        print(f"python -m runtime_guard: no module named {module!r}", file=sys.stderr)
        return 1
    install(mode)
    if module is not None:
        # What python -m does: the current directory first on sys.path, argv[0] the module's file.
        sys.argv = [module, *argv]
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
