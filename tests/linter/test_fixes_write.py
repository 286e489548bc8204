import os
import stat

import pytest

from linter.finding import Edit, Finding, Fix, Span
from linter.fixes import apply_fixes, write_atomic


def test_atomic_write_replaces_content_and_keeps_mode_bits(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("old\n")
    path.chmod(0o751)
    write_atomic(str(path), b"new\n")
    assert path.read_bytes() == b"new\n" and stat.S_IMODE(path.stat().st_mode) == 0o751


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("old\n")
    write_atomic(str(path), b"new\n")
    assert os.listdir(tmp_path) == ["m.py"]


def test_an_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_text("old\n")

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(path), b"new\n")
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["m.py"]


def test_writing_through_a_symlink_replaces_the_target(tmp_path):
    target = tmp_path / "real.py"
    target.write_text("old\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_atomic(str(link), b"new\n")
    assert link.is_symlink() and target.read_text() == "new\n"


def test_fix_offsets_count_lines_as_python_does():
    source = "a = 1\x0c\nb = k\n"
    finding = Finding("KV900", "m", "f.py", Span(2, 5, 2, 6), "s", fix=Fix("f", (Edit(Span(2, 5, 2, 6), "v"),)))
    assert apply_fixes(source, [finding]) == "a = 1\x0c\nb = v\n"
