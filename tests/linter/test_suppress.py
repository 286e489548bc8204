from linter.finding import Finding, Span
from linter.suppress import noqa_map, unsuppressed


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
