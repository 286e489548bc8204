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
