import json
from pathlib import Path

import pytest

from linter.finding import Finding, Span
from linter.suppress import directives, invalid_directives, noqa_map, unsuppressed
from tests.linter.test_cli import kvlint


def _finding(code: str, row: int) -> Finding:
    return Finding(code, "m", "f.py", Span(row, 1, row, 2), "s", noqa_row=row)


def test_blanket_noqa_suppresses_every_code_on_its_line():
    assert noqa_map("x = 1  # noqa\n") == {1: None}


def test_noqa_with_codes_lists_them():
    assert noqa_map("x = 1  # noqa: KV101,KV202\n") == {1: frozenset({"KV101", "KV202"})}


def test_noqa_codes_may_be_separated_by_spaces_and_followed_by_a_reason():
    assert noqa_map("x = 1  # noqa: KV101 KV202 - V is trimmed by the caller\n") == {1: frozenset({"KV101", "KV202"})}


def test_noqa_is_case_insensitive():
    assert noqa_map("x = 1  # NOQA:kv101\n") == {1: frozenset({"KV101"})}


def test_noqa_inside_a_string_suppresses_nothing():
    assert noqa_map('x = "# noqa"\n') == {}


def test_code_noqa_keeps_findings_of_other_codes():
    text = "a\nb  # noqa: KV101\n"
    kept = unsuppressed([_finding("KV101", 2), _finding("KV202", 2), _finding("KV101", 1)], text)
    assert [(f.code, f.span.row) for f in kept] == [("KV202", 2), ("KV101", 1)]


def test_blanket_noqa_removes_every_finding_on_its_line():
    assert unsuppressed([_finding("KV101", 1), _finding("KV203", 1)], "x  # noqa\n") == []


def test_finding_is_matched_on_its_noqa_row_not_its_start_row():
    finding = Finding("KV101", "m", "f.py", Span(1, 1, 2, 2), "s", noqa_row=2)
    assert unsuppressed([finding], "call(\n  x)  # noqa: KV101\n") == []


@pytest.mark.parametrize(
    ("comment", "why"),
    [
        pytest.param("# noqa KV101", "expected `:`", id="missing-colon"),
        pytest.param("# noqa E501", "expected `:`", id="missing-colon-other-tool"),
        pytest.param("# noqa:", "expected a comma-separated list of codes", id="empty-codes"),
        pytest.param("# noqa:  # reason", "expected a comma-separated list of codes", id="empty-codes-then-comment"),
        pytest.param("# noqa: E", "not `E`", id="letters-only"),
        pytest.param("# noqa: KV-101", "not `KV-101`", id="dashed-code"),
    ],
)
def test_a_malformed_directive_suppresses_nothing_and_says_why(comment, why):
    text = f"x = 1  {comment}\n"
    assert noqa_map(text) == {}
    (directive,) = directives(text).values()
    assert directive.error is not None and why in directive.error
    assert unsuppressed([_finding("KV101", 1)], text) == [_finding("KV101", 1)]


@pytest.mark.parametrize(
    ("comment", "codes"),
    [
        ("# noqa", None),
        ("# noqa  ", None),
        ("# noqa # the caller trims V", None),
        ("# noqa:KV101", frozenset({"KV101"})),
        ("# noqa : KV101, KV202 - reason", frozenset({"KV101", "KV202"})),
        ("# type: ignore  # noqa: KV101", frozenset({"KV101"})),
    ],
)
def test_well_formed_directives_are_read(comment, codes):
    assert noqa_map(f"x = 1  {comment}\n") == {1: codes}


def test_a_word_that_only_starts_with_noqa_is_no_directive():
    assert directives("x = 1  # noqa_helper is imported for its side effects\n") == {}


def test_a_warning_is_given_for_a_malformed_directive_on_a_line_with_a_finding():
    text = "a  # noqa KV101\nb  # noqa E501\n"
    (warning,) = invalid_directives([_finding("KV101", 1)], text, "f.py")
    assert (warning.code, warning.row, warning.warning) == ("WKV001", 1, True)
    assert "suppresses nothing" in warning.message


def test_the_cli_shows_the_finding_warns_and_keeps_exit_status_1(tmp_path):
    (tmp_path / "ring.py").write_text(
        "def f(q, k, v, n):\n    return flash_attn_func(q, k[:n], v)  # noqa KV101\n"
    )
    proc = kvlint("check", "--no-cache", "--format", "concise", "ring.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "KV101" in proc.stdout.decode()
    assert "ring.py:2: WKV001 invalid `# noqa` directive" in proc.stderr.decode()


# File-level exemptions, as ruff's `# ruff: noqa`.
def test_kvlint_noqa_on_its_own_line_exempts_the_whole_file():
    text = "# kvlint: noqa\na\nb\n"
    assert unsuppressed([_finding("KV101", 2), _finding("KV203", 3)], text) == []


def test_kvlint_noqa_with_codes_exempts_only_those_codes():
    text = "a\n# kvlint: noqa: KV101, KV202 - generated from the reference model\nb\n"
    kept = unsuppressed([_finding("KV101", 1), _finding("KV202", 3), _finding("KV203", 3)], text)
    assert [f.code for f in kept] == ["KV203"]


def test_ruffs_spelling_exempts_the_kv_codes_it_names():
    text = "# ruff: noqa: F401, KV101\na\n"
    assert [f.code for f in unsuppressed([_finding("KV101", 2), _finding("KV202", 2)], text)] == ["KV202"]


def test_a_blanket_ruff_noqa_is_ruffs_opt_out_not_kvlints():
    text = "# ruff: noqa\na\n"
    assert [f.code for f in unsuppressed([_finding("KV101", 2)], text)] == ["KV101"]


def test_file_exemption_inside_a_string_exempts_nothing():
    text = 'x = "# kvlint: noqa"\na\n'
    assert [f.code for f in unsuppressed([_finding("KV101", 2)], text)] == ["KV101"]


def test_a_malformed_file_exemption_exempts_nothing_and_is_reported_where_it_is():
    text = "# kvlint: noqa KV101\na\nb\n"
    findings = [_finding("KV101", 3)]
    assert unsuppressed(findings, text) == findings
    (problem,) = invalid_directives(findings, text, "f.py")
    assert (problem.code, problem.row) == ("WKV001", 1) and "file-level" in problem.message


def test_file_exemption_through_the_command_line(tmp_path):
    from tests.linter.test_cli import BUGGY

    (tmp_path / "exempt.py").write_text("# kvlint: noqa: KV101\n" + BUGGY)
    (tmp_path / "ruff.py").write_text("# ruff: noqa: KV101\n" + BUGGY)
    (tmp_path / "other.py").write_text("# kvlint: noqa: KV202\n" + BUGGY)
    proc = kvlint("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    assert [(Path(f["filename"]).name, f["code"]) for f in json.loads(proc.stdout)] == [("other.py", "KV101")]


def test_a_malformed_noqa_is_a_warning_not_an_unchecked_file(tmp_path):
    from tests.linter.test_cli import BUGGY

    (tmp_path / "attn.py").write_text(BUGGY.replace('"TND")', '"TND")  # noqa KV101'))
    proc = kvlint("check", "--no-cache", "attn.py", cwd=tmp_path)
    assert proc.returncode == 1  # the finding the comment did not hide
    assert "attn.py:4: WKV001 invalid `# noqa` directive" in proc.stderr.decode()
    summary = proc.stdout.decode().rstrip().splitlines()[-1]
    assert summary == "Found 1 finding and 1 warning (1 fixable with --fix)."
    entries = json.loads(kvlint("check", "--no-cache", "--format", "json", "attn.py", cwd=tmp_path).stdout)
    assert sorted((e["code"], e["severity"]) for e in entries) == [("KV101", "error"), ("WKV001", "warning")]
