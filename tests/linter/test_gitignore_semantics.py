"""Outside a git checkout, the walk skips exactly what git would ignore.

Each case writes generated ``.gitignore`` files (root and nested) and a tree of ``.py`` files
twice: once in a plain directory, where kvlint reads the ``.gitignore`` files itself, and once
in a ``git init`` directory, where ``git check-ignore --no-index`` gives git's verdict for every
file. The files kvlint lints must be exactly the files git does not ignore.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linter.files import discover
from linter.settings import Settings

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Directory and file names chosen so patterns collide: lib vs penaltylib, a vs ab, nested lib.
DIRS = ["lib", "penaltylib", "a", "ab", "a/lib", "a/lib/deep", "src", "src/lib", "b/c"]
FILES = [f"{d}/{name}" for d in DIRS for name in ("m.py", "keep.py", "test_x.py")] + ["top.py", "lib.py", "keep.py"]
PIECES = [
    "lib", "lib/", "/lib", "/lib/", "**/lib/", "**/lib", "lib/**", "a/**/deep", "a/**", "**/keep.py",
    "*.py", "test_*.py", "!keep.py", "!**/keep.py", "!lib/", "!a/lib/", "a/lib/", "src/*", "!src/lib",
    "[ab]", "a?", "*lib", "b/", "/top.py", "deep/", "\\#x", "lib/m.py", "  ", "# comment", "!*.py",
    "m.py ", "**/", "a/*/deep", "**/a/lib/**",
]
patterns = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6)


def _write_tree(root: Path, root_ignore: list[str], nested: dict[str, list[str]]) -> None:
    for rel in FILES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    (root / ".gitignore").write_text("\n".join(root_ignore) + "\n")
    for directory, lines in nested.items():
        (root / directory / ".gitignore").write_text("\n".join(lines) + "\n")


def _git_ignored(root: Path) -> set[str]:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    # -z in and out: names are passed and read back verbatim.
    run = subprocess.run(
        ["git", "-c", "core.excludesFile=/dev/null", "check-ignore", "--no-index", "-z", "--stdin"], cwd=root,
        input="\0".join(FILES).encode(), capture_output=True, check=False,
    )
    assert run.returncode in (0, 1), run.stderr
    return {name for name in run.stdout.decode().split("\0") if name}


def _kvlint_linted(root: Path) -> set[str]:
    found, problems = discover([str(root)], Settings())
    assert not problems
    return {Path(p).relative_to(root).as_posix() for p in found}


@settings(max_examples=int(os.environ.get("KVLINT_GITIGNORE_EXAMPLES", "40")), deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(root_ignore=patterns, nested=st.dictionaries(st.sampled_from(["a", "src", "a/lib", "penaltylib"]), patterns, max_size=2))
def test_walk_skips_exactly_what_git_check_ignore_ignores(tmp_path_factory, root_ignore, nested):
    plain, repo = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("repo")
    _write_tree(plain, root_ignore, nested)
    _write_tree(repo, root_ignore, nested)
    expected = set(FILES) - _git_ignored(repo)
    assert _kvlint_linted(plain) == expected, (root_ignore, nested)


def test_double_star_directory_pattern_does_not_match_a_longer_name(tmp_path):
    # The case that hid penaltylib/ (tracked source) behind **/lib/ before.
    _write_tree(tmp_path, ["**/lib/"], {})
    linted = _kvlint_linted(tmp_path)
    assert "penaltylib/m.py" in linted and "a/lib/m.py" not in linted and "lib/m.py" not in linted
