"""KV105 reads a helper from the module of the linted tree its caller imports it from."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

from linter.engine import lint_source
from linter.plan.text_plan import parse_plan
from linter.settings import Settings

UTILS = dedent("""\
    import torch


    def trim_keys(x, window):
        \"\"\"Keep the most recent tokens.\"\"\"
        return x[:, -window:]


    def rotary_half(x, rot):
        return x[..., :rot]
""")
CALLER = dedent("""\
    from {module} import {helper}


    class SlidingAttention(nn.Module):
        def forward(self, q, k, v, n):
            k = {helper}(k, n)
            return self.attn(q, k, v)
""")


def _package(tmp_path: Path, module: str = "engine.attention.utils", helper: str = "trim_keys",
             utils: str = UTILS) -> tuple[Path, str]:
    for folder in ("engine", "engine/attention", "engine/models"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "engine" / "attention" / "utils.py").write_text(utils)
    caller = tmp_path / "engine" / "models" / "sliding.py"
    text = CALLER.format(module=module, helper=helper)
    caller.write_text(text)
    return caller, text


def _lint(path: Path, text: str):
    return lint_source(text, path=str(path), codes=["KV105"])


def test_a_helper_imported_by_absolute_name_of_the_own_package_is_read(tmp_path):
    caller, text = _package(tmp_path)
    [finding] = _lint(caller, text)
    assert finding.span.row == 6 and "helper call `trim_keys(k, n)`" in finding.message
    # The prefilter lets the file through: the helper lies in another file.
    assert parse_plan(text, ["KV105"], Settings()).needed


def test_a_helper_imported_relatively_is_read(tmp_path):
    caller, text = _package(tmp_path, module="..attention.utils")
    assert [f.span.row for f in _lint(caller, text)] == [6]


def test_a_head_dim_helper_and_another_package_are_silent(tmp_path):
    caller, text = _package(tmp_path, helper="rotary_half")
    assert _lint(caller, text) == []
    caller, text = _package(tmp_path, module="otherlib.attention.utils")
    assert _lint(caller, text) == []


def test_a_value_passed_through_the_helper_too_is_silent(tmp_path):
    caller, text = _package(tmp_path)
    text = text.replace("        k = trim_keys(k, n)\n", "        k = trim_keys(k, n)\n        v = trim_keys(v, n)\n")
    assert "v = trim_keys(v, n)" in text
    assert _lint(caller, text) == []


def test_a_missing_broken_or_twice_defined_helper_contributes_nothing(tmp_path):
    caller, text = _package(tmp_path, utils=UTILS + "\n\ndef trim_keys(x, window):\n    return x\n")
    assert _lint(caller, text) == []
    (tmp_path / "engine" / "attention" / "utils.py").write_text("def trim_keys(x, window:\n    return x[:, -window:]\n")
    assert _lint(caller, text) == []
    (tmp_path / "engine" / "attention" / "utils.py").unlink()
    assert _lint(caller, text) == []


def test_an_imported_call_with_no_arguments_beside_the_helper_call_is_passed_over(tmp_path):
    # ``get_forward_context()`` takes no key; the imported helper beside it still cuts one.
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "forward_context.py").write_text("def get_forward_context():\n    return _CONTEXT\n")
    caller, text = _package(tmp_path)
    text = "from engine.forward_context import get_forward_context\n" + text.replace(
        "        k = trim_keys(k, n)\n", "        context = get_forward_context()\n        k = trim_keys(k, n)\n")
    caller.write_text(text)
    assert [f.span.row for f in _lint(caller, text)] == [8]


# Differential attention splits the key's heads into two groups, each scored against the whole
# value: a helper returning the pieces (`chunk`) hands the core a pair, not a narrowed key, so
# the whole value beside it is no token/head mismatch.
DIFFERENTIAL = dedent("""\
    def {helper}(x{extra}):
        return {body}


    class DifferentialAttention(nn.Module):
        def forward(self, q, k, v, n):
            return self.core(q, {helper}(k{args}), v)
""")


def test_a_helper_returning_key_pieces_is_silent():
    source = DIFFERENTIAL.format(helper="head_groups", extra="", body="x.chunk(2, dim=1)", args="")
    assert lint_source(source, codes=["KV105"]) == []


def test_a_helper_returning_one_cut_of_the_key_is_reported():
    source = DIFFERENTIAL.format(helper="drop_prefix", extra=", n", body="x[:, n:]", args=", n")
    assert [f.span.row for f in lint_source(source, codes=["KV105"])] == [7]
