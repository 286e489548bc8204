"""Which files to lint, and reading them without ever crashing on what is in them.

Directories are walked with ``exclude`` applied and, by default, ``.gitignore`` respected:
through ``git ls-files`` when the directory is inside a git work tree (and not itself ignored),
else by reading the ``.gitignore`` files found under it and matching them as git does (a test
compares the walk with ``git check-ignore --no-index`` over generated patterns and paths). A path
given explicitly is linted even when it matches ``exclude``, unless ``force-exclude`` is set
(ruff's ``--force-exclude``: what pre-commit needs, since it names every file).
Symlinked directories are not followed, so a symlink loop can never make the walk endless; a
symlink loop named as a file becomes an ``EKV001`` diagnostic like any unreadable file.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from linter.diagnostics import FileProblem
from linter.settings import Settings

# Notebooks are discovered like Python files, as in ruff (0.6 and later).
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
# Never worth walking into (ruff's defaults plus our own cache).
DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox", ".pants.d",
    ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", "__pypackages__", "_build", "buck-out",
    "dist", "node_modules", "venv", ".kvlint_cache", "__pycache__",
)


class Unreadable(Exception):
    """A file that cannot be linted; carries its diagnostic."""

    def __init__(self, problem: FileProblem) -> None:
        super().__init__(problem.line())
        self.problem = problem


@dataclass(frozen=True)
class Source:
    """A file's decoded text and how to encode it back (for ``--fix``)."""

    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM


def path_matches(path: str, pattern: str, is_dir: bool = False) -> bool:
    """Does ``path`` (absolute, with ``/``) match an anchored or bare exclude/ignore pattern?

    Anchored patterns (containing ``/``) match the path or anything below it; bare ones match
    any path component (``build``, ``test_*.py``); a trailing ``/`` restricts to directories.
    """
    dir_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    if "/" in pattern:
        if fnmatchcase(path, pattern) and (is_dir or not dir_only):
            return True
        return fnmatchcase(path, pattern + "/*")
    parts = path.split("/")
    last = len(parts) - 1
    return any(
        fnmatchcase(part, pattern) and (i < last or is_dir or not dir_only)
        for i, part in enumerate(parts)
    )


def posix_absolute(path: str) -> str:
    """``path`` made absolute, with ``/`` separators (what exclude and ignore patterns see)."""
    absolute = os.path.abspath(path)
    return absolute if os.sep == "/" else absolute.replace(os.sep, "/")


def is_excluded(path: str, settings: Settings, is_dir: bool = False) -> bool:
    if not settings.exclude:
        return False
    absolute = posix_absolute(path)
    return any(path_matches(absolute, p, is_dir) for p in settings.exclude)


def discover(paths: Iterable[str], settings: Settings) -> tuple[list[str], list[FileProblem]]:
    """Files to lint for the command-line ``paths``, and diagnostics for paths that do not exist."""
    found: dict[str, None] = {}
    problems = []
    for given in paths:
        if os.path.isdir(given):
            for path in _walk(given, settings):
                found.setdefault(path)
        elif os.path.lexists(given):
            if not (settings.force_exclude and is_excluded(given, settings)):
                found.setdefault(given)
        else:
            problems.append(FileProblem(given, "EKV001", "no such file or directory"))
    return list(found), problems


def _walk(root: str, settings: Settings) -> Iterator[str]:
    listed = _git_listing(root) if settings.respect_gitignore else None
    if listed is not None:
        for rel in listed:
            path = os.path.normpath(os.path.join(root, rel))
            parts = Path(rel).parts
            if (
                path.endswith(PYTHON_SUFFIXES)
                and not any(part in DEFAULT_EXCLUDES for part in parts[:-1])
                and os.path.isfile(path)
                and not _excluded_on_the_way(root, parts, settings)
            ):
                yield path
        return
    yield from _walk_tree(root, settings, GitignoreRules() if settings.respect_gitignore else None)


def _excluded_on_the_way(root: str, parts: tuple[str, ...], settings: Settings) -> bool:
    if not settings.exclude:
        return False
    path = root
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        if is_excluded(path, settings, is_dir=i < len(parts) - 1):
            return True
    return False


def _git_listing(root: str) -> list[str] | None:
    """Files under ``root`` that git does not ignore, or None when git cannot tell us."""
    # Imported here: checking named files (the pre-commit case) never starts git.
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return None
    try:
        inside = subprocess.run(
            [git, "-C", root, "rev-parse", "--is-inside-work-tree"],
            capture_output=True, text=True, timeout=30, check=False,
        )
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        # An ignored directory named explicitly is still walked (its own .gitignore files apply).
        ignored = subprocess.run([git, "-C", root, "check-ignore", "-q", "."], capture_output=True, timeout=30, check=False)
        if ignored.returncode == 0:
            return None
        listing = subprocess.run(
            [git, "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            capture_output=True, timeout=120, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if listing.returncode != 0:
        return None
    names = listing.stdout.decode("utf-8", "surrogateescape").split("\0")
    return sorted({name for name in names if name})


def _walk_tree(directory: str, settings: Settings, gitignore: GitignoreRules | None) -> Iterator[str]:
    if gitignore is not None:
        gitignore = gitignore.entering(directory)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        # An unreadable directory holds nothing we could lint; its files were never asked for.
        return
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir and entry.name in DEFAULT_EXCLUDES:
            continue
        if is_excluded(entry.path, settings, is_dir) or (gitignore is not None and gitignore.ignores(entry.path, is_dir)):
            continue
        if is_dir:
            yield from _walk_tree(entry.path, settings, gitignore)
        elif entry.name.endswith(PYTHON_SUFFIXES):
            yield os.path.normpath(entry.path)


class GitignoreRules:
    """The ``.gitignore`` files met on the way down, applied git's way: within a file the last
    matching pattern wins, and a deeper file's verdict overrides a shallower one's. An ignored
    directory is never entered, so nothing below it can be re-included (git's rule too)."""

    def __init__(self, files: tuple[tuple[str, tuple[GitignorePattern, ...]], ...] = ()) -> None:
        # (base directory, its patterns), shallowest first
        self.files = files

    def entering(self, directory: str) -> GitignoreRules:
        try:
            with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="surrogateescape") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return self
        patterns = tuple(p for p in map(GitignorePattern.parse, lines) if p is not None)
        return GitignoreRules((*self.files, (posix_absolute(directory), patterns))) if patterns else self

    def ignores(self, path: str, is_dir: bool) -> bool:
        absolute = posix_absolute(path)
        for base, patterns in reversed(self.files):
            if not absolute.startswith(base + "/"):
                continue
            rel = absolute[len(base) + 1:]
            for pattern in reversed(patterns):
                if pattern.matches(rel, is_dir):
                    return not pattern.negated
        return False


@dataclass(frozen=True)
class GitignorePattern:
    """One ``.gitignore`` line, matched as git's ``dir.c`` and ``wildmatch`` do.

    A pattern without a slash (a trailing one aside) matches the last path component at any
    depth; one with a slash matches the path relative to its ``.gitignore`` (a leading slash
    only anchors). ``*``, ``?`` and ``[...]`` never match ``/``; ``**`` is special only as a
    whole component: ``**/x`` (any leading directories), ``a/**/b`` (zero or more between),
    ``a/**`` (everything inside ``a``, not ``a`` itself); elsewhere it is ``*``. A trailing
    ``/`` matches directories only. Trailing spaces are dropped unless escaped; ``\\`` escapes.
    """

    regex: re.Pattern
    negated: bool
    directory_only: bool
    basename: bool

    @classmethod
    def parse(cls, line: str) -> GitignorePattern | None:
        if line.startswith("#"):
            return None
        # Trailing spaces go unless the last one is escaped ("a\ " keeps one space).
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line) and not stripped.endswith("\\\\"):
            stripped += " "
        line = stripped
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        if not line:
            return None
        directory_only = line.endswith("/")
        line = line.rstrip("/") if directory_only else line
        if not line:
            return None
        basename = "/" not in line
        line = line.lstrip("/") if not basename else line
        return cls(re.compile(_wildmatch_regex(line), re.DOTALL), negated, directory_only, basename)

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.directory_only and not is_dir:
            return False
        subject = rel.rsplit("/", 1)[-1] if self.basename else rel
        return self.regex.fullmatch(subject) is not None


def _wildmatch_regex(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            whole = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
            if j - i >= 2 and whole:
                if j == n:  # "a/**": everything inside (or, alone, everything)
                    out.append(".*")
                else:  # "**/": zero or more directories
                    out.append("(?:.*/)?")
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            klass, i = _bracket(pattern, i)
            out.append(klass)
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _bracket(pattern: str, start: int) -> tuple[str, int]:
    """A ``[...]`` class as a regex (never matching ``/``), or a literal ``[`` if unclosed."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    while i < len(pattern) and (pattern[i] != "]" or first):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            items.append(re.escape(pattern[i + 1]))
            i += 2
        elif c == "-" and items and i + 1 < len(pattern) and pattern[i + 1] != "]":
            items.append("-")
            i += 1
        else:
            items.append(re.escape(c))
            i += 1
        first = False
    if i >= len(pattern):
        return re.escape("["), start + 1
    body = "".join(items)
    return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), i + 1


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise Unreadable(FileProblem(path, "EKV001", "cannot read: the file vanished or is a broken symlink")) from None
    except IsADirectoryError:
        raise Unreadable(FileProblem(path, "EKV001", "cannot read: it is a directory")) from None
    except PermissionError:
        raise Unreadable(FileProblem(path, "EKV001", "cannot read: permission denied; check the file's mode")) from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise Unreadable(FileProblem(path, "EKV001", "cannot read: symlink loop")) from None
        raise Unreadable(FileProblem(path, "EKV001", f"cannot read: {exc.strerror or exc}")) from None


def decode(path: str, data: bytes) -> Source:
    """Text of a Python file: UTF-8 (BOM allowed) or its PEP 263 declared encoding."""
    nul = data.find(b"\0")
    if nul >= 0:
        row = data.count(b"\n", 0, nul) + 1
        raise Unreadable(FileProblem(path, "EKV002", f"contains a NUL byte (line {row}); this is not Python source", row))
    try:
        encoding = _declared_encoding(data)
    except SyntaxError as exc:
        if b"coding" in data[:1024]:
            raise Unreadable(FileProblem(path, "EKV002", f"bad encoding declaration: {exc.msg}")) from None
        # tokenize says this when the first lines are not UTF-8; the decode below says where.
        encoding = "utf-8"
    encoding = codecs.lookup(encoding).name
    if encoding == "utf-8" and data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    try:
        return Source(data.decode(encoding), encoding)
    except UnicodeDecodeError as exc:
        row = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise Unreadable(FileProblem(
            path, "EKV002",
            f"not valid {encoding}: byte 0x{data[exc.start]:02x} at line {row}, column {column}; "
            "save the file as UTF-8 or declare its encoding (PEP 263)",
            row, column,
        )) from None


def _declared_encoding(data: bytes) -> str:
    """``tokenize.detect_encoding``'s answer, as ``decode`` reads it. Without the word
    ``coding`` in the first two lines, and in the first kilobyte (where ``decode`` looks for a
    bad declaration when tokenize refuses), there is no declaration: UTF-8, and ``decode``
    reads a BOM and reports a bad byte itself. Most files have none, and asking tokenize
    cost a per-file tenth of a millisecond."""
    second = data.find(b"\n", data.find(b"\n") + 1)
    if b"coding" not in data[:max(second, 1024)] and second >= 0:
        return "utf-8"
    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


def source_lines(text: str) -> list[str]:
    """Lines as the parser counts them (``str.splitlines`` also splits on form feeds)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and lines[-1] == "" else lines
