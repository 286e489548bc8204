"""Hostile files: each gets one clear diagnostic and the run goes on to lint every other file.

Every hostile file carries attention code (torch_npu, k/v slicing) so that the pre-filter
hands it to the parser: the properties are about what happens when kvlint does parse it.
"""

import os
import threading

import pytest

from linter import cli, files
from tests.linter.test_cli import kvlint

ATTENTION = "import torch_npu\n\ndef attend(q, k, v, n):\n    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, 'TND')\n"
FINDING = "buggy.py:4:"

# name -> (bytes, the diagnostic expected on stderr, or None when the file lints normally)
HOSTILE = {
    "syntax_error.py": (ATTENTION.encode() + b"def f(:\n", "syntax_error.py:5: E999 syntax error"),
    "not_utf8.py": (ATTENTION.encode() + b"name = '\xff'\n", "not_utf8.py:5: EKV002 not valid utf-8: byte 0xff at line 5, column 9"),
    "mixed_encodings.py": (
        "x = 'é'\n".encode() + ATTENTION.encode() + "y = 'é'\n".encode("latin-1"),
        "mixed_encodings.py:6: EKV002 not valid utf-8",
    ),
    "bad_declaration.py": (b"# -*- coding: klingon -*-\n" + ATTENTION.encode(), "bad_declaration.py:1: EKV002 bad encoding declaration"),
    "nul_byte.py": (ATTENTION.encode() + b"x = 1\0\n", "nul_byte.py:5: EKV002 contains a NUL byte (line 5)"),
    "huge_one_line.py": (ATTENTION.replace("\n    ", " ").encode() + b"x = [" + b"1," * 5_100_000 + b"]\n", "huge_one_line.py:1: EKV005 too large to lint"),
    "deep_brackets.py": (ATTENTION.encode() + b"x = " + b"(" * 1000 + b"1" + b")" * 1000 + b"\n", "deep_brackets.py:5: E999 syntax error: too many nested parentheses"),
    "deep_attributes.py": (ATTENTION.encode() + b"x = a" + b".b" * 20_000 + b"\n", "deep_attributes.py:1: EKV003 nested too deeply"),
    "deep_subscripts.py": (ATTENTION.encode() + b"x = a" + b"[0]" * 5_000 + b"\n", "deep_subscripts.py:1: EKV003 nested too deeply"),
    "deep_lambdas.py": (ATTENTION.encode() + b"x = " + b"lambda: " * 5_000 + b"1\n", "deep_lambdas.py:1: EKV003 nested too deeply"),
    "deep_blocks.py": (
        ATTENTION.encode() + b"".join(b" " * i + b"if x:\n" for i in range(1000)) + b" " * 1000 + b"pass\n",
        # CPython's message and position (libcst's said line 1).
        "deep_blocks.py:105: E999 syntax error: too many levels of indentation",
    ),
    "empty.py": (b"", None),
    "only_bom.py": (b"\xef\xbb\xbf", None),
}


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    tree = tmp_path_factory.mktemp("hostile")
    for name, (data, _) in HOSTILE.items():
        (tree / name).write_bytes(data)
    (tree / "buggy.py").write_text(ATTENTION)
    (tree / "loop_a.py").symlink_to(tree / "loop_b.py")
    (tree / "loop_b.py").symlink_to(tree / "loop_a.py")
    (tree / "dangling.py").symlink_to(tree / "nowhere.py")
    # --jobs 2: the pool, as in a real run, so a crash in a worker would show too.
    return kvlint("check", "--no-cache", "--format", "concise", "--jobs", "2", ".", cwd=tree)


@pytest.mark.parametrize("name", [n for n, (_, d) in HOSTILE.items() if d])
def test_each_hostile_file_gets_its_diagnostic(hostile_run, name):
    assert HOSTILE[name][1] in hostile_run.stderr.decode()


def test_the_run_goes_on_and_reports_the_other_files(hostile_run):
    assert hostile_run.returncode == 2
    assert hostile_run.stdout.decode().startswith(FINDING)
    assert "Traceback" not in hostile_run.stderr.decode()


def test_files_kvlint_can_lint_get_no_diagnostic(hostile_run):
    stderr = hostile_run.stderr.decode()
    assert "empty.py" not in stderr and "only_bom.py" not in stderr and "buggy.py" not in stderr


def test_symlink_loops_and_dangling_links_are_unreadable_diagnostics(hostile_run):
    stderr = hostile_run.stderr.decode()
    assert "loop_a.py:1: EKV001 cannot read: symlink loop" in stderr
    assert "dangling.py:1: EKV001 cannot read: the file vanished or is a broken symlink" in stderr


def test_every_problem_is_exactly_one_stderr_line(hostile_run):
    lines = hostile_run.stderr.decode().splitlines()
    expected = sum(1 for _, d in HOSTILE.values() if d) + 3  # two loop links, one dangling link
    assert len(lines) == expected, lines


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_diagnostics_appear_in_every_format_with_the_finding(tmp_path, fmt):
    (tmp_path / "buggy.py").write_text(ATTENTION)
    (tmp_path / "not_utf8.py").write_bytes(HOSTILE["not_utf8.py"][0])
    proc = kvlint("check", "--no-cache", "--format", fmt, ".", cwd=tmp_path)
    assert proc.returncode == 2 and "EKV002" in proc.stdout.decode() and "KV10" in proc.stdout.decode()


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "utf-16"])
def test_a_declared_encoding_is_honoured(tmp_path, encoding):
    if encoding == "utf-16":
        # PEP 263 cannot declare UTF-16 (the declaration itself must be ASCII-compatible).
        data = ATTENTION.encode("utf-16")
        expected = 2
    else:
        data = f"# -*- coding: {encoding} -*-\nname = 'é'\n{ATTENTION}".encode(encoding)
        expected = 1
    (tmp_path / "m.py").write_bytes(data)
    proc = kvlint("check", "--no-cache", "--format", "concise", "m.py", cwd=tmp_path)
    assert proc.returncode == expected and "Traceback" not in proc.stderr.decode()


def test_crlf_tabs_and_a_bom_are_linted_with_the_right_position(tmp_path):
    text = ATTENTION.replace("    ", "\t").replace("\n", "\r\n")
    (tmp_path / "m.py").write_bytes(b"\xef\xbb\xbf" + text.encode())
    proc = kvlint("check", "--no-cache", "--format", "concise", "m.py", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout.decode().startswith("m.py:4:43: KV101")


def _run_in_process(args, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_unreadable_file_is_a_diagnostic_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    (tmp_path / "buggy.py").write_text(ATTENTION)
    secret = tmp_path / "secret.py"
    secret.write_text(ATTENTION)
    secret.chmod(0)
    if os.geteuid() == 0:
        # root reads any file whatever its mode; make the read fail the way it does for a user.
        real_open = open

        def refusing_open(path, *args, **kwargs):
            if str(path).endswith("secret.py"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr("builtins.open", refusing_open)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run_in_process(["check", "--no-cache", "--jobs", "1", "--format", "concise", "."], capsys)
    assert code == 2 and "secret.py:1: EKV001 cannot read: permission denied" in err
    assert out.startswith(FINDING)


def test_files_vanishing_between_discovery_and_reading_are_diagnostics(tmp_path, monkeypatch, capsys):
    for i in range(20):
        (tmp_path / f"gone{i}.py").write_text(ATTENTION)
    (tmp_path / "buggy.py").write_text(ATTENTION)
    real_discover = files.discover

    def discover_then_delete(paths, settings):
        found, problems = real_discover(paths, settings)
        for path in found:
            if "gone" in path:
                os.unlink(path)
        return found, problems

    monkeypatch.setattr(cli, "discover", discover_then_delete)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run_in_process(["check", "--no-cache", "--jobs", "1", "--format", "concise", "."], capsys)
    assert code == 2 and err.count("EKV001 cannot read: the file vanished") == 20
    assert out.startswith(FINDING) and out.count("KV101") == 1


def test_files_deleted_by_another_thread_during_a_run_never_crash_it(tmp_path, monkeypatch, capsys):
    names = [tmp_path / f"m{i:03}.py" for i in range(200)]
    for path in names:
        path.write_text(ATTENTION)
    real_read = files.read_bytes
    started = threading.Event()

    def read_and_signal(path):
        started.set()
        return real_read(path)

    def delete_every_other():
        started.wait(10)
        for path in names[::2]:
            path.unlink()

    monkeypatch.setattr(files, "read_bytes", read_and_signal)
    monkeypatch.chdir(tmp_path)
    deleter = threading.Thread(target=delete_every_other)
    deleter.start()
    code, out, err = _run_in_process(["check", "--no-cache", "--jobs", "1", "--format", "concise", "."], capsys)
    deleter.join()
    vanished = err.count("EKV001 cannot read: the file vanished")
    assert code in (1, 2) and "Traceback" not in err
    # Every file is either reported (linted) or a vanished diagnostic, never lost.
    assert out.count("KV101") + vanished == 200
