"""The distribution installs this project, under a name no other project holds on the index.

``kvlint`` on PyPI is an unrelated prefix-cache log analyser with its own ``kvlint`` command;
every install recipe must name ``kvlint-npu`` (or a git URL or checkout), never bare ``kvlint``.
"""

from __future__ import annotations

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
