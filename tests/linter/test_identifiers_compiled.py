"""The compiled identifier sets (linter/_identifiers.c) answer exactly as the Python reading,
and so do the names it finds with a K-side part and the whole-word spans it finds.

Differential: generated texts (names, digits, underscores, punctuation, blanks and long runs;
any character, other scripts' letters and digits, lone surrogates) and every Python file of the
repository give the same frozenset from both, and from the identifier pattern itself; generated
names and the repository's identifiers give the same K-side candidates from both.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from linter.plan import triggers
from linter.plan import file
from linter.plan import words
from tests.compiled import compiler_at_hand as _compiler_at_hand

_IDENTIFIER = re.compile(r"[^\W\d]\w*")
_ROOT = Path(__file__).resolve().parents[2]

try:
    from linter._identifiers import identifiers as native
    from linter._identifiers import joined, lines_with, present, spans, with_part
except ImportError:
    native = joined = lines_with = present = spans = with_part = None

needs_native = pytest.mark.skipif(native is None, reason="linter._identifiers was not built (no C compiler): identifier sets are read in Python")


def _python_reading(text: str, monkeypatch: pytest.MonkeyPatch) -> frozenset[str]:
    with monkeypatch.context() as patch:
        patch.setattr(words, "_compiled_identifiers", None)
        return words.identifier_set(text)


def test_the_pre_filter_uses_the_compiled_sets_where_they_could_be_built() -> None:
    if not _compiler_at_hand():
        pytest.skip("no C compiler or Python headers here: the wheel is pure Python")
    assert native is not None and words._compiled_identifiers is native
    assert joined is not None and words._compiled_joined is joined
    assert with_part is not None and file._compiled_with_part is with_part
    assert spans is not None and words._compiled_spans is spans
    assert present is not None and triggers._present is present
    assert lines_with is not None and file._compiled_lines_with is lines_with


_PIECES = ["k", "k_cache", "_", "__init__", "0", "12", "0x1f", "9a", "é", " ", "\n", "\t", ".", "(", "[", "#", "'", "\\", "x" * 300]


@needs_native
@given(st.lists(st.sampled_from([p for p in _PIECES if p.isascii()]), max_size=200))
def test_ascii_text_gives_the_pythons_answer(pieces: list[str]) -> None:
    text = "".join(pieces)
    found = native(text)
    assert found == frozenset(_IDENTIFIER.findall(text))
    assert isinstance(found, frozenset)


@needs_native
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_any_ascii_text_gives_the_patterns_answer(text: str) -> None:
    assert native(text) == frozenset(_IDENTIFIER.findall(text))


@needs_native
@given(st.text(max_size=200))
def test_any_text_gives_the_patterns_answer(text: str) -> None:
    assert native(text) == frozenset(_IDENTIFIER.findall(text))


@needs_native
@pytest.mark.parametrize("text", [
    "ключ = k_cache[0]  # café\n",
    "x×y = 3·k_cache  # 形状 2d→3d, 4ª café_crème\nv\u00a0w ½z 7seg ²k ٣v_٣\n",
    "k\udcffv = 1\n",  # a byte decoded with surrogateescape
    "\U0001d4b3 = 𝒽ead_dim\n",  # four-byte characters
])
def test_other_scripts_read_as_the_pattern_reads_them(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert native(text) == _python_reading(text, monkeypatch) == frozenset(_IDENTIFIER.findall(text))
    with pytest.raises(TypeError):
        native(b"k = 1")


@needs_native
def test_the_repositorys_files_read_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted([*(_ROOT / "linter").rglob("*.py"), *(_ROOT / "tests").rglob("*.py"), *(_ROOT / "benchmarks").rglob("*.py")])
    assert len(paths) > 100
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert words.identifier_set(text) == _python_reading(text, monkeypatch), path
    # A table that grows many times: tens of thousands of distinct names.
    many = " ".join(f"name_{i}" for i in range(50_000)) + " name_7 7name"
    assert native(many) == frozenset(_IDENTIFIER.findall(many))


def _lines(text: str) -> list[str]:
    return text.split("\n") if text else []


@needs_native
@given(st.text(max_size=200))
def test_joined_names_are_the_set_one_a_line(text: str) -> None:
    found = _lines(joined(text))
    # Each name once, and equal (so of the narrowest width) to the pattern's.
    assert len(found) == len(set(found))
    assert frozenset(found) == native(text) == frozenset(_IDENTIFIER.findall(text))


@needs_native
@pytest.mark.parametrize("text", [
    "",
    "# only a comment: ()\n",
    "ключ = k_cache[0]  # café\n",
    "k = 1  # 形状\nv = k\n",  # two bytes a character in the text, one in its names
    "\U0001d4b3 = 𝒽ead_dim + k\n",
    "k\udcffv = 1\n",
])
def test_joined_names_of_any_width_read_alike(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    found = _lines(joined(text))
    assert sorted(found) == sorted(_python_reading(text, monkeypatch))
    with monkeypatch.context() as patch:
        patch.setattr(words, "_compiled_joined", None)
        assert sorted(_lines(words.identifier_lines(text))) == sorted(found)
    with pytest.raises(TypeError):
        joined(b"k = 1")


def _the(name: str, names: frozenset[str]) -> str:
    return next(n for n in names if n == name)


@needs_native
def test_a_name_met_before_is_the_same_string_whatever_the_texts_script() -> None:
    first = native("k_cache = torch.empty(n)\n")
    # The same names in texts of one, two and four bytes a character, and after them.
    for text in ("y = k_cache[0]\n", "# café\nk_cache = 2\n", "ключ = k_cache\n", "𝒽 = k_cache\n"):
        found = native(text)
        assert found == frozenset(_IDENTIFIER.findall(text))
        assert _the("k_cache", found) is _the("k_cache", first)
    assert _the("café", native("café = 1")) == "café" and _the("ключ", native("ключ")) == "ключ"


@needs_native
def test_names_past_the_kept_limit_still_read_alike() -> None:
    # More distinct names than are kept between calls (the kept ones are let go, not reused wrongly).
    many = " ".join(f"n{i}_{i % 7}" for i in range(300_000))
    assert native(many) == frozenset(_IDENTIFIER.findall(many))
    again = " ".join(f"n{i}_{i % 7}" for i in range(0, 300_000, 3)) + " k_cache"
    assert native(again) == frozenset(_IDENTIFIER.findall(again))


def test_without_the_compiled_helper_the_python_reading_answers() -> None:
    # What a build without a C compiler gets: the import fails, identifier sets are read in Python.
    code = (
        "import sys; sys.modules['linter._identifiers'] = None\n"
        "from linter.plan import words\n"
        "print(words._compiled_identifiers is None, words._compiled_spans is None,"
        " sorted(words.identifier_set('k_cache = 2k + v')), list(words.word_spans('k.k_cache kk k', ['k'])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT)
    assert out.stdout.strip() == "True True ['k', 'k_cache', 'v'] [(0, 1), (13, 14)]"


_NAME_PIECES = ["k", "K", "key", "Keys", "KEY", "wk", "xk", "kk", "v", "_", "__", "ключ", "é", "a1", "keyk"]


@needs_native
@given(st.lists(st.lists(st.sampled_from(_NAME_PIECES), max_size=6).map("".join), max_size=30))
def test_k_candidates_are_the_pythons(names: list[str]) -> None:
    found = file._k_candidates(names)
    assert found == file._k_candidates_searched(names)
    assert found == {n for n in names if any(part in file.K_SIDE_TOKENS for part in n.split("_"))}
    # The names one a line, as the pre-filter keeps a file's.
    lines = "\n".join(dict.fromkeys(names))
    assert file._k_candidates(lines) == file._k_candidates_searched(lines) == found


@needs_native
def test_k_candidates_of_the_repositorys_files_read_alike() -> None:
    for path in sorted((_ROOT / "linter").rglob("*.py")):
        names = words.identifier_set(path.read_text(encoding="utf-8"))
        assert file._k_candidates(names) == file._k_candidates_searched(names), path
    # Parts of any length and script, an empty part, and what is not a tuple of str.
    names = ["ключ_x", "x__y", "k", "_"]
    assert with_part(names, ("ключ", "")) == {"ключ_x", "x__y", "_"}
    assert with_part(iter(names), ()) == set()
    assert with_part("\n".join(names), ("ключ", "")) == {"ключ_x", "x__y", "_"}
    assert with_part("", ("k",)) == set() and with_part("k\n\nk_1", ("k",)) == {"k", "k_1"}
    with pytest.raises(TypeError):
        with_part(names, ["k"])
    with pytest.raises(TypeError):
        with_part([b"k"], ("k",))


def _python_spans(text: str, word: str) -> list[tuple[int, int]]:
    return list(words._spans(text, word))


_SPAN_PIECES = ["k", "key", "k_cache", "self", "é", "ключ", "_", "1", " ", ".", "(", "\n", "kk", "\udcff", "𝒽"]


@needs_native
@given(st.lists(st.sampled_from(_SPAN_PIECES), max_size=150), st.sampled_from(["k", "key", "k_cache", "self", "ключ", "𝒽"]))
def test_spans_are_the_pythons(pieces: list[str], word: str) -> None:
    text = "".join(pieces)
    found = spans(text, word)
    assert found == _python_spans(text, word)
    assert found == [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text)]


@needs_native
def test_spans_of_the_repositorys_files_read_alike() -> None:
    for path in sorted((_ROOT / "linter").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for word in ("self", "text", "k", "return", "_File"):
            assert spans(text, word) == _python_spans(text, word), (path, word)
    # Only whole words, each hit searched on from its end; an empty word has none; str only.
    assert spans("aaa aa a", "aa") == [(4, 6)]
    assert spans("k", "") == []
    with pytest.raises(TypeError):
        spans(b"k k", "k")


_PRESENT_PIECES = ["attn", "at", "a", "_", "proj", "pro", "to_k", "k", "kk", "\n", " ", "é", "ключ", "\x00", "x" * 40]
_PRESENT_WORDS = ["attn", "at", "a", "proj", "to_k", "k", "ключ", "é", "tn\nk", "\x00", "xxx", "never"]


@needs_native
@given(
    st.lists(st.sampled_from(_PRESENT_PIECES), max_size=80),
    st.lists(st.sampled_from(_PRESENT_WORDS), max_size=12).map(tuple),
)
def test_present_words_are_the_ones_a_search_finds(pieces: list[str], asked: tuple[str, ...]) -> None:
    text = "".join(pieces)
    assert present(text, asked) == {w for w in asked if w in text}


@needs_native
def test_present_words_alike_whichever_tuples_were_asked_before() -> None:
    # Three tuples in turn: the kept tables are rebuilt, never read for another tuple.
    plain = ("attn", "proj", "dense", "wk", "to_k", "k", "_")
    lower = ("attention", "mla", "softmax")
    other = ("ab", "abc", "b")
    text = "self_attn\nq_proj\nmla_dim\nabc\n"
    for _ in range(3):
        assert present(text, plain) == {"attn", "proj", "_"}
        assert present(text, lower) == {"mla"}
        assert present(text, other) == {"ab", "abc", "b"}
    # Offsets near the end, words longer than the text, an empty word (in every text).
    assert present("xa", ("a", "xa", "xab", "")) == {"a", "xa", ""}
    assert present("", ("a", "")) == {""}
    with pytest.raises(TypeError):
        present("k", ["k"])
    with pytest.raises(TypeError):
        present("k", (b"k",))


def test_without_the_compiled_helper_present_words_are_searched_one_by_one() -> None:
    code = (
        "import sys; sys.modules['linter._identifiers'] = None\n"
        "from linter.plan import triggers\n"
        "print(sorted(triggers._present('self_attn\\nk', ('attn', 'k', 'v'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT)
    assert out.stdout.strip() == "['attn', 'k']"


_NAME_LINE_PIECES = ["head", "Head", "HEAD", "dim", "_", "k", "v_", "size", "x", "é", "ключ", "\n"]


@needs_native
@given(st.lists(st.sampled_from(_NAME_LINE_PIECES), max_size=60), st.sampled_from(["head", "dim", "k", "_", "ключ", "e_d"]))
def test_names_containing_a_part_are_the_pythons(pieces: list[str], part: str) -> None:
    from linter.plan.file import _File
    from linter.settings import Settings

    text = " ".join("".join(pieces).split("\n"))
    for ignore_case in (False, True):
        found = sorted(_File(text, Settings())._names_containing(part, ignore_case))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(file, "_compiled_lines_with", None)
            assert found == sorted(_File(text, Settings())._names_containing(part, ignore_case))
        names = words.identifier_set(text)
        assert set(found) == {n for n in names if part in (n.lower() if ignore_case else n)}
    assert lines_with("ab\nb", "AB\nB", "b") == ["AB", "B"]
    with pytest.raises(ValueError):
        lines_with("ab", "a", "b")
