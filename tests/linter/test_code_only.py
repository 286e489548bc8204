"""``code_only``: source text reduced to its code, with the file's line numbers kept."""

from __future__ import annotations

import re

import pytest

from linter.plan.code_only import code_only


def _lines_start_at_column_0(text: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if re.match(r"[^\s]", line)]


@pytest.mark.parametrize(
    "text",
    [
        'x = """one\ntwo\nthree"""\ny = 1\n',
        "x = '''a\n\nb'''\n",
        'x = "abc\\\ndef"\ny = 1\n',
        'x = f"""\n{k}\n{v}\n"""\n',
        "# only a comment\n# and another\n",
        'x = """never closed\ny = 1\nz = 2\n',
        'x = 1\r\ny = """a\r\nb"""\r\n',
    ],
)
def test_the_line_count_is_kept(text: str) -> None:
    assert code_only(text).count("\n") == text.count("\n")


def test_a_comment_is_dropped_and_the_code_before_it_kept() -> None:
    assert code_only("k = k[:n]  # cache_v too\n") == "k = k[:n]  \n"


def test_a_comment_only_line_becomes_empty() -> None:
    assert code_only("# def f(k, v):\nx = 1\n") == "\nx = 1\n"


def test_a_hash_inside_a_string_is_not_a_comment() -> None:
    assert code_only('x = "a # b" + k\n') == 'x = "" + k\n'


def test_a_quote_inside_a_comment_opens_no_string() -> None:
    assert code_only("x = 1  # it's\ny = k\n") == "x = 1  \ny = k\n"


@pytest.mark.parametrize(
    "literal",
    ['"cache_k"', "'cache_k'", 'b"cache_k"', "rb'cache_k'", 'R"cache_k"', 'u"cache_k"', "Br'\\d'"],
)
def test_a_one_line_string_of_any_prefix_is_emptied(literal: str) -> None:
    assert code_only(f"x = {literal}\n") == 'x = ""\n'


def test_escaped_quotes_do_not_end_a_string() -> None:
    assert code_only("x = 'it\\'s k' + \"a \\\" v\" + y\n") == 'x = "" + "" + y\n'


def test_an_escaped_backslash_before_the_quote_ends_the_string() -> None:
    assert code_only('x = "a\\\\" + k\n') == 'x = "" + k\n'


def test_a_raw_string_ending_in_an_escaped_quote_runs_on() -> None:
    assert code_only("x = r'a\\'b' + k\n") == 'x = "" + k\n'


def test_a_triple_quoted_string_keeps_its_lines_and_loses_its_text() -> None:
    assert code_only('x = """def f(k, v):\n    return k\n""" + y\n') == 'x = \n\n "" + y\n'


def test_quotes_inside_a_triple_quoted_string_do_not_end_it() -> None:
    assert code_only("x = '''it's 'k' and ''v'' '''\n") == 'x = ""\n'


def test_a_backslash_newline_continues_a_one_line_string() -> None:
    assert code_only('x = "k \\\nv" + y\n') == 'x = \n "" + y\n'


def test_an_unterminated_string_ends_at_its_line() -> None:
    assert code_only('x = "open\ny = k\n') == 'x = ""\ny = k\n'


def test_an_unterminated_triple_quoted_string_runs_to_the_end() -> None:
    reduced = code_only('x = """open\ny = k\n')
    assert "k" not in reduced and reduced.count("\n") == 2


def test_an_f_string_keeps_its_replacement_fields_only() -> None:
    assert code_only('x = f"K {k.shape} and V {v.shape}"\n') == 'x = "k.shape v.shape"\n'


def test_an_f_string_field_keeps_its_nested_brackets() -> None:
    assert code_only('x = f"{k[0].view(b, {1: s}[1])}"\n') == 'x = "k[0].view(b, {1: s}[1])"\n'


def test_doubled_braces_in_an_f_string_are_literal_text() -> None:
    assert code_only('x = f"{{k_cache}} {v}"\n') == 'x = "v"\n'


def test_a_format_spec_stays_with_its_field() -> None:
    assert code_only('x = f"{k:>{width}} {v!r}"\n') == 'x = "k:>{width} v!r"\n'


@pytest.mark.parametrize("prefix", ["F", "rf", "fR", "Rf"])
def test_every_f_prefix_keeps_fields(prefix: str) -> None:
    assert code_only(f'x = {prefix}"{{k}}"\n') == 'x = "k"\n'


def test_a_multi_line_f_string_keeps_its_fields_on_one_line() -> None:
    reduced = code_only('x = f"""\n{k.view(1,\n2)}\n{v}\n"""\ny = 1\n')
    assert reduced == 'x = \n\n\n\n "k.view(1, 2) v"\ny = 1\n'


def test_a_multi_line_f_string_whose_lines_start_at_column_0_leaves_none() -> None:
    text = 'x = f"""\nclass {name}:\ndef f():\n{k}\n"""\n'
    assert _lines_start_at_column_0(code_only(text)) == [0]


@pytest.mark.parametrize(
    "text",
    [
        'x = """a\ndef f(k):\n""".strip()\n',
        "x = '''\nclass C:\n'''\n",
        'x = "a \\\nclass C"\n',
        'x = "a \\\r\nclass C"\r\n',
        'x = f"""\n{k}\n"""\n',
    ],
    ids=["triple", "triple-single", "backslash-newline", "backslash-crlf", "f-string"],
)
def test_no_line_after_a_multi_line_string_starts_at_column_0(text: str) -> None:
    assert _lines_start_at_column_0(code_only(text)) == [0]


def test_after_a_module_docstring_only_the_next_statement_starts_at_column_0() -> None:
    assert _lines_start_at_column_0(code_only('"""Doc.\n\nMore.\n"""\nx = 1\n')) == [4]


def test_code_between_strings_is_kept() -> None:
    assert code_only("x = 'a' + k_cache['b'] + \"c\"\n") == 'x = "" + k_cache[""] + ""\n'


def test_an_identifier_ending_in_a_prefix_letter_is_not_a_prefix() -> None:
    assert code_only('elif"{k}" in x: pass\n') == 'elif"" in x: pass\n'


def test_a_field_holding_a_string_with_a_bracket_is_kept() -> None:
    assert re.search(r"\bif k else\b", code_only("x = f\"{'(' if k else ''}\"\n"))


@pytest.mark.parametrize(("text", "reduced"), [
    # A prefix is one or two letters starting a word right before the quote.
    ('x = rb"a#b"  # c\n', 'x = ""  \n'),
    ('y = bar"s" + Rf"{k.shape}"\n', 'y = bar"" + "k.shape"\n'),
    ('z = rrb"q"\n', 'z = rrb""\n'),
    # A prefix letter right after a replaced literal still starts a word.
    ('"a"r"b"', '""""'),
    # A quote then a lone backslash ending the text opens no literal.
    ("w = '\\", "w = '\\"),
    # ... where one before a newline continues the literal onto the next line.
    ("w = '\\\n", 'w = \n ""'),
])
def test_string_prefixes_and_a_trailing_backslash(text: str, reduced: str) -> None:
    assert code_only(text) == reduced
