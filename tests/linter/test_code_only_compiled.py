"""The compiled code-only reduction (linter/_code_only.c) answers exactly as code_only in Python,
and so do its top-level statement starts (``segments``) and its brackets (KV208's ``_Brackets``).

Differential: generated texts built from the pieces that decide where a literal or comment
starts and ends (quotes single and triple, backslashes before quotes, CR, LF and CRLF, ``#``,
string prefixes, f-string braces, other scripts) and every Python file of the repository
give the same text from both; generated texts built from what decides where a top-level
statement starts (brackets, backslashes before line ends, form feeds, decorators, ``async``
before ``def``, clause words and their look-alikes, other scripts' spaces and letters) and the
repository's files reduced give the same starts from both.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linter.plan import code_only as module
from linter.plan import segments
from linter.rules.kv208 import condition as kv208
from linter.plan import lines
from tests.compiled import compiler_at_hand as _compiler_at_hand

_ROOT = Path(__file__).resolve().parents[2]

try:
    from linter._code_only import bracket_opener, brackets_balanced, definition_lines
    from linter._code_only import reduced as native
    from linter._code_only import top_level_cuts
except ImportError:
    native = top_level_cuts = bracket_opener = brackets_balanced = definition_lines = None

needs_native = pytest.mark.skipif(native is None, reason="linter._code_only was not built (no C compiler): code_only runs in Python")


def _python(text: str, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(module, "_compiled_reduced", None)
        return module.code_only(text)


def test_code_only_uses_the_compiled_reduction_where_it_could_be_built() -> None:
    if not _compiler_at_hand():
        pytest.skip("no C compiler or Python headers here: the wheel is pure Python")
    assert native is not None and module._compiled_reduced is native
    assert top_level_cuts is not None and segments._compiled_cuts is top_level_cuts
    assert kv208._compiled_opener is bracket_opener is not None and kv208._compiled_balanced is brackets_balanced
    assert lines._compiled_definition_lines is definition_lines is not None


_PIECES = ['"', "'", '"""', "'''", "\\", "\\\r\n", "\r\n", "\r", "\n", "#", " ", "x", "k[0]",
           "r", "b", "f", "F", "rb", "u", "{", "}", "{{", "(", ")", "é", "形", "_", "1"]


@needs_native
@settings(max_examples=2000)
@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_generated_text_reduces_as_in_python(pieces: list[str]) -> None:
    text = "".join(pieces)
    with pytest.MonkeyPatch.context() as patch:
        assert native(text, module._literal) == _python(text, patch)


@needs_native
@pytest.mark.parametrize("text", [
    '"a\\\r\nb\\',  # a backslash ending the text, after an escaped CRLF: the literal ends at the CR
    '"""abc\\',  # triple quotes that cannot close: two quotes are a literal
    "x = '\\",  # a quote and a backslash ending the text: no literal
    'f"{k[\'}\']}" # c\n',  # an f-string keeps its fields, a bracket in a string inside one
    "rb'''\nx\n''' + Fr\"{v}\" + bar'k'\n",
])
def test_the_patterns_corners_reduce_as_in_python(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert native(text, module._literal) == _python(text, monkeypatch)


@needs_native
def test_the_repositorys_files_reduce_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted([*(_ROOT / "linter").rglob("*.py"), *(_ROOT / "tests").rglob("*.py"), *(_ROOT / "examples").rglob("*.py")])
    assert len(paths) > 100
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert module.code_only(text) == _python(text, monkeypatch), path
    with pytest.raises(TypeError):
        native(b"x = 1", module._literal)


def test_without_the_compiled_helper_code_only_runs_in_python() -> None:
    code = (
        "import sys; sys.modules['linter._code_only'] = None\n"
        "from linter.plan import code_only, segments\n"
        "print(code_only._compiled_reduced is None, repr(code_only.code_only('k = \"v\"  # c')))\n"
        "print(segments._compiled_cuts is None, [s.kind for s in segments.top_level_segments('@d\\ndef f(): pass\\nx = 1\\n')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT)
    assert out.stdout.strip().splitlines() == ["True 'k = \"\"  '", "True ['def', 'statement']"]


_STATEMENT_PIECES = ["\n", "\r\n", "\f", " ", "\t", "(", ")", "[", "]", "{", "}", "\\", "@d\n", "def f():\n",
                     "async  def g", "async\ndef", "class C", "else:", "elif", "except", "finally", "elsewhere",
                     "class_", "defé", "x = 1", "é", "\u00a0", "\u2028", "~"]


@needs_native
@settings(max_examples=2000)
@given(st.lists(st.sampled_from(_STATEMENT_PIECES), max_size=40))
def test_generated_text_cuts_as_in_python(pieces: list[str]) -> None:
    code = "".join(pieces)
    assert top_level_cuts(code) == segments._top_level_cuts(code)


@needs_native
def test_the_repositorys_files_cut_alike() -> None:
    for path in sorted([*(_ROOT / "linter").rglob("*.py"), *(_ROOT / "tests").rglob("*.py")]):
        code = module.code_only(path.read_text(encoding="utf-8"))
        assert top_level_cuts(code) == segments._top_level_cuts(code), path
    with pytest.raises(TypeError):
        top_level_cuts(b"x = 1\n")


def _python_brackets(code: str) -> kv208._Brackets:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kv208, "_compiled_balanced", None)
        brackets = kv208._Brackets(code)
    return brackets


def _python_opener(brackets: kv208._Brackets, at: int) -> int | None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kv208, "_compiled_opener", None)
        return brackets.opener(at)


_BRACKET_PIECES = ["(", ")", "[", "]", "{", "}", ",", "x", "\n", " ", "é", "形", "𝒽"]


@needs_native
@settings(max_examples=2000)
@given(st.lists(st.sampled_from(_BRACKET_PIECES), max_size=40))
def test_generated_brackets_read_as_in_python(pieces: list[str]) -> None:
    code = "".join(pieces)
    python = _python_brackets(code)
    assert brackets_balanced(code) == python.balanced
    if python.balanced:  # the opener is asked of balanced text only
        for at in range(len(code) + 1):
            assert bracket_opener(code, at) == _python_opener(python, at), (code, at)


@needs_native
def test_the_repositorys_files_brackets_read_alike() -> None:
    for path in sorted((_ROOT / "linter").rglob("*.py")):
        code = module.code_only(path.read_text(encoding="utf-8"))
        python = _python_brackets(code)
        assert brackets_balanced(code) == python.balanced, path
        for at in range(0, len(code), 97):
            assert bracket_opener(code, at) == _python_opener(python, at), (path, at)
    assert brackets_balanced(")(") is False and brackets_balanced("(") is False and brackets_balanced("") is True
    with pytest.raises(TypeError):
        brackets_balanced(b"()")


_LINE_PIECES = ["\n", " ", "\t", "def", "class", "async", "@", "x", "_", "é", "ключ", "(", ":", "\r"]


@needs_native
@settings(max_examples=2000)
@given(st.lists(st.sampled_from(_LINE_PIECES), max_size=40))
def test_generated_definition_lines_read_as_in_python(pieces: list[str]) -> None:
    text = "".join(pieces)
    found = definition_lines(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lines, "_compiled_definition_lines", None)
        assert found == lines.definition_lines(text)
    assert found == [m.end() for m in lines._DEFINITION.finditer(text)]


@needs_native
def test_the_repositorys_files_definition_lines_read_alike() -> None:
    for path in sorted((_ROOT / "linter").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert definition_lines(text) == [m.end() for m in lines._DEFINITION.finditer(text)], path
    with pytest.raises(TypeError):
        definition_lines(b"def f(): pass\n")
