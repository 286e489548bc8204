"""What happens to a violation: raise, warn once per call site, JSONL record, exit summary."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import warnings
from typing import Any, NamedTuple

from runtime_guard.checks import Violation, is_tensor_like


class KVConsistencyError(ValueError):
    """An attention or KV-cache call whose tensors cannot describe one consistent K/V pair."""

    def __init__(self, message: str, op: str = "", check: str = "", call_site: str = "") -> None:
        super().__init__(message)
        self.op, self.check, self.call_site = op, check, call_site


class KVConsistencyWarning(UserWarning):
    pass


class KVGuardInternalWarning(RuntimeWarning):
    pass


class KVGuardLogWarning(RuntimeWarning):
    """KVGUARD_LOG cannot be written; the guard keeps checking calls without the file."""


class KVGuardNotJudgedWarning(UserWarning):
    """Warn mode: a call the guard does not understand (layout, cache format, mode, argument type) went through unchecked."""


# Tracebacks and pytest summaries show the public name users catch.
for _public in (KVConsistencyError, KVConsistencyWarning, KVGuardLogWarning, KVGuardInternalWarning, KVGuardNotJudgedWarning):
    _public.__module__ = "runtime_guard"
del _public


class CallSite(NamedTuple):
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


def _is_library_module(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in ("runtime_guard", "torch", "torch_npu"))


def user_call_site() -> CallSite:
    """The innermost frame outside the guard, torch and torch_npu: the line the user wrote."""
    frame = sys._getframe(1)
    while frame is not None and _is_library_module(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
    if frame is None:
        return CallSite("<unknown>", 0, "<unknown>")
    return CallSite(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def tensor_facts(name: str, value: Any) -> dict:
    if not is_tensor_like(value):
        return {"name": name, "type": type(value).__name__}
    return {"name": name, "shape": list(value.shape), "dtype": str(value.dtype), "device": str(value.device)}


# How to ask for warn mode instead, named in raise mode's message: pytest's plugin names its own
# option, since a user who typed --kvguard=raise never set KVGUARD.
warn_instead = "KVGUARD=warn"


def format_message(mode: str, op: str, layout: str, violation: Violation, site: CallSite) -> str:
    lines = [
        f"KV consistency violation in {op} (layout {layout}) at {site}:",
        f"  {violation.requirement}",
        f"  likely cause: {violation.cause}",
    ]
    if violation.tensors:
        facts = (tensor_facts(n, v) for n, v in violation.tensors)
        lines.append("  tensors: " + "; ".join(f"{f['name']} {tuple(f['shape'])} {f['dtype']} {f['device']}" if "shape" in f else f"{f['name']}: {f['type']}" for f in facts))
    hint = f"; {warn_instead} logs instead of raising" if mode == "raise" else ""
    lines.append(f"  [check {violation.check}{hint}]")
    return "\n".join(lines)


class Tally(NamedTuple):
    count: int
    first_site: CallSite


class Reporter:
    """Shared by every wrapped op; only the violation path takes its lock."""

    def __init__(self, log_path: str | None) -> None:
        self.log_path = _usable_log_path(log_path)
        self._lock = threading.Lock()
        self._seen: set = set()
        self.tallies: dict = {}
        self.unjudged: dict = {}  # (op, reason) -> Tally: calls the guard let through without judging

    def violation(self, mode: str, op: str, layout: str, violation: Violation) -> KVConsistencyError | None:
        """Count and log one violation; in raise mode return the error for the guarded call to raise
        (raised there, so a traceback shows one guard frame), in warn mode warn once per call site."""
        site = user_call_site()
        message = format_message(mode, op, layout, violation, site)
        key = (op, violation.check, site.file, site.line)
        with self._lock:
            tally = self.tallies.get(key[:2])
            self.tallies[key[:2]] = Tally(tally.count + 1, tally.first_site) if tally else Tally(1, site)
            first_here = key not in self._seen
            self._seen.add(key)
        self._log(mode, op, layout, violation, site)  # every violation: one JSON line each
        if mode == "raise":
            return KVConsistencyError(message, op, violation.check, str(site))
        if first_here:
            warnings.warn_explicit(message, KVConsistencyWarning, site.file, site.line)
        return None

    def internal(self, mode: str, op: str, exc: BaseException) -> None:
        """The guard itself failed on a call: in either mode the call goes on to the kernel unjudged
        (the op's own behaviour is never replaced by a guard bug); say so once per op and error type."""
        reason = f"the guard failed: {type(exc).__name__}"
        first, site = self._count_unjudged(op, reason)
        if first:
            text = (
                f"kvlint runtime guard failed while checking {op} at {site}: {type(exc).__name__}: {exc}. "
                "The call went to the kernel unchecked. This is a bug in kvlint, not in your call: please report it "
                "with this message and the call's argument shapes and dtypes (KVGUARD=off turns the guard off)."
            )
            warnings.warn_explicit(text, KVGuardInternalWarning, site.file, site.line)

    def _count_unjudged(self, op: str, reason: str) -> tuple:
        """Count one call let through unjudged; (first time for this op and reason, first call site)."""
        key = (op, reason)
        with self._lock:
            tally = self.unjudged.get(key)
            if tally is not None:
                self.unjudged[key] = Tally(tally.count + 1, tally.first_site)
                return False, tally.first_site
            site = user_call_site()
            self.unjudged[key] = Tally(1, site)
            return True, site

    def not_judged(self, mode: str, op: str, reason: str) -> None:
        """A call the guard does not understand went to the kernel unjudged: count it, say so once in warn mode."""
        first, site = self._count_unjudged(op, reason)
        if first and mode == "warn":
            warnings.warn_explicit(f"kvlint runtime guard did not judge {op} at {site}: {reason}; the call went to the kernel unchecked", KVGuardNotJudgedWarning, site.file, site.line)

    def not_judged_rows(self) -> list:
        """(op, reason, count, first call site) for every kind of call the guard let through unjudged."""
        with self._lock:
            return sorted((op, reason, t.count, str(t.first_site)) for (op, reason), t in self.unjudged.items())

    def _log(self, mode: str, op: str, layout: str, violation: Violation, site: CallSite) -> None:
        if not self.log_path:
            return
        record = {
            "time": time.time(),
            "mode": mode,
            "op": op,
            "layout": layout,
            "check": violation.check,
            "requirement": violation.requirement,
            "cause": violation.cause,
            "tensors": [tensor_facts(n, v) for n, v in violation.tensors],
            "call_site": site._asdict(),
            "rank": os.environ.get("RANK"),
            "local_rank": os.environ.get("LOCAL_RANK"),
            "pid": os.getpid(),
        }
        line = json.dumps(record) + "\n"
        try:
            with self._lock, open(self.log_path, "a", encoding="utf-8") as log:
                log.write(line)
        except OSError as exc:  # removed or filled since start-up: the violation itself still stands
            path, self.log_path = self.log_path, None
            _say_once(f"kvlint runtime guard: cannot write KVGUARD_LOG={path!r} any more ({exc}); violations are no longer logged to a file (the guard still checks every call); point KVGUARD_LOG at a writable file")

    def summary_rows(self) -> list:
        with self._lock:
            return sorted((op, check, t.count, str(t.first_site)) for (op, check), t in self.tallies.items())


def _say_once(text: str) -> None:
    from runtime_guard.activation import environment_warning

    environment_warning("KVGUARD_LOG", text, KVGuardLogWarning)


def _usable_log_path(path: str | None) -> str | None:
    """KVGUARD_LOG checked when the guard starts: a path that cannot be appended to is said once,
    with what to do, and dropped; the guard keeps judging calls (a bad log path never hides a violation)."""
    if not path:
        return None
    target = os.path.abspath(path)
    parent = os.path.dirname(target)
    if os.path.isdir(target):
        problem, fix = "is a directory", f"name a file in it, e.g. KVGUARD_LOG={os.path.join(path, 'kvguard.jsonl')}"
    elif not os.path.isdir(parent):
        problem, fix = f"is in a directory that does not exist ({parent})", f"create it (mkdir -p {parent}) or point KVGUARD_LOG at a writable file"
    elif not os.access(target if os.path.exists(target) else parent, os.W_OK):
        problem = "is not writable" if os.path.exists(target) else f"cannot be created (no write permission in {parent})"
        fix = "point KVGUARD_LOG at a file you can write"
    else:
        return target
    _say_once(f"kvlint runtime guard: KVGUARD_LOG={path!r} {problem}; {fix}. Until then violations are not logged to a file; the guard still checks every call")
    return None


def format_summary(rows: list, unjudged: list = ()) -> str:
    """The exit summary: violations by op and check, then the calls let through unjudged by op and reason."""
    lines = [f"kvlint runtime guard: {sum(r[2] for r in rows)} K/V consistency violation(s)" if rows else "kvlint runtime guard: no K/V consistency violations"]
    if rows:
        lines.append("  count  op / check / first call site")
        lines += [f"  {count:5d}  {op} / {check} / {site}" for op, check, count, site in rows]
    if unjudged:
        lines.append(f"  {sum(r[2] for r in unjudged)} call(s) not judged (the guard did not understand them; they ran unchecked):")
        lines += [f"  {count:5d}  {op} / {reason} / {site}" for op, reason, count, site in unjudged]
    return "\n".join(lines)
