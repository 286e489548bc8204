"""Properties of ``code_only`` and ``top_level_segments`` on real and generated Python.

For every file: the reduced text has the file's lines, the segments cover every line exactly
once, and every segment's original lines parse on their own, which is what lets the
pre-filter hand libcst an excerpt of the file. The real files are a fixed sample of the
standard library and of the installed torch; the generated ones come from hypothesmith under
the ``kvlint-ci`` profile.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sysconfig
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import assume, given, settings

from linter.plan.code_only import code_only
from linter.plan.segments import Segment, top_level_segments
from tests.linter.test_fuzz import PROFILE

# hypothesmith compiles each generated program to check it; programs such as ``1()`` draw a
# SyntaxWarning ("'int' object is not callable") that says nothing about kvlint.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

_PER_TREE = 100


def _torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "torch is a test dependency"
    return Path(next(iter(spec.submodule_search_locations)))


def _every_nth(root: Path, count: int) -> list[Path]:
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.relative_to(root).parts)
    return files[:: max(1, len(files) // count)][:count]


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


@functools.cache
def _sample() -> list[tuple[str, str]]:
    """(name, text) of about 200 files, every nth of each tree in path order; files that do
    not parse as a whole (lib2to3's Python 2 test data) are left out."""
    sample = []
    for root in (Path(sysconfig.get_paths()["stdlib"]), _torch_root()):
        for path in _every_nth(root, _PER_TREE):
            text = path.read_text(encoding="utf-8", errors="replace")
            if _parses(text):
                sample.append((str(path.relative_to(root.parent)), text))
    return sample



@functools.cache
def _segments(text: str) -> list[Segment]:
    return top_level_segments(code_only(text))


def _unparsable_segments(text: str) -> list[str]:
    lines = text.split("\n")
    return [
        f"lines {s.start + 1}-{s.end}" for s in _segments(text) if not _parses("\n".join(lines[s.start:s.end]))
    ]


def _uncovered(text: str) -> bool:
    covered = [line for s in _segments(text) for line in range(s.start, s.end)]
    return covered != list(range(text.count("\n") + 1))


def test_the_sample_holds_about_200_parsable_files_from_both_trees() -> None:
    assert len(_sample()) >= 190
    assert any(name.startswith("torch/") for name, _ in _sample())
    assert any(not name.startswith("torch/") for name, _ in _sample())


def test_every_segment_of_a_real_file_parses_on_its_own() -> None:
    failures = {name: bad for name, text in _sample() if (bad := _unparsable_segments(text))}
    assert failures == {}


def test_the_segments_of_a_real_file_cover_every_line_once() -> None:
    assert [name for name, text in _sample() if _uncovered(text)] == []


def test_code_only_keeps_the_line_count_of_a_real_file() -> None:
    assert [name for name, text in _sample() if code_only(text).count("\n") != text.count("\n")] == []


# A third of the profile's cases: each generated module costs more to make than to check.
@settings(PROFILE, max_examples=max(10, PROFILE.max_examples // 3))
@given(hypothesmith.from_node())
def test_every_segment_of_a_generated_module_parses_on_its_own(text: str) -> None:
    assume(_parses(text))  # libcst accepts some code CPython's parser refuses
    assert code_only(text).count("\n") == text.count("\n")
    assert not _uncovered(text)
    assert _unparsable_segments(text) == []
