"""Turning the guard on without code changes: KVGUARD, the start-up hook, the torch_npu import hook.

The .pth file shipped with the package runs ``bootstrap()`` only when KVGUARD is set, so an unset
KVGUARD costs one environment lookup per interpreter start and never imports torch.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import warnings
from typing import Any

MODES = {"raise": "raise", "1": "raise", "on": "raise", "warn": "warn", "off": None, "0": None, "": None}
ACCEPTED = "raise, 1, on, warn, off, 0"


def environment_warning(variable: str, text: str, category: type[Warning]) -> None:
    """Warn about an environment variable's value with the variable as the location:
    ``KVGUARD_LOG: KVGuardLogWarning: ...``. ``warnings.warn_explicit`` alone would print it as a
    file with a fake line (``KVGUARD_LOG:0:``); filters (``-W error::...``) still apply."""
    original = warnings.formatwarning

    def at_variable(message: Any, category: Any, filename: str, lineno: int, line: Any = None) -> str:
        return f"{filename}: {category.__name__}: {message}\n"

    warnings.formatwarning = at_variable
    try:
        warnings.warn_explicit(text, category, variable, 0)
    finally:
        warnings.formatwarning = original


def mode_from_env(value: str | None) -> str | None:
    """The mode KVGUARD asks for; an unknown value warns once and leaves the guard off."""
    if value is None:
        return None
    key = value.strip().lower()
    if key in MODES:
        return MODES[key]
    environment_warning("KVGUARD", f"KVGUARD={value!r} is not understood; accepted values: {ACCEPTED}. The runtime guard stays off.", RuntimeWarning)
    return None


def mode_from_environment(environ: Any = os.environ) -> str | None:
    """KVGUARD's mode; with KVGUARD unset (or empty) a non-empty KVGUARD_LOG alone turns on warn mode.

    Asking for a log is asking to know about violations without stopping the program, which is
    warn mode; KVGUARD=off (or 0) with KVGUARD_LOG set stays off.
    """
    value = environ.get("KVGUARD")
    if (value is None or not value.strip()) and environ.get("KVGUARD_LOG"):
        return "warn"
    return mode_from_env(value)


_bootstrapped = []


def bootstrap() -> None:
    """Called from the .pth start-up hook when KVGUARD is set to anything but off/0, or KVGUARD_LOG alone."""
    if _bootstrapped:
        return  # site can process one site-packages twice (a venv's lib64 -> lib link)
    _bootstrapped.append(True)
    mode = mode_from_environment()
    if mode is not None:
        from runtime_guard import install

        install(mode)


class _PatchAfterExec(importlib.abc.Loader):
    """Runs torch_npu's own loader, then wraps its ops before anyone else sees the module."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        from runtime_guard import patching

        patching.patch_torch_npu(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class TorchNpuImportHook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "torch_npu":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchAfterExec(spec.loader)
                return spec
        return None


def arm_import_hook() -> None:
    if not any(isinstance(finder, TorchNpuImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchNpuImportHook())


def disarm_import_hook() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, TorchNpuImportHook)]
