"""Run-time K/V consistency guard for torch_npu attention and KV-cache ops.

Importing this package never imports torch; torch is touched only when torch_npu is patched.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

from runtime_guard import activation, ops, patching, validators
from runtime_guard.checks import ABSENT
from runtime_guard.reporting import (
    KVConsistencyError,
    KVConsistencyWarning,
    KVGuardInternalWarning,
    KVGuardNotJudgedWarning,
)

__all__ = [
    "KVConsistencyError",
    "KVConsistencyWarning",
    "KVGuardInternalWarning",
    "KVGuardNotJudgedWarning",
    "guard",
    "guarded",
    "install",
    "mode",
    "summary",
    "uninstall",
]

_MODES = ("raise", "warn")


def install(mode: str = "raise") -> None:
    """Check every guarded torch_npu op from now on; patches torch_npu now or when it is imported."""
    if mode not in _MODES:
        raise ValueError(f"runtime_guard.install(mode={mode!r}): mode must be one of {', '.join(_MODES)}")
    with patching.LOCK:
        patching.reporter()
        patching.STATE.mode = mode
        if patching.STATE.installed:
            return
        patching.STATE.installed = True
        activation.arm_import_hook()
        torch_npu = sys.modules.get("torch_npu")
        if torch_npu is not None:
            patching.patch_torch_npu(torch_npu)


def uninstall() -> None:
    """Stop checking and put the exact original op objects back; safe to call when not installed."""
    with patching.LOCK:
        patching.STATE.mode = None
        patching.STATE.installed = False
        activation.disarm_import_hook()
        patching.unpatch()


def mode() -> str | None:
    return patching.STATE.mode


@contextlib.contextmanager
def guarded(mode: str = "raise") -> Iterator[None]:
    """Guard a block, then return to whatever was in force before it."""
    previous = patching.STATE.mode
    install(mode)
    try:
        yield
    finally:
        if previous is None:
            uninstall()
        else:
            install(previous)


def summary() -> list:
    """(op, check, count, first call site) for every violation seen in this process."""
    reporter = patching.STATE.reporter
    return reporter.summary_rows() if reporter else []


def guard(
    function: Callable | None = None,
    *,
    layout: str = "TND",
    query: str = "q",
    key: str = "k",
    value: str = "v",
    seq_lens_q: str | None = None,
    seq_lens_kv: str | None = None,
    heads: str | None = None,
    kv_heads: str | None = None,
    device_type: str | None = None,
    mode: str | None = None,
) -> Any:
    """Give your own attention wrapper the checks the torch_npu ops get.

    Arguments name your function's parameters. ``layout`` is a fixed layout (TND, BSND, BNSD,
    BSH, SBH) or the name of a layout parameter. Sequence lengths are cumulative in packed
    layouts (a leading 0, as flash-attn's cu_seqlens have, is fine). ``device_type=None`` accepts
    any one device. ``mode=None`` follows the installed guard (off unless installed); "raise" or
    "warn" checks every call regardless.
    """
    if mode is not None and mode not in _MODES:
        raise ValueError(f"runtime_guard.guard(mode={mode!r}): mode must be None, 'raise' or 'warn'")

    def role(name: str | None, fixed: Any = None) -> Any:
        return ops.Fixed(fixed) if name is None else name

    def decorate(fn: Callable) -> Callable:
        params = ops.signature_params(fn)
        names = {p[0] for p in params}
        layout_role = layout if layout in names else ops.Fixed(layout)  # a parameter or a fixed layout
        roles = (layout_role, query, key, value, role(heads, ABSENT), role(kv_heads, ABSENT), role(seq_lens_q), role(seq_lens_kv), ops.Fixed(None), ops.Fixed(0), ops.Fixed(device_type))
        missing = [r for r in roles if isinstance(r, str) and r not in names]
        if missing:
            raise TypeError(f"runtime_guard.guard: {fn.__qualname__} has no parameter(s) {', '.join(missing)}")
        row = ops.OpRow(fn.__qualname__, "", roles, validators.attention, layout)
        checked = patching.GuardedOp(fn, row, fn.__qualname__, params, mode)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return checked(*args, **kwargs)

        return wrapper

    return decorate(function) if function is not None else decorate
