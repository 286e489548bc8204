"""--fix never corrupts: it is idempotent, its output parses, it leaves files without fixes
untouched, and an interrupted write leaves the old file whole.

The corpus is every rule's INVALID example that carries a fix, every examples/*/buggy.py, and,
as files that must not change, every VALID example and examples/*/fixed.py.
"""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from linter import cli
from linter.engine import lint_source
from linter.report import is_fixable
from linter.rules import all_rules
from tests.linter.test_cli import kvlint

ROOT = Path(__file__).resolve().parents[2]


def _fixable_sources() -> dict[str, str]:
    sources = {}
    for rule in all_rules():
        for i, example in enumerate(rule.INVALID):
            if any(f.fix is not None for f in lint_source(example.code, codes=[rule.code])):
                sources[f"{rule.code.lower()}_invalid_{i}.py"] = example.code
    for buggy in sorted(ROOT.glob("examples/*/buggy.py")):
        sources[f"example_{buggy.parent.name}.py"] = buggy.read_text()
    return sources


def _clean_sources() -> dict[str, str]:
    sources = {}
    for rule in all_rules():
        for i, example in enumerate(rule.VALID):
            sources[f"{rule.code.lower()}_valid_{i}.py"] = example.code
    for fixed in sorted(ROOT.glob("examples/*/fixed.py")):
        sources[f"example_{fixed.parent.name}_fixed.py"] = fixed.read_text()
    return sources


FIXABLE = _fixable_sources()
CLEAN = _clean_sources()


def _tree(root: Path) -> Path:
    for name, text in {**FIXABLE, **CLEAN}.items():
        (root / name).write_text(text)
    return root


def _snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in sorted(root.iterdir())}


def test_the_corpus_has_a_fixable_file_for_every_rule_with_fixes():
    covered = {name[:5].upper() for name in FIXABLE if name.startswith("kv")}
    assert covered == {rule.code for rule in all_rules() if is_fixable(rule)}
    assert len(CLEAN) >= 20


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fixing_twice_equals_fixing_once_and_every_fixed_file_parses(tmp_path, unsafe):
    root = _tree(tmp_path)
    flags = ["--unsafe-fixes"] if unsafe else []
    kvlint("check", "--no-cache", "--fix", *flags, ".", cwd=root)
    once = _snapshot(root)
    changed = [name for name in FIXABLE if once[name][0] != FIXABLE[name].encode()]
    assert changed, "no fix was applied at all"
    kvlint("check", "--no-cache", "--fix", *flags, ".", cwd=root)
    twice = _snapshot(root)
    assert {n: s[0] for n, s in twice.items()} == {n: s[0] for n, s in once.items()}
    # The second run found nothing more to write: not even a rewrite with the same bytes.
    assert {n: s[1:] for n, s in twice.items()} == {n: s[1:] for n, s in once.items()}
    for name in changed:
        cst.parse_module(once[name][0].decode())


def test_files_without_fixes_are_byte_identical_and_untouched(tmp_path):
    root = _tree(tmp_path)
    before = _snapshot(root)
    kvlint("check", "--no-cache", "--fix", "--unsafe-fixes", ".", cwd=root)
    after = _snapshot(root)
    assert all(after[name] == before[name] for name in CLEAN)


def test_diff_writes_nothing(tmp_path):
    root = _tree(tmp_path)
    before = _snapshot(root)
    assert kvlint("check", "--no-cache", "--diff", "--unsafe-fixes", ".", cwd=root).returncode == 1
    assert _snapshot(root) == before


def test_fix_on_stdin_writes_stdout_only_and_touches_no_file(tmp_path):
    root = _tree(tmp_path)
    before = _snapshot(root)
    source = FIXABLE["example_tnd_truncated.py"] if "example_tnd_truncated.py" in FIXABLE else next(iter(FIXABLE.values()))
    proc = kvlint("check", "--fix", "--stdin-filename", "attn.py", "-", cwd=root, stdin=source)
    assert proc.stdout.decode() != source and cst.parse_module(proc.stdout.decode())
    assert _snapshot(root) == before


def test_a_failed_rename_leaves_the_old_file_whole_and_no_temporary_file(tmp_path, monkeypatch, capsys):
    root = _tree(tmp_path)
    before = _snapshot(root)

    def refuse(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.chdir(root)
    code = cli.main(["check", "--no-cache", "--jobs", "1", "--fix", "."])
    err = capsys.readouterr().err
    assert code == 2 and "EKV004 fix not written" in err and "Traceback" not in err
    assert _snapshot(root) == before


# Runs kvlint --fix with fsync made slow, so the parent can kill it mid-write.
_SLOW_FSYNC = textwrap.dedent("""
    import os, sys, time
    real_fsync = os.fsync
    def slow_fsync(fd):
        print("writing", flush=True)
        time.sleep(60)
        real_fsync(fd)
    os.fsync = slow_fsync
    from linter import cli
    sys.exit(cli.main(["check", "--no-cache", "--jobs", "1", "--fix", sys.argv[1]]))
""")


def test_a_kill_mid_write_leaves_the_old_file_whole(tmp_path):
    name = next(iter(FIXABLE))
    target = tmp_path / name
    target.write_text(FIXABLE[name])
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_FSYNC, str(target)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout.readline() == b"writing\n"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert target.read_text() == FIXABLE[name]
    # A kill leaves the temporary file: hidden, and not a .py file, so no run ever lints it.
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != name]
    assert all(n.startswith(f".{name}.") and n.endswith(".kvlint-tmp") for n in leftovers)
    assert kvlint("check", "--no-cache", "--fix", ".", cwd=tmp_path).returncode == 0
    assert target.read_text() != FIXABLE[name]
