"""The hooks of .pre-commit-hooks.yaml, driven through the real ``pre-commit`` program.

Each test stages files in a throwaway git repository and runs ``pre-commit try-repo <this
checkout> <hook>``. try-repo installs the hook from a commit of the checkout, never from the
working tree: by default HEAD, or, when tracked files have uncommitted changes, a temporary
shadow commit of them (untracked files are left out either way). A shadow commit is new on
every call, so each call would build a new hook environment; ``hook_ref`` makes that commit
once per session, the same way (tracked changes only, through a private index so the
checkout's own index is never touched), and passes it as ``--ref``. With the session's
PRE_COMMIT_HOME the hook environment is then built once (pip installs kvlint and its core
dependencies from PyPI, about 20 s) and reused by every test here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]

K_ONLY_SLICE = """\
def ring_step(q, k, v, a, b):
    k_chunk = k[a:b]
    return flash_attn_func(q, k_chunk, v)
"""
BOTH_SLICED = """\
def ring_step(q, k, v, a, b):
    k_chunk = k[a:b]
    v_chunk = v[a:b]
    return flash_attn_func(q, k_chunk, v_chunk)
"""


def _git(*args: str, cwd: Path, env: dict | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="session")
def hook_ref(tmp_path_factory: pytest.TempPathFactory) -> str:
    """HEAD of the checkout, or one commit of HEAD plus its uncommitted tracked changes."""
    head = _git("rev-parse", "HEAD", cwd=CHECKOUT)
    if not _git("status", "--porcelain", "--untracked-files=no", cwd=CHECKOUT):
        return head
    env = dict(os.environ, GIT_INDEX_FILE=str(tmp_path_factory.mktemp("index") / "index"))
    _git("read-tree", "HEAD", cwd=CHECKOUT, env=env)
    _git("add", "--update", cwd=CHECKOUT, env=env)
    tree = _git("write-tree", cwd=CHECKOUT, env=env)
    return _git(
        "-c", "user.name=kvlint tests", "-c", "user.email=tests@kvlint.invalid",
        "commit-tree", tree, "-p", head, "-m", "uncommitted changes for try-repo", cwd=CHECKOUT,
    )


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _git("init", "--quiet", cwd=tmp_path)
    _git("config", "user.name", "kvlint tests", cwd=tmp_path)
    _git("config", "user.email", "tests@kvlint.invalid", cwd=tmp_path)
    return tmp_path


def _stage(project: Path, name: str, text: str) -> None:
    (project / name).write_text(text)
    _git("add", name, cwd=project)


def _try_repo(project: Path, hook: str, ref: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(CHECKOUT), hook,
         "--ref", ref, "--all-files", "--color", "never"],
        cwd=project, env=dict(os.environ, PRE_COMMIT_HOME=str(home)),
        capture_output=True, text=True, timeout=600,
    )


def test_kvlint_hook_fails_on_k_only_slicing_and_shows_the_finding(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _try_repo(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "kvlint" in run.stdout and "Failed" in run.stdout
    assert "KV101" in run.stdout
    assert "attention.py" in run.stdout


def test_kvlint_hook_passes_once_the_value_is_sliced_too(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", BOTH_SLICED)
    run = _try_repo(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout


def test_kvlint_hook_honours_tool_kvlint_in_pyproject(project, hook_ref, pre_commit_home):
    _stage(project, "pyproject.toml", '[tool.kvlint]\nignore = ["KV101"]\n')
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _try_repo(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr


def test_kvlint_fix_hook_mirrors_the_slice_onto_the_value(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _try_repo(project, "kvlint-fix", hook_ref, pre_commit_home)
    # pre-commit fails a hook that modified files, so the user reviews and stages the fix.
    assert run.returncode == 1, run.stdout + run.stderr
    assert "files were modified by this hook" in run.stdout
    assert (project / "attention.py").read_text() == BOTH_SLICED


def test_hook_environment_has_kvlint_but_not_torch(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", BOTH_SLICED)
    assert _try_repo(project, "kvlint", hook_ref, pre_commit_home).returncode == 0
    pythons = sorted(pre_commit_home.glob("repo*/py_env-*/bin/python"))
    assert pythons, f"no hook environment under {pre_commit_home}"
    probe = "import importlib.util as u; print(u.find_spec('linter') is not None, u.find_spec('torch') is not None)"
    for python in pythons:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
        assert found == ["True", "False"], f"{python.parent.parent}: linter, torch importable = {found}"
