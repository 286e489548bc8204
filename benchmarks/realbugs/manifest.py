"""Reading and checking the real-bug manifest.

The split is a function of the case id alone (``split_of``), fixed before any rule was built
against the cases, so a case cannot move between ``dev`` and ``measure`` when others are added.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project supports 3.10 with tomli
    import tomli as tomllib

MANIFEST = Path(__file__).with_name("manifest.toml")

CLASSES = ("twin-name", "query-size", "v-head-dim", "one-side-op", "equal-split", "v-rebuilt-from-k", "other")
SPLITS = ("dev", "measure")


class ManifestError(ValueError):
    """The manifest breaks one of its rules; the message names the case and the field."""


def split_of(case_id: str) -> str:
    """``measure`` when the sha1 of the id, read as a number, is divisible by 3; else ``dev``."""
    return "measure" if int(hashlib.sha1(case_id.encode()).hexdigest(), 16) % 3 == 0 else "dev"


@dataclass(frozen=True)
class Release:
    requirement: str          # name==version
    path: str                 # the file inside the wheel, or inside the sdist's top folder
    python: str | None = None     # pip --python-version, for releases with only version-tagged wheels
    platform: str | None = None   # pip --platform, likewise


@dataclass(frozen=True)
class Case:
    id: str
    project: str
    repo: str
    fix_commit: str | None   # None: a released case found by diffing releases, whose commit is not pinned
    kind: str
    split: str
    description: str
    released: bool
    lines: tuple[int, ...]
    buggy: Release | None
    fixed: Release | None
    path: str | None = None   # for an unreleased case: the file in repo at fix_commit^ (and at fix_commit)
    # Lines of the fixed file that still hold a real K/V bug the fix left (read and judged): a
    # finding there is no false alarm on the fixed file.
    still_buggy_in_fixed: tuple[int, ...] = ()


_CASE_FIELDS = {"id", "project", "repo", "fix_commit", "class", "split", "description", "released", "lines", "buggy", "fixed", "still_buggy_in_fixed",
                "path"}
_RELEASE_FIELDS = {"requirement", "path", "python", "platform"}


def _release(case_id: str, side: str, table: object) -> Release:
    if not isinstance(table, dict):
        raise ManifestError(f"case {case_id}: `{side}` must be a table with requirement and path")
    unknown = set(table) - _RELEASE_FIELDS
    if unknown:
        raise ManifestError(f"case {case_id}: `{side}` has unknown fields {sorted(unknown)}")
    for key in ("requirement", "path"):
        if not isinstance(table.get(key), str) or not table[key]:
            raise ManifestError(f"case {case_id}: `{side}.{key}` is missing or not a string")
    name, sep, version = table["requirement"].partition("==")
    if not sep or not name or not version:
        raise ManifestError(f"case {case_id}: `{side}.requirement` must be name==version, got {table['requirement']!r}")
    return Release(table["requirement"], table["path"], table.get("python"), table.get("platform"))


def parse_case(table: dict) -> Case:
    case_id = table.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise ManifestError(f"a case has no `id`: {sorted(table)}")
    missing = {"id", "project", "repo", "class", "split", "description", "lines"} - set(table)
    if missing:
        raise ManifestError(f"case {case_id}: missing fields {sorted(missing)}")
    unknown = set(table) - _CASE_FIELDS
    if unknown:
        raise ManifestError(f"case {case_id}: unknown fields {sorted(unknown)}")
    if table["class"] not in CLASSES:
        raise ManifestError(f"case {case_id}: class {table['class']!r} is not one of {', '.join(CLASSES)}")
    expected = split_of(case_id)
    if table["split"] != expected:
        raise ManifestError(f"case {case_id}: split is {table['split']!r} but the split rule gives {expected!r}")
    lines = table["lines"]
    if not isinstance(lines, list) or not lines or not all(isinstance(n, int) and n >= 1 for n in lines):
        raise ManifestError(f"case {case_id}: `lines` must be a non-empty list of 1-based line numbers")
    if "\n" in table["description"]:
        raise ManifestError(f"case {case_id}: `description` must be one line")
    released = table.get("released", True)
    if released:
        if "buggy" not in table or "fixed" not in table:
            raise ManifestError(f"case {case_id}: a released case needs `buggy` and `fixed` releases")
        buggy, fixed = _release(case_id, "buggy", table["buggy"]), _release(case_id, "fixed", table["fixed"])
    else:
        if not isinstance(table.get("path"), str) or not table["path"]:
            raise ManifestError(f"case {case_id}: an unreleased case needs `path`, the file in {table['repo']}")
        buggy = fixed = None
    # A released case is pinned by its two releases; an unreleased one only by its commit.
    fix_commit = table.get("fix_commit")
    if (fix_commit is not None or not released) and (not isinstance(fix_commit, str) or len(fix_commit) != 40):
        raise ManifestError(f"case {case_id}: `fix_commit` must be a full 40-character commit hash")
    return Case(case_id, table["project"], table["repo"], fix_commit, table["class"], table["split"],
                table["description"], bool(released), tuple(lines), buggy, fixed, table.get("path"),
                tuple(_still_buggy(case_id, table.get("still_buggy_in_fixed", []))))


def _still_buggy(case_id: str, lines: object) -> list[int]:
    if not isinstance(lines, list) or not all(isinstance(n, int) and n >= 1 for n in lines):
        raise ManifestError(f"case {case_id}: `still_buggy_in_fixed` must be a list of 1-based line numbers")
    return lines


def load(path: Path = MANIFEST) -> list[Case]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the manifest: {exc}") from None
    cases = [parse_case(t) for t in data.get("case", [])]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise ManifestError(f"case {case.id}: the id appears twice")
        seen.add(case.id)
    return cases


def check_lines(case: Case, text: str) -> None:
    """Download-time check: every bug line lies inside the buggy file."""
    count = len(text.splitlines())
    outside = [n for n in case.lines if n > count]
    if outside:
        where = f"{case.buggy.requirement}:{case.buggy.path}" if case.buggy else f"{case.repo}@{case.fix_commit}^:{case.path}"
        raise ManifestError(f"case {case.id}: bug lines {outside} lie past the end of {where} ({count} lines)")
