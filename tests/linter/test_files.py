import codecs
import io
import os
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from linter.files import (
    Unreadable,
    _declared_encoding,
    decode,
    discover,
    read_bytes,
    source_lines,
)
from linter.settings import Settings


def _tree(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def _names(found: list[str], root: Path) -> set[str]:
    return {Path(os.path.relpath(p, root)).as_posix() for p in found}


def test_directories_yield_python_files_only(tmp_path):
    _tree(tmp_path, "a.py", "b.pyi", "c.txt", "pkg/d.py")
    found, problems = discover([str(tmp_path)], Settings(respect_gitignore=False))
    assert _names(found, tmp_path) == {"a.py", "b.pyi", "pkg/d.py"} and problems == []


def test_exclude_applies_while_walking_a_directory(tmp_path):
    _tree(tmp_path, "keep.py", "gen/skip.py", "legacy/old.py")
    settings = Settings(exclude=("gen", f"{tmp_path.as_posix()}/legacy/*.py"), respect_gitignore=False)
    found, _ = discover([str(tmp_path)], settings)
    assert _names(found, tmp_path) == {"keep.py"}


def test_an_explicit_file_is_linted_even_when_excluded(tmp_path):
    _tree(tmp_path, "gen/skip.py")
    found, _ = discover([str(tmp_path / "gen/skip.py")], Settings(exclude=("gen",)))
    assert found == [str(tmp_path / "gen/skip.py")]


def test_a_missing_path_is_a_diagnostic(tmp_path):
    found, problems = discover([str(tmp_path / "nope.py")], Settings())
    assert found == [] and [p.code for p in problems] == ["EKV001"]


def test_gitignore_is_respected_outside_git(tmp_path):
    _tree(tmp_path, "keep.py", "build/gen.py", "pkg/secret.py", "pkg/keep2.py")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "pkg/.gitignore").write_text("secret.py\n")
    found, _ = discover([str(tmp_path)], Settings())
    assert _names(found, tmp_path) == {"keep.py", "pkg/keep2.py"}


def test_gitignore_is_respected_inside_a_git_work_tree(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _tree(tmp_path, "keep.py", "ignored/gen.py")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    found, _ = discover([str(tmp_path)], Settings())
    assert _names(found, tmp_path) == {"keep.py"}


def test_gitignore_can_be_switched_off(tmp_path):
    _tree(tmp_path, "keep.py", "build/gen.py")
    (tmp_path / ".gitignore").write_text("build/\n")
    found, _ = discover([str(tmp_path)], Settings(respect_gitignore=False))
    assert _names(found, tmp_path) == {"keep.py", "build/gen.py"}


def test_a_directory_loop_of_symlinks_ends_the_walk(tmp_path):
    _tree(tmp_path, "pkg/a.py")
    (tmp_path / "pkg/loop").symlink_to(tmp_path, target_is_directory=True)
    found, _ = discover([str(tmp_path)], Settings(respect_gitignore=False))
    assert _names(found, tmp_path) == {"pkg/a.py"}


def test_a_symlink_loop_file_is_an_unreadable_diagnostic(tmp_path):
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    with pytest.raises(Unreadable) as info:
        read_bytes(str(tmp_path / "a.py"))
    assert info.value.problem.code == "EKV001" and "symlink loop" in info.value.problem.message


def test_a_vanished_file_is_an_unreadable_diagnostic(tmp_path):
    with pytest.raises(Unreadable, match="vanished"):
        read_bytes(str(tmp_path / "gone.py"))


def test_an_unreadable_file_is_a_diagnostic(tmp_path, monkeypatch):
    # Simulated: the suite may run as root, which reads files whatever their mode.
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(Unreadable, match="permission denied"):
        read_bytes(str(tmp_path / "secret.py"))


def test_utf8_with_bom_decodes_and_remembers_the_bom():
    source = decode("f.py", b"\xef\xbb\xbfx = 1\n")
    assert source.text == "x = 1\n" and source.encoding == "utf-8-sig"


def test_a_declared_latin1_file_decodes():
    source = decode("f.py", b"# -*- coding: latin-1 -*-\nname = '\xe9'\n")
    assert "é" in source.text and source.encoding == "iso8859-1"


def test_non_utf8_bytes_name_the_line_and_column():
    with pytest.raises(Unreadable) as info:
        decode("f.py", b"x = 1\ny = '\xff'\n")
    problem = info.value.problem
    assert (problem.code, problem.row, problem.column) == ("EKV002", 2, 6)


def test_a_nul_byte_is_a_diagnostic_naming_its_line():
    with pytest.raises(Unreadable) as info:
        decode("f.py", b"x = 1\n\0\n")
    assert info.value.problem.code == "EKV002" and info.value.problem.row == 2


def test_source_lines_split_only_where_python_does():
    assert source_lines("a\r\nb\x0cc\rd\n") == ["a", "b\x0cc", "d"]


# Declarations and their look-alikes, on the first, second and third line, beside a BOM and
# bytes that are not UTF-8: the shortcut for files without the word "coding" must answer as
# tokenize does, or fail alike where ``decode`` reports a bad declaration; a BOM is read by
# ``decode`` itself (utf-8-sig either way).
_HEADS = [
    b"", b"x = 1\n", b"#!/usr/bin/env python\n", b"\xef\xbb\xbf", b"\xff\xfe = 1\n", b"# \xe9\n",
    b"# -*- coding: latin-1 -*-\n", b"# vim: set fileencoding=cp1252 :\n", b"# coding: nonsense\n",
    b"# encoding is not declared here\n", b"\xef\xbb\xbf# coding: latin-1\n", b"s = '''\n",
]


@pytest.mark.parametrize("second", _HEADS)
@pytest.mark.parametrize("first", _HEADS)
def test_the_declared_encoding_is_tokenizes(first: bytes, second: bytes) -> None:
    for data in (first + second, first + second + b"# coding: latin-1\nx = 1\n", first + second + b"x = '\xe9'\n"):
        try:
            expected = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
        except SyntaxError as exc:
            if b"coding" in data[:1024]:
                with pytest.raises(SyntaxError, match=re.escape(exc.msg)):
                    _declared_encoding(data)
                continue
            expected = "utf-8"  # what ``decode`` reads where tokenize refuses undeclared bytes
        try:
            found = _declared_encoding(data)
        except SyntaxError:
            found = "utf-8"  # as ``decode`` reads a refusal without a declaration
        assert codecs.lookup(found.replace("-sig", "")).name == codecs.lookup(expected.replace("-sig", "")).name, data
