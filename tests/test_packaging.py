"""The distribution installs this project, under a name no other project holds on the index.

``kvlint`` on PyPI is an unrelated prefix-cache log analyser with its own ``kvlint`` command;
every install recipe must name ``kvlint-npu`` (or a git URL or checkout), never bare ``kvlint``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.compiled import compiler_at_hand as _compiler_at_hand

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "kvlint-npu"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `pip install ...` up to the end of the line or of an inline code span.
PIP_INSTALL = re.compile(r"pip install ([^`\n]+)")


def test_the_distribution_is_kvlint_npu_and_installs_the_kvlint_command():
    assert PYPROJECT["project"]["name"] == DISTRIBUTION
    assert PYPROJECT["project"]["scripts"] == {"kvlint": "linter.cli:main"}


def _recipes() -> list[tuple[str, str]]:
    """Every `pip install ...` in the docs, except the warnings ("Do not `pip install kvlint`")."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        found += [
            (doc.name, m.group(1).strip()) for m in PIP_INSTALL.finditer(text)
            if not text[max(0, m.start() - 6):m.start()].lower().endswith("not `")
        ]
    return found


def test_no_recipe_installs_the_unrelated_kvlint_from_the_index():
    recipes = _recipes()
    assert any(DISTRIBUTION in args for _, args in recipes)
    for doc, args in recipes:
        requirements = [a.strip("\"'") for a in args.split() if not a.startswith("-")]
        for requirement in requirements:
            name = re.split(r"[\s@=<>~!\[;]", requirement, maxsplit=1)[0]
            assert name.lower() != "kvlint", f"{doc}: `pip install {args}` installs the unrelated PyPI kvlint"


def test_readme_says_how_to_install_from_git_and_from_a_checkout():
    readme = (ROOT / "README.md").read_text()
    assert f'pip install "{DISTRIBUTION} @ git+https://' in readme
    assert "pip install ./kvlint" in readme


# What a recipe pins: `git+https://HOST/kvlint@REF` for pip, `rev: REF` for pre-commit.
PINNED_REF = re.compile(r"git\+\S+?@([^\s\"'#]+)|^\s*rev:\s*([^\s#]+)", re.MULTILINE)
PLACEHOLDER = "<commit>"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_every_pinned_ref_in_the_docs_exists_or_is_the_commit_placeholder():
    refs = [(doc.name, a or b) for doc in DOCS for a, b in PINNED_REF.findall(doc.read_text())]
    assert len(refs) >= 4 and any(ref == PLACEHOLDER for _, ref in refs)
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: tags cannot be looked up")
    missing = [(doc, ref) for doc, ref in refs if ref != PLACEHOLDER and _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode]
    assert not missing, f"pinned to refs this repository does not have: {missing}"


@pytest.mark.slow
def test_the_readme_git_recipe_installs_this_repository_pinned_to_a_commit(tmp_path):
    """The README's `pip install "kvlint-npu @ git+https://<your-git-host>/kvlint@<commit>"`,
    with this checkout as the host and its HEAD as the commit: pip resolves it to kvlint-npu."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    (recipe,) = re.findall(r'pip install "(kvlint-npu @ git\+https://<your-git-host>/kvlint@<commit>)"', (ROOT / "README.md").read_text())
    head = _git("rev-parse", "HEAD").stdout.strip()
    # file://localhost/...: pip's requirement parser wants a host in a git+ URL; git accepts it.
    requirement = recipe.replace("https://<your-git-host>/kvlint", f"file://localhost{ROOT.as_posix()}").replace(PLACEHOLDER, head)
    report = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "-q", "--report", str(report), requirement],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert run.returncode == 0, run.stderr
    (installed,) = json.loads(report.read_text())["install"]
    assert installed["metadata"]["name"] == DISTRIBUTION
    assert installed["download_info"]["vcs_info"]["commit_id"] == head


def test_the_license_file_is_the_apache_2_text_pyproject_declares():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_both_packages_are_marked_typed_and_the_wheel_carries_kvlint():
    for package in ("linter", "runtime_guard"):
        assert (ROOT / package / "py.typed").is_file(), package
    assert set(PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]) == {"linter", "runtime_guard", "kvlint"}


def test_python_m_kvlint_is_the_kvlint_command():
    version = subprocess.run([sys.executable, "-m", "kvlint", "--version"], capture_output=True, text=True, check=False)
    assert (version.returncode, version.stdout.strip()) == (0, f"kvlint {PYPROJECT['project']['version']}")
    args = ["check", "--no-cache", "--output-format", "concise", "examples/tnd_truncated/buggy.py"]
    as_module, as_linter = (
        subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, check=False)
        for module in ("kvlint", "linter")
    )
    assert as_module.returncode == 1 and "KV101" in as_module.stdout
    assert (as_module.returncode, as_module.stdout) == (as_linter.returncode, as_linter.stdout)


@pytest.mark.slow
def test_the_wheel_is_named_kvlint_npu_and_carries_the_command_and_rule_pages(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith("kvlint_npu-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert f"Name: {DISTRIBUTION}" in metadata.splitlines()
    assert "kvlint = linter.cli:main" in entry_points
    # JSON `url` and SARIF `helpUri` link to these pages in an installed kvlint.
    assert "linter/rule_pages/KV101.md" in names
    # `python -m kvlint`, the type-checker marker of both packages, and the licence text.
    assert {"kvlint/__main__.py", "linter/py.typed", "runtime_guard/py.typed"} <= set(names)
    assert any(".dist-info/" in n and n.endswith("/LICENSE") for n in names), [n for n in names if "dist-info" in n]
    assert {"License-Expression: Apache-2.0", "License: Apache-2.0"} & set(metadata.splitlines())
    # The C helpers, compiled where a compiler is at hand; their sources stay out.
    assert not [n for n in names if n.endswith(".c")]
    if _compiler_at_hand():
        for helper in ("linter/_identifiers.", "linter/_code_only.", "runtime_guard/_lengths."):
            assert [n for n in names if n.startswith(helper)], helper


def test_slow_marker_is_registered_and_selects_the_whole_tree_tests():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--strict-markers", "--collect-only", "-q", "-m", "slow", "-p", "no:randomly",
         "tests/linter/test_corpus_sweep.py", "tests/linter/test_fast_path_equivalence.py", "tests/test_precommit.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    selected = [line for line in run.stdout.splitlines() if "::" in line]
    assert any("test_corpus_sweep.py" in s for s in selected)
    assert any("test_the_whole_torch_tree" in s for s in selected)
    assert any("test_precommit.py" in s for s in selected)
    assert not any("test_rule_examples_give_the_same_findings" in s for s in selected)
