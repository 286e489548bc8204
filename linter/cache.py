"""Per-file results cached on disk, so an unchanged tree is checked without parsing anything.

An entry is keyed by a hash of: the file's bytes, its path (findings and per-file-ignores name
it), the settings fingerprint, the rules that ran, and kvlint's own code (version plus the size
and mtime of every module of the ``linter`` package, so an edited install never reuses stale
results). An entry also records the other files the lint read (``linter.dependencies``: a
base class's module, a pool's module) and is used only while they are unchanged. Entries are written to a temporary file and renamed into place, so a reader sees a
whole entry or none; two processes writing the same key write the same bytes. An entry that is
truncated, garbage, from another version, or for another key is ignored, never trusted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from functools import cache
from pathlib import Path

import linter
from linter import dependencies
from linter.dependencies import Stamp
from linter.diagnostics import FileProblem
from linter.finding import Edit, Finding, Fix, Related, Span

DEFAULT_DIR = ".kvlint_cache"
_FORMAT = 2  # 2: entries record the other files a lint read


@cache
def code_fingerprint() -> str:
    root = Path(linter.__file__).parent
    stats = sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*.py")
    )
    import hashlib  # imported on use, like in Cache: a --no-cache run never hashes

    return hashlib.sha256(repr((linter.__version__, stats)).encode()).hexdigest()


class Cache:
    def __init__(self, directory: Path, settings_fingerprint: str, rule_ids: Sequence[str]) -> None:
        import hashlib

        self._sha256 = hashlib.sha256
        self.directory = directory
        self.salt = repr((_FORMAT, code_fingerprint(), settings_fingerprint, tuple(rule_ids)))

    def key(self, path: str, data: bytes) -> str:
        digest = self._sha256(self.salt.encode())
        digest.update(b"\0" + os.path.abspath(path).encode("utf-8", "surrogateescape") + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[list[Finding], list[FileProblem]] | None:
        try:
            payload = json.loads(self._entry(key).read_bytes())
            if payload["key"] != key or not dependencies.unchanged(payload.get("depends", [])):
                return None
            return (
                [_finding(d) for d in payload["findings"]],
                [FileProblem(**d) for d in payload["problems"]],
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(
        self, key: str, findings: Sequence[Finding], problems: Sequence[FileProblem], depends: Iterable[Stamp] = ()
    ) -> None:
        entry = self._entry(key)
        payload = json.dumps({
            "key": key,
            "depends": sorted(depends),
            "findings": [asdict(f) for f in findings],
            "problems": [asdict(p) for p in problems],
        }).encode()
        try:
            self._prepare()
            entry.parent.mkdir(exist_ok=True)
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(payload)
                os.replace(tmp, entry)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            # A read-only or full disk costs speed, never findings.
            pass

    def _prepare(self) -> None:
        if (self.directory / "CACHEDIR.TAG").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / ".gitignore").write_text("# created by kvlint\n*\n")
        (self.directory / "CACHEDIR.TAG").write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n# kvlint cache; see https://bford.info/cachedir/\n"
        )


def _span(d: dict) -> Span:
    return Span(d["row"], d["column"], d["end_row"], d["end_column"])


def _finding(d: dict) -> Finding:
    fix = d["fix"]
    return Finding(
        code=d["code"],
        message=d["message"],
        path=d["path"],
        span=_span(d["span"]),
        suggestion=d["suggestion"],
        related=tuple(Related(_span(r["span"]), r["message"]) for r in d["related"]),
        fix=None if fix is None else Fix(
            fix["message"], tuple(Edit(_span(e["span"]), e["content"]) for e in fix["edits"]), fix["applicability"]
        ),
        noqa_row=d["noqa_row"],
    )
