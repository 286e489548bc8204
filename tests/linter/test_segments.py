"""``top_level_segments``: reduced source cut into its top-level statements, by line."""

from __future__ import annotations

from linter.plan.code_only import code_only
from linter.plan.segments import Segment, header, top_level_segments


def _cuts(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each segment of ``text`` once reduced."""
    return [(s.start, s.end, s.kind) for s in top_level_segments(code_only(text))]


def _covers_every_line_once(segments: list[Segment], text: str) -> bool:
    lines = [line for s in segments for line in range(s.start, s.end)]
    return lines == list(range(text.count("\n") + 1))


def test_each_top_level_statement_is_its_own_segment() -> None:
    assert _cuts("import torch\nx = 1\ny = 2\n") == [(0, 1, "statement"), (1, 2, "statement"), (2, 4, "statement")]


def test_a_function_is_a_def_and_its_body_stays_with_it() -> None:
    assert _cuts("def f(k):\n    return k\n\nx = 1\n") == [(0, 3, "def"), (3, 5, "statement")]


def test_an_async_def_is_a_def() -> None:
    assert _cuts("x = 1\nasync def f(k):\n    await k\n")[1] == (1, 4, "def")


def test_a_class_is_a_class_not_a_def() -> None:
    assert _cuts("class C:\n    def f(self):\n        pass\ndef g():\n    pass\n") == [
        (0, 3, "class"),
        (3, 6, "def"),
    ]


def test_a_decorator_stays_with_its_def() -> None:
    assert _cuts("x = 1\n@torch.no_grad()\ndef f(k):\n    return k\n") == [(0, 1, "statement"), (1, 5, "def")]


def test_stacked_decorators_stay_with_their_class() -> None:
    assert _cuts("@dataclass\n@final\nclass C:\n    k: int\n") == [(0, 5, "class")]


def test_a_multi_line_decorator_stays_with_its_def() -> None:
    text = "@register(\n    'attention',\n)\ndef f(k):\n    return k\ny = 2\n"
    assert _cuts(text) == [(0, 5, "def"), (5, 7, "statement")]


def test_a_multi_line_def_header_with_parameters_at_column_0_is_one_segment() -> None:
    text = "def f(\nk,\nv,\n):\n    return k\nx = 1\n"
    assert _cuts(text) == [(0, 5, "def"), (5, 7, "statement")]


def test_a_column_0_line_inside_brackets_continues_the_statement() -> None:
    text = "def f(k, v):\n    return attention(\nk[0],\nv[0])\nx = 1\n"
    assert _cuts(text) == [(0, 4, "def"), (4, 6, "statement")]


def test_a_closing_bracket_at_column_0_continues_the_statement() -> None:
    assert _cuts("x = [\n    1,\n]\ny = 2\n") == [(0, 3, "statement"), (3, 5, "statement")]


def test_a_backslash_continuation_line_at_column_0_continues_the_statement() -> None:
    assert _cuts("x = 1 + \\\n2\ny = 3\n") == [(0, 2, "statement"), (2, 4, "statement")]


def test_a_backslash_crlf_continuation_line_at_column_0_continues_the_statement() -> None:
    assert _cuts("x = 1 + \\\r\n2\r\ny = 3\r\n") == [(0, 2, "statement"), (2, 4, "statement")]


def test_a_form_feed_before_a_def_does_not_join_it_to_the_class_before() -> None:
    assert _cuts("class A:\n    pass\n\fdef f():\n    pass\n") == [(0, 2, "class"), (2, 5, "def")]


def test_module_level_if_else_is_one_statement() -> None:
    text = "if torch.cuda.is_available():\n    def f(): pass\nelif x:\n    pass\nelse:\n    def f(): pass\n"
    assert _cuts(text) == [(0, 7, "statement")]


def test_try_except_else_finally_is_one_statement() -> None:
    text = "try:\n    import a\nexcept ImportError:\n    a = None\nelse:\n    pass\nfinally:\n    pass\nx = 1\n"
    assert _cuts(text) == [(0, 8, "statement"), (8, 10, "statement")]


def test_a_name_that_starts_like_a_clause_keyword_starts_a_statement() -> None:
    assert _cuts("x = 1\nelse_branch = 2\nfinally_ = 3\n") == [
        (0, 1, "statement"),
        (1, 2, "statement"),
        (2, 4, "statement"),
    ]


def test_a_name_that_starts_like_def_or_class_is_a_statement() -> None:
    assert [kind for *_, kind in _cuts("default = 1\nclasses = []\n")] == ["statement", "statement"]


def test_a_def_inside_a_string_cuts_nothing() -> None:
    assert _cuts('x = """\ndef f():\n    pass\n"""\ny = 1\n') == [(0, 4, "statement"), (4, 6, "statement")]


def test_a_def_inside_a_comment_cuts_nothing() -> None:
    assert _cuts("x = 1\n# def f():\ny = 2\n") == [(0, 2, "statement"), (2, 4, "statement")]


def test_indented_text_before_the_first_statement_is_a_statement_of_its_own() -> None:
    assert _cuts("  \n\ndef f():\n    pass\n") == [(0, 2, "statement"), (2, 5, "def")]


def test_the_segments_of_an_empty_text_cover_its_one_line() -> None:
    assert _cuts("") == [(0, 1, "statement")]


def test_segments_cover_every_line_exactly_once() -> None:
    text = (
        '"""Doc."""\nimport torch\n\n@decorate(\n    1,\n)\nclass C:\n    x = """\nclass D:\n"""\n\n'
        "def f(\nk,\n):\n    return g(\nk)\nif x:\n    pass\nelse:\n    pass\ny = 1 + \\\n2\n"
    )
    assert _covers_every_line_once(top_level_segments(code_only(text)), text)


def test_a_segment_text_is_the_reduced_text_of_its_lines() -> None:
    code = code_only("x = 1  # note\ndef f(k):\n    return 'k'\n")
    assert [s.text for s in top_level_segments(code)] == ["x = 1  \n", "def f(k):\n    return \"\"\n"]


def test_only_definitions_are_definitions() -> None:
    segments = top_level_segments(code_only("x = 1\ndef f():\n    pass\nclass C:\n    pass\n"))
    assert [s.definition for s in segments] == [False, True, True]


def test_the_header_of_a_decorated_definition_is_its_def_line() -> None:
    (segment,) = top_level_segments(code_only("@cache\n@wraps(g)\ndef f(k, v):\n    return k\n"))
    assert header(segment) == "def f(k, v):"


def test_a_statement_has_no_header() -> None:
    (segment,) = top_level_segments(code_only("k = v\n"))
    assert header(segment) == ""
