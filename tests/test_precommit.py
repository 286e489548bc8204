"""The hooks of .pre-commit-hooks.yaml, driven through the real ``pre-commit`` program.

Each test stages files in a throwaway git repository. The headline test runs ``pre-commit
try-repo <this checkout> kvlint``, exactly what a hook author runs. try-repo installs the hook
from a commit of the checkout, never from the working tree: HEAD, or, when tracked files have
uncommitted changes, a temporary shadow commit of them (untracked files are left out either
way). It also builds the hook environment in a throwaway store, ignoring PRE_COMMIT_HOME, so
every call pays a full install (pip fetches kvlint's core dependencies, about 20 s).

The other tests therefore use ``pre-commit run`` with a ``.pre-commit-config.yaml`` that pins
this checkout, the way users install the hook; its environment is built once per session in
the session's PRE_COMMIT_HOME, where the last test inspects it. ``hook_ref`` is the commit both
use: HEAD, or one commit of HEAD plus the uncommitted tracked changes, made the way try-repo
makes its shadow commit but through a private index, so the checkout's own index is untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from linter.rules.kv101.rule import KeyOnlyReshape

CHECKOUT = Path(__file__).resolve().parents[1]
# Each hook environment is built by pip: about a minute for the module.
pytestmark = pytest.mark.slow

# KV101's own documented example and its fix: K sliced for a ring step, then V sliced too.
K_ONLY_SLICE = KeyOnlyReshape.bad
BOTH_SLICED = KeyOnlyReshape.good


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


def _pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args, "--all-files", "--color", "never"],
        check=False, cwd=project, env=dict(os.environ, PRE_COMMIT_HOME=str(home)),
        capture_output=True, text=True, timeout=600,
    )


def _run_hook(project: Path, hook: str, ref: str, home: Path) -> subprocess.CompletedProcess:
    config = {"repos": [{"repo": str(CHECKOUT), "rev": ref, "hooks": [{"id": hook}]}]}
    _stage(project, ".pre-commit-config.yaml", json.dumps(config))  # JSON is YAML; pre-commit wants it staged
    return _pre_commit(project, home, "run", hook)


def test_try_repo_fails_on_k_only_slicing_and_shows_the_finding(project, hook_ref, tmp_path_factory):
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _pre_commit(project, tmp_path_factory.mktemp("try-repo-home"), "try-repo", str(CHECKOUT), "kvlint", "--ref", hook_ref)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "kvlint" in run.stdout and "Failed" in run.stdout
    assert "KV101" in run.stdout
    assert "attention.py" in run.stdout


def test_kvlint_hook_passes_once_the_value_is_sliced_too(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", BOTH_SLICED)
    run = _run_hook(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout


def test_kvlint_hook_honours_tool_kvlint_in_pyproject(project, hook_ref, pre_commit_home):
    _stage(project, "pyproject.toml", '[tool.kvlint]\nignore = ["KV101"]\n')
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _run_hook(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr


def test_kvlint_hook_skips_files_excluded_in_tool_kvlint(project, hook_ref, pre_commit_home):
    # pre-commit names legacy/attention.py explicitly; without --force-exclude in the hook's
    # entry the exclude would be bypassed and the hook would fail on it.
    _stage(project, "pyproject.toml", '[tool.kvlint]\nexclude = ["legacy/"]\n')
    (project / "legacy").mkdir()
    _stage(project, "legacy/attention.py", K_ONLY_SLICE)
    _stage(project, "attention.py", BOTH_SLICED)
    run = _run_hook(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout
    # The same file outside the excluded directory still fails the hook.
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _run_hook(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 1 and "KV101" in run.stdout and "legacy/attention.py" not in run.stdout, run.stdout


def _notebook(source: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source.splitlines(keepends=True)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_one_hook_run_lints_notebooks_and_stubs_and_prints_one_summary(project, hook_ref, pre_commit_home):
    # Enough files that pre-commit, left to itself, splits them across one process per CPU.
    for n in range(6):
        _stage(project, f"attention_{n}.py", K_ONLY_SLICE)
    _stage(project, "ring.ipynb", _notebook(K_ONLY_SLICE))
    _stage(project, "ring.pyi", K_ONLY_SLICE)
    run = _run_hook(project, "kvlint", hook_ref, pre_commit_home)
    assert run.returncode == 1, run.stdout + run.stderr
    for name in ("ring.ipynb", "ring.pyi", "attention_0.py", "attention_5.py"):
        assert f"{name}:" in run.stdout, run.stdout
    # One kvlint process for the run: one summary, counting every file's finding.
    summaries = [line for line in run.stdout.splitlines() if line.startswith(("Found ", "All checks passed"))]
    assert len(summaries) == 1 and summaries[0].startswith("Found 8 "), run.stdout


def test_autoupdate_pins_the_hook_to_a_commit_of_this_repository(project):
    """docs/ci.md: `pre-commit autoupdate` fills in `rev` where the config names a placeholder."""
    config = project / ".pre-commit-config.yaml"
    config.write_text(json.dumps({"repos": [{"repo": str(CHECKOUT), "rev": "<commit>", "hooks": [{"id": "kvlint"}]}]}))
    run = subprocess.run([sys.executable, "-m", "pre_commit", "autoupdate", "--freeze"], cwd=project,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    rev = yaml.safe_load(config.read_text())["repos"][0]["rev"]
    assert len(rev) == 40 and rev != "<commit>"
    is_ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", rev, "HEAD"], cwd=CHECKOUT, check=False)
    assert is_ancestor.returncode == 0, f"{rev} is not a commit of this checkout's history"


def test_kvlint_fix_hook_mirrors_the_slice_onto_the_value(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", K_ONLY_SLICE)
    run = _run_hook(project, "kvlint-fix", hook_ref, pre_commit_home)
    # pre-commit fails a hook that modified files, so the user reviews and stages the fix.
    assert run.returncode == 1, run.stdout + run.stderr
    assert "files were modified by this hook" in run.stdout
    assert (project / "attention.py").read_text() == BOTH_SLICED


def test_hook_environment_has_kvlint_but_not_torch(project, hook_ref, pre_commit_home):
    _stage(project, "attention.py", BOTH_SLICED)
    assert _run_hook(project, "kvlint", hook_ref, pre_commit_home).returncode == 0
    pythons = sorted(pre_commit_home.glob("repo*/py_env-*/bin/python"))
    assert pythons, f"no hook environment under {pre_commit_home}"
    probe = "import importlib.util as u; print(u.find_spec('linter') is not None, u.find_spec('torch') is not None)"
    for python in pythons:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
        assert found == ["True", "False"], f"{python.parent.parent}: linter, torch importable = {found}"
