"""Wrapping torch_npu's op packets in torch_npu.* and torch.ops.npu/atb.*, and undoing it exactly.

torch_npu.X and torch.ops.<ns>.X are the same OpOverloadPacket stored in two namespaces; both get
the same wrapper. Each namespace object's class is swapped for a subclass that wraps a watched
name whenever something assigns it later: that keeps the guard in place when torch_npu replaces
its lazy ATB wrappers with torch.ops.atb.* and when torch.ops resolves an op on first access.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import warnings
from typing import Any

from runtime_guard import fast_paths, ops, validators
from runtime_guard.checks import NotJudged
from runtime_guard.reporting import (
    KVConsistencyError,
    KVGuardInternalWarning,
    Reporter,
    format_summary,
)


# pytest leaves this module's frames out of a failing test's traceback: the last frame shown is
# the user's call into the guarded op.
__tracebackhide__ = True


class _State:
    mode: str | None = None  # read without the lock on every guarded call
    installed = False
    reporter: Reporter | None = None


STATE = _State()
LOCK = threading.RLock()

_watched: dict = {}  # (id(owner), name) -> OpRow
_restore: dict = {}  # (id(owner), name) -> (owner, raw value to put back)
_owners: dict = {}  # id(owner) -> (owner, original class)
_wrappers: dict = {}  # id(raw packet or overload) -> GuardedOp
_warned_early: set = set()


class _NotCompiling:
    _is_compiling_flag = False


# torch.compiler.is_compiling() is torch.jit.is_scripting() (False outside TorchScript, which
# never scripts this wrapper) or a flag that torch.compile and non-strict export set while they
# trace, and Dynamo folds it to True. A guarded call reads that flag itself and calls only
# is_dynamo_compiling(), which Dynamo folds to True as well: one Python frame instead of two
# (about 0.4 us of a guarded call in guard_bench). A torch without them keeps is_compiling().
_compile_flags: Any = _NotCompiling


def _bind_torch_checks() -> None:
    """Resolve the per-call torch checks once; a wrapper made after torch is imported does it."""
    global _dynamo_compiling, _compile_flags, _function_mode_enabled
    import torch

    compiler = torch.compiler
    if hasattr(compiler, "is_dynamo_compiling") and hasattr(compiler, "_is_compiling_flag"):
        _dynamo_compiling, _compile_flags = compiler.is_dynamo_compiling, compiler
    else:
        _dynamo_compiling = compiler.is_compiling
    _function_mode_enabled = torch._C._is_torch_function_mode_enabled


def _dynamo_compiling() -> bool:  # until bound: a guard()-decorated function may come before torch
    _bind_torch_checks()
    return _dynamo_compiling()


def _function_mode_enabled() -> bool:
    _bind_torch_checks()
    return _function_mode_enabled()


# Under a TorchFunctionMode (``with torch.device(...)`` is one) torch looks the op up by name, so
# the mode is handed this wrapper and calls it again with the same arguments: that inner call was
# checked on the way in and must not be checked (and counted) twice.
_inner = threading.local()  # .row: the op whose original a mode is running on this thread
_inner_possible = False  # True once any guarded call has run under a TorchFunctionMode


def _call_marked(op: GuardedOp, args: tuple, kwargs: dict) -> Any:
    global _inner_possible
    _inner_possible = True
    outer = getattr(_inner, "row", None)
    _inner.row = op._row
    try:
        return op._kvguard_original(*args, **kwargs)
    finally:
        _inner.row = outer


def reporter() -> Reporter:
    with LOCK:
        if STATE.reporter is None:
            STATE.reporter = Reporter(os.environ.get("KVGUARD_LOG") or None)
            atexit.register(_print_summary_at_exit)
        return STATE.reporter


def _print_summary_at_exit() -> None:
    if STATE.reporter is None or STATE.mode != "warn":
        return
    rows, unjudged = STATE.reporter.summary_rows(), STATE.reporter.not_judged_rows()
    if rows or unjudged:
        print(format_summary(rows, unjudged), file=sys.stderr)


def _report(op: GuardedOp, mode: str, values: list, found: Any) -> KVConsistencyError | None:
    """A violation: the error to raise (raise mode), or warned and logged; a failure while wording it is a guard bug."""
    try:
        if op._row.validate is validators.attention:
            # Judged with generic role names on the hot path; worded with the op's own argument names.
            found = validators.attention(*values, names=ops.role_names(op._row)) or found
        layout_index = op._binder.layout_index
        layout = values[layout_index] if layout_index >= 0 else op._row.layout
        return reporter().violation(mode, op._label, str(layout), found)
    except Exception as exc:  # noqa: BLE001 - wording a violation must not break the call either
        reporter().internal(mode, op._label, exc)
        return None


def _guard_failed(op: GuardedOp, mode: str, exc: Exception, args: tuple, kwargs: dict) -> None:
    if _under_fake_tensors(args, kwargs):
        return  # symbolic shapes during tracing: leave the judgement to the real run
    reporter().internal(mode, op._label, exc)


def _under_fake_tensors(args: tuple, kwargs: dict) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return any(isinstance(value, FakeTensor) for value in (*args, *kwargs.values()))


_OWN_ATTRIBUTES = frozenset(("_kvguard_original", "_entry", "_row", "_declared_row", "_binder", "_accepts", "_label", "_overloads", "_mode", "__wrapped__", "__doc__", "__name__", "__qualname__", "__module__"))


class GuardedOp:
    """Stands where a packet (or one of its overloads) stood; checks, then calls the original.

    A call runs the __call__ of a subclass made for each wrapper (_calling_class).
    """

    # No __slots__: torch.compile guards on a called object's __dict__.

    def __init__(self, original: Any, row: ops.OpRow, label: str, params: list | None = None, mode: str | None = None) -> None:
        if "torch" in sys.modules:
            _bind_torch_checks()  # before any call, which Dynamo may be the first to trace
        self._kvguard_original = original
        self._entry = _entry_point(original)
        self._binder = ops.Binder(row, ops.schema_params(original) if params is None else params)
        self._declared_row = row  # what an overload's own wrapper judges by: its schema may hold the roles this one lacks
        if self._binder.missing:
            reason = NotJudged(f"this {row.name} has no argument {', '.join(self._binder.missing)} (a torch_npu release the guard's roles do not fit)")
            row = row._replace(validate=lambda *values: reason)
        self._row = row
        self._accepts = fast_paths.for_op(row, self._binder.slots)
        self._label = label
        self._overloads: dict = {}
        self._mode = mode  # set for guard()-decorated functions that always check
        # What help(), inspect.signature and functools read: the op's own (torch_npu's docstrings).
        self.__wrapped__ = original
        object.__setattr__(self, "__doc__", getattr(original, "__doc__", None))  # None too: never the guard's own docstring
        for name in ("__name__", "__qualname__", "__module__"):
            value = getattr(original, name, None)
            if value is not None:
                setattr(self, name, value)
        object.__setattr__(self, "__class__", _calling_class(self))

    def _judge(self, mode: str, args: tuple, kwargs: dict) -> KVConsistencyError | None:
        """The general path: bind every role, run the op's validator, report what it finds."""
        try:
            values = self._binder.bind(args, kwargs)
            found = self._row.validate(*values)
        except Exception as exc:  # noqa: BLE001 - a guard bug must not become the user's bug
            _guard_failed(self, mode, exc, args, kwargs)
            return None
        if found is None:
            return None
        if type(found) is NotJudged:
            reporter().not_judged(mode, self._label, found.reason)
            return None
        return _report(self, mode, values, found)

    def verdict(self, args: tuple, kwargs: dict) -> KVConsistencyError | None:
        """For guard()-decorated functions: the error to raise, or None (also when off or compiling)."""
        mode = self._mode or STATE.mode
        if mode is None or _dynamo_compiling() or _compile_flags._is_compiling_flag or self._accepts(args, kwargs):
            return None
        return self._judge(mode, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # .default, .out and every other overload are checked too; anything else passes through.
        attr = getattr(self._kvguard_original, name)
        if not _is_overload(attr) or getattr(_pinning, "active", False):
            return attr  # while pinning, the dispatcher caches the raw overload through this path
        wrapper = self._overloads.get(name)
        if wrapper is None:
            if id(attr) not in _pinned:  # an overload defined after the packet was wrapped
                _pin_overloads((attr,))
            wrapper = GuardedOp(attr, self._declared_row, f"{self._label}.{name}")
            self._overloads[name] = wrapper
            _wrappers[id(attr)] = wrapper
        return wrapper

    def __setattr__(self, name: str, value: Any) -> None:
        # Whatever else is stored on an op belongs to the op: torchair registers its converter as
        # ``op._ge_converter = ...`` and later reads it from the raw OpOverload the graph holds.
        if name == "__doc__":
            # torch_npu documents ATB ops when it loads them, by then through this wrapper: the op
            # keeps the docstring it would have had unguarded, and the wrapper shows it too.
            setattr(self._kvguard_original, name, value)
            object.__setattr__(self, name, value)
        elif name in _OWN_ATTRIBUTES:
            object.__setattr__(self, name, value)
        else:
            setattr(self._kvguard_original, name, value)

    def __delattr__(self, name: str) -> None:
        if name in _OWN_ATTRIBUTES:
            object.__delattr__(self, name)
        else:
            delattr(self._kvguard_original, name)

    # A registry keyed by the op (torchair's _CONVERTERS, sets of ops) finds an entry made
    # through the wrapper when it is looked up with the raw op, and the other way round.
    def __eq__(self, other: object) -> bool:
        return self._kvguard_original == unwrap(other)

    def __hash__(self) -> int:
        return hash(self._kvguard_original)

    def __repr__(self) -> str:
        return f"<kvlint guard around {self._kvguard_original!r}>"


def _calling_class(op: GuardedOp) -> type:
    """A subclass of GuardedOp for this one wrapper, whose __call__ holds what a call reads.

    Reading an attribute of a GuardedOp costs about 65 ns (its __getattr__ keeps CPython from
    specialising the read) against 10 ns for a closure variable, and a call would read three;
    the wrapper's fields are set once, in __init__, so they are bound here instead.
    """
    accepts, entry, original, row, judge, fixed_mode = op._accepts, op._entry, op._kvguard_original, op._row, op._judge, op._mode
    state = STATE

    def __call__(self: GuardedOp, *args: Any, **kwargs: Any) -> Any:
        mode = fixed_mode or state.mode
        if mode is not None and not _dynamo_compiling() and not _compile_flags._is_compiling_flag:
            if _inner_possible and getattr(_inner, "row", None) is row:
                return original(*args, **kwargs)  # handed back by a TorchFunctionMode
            if not accepts(args, kwargs) and (error := judge(mode, args, kwargs)) is not None:
                raise error  # here, so a traceback shows the user's call and this one guard frame
            if _function_mode_enabled():
                return _call_marked(self, args, kwargs)
            return entry(*args, **kwargs)
        return original(*args, **kwargs)  # what torch.compile traces, too

    return type(GuardedOp.__name__, (GuardedOp,), {"__call__": __call__, "__slots__": (), "__module__": __name__, "__qualname__": GuardedOp.__qualname__})


def _entry_point(original: Any) -> Any:
    """What a checked call hands its arguments to.

    An OpOverload's __call__, and an OpOverloadPacket's when none of its overloads takes a
    torchbind object, does nothing but call the op's C++ entry point ``_op``; calling that
    directly saves the guarded call one Python frame. Anything else (a guard()-decorated
    function, a subclass, another torch) is called as it is.
    """
    torch_ops = sys.modules.get("torch._ops")
    if torch_ops is None:
        return original
    if type(original) is torch_ops.OpOverload or (type(original) is torch_ops.OpOverloadPacket and getattr(original, "_has_torchbind_op_overload", True) is False):
        return getattr(original, "_op", original)
    return original


def _is_overload(value: Any) -> bool:
    from torch._ops import OpOverload

    return isinstance(value, OpOverload)


def _is_packet(value: Any) -> bool:
    from torch._ops import OpOverloadPacket

    return isinstance(value, OpOverloadPacket)


def unwrap(value: Any) -> Any:
    return value._kvguard_original if isinstance(value, GuardedOp) else value


def _wrap(raw: Any, row: ops.OpRow) -> GuardedOp:
    wrapper = _wrappers.get(id(raw))
    if wrapper is None or wrapper._kvguard_original is not raw:
        _pin_dispatcher_objects(raw)
        wrapper = _wrappers[id(raw)] = GuardedOp(raw, row, _label(row))
    return wrapper


class _Pinned(Exception):
    pass


def _pin_dispatcher_objects(packet: Any) -> None:
    """Make the dispatcher cache the raw OpOverloads before torch.ops.<ns>.X points at a wrapper.

    Python-level dispatch (FakeTensor, torch.compile, tensor subclasses) receives the op object
    that the C++ dispatcher looked up once by attribute path torch.ops.<ns>.<name>.<overload> and
    cached for good. Dispatching each overload once under a mode that stops at the first Python
    hook fills that cache with the raw objects; no kernel runs. An overload defined after the
    packet was wrapped (torch.library defines a packet's overloads one at a time) is pinned when
    the wrapper first hands it out.
    """
    _pin_overloads([getattr(packet, name) for name in packet.overloads()])


_pinned: set = set()  # ids of the overloads pinned
_pinning = threading.local()  # .active while an overload is pinned through a wrapped packet


def _pin_overloads(overloads: Any) -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    def stop(self: Any, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        raise _Pinned

    class StopAtPython(TorchDispatchMode):
        pass

    # Set after the class exists: TorchDispatchMode wraps a __torch_dispatch__ defined in the class
    # body in dynamo.disable, whose first call imports torch._dynamo (about 3 s) only to reach this.
    StopAtPython.__torch_dispatch__ = stop

    for overload in overloads:
        _pinned.add(id(overload))
        args, kwargs = _placeholder_arguments(overload._schema)
        _pinning.active = True
        try:
            with StopAtPython():
                overload(*args, **kwargs)
        except _Pinned:
            continue
        except Exception as exc:  # noqa: BLE001 - an op that cannot be primed is still guarded
            warnings.warn(f"kvlint runtime guard: could not pin {overload} for Python dispatch ({exc}); under FakeTensor or torch.compile that op may be seen as the guard's wrapper", KVGuardInternalWarning, stacklevel=2)
        finally:
            _pinning.active = False


def _placeholder_arguments(schema: Any) -> tuple:
    import torch

    def placeholder(type_text: str) -> Any:
        if type_text.startswith("Optional[") or type_text.endswith("?"):
            return None  # a required optional (npu_sparse_flash_attention's Tensor? value)
        base = type_text
        if base.endswith("]"):  # Tensor[] (FIA's .out), Tensor?[], int[], SymInt[2]
            return [torch.empty(0)] if base.startswith("Tensor[") else []
        if base.startswith("Tensor"):
            return torch.empty(0)
        return {"int": 0, "SymInt": 0, "float": 0.0, "str": "", "bool": False, "Scalar": 0, "ScalarType": torch.float32}.get(base)

    args, kwargs = [], {}
    for arg in schema.arguments:
        if arg.has_default_value():
            continue
        if arg.kwarg_only:
            kwargs[arg.name] = placeholder(str(arg.type))
        else:
            args.append(placeholder(str(arg.type)))
    return args, kwargs


_watching_classes: dict = {}


def _watching_class(base: type) -> type:
    """A subclass of a namespace's class that wraps watched names on assignment (and on first resolve)."""
    cls = _watching_classes.get(base)
    if cls is not None:
        return cls

    def __setattr__(self: Any, name: str, value: Any) -> None:
        key = (id(self), name)
        row = _watched.get(key)
        if row is None:
            base.__setattr__(self, name, value)
            return
        with LOCK:  # torch_npu may assign from any thread
            raw = unwrap(value)
            _restore[key] = (self, raw)
            if STATE.installed and _is_packet(raw):
                base.__setattr__(self, name, raw)  # _wrap pins the raw overloads through this name
                value = _wrap(raw, row)
            base.__setattr__(self, name, value)

    namespace: dict = {"__setattr__": __setattr__, "__module__": __name__}
    if hasattr(base, "__getattr__"):
        # torch.ops.<ns>.__getattr__ resolves an op, stores it with setattr (wrapped above) and
        # returns the raw packet; hand back what was stored instead.
        def __getattr__(self: Any, name: str) -> Any:
            raw = base.__getattr__(self, name)
            return self.__dict__.get(name, raw)

        namespace["__getattr__"] = __getattr__
    cls = _watching_classes[base] = type(f"KVGuarded{base.__name__}", (base,), namespace)
    return cls


def _watch(owner: Any, name: str, row: ops.OpRow) -> None:
    if id(owner) not in _owners:
        _owners[id(owner)] = (owner, type(owner))
        owner.__class__ = _watching_class(type(owner))
    _watched[(id(owner), name)] = row
    current = owner.__dict__.get(name)
    if current is not None:
        setattr(owner, name, current)  # re-assign through the watcher: wraps a packet, records the original


def _label(row: ops.OpRow) -> str:
    """How messages name the op: where torch_npu exposes it (torch_npu.X, or torch_npu.atb.X for the ATB-only ones),
    or torch.ops.<namespace>.X for another package's op."""
    if row.namespace not in ("npu", "atb"):
        return f"torch.ops.{row.namespace}.{row.name}"
    atb = sys.modules.get("torch_npu.atb")
    torch_npu = sys.modules.get("torch_npu")
    if atb is not None and row.name in vars(atb) and (torch_npu is None or row.name not in vars(torch_npu)):
        return f"torch_npu.atb.{row.name}"
    return f"torch_npu.{row.name}"


def patch_torch_npu(torch_npu: Any) -> None:
    """Wrap every guarded op in torch_npu and torch.ops.*; safe to call again."""
    import torch

    with LOCK:
        if not STATE.installed:
            return
        for row in ops.PACKAGE_ROWS:
            # Another package's op: wrapped now if its library is loaded, else when torch.ops resolves it.
            namespace = getattr(torch.ops, row.namespace)
            _watch(namespace, row.name, row)
            try:
                getattr(namespace, row.name)
            except (AttributeError, RuntimeError):
                pass
        for row in ops.ROWS:
            namespace = getattr(torch.ops, row.namespace)
            _watch(namespace, row.name, row)
            try:
                getattr(namespace, row.name)  # resolve now, so both names share one wrapper
            except (AttributeError, RuntimeError):
                pass  # not registered (yet): the watcher wraps it when it appears
            # torch_npu.X, and torch_npu.atb.X where torch_npu keeps its ATB-only ops (npu_paged_cache_load):
            # both start as lazy functions and are replaced by torch.ops.atb.X on the first ATB call.
            for owner in (torch_npu, vars(torch_npu).get("atb")):
                if owner is not None:
                    _watch(owner, row.name, row)
        _warn_early_bindings(torch_npu)


def unpatch() -> None:
    """Put back the raw objects (the latest ones torch_npu assigned) and the namespaces' classes."""
    with LOCK:
        for (owner_id, name), (owner, raw) in _restore.items():
            if isinstance(owner.__dict__.get(name), GuardedOp):
                _owners[owner_id][1].__setattr__(owner, name, raw)
        for owner, original_class in _owners.values():
            owner.__class__ = original_class
        _owners.clear()
        _watched.clear()
        _restore.clear()


def _warn_early_bindings(torch_npu: Any) -> None:
    """Names bound before the guard (``from torch_npu import X``) keep calling the raw op."""
    originals = {id(raw): f"torch_npu.{name}" for (_, name), (_, raw) in _restore.items() if raw is not None}
    for module_name, module in list(sys.modules.items()):
        if module is None or module is torch_npu or module_name.partition(".")[0] in ("torch", "torch_npu", "runtime_guard"):
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for name, value in items:
            op = originals.get(id(value))
            if op is None or (id(module), name) in _warned_early:
                continue
            _warned_early.add((id(module), name))
            warnings.warn_explicit(
                f"kvlint runtime guard: {module_name}.{name} was bound to {op} before the guard was installed; "
                f"calls through that name are not checked (call {op}(...) instead, or install the guard first)",
                RuntimeWarning,
                getattr(module, "__file__", None) or module_name,
                0,
            )
