"""KV207's text condition (``rules.kv207.condition._kv207``) against its module screen
(``rules.kv207.screen.kv207``): wherever the screen says yes the condition must too; where the
twin of the redeclared side is surely defined by the class itself it now says no."""

from __future__ import annotations

import ast
import itertools

import pytest

from linter.plan.code_only import code_only
from linter.rules.kv207.screen import kv207 as screen
from linter.plan.text_plan import parse_plan
from linter.plan.file import _File
from linter.rules.kv207.condition import _kv207, _surely_defined
from linter.rules import rules_by_code
from linter.settings import Settings

BASE = (
    "import torch.nn as nn\n\n\n"
    "class Base(nn.Module):\n"
    "    def __init__(self, dim, heads, kv_heads):\n"
    "        super().__init__()\n"
    "        self.k_proj = nn.Linear(dim, kv_heads * 64)\n"
    "        self.v_proj = nn.Linear(dim, kv_heads * 64)\n\n\n"
)


def _condition(text: str) -> bool:
    return _kv207(_File(text, Settings()))


def _screened(text: str, path: str = "model.py") -> bool:
    return bool(screen(ast.parse(text), Settings(), path))


def _child(body: str, header: str = "    def __init__(self, dim, heads, kv_heads):\n") -> str:
    return "class Child(Base):\n" + header + body


REDECLARE_V = "        self.v_proj = nn.Linear(dim, heads * 64)\n"
PARENT = "        super().__init__(dim, heads, kv_heads)\n"


def test_a_subclass_redeclaring_only_v_proj_after_the_parent_init_is_admitted() -> None:
    text = BASE + _child(PARENT + REDECLARE_V)
    assert _screened(text)
    assert _condition(text)
    assert parse_plan(text, [rules_by_code()["KV207"]], Settings()).module_rules == {"KV207"}


def test_both_sides_redeclared_directly_is_rejected() -> None:
    text = BASE + _child(PARENT + "        self.k_proj = nn.Linear(dim, heads * 64)\n" + REDECLARE_V)
    assert not _screened(text)
    assert not _condition(text)


def test_the_base_class_alone_is_rejected_although_it_assigns_projections() -> None:
    # Base assigns both sides directly (and its base, nn.Module, is neither local nor imported
    # by ``from``); before, the class name occurring twice was enough.
    text = BASE + "def build():\n    return Base(1, 2, 3), Base(4, 5, 6)\n"
    assert not _screened(text)
    assert not _condition(text)


def test_the_twin_assigned_only_inside_an_if_is_not_a_direct_definition() -> None:
    body = PARENT + "        if dim > 8:\n            self.k_proj = nn.Linear(dim, heads * 64)\n" + REDECLARE_V
    text = BASE + _child(body)
    assert _screened(text)
    assert _condition(text)


@pytest.mark.parametrize("nested", [
    "        def build():\n            self.k_proj = nn.Linear(dim, heads * 64)\n",
    "        for _ in range(1):\n            self.k_proj = nn.Linear(dim, heads * 64)\n",
    "        with torch.no_grad():\n            self.k_proj = nn.Linear(dim, heads * 64)\n",
    "        try:\n            self.k_proj = nn.Linear(dim, heads * 64)\n        except ValueError:\n            pass\n",
    "        if dim: self.k_proj = nn.Linear(dim, heads * 64)\n",
    "        if dim: \\\n        self.k_proj = nn.Linear(dim, heads * 64)\n",
    '        """\n        self.k_proj = nn.Linear(dim, heads * 64)\n        """\n',
    "        # self.k_proj = nn.Linear(dim, heads * 64)\n",
    "        class Inner:\n            def f(self):\n                self.k_proj = 1\n",
])
def test_a_twin_defined_only_nested_or_in_a_string_leaves_the_class_admitted(nested: str) -> None:
    text = BASE + _child(PARENT + nested + REDECLARE_V)
    assert _screened(text)
    assert _condition(text)


def test_a_twin_assigned_directly_in_another_method_counts_as_defined() -> None:
    other = "\n    def reset(self):\n        self.k_proj = nn.Linear(1, 1)\n"
    text = BASE + _child(PARENT + REDECLARE_V) + other
    assert not _screened(text)
    assert not _condition(text)


def test_a_twin_that_is_a_method_counts_as_defined() -> None:
    prop = "\n    @property\n    def k_proj(self):\n        return self.v_proj\n"
    text = BASE + _child(PARENT + REDECLARE_V) + prop
    assert not _screened(text)
    assert not _condition(text)


def test_a_multi_line_signature_and_a_docstring_still_let_a_direct_twin_count() -> None:
    header = "    def __init__(\n        self,\n        dim,\n        heads,\n        kv_heads,\n    ) -> None:\n"
    body = '        """Doc.\n\n        More doc.\n        """\n' + PARENT + (
        "        self.scale = foo(\n    1)\n"  # a continuation line dedented below the body
        "        self.k_proj = nn.Linear(dim, heads * 64)\n" + REDECLARE_V
    )
    text = BASE + _child(body, header)
    assert not _screened(text)
    assert not _condition(text)


def test_tab_indentation_is_not_read_and_the_class_is_admitted() -> None:
    child = _child(PARENT + "        self.k_proj = nn.Linear(dim, heads * 64)\n" + REDECLARE_V).replace("    ", "\t")
    text = BASE + child
    assert not _screened(text)  # both sides are direct: the condition over-approximates here
    assert _condition(text)
    assert _surely_defined(code_only(child)) == set()


def test_a_twin_inside_an_if_in_a_tab_indented_class_is_admitted() -> None:
    body = PARENT + "        if dim:\n            self.k_proj = nn.Linear(dim, heads * 64)\n" + REDECLARE_V
    text = BASE + _child(body).replace("    ", "\t")
    assert _screened(text)
    assert _condition(text)


def test_a_base_imported_over_several_lines_is_read(tmp_path) -> None:
    (tmp_path / "base.py").write_text(BASE)  # the screen reads the base's module for its twin
    (tmp_path / "model.py").write_text("")
    model = str(tmp_path / "model.py")
    for imports in ("from .base import (\n    Other,\n    Base,\n)\n", "from .base import Other, \\\n    Base\n"):
        text = "import torch.nn as nn\n" + imports + "\n\n" + _child(PARENT + REDECLARE_V)
        assert _screened(text, model), imports
        assert _condition(text), imports


def test_a_base_that_is_neither_local_nor_imported_by_from_is_rejected() -> None:
    text = "import torch.nn as nn\nimport base\n\n\nclass Child(base.Base):\n" + (
        "    def __init__(self, dim, heads, kv_heads):\n" + PARENT + REDECLARE_V
    )
    assert not _screened(text)
    assert not _condition(text)


def test_a_key_side_statement_without_a_linear_is_no_redeclaration() -> None:
    # ``self.v_head_dim`` is V-side, but its statement builds no Linear: the Linear of the
    # next statement must not be read as its value.
    body = PARENT + "        self.v_head_dim = 64\n        self.o_proj = nn.Linear(dim, dim)\n"
    text = BASE + _child(body)
    assert not _screened(text)
    assert not _condition(text)


def test_a_redeclaration_in_a_target_list_is_admitted() -> None:
    body = PARENT + "        self.v_proj, self.gate = nn.Linear(dim, heads * 64), None\n"
    text = BASE + _child(body)
    assert _screened(text)
    assert _condition(text)


def test_a_multi_line_value_after_a_string_is_read_to_its_end() -> None:
    body = PARENT + '        self.v_proj = wrap("""\n  doc\n""",\n            nn.Linear(dim, heads * 64))\n'
    text = BASE + _child(body)
    assert _screened(text)
    assert _condition(text)


# Every combination of where the twin lies, how the method's signature is written and how the
# class is indented: the condition says yes wherever the screen does, and no for the direct twin
# written plainly.
_TWINS = {
    "direct": "        self.k_proj = nn.Linear(dim, heads * 64)\n",
    "annotated": "        self.k_proj: nn.Linear = nn.Linear(dim, heads * 64)\n",
    "chained": "        self.k_proj = self.extra = nn.Linear(dim, heads * 64)\n",
    "tuple": "        self.k_proj, self.o = nn.Linear(dim, heads * 64), None\n",
    "if": "        if dim:\n            self.k_proj = nn.Linear(dim, heads * 64)\n",
    "else": "        if not dim:\n            pass\n        else:\n            self.k_proj = nn.Linear(dim, 1)\n",
    "semicolon": "        x = 1; self.k_proj = nn.Linear(dim, 1)\n",
    "docstring": '        """\n        self.k_proj = nn.Linear(dim, heads * 64)\n        """\n',
    "after-continuation": "        x = [\n            1,\n]\n        self.k_proj = nn.Linear(dim, 1)\n",
    "absent": "",
}
_HEADERS = {
    "one line": "    def __init__(self, dim, heads, kv_heads):\n",
    "black": "    def __init__(\n        self,\n        dim,\n        heads,\n        kv_heads,\n    ):\n",
    "aligned": "    def __init__(self, dim,\n                 heads, kv_heads):\n",
}


@pytest.mark.parametrize(("twin", "header", "indent"), list(itertools.product(_TWINS, _HEADERS, ("    ", "  ", "\t"))))
def test_the_condition_admits_whatever_the_screen_does(twin: str, header: str, indent: str) -> None:
    child = _child(PARENT + _TWINS[twin] + REDECLARE_V, _HEADERS[header])
    text = BASE + child.replace("    ", indent)
    screened = _screened(text)
    assert screened == (twin in ("if", "else", "docstring", "absent"))
    if screened:
        assert _condition(text)
    elif indent != "\t" and twin in ("direct", "annotated", "after-continuation"):
        assert not _condition(text)


def test_windows_line_ends_are_read_and_old_mac_ones_admit_the_file() -> None:
    both = BASE + _child(PARENT + "        self.k_proj = nn.Linear(dim, heads * 64)\n" + REDECLARE_V)
    assert not _condition(both.replace("\n", "\r\n"))
    nested = BASE + _child(PARENT + "        if dim:\n            self.k_proj = nn.Linear(dim, 1)\n" + REDECLARE_V)
    for text in (nested.replace("\n", "\r\n"), nested.replace("\n", "\r")):
        assert _screened(text)
        assert _condition(text)


def test_configured_extra_pairs_are_read_as_k_v_sides() -> None:
    settings = Settings(extra_pairs=(("kp", "vp"),))
    base = BASE.replace("k_proj", "kp").replace("v_proj", "vp")
    lonely = base + _child(PARENT + "        self.vp = nn.Linear(dim, heads * 64)\n")
    both = base + _child(PARENT + "        self.kp = nn.Linear(dim, 1)\n        self.vp = nn.Linear(dim, 1)\n")
    assert screen(ast.parse(lonely), settings, "model.py")
    assert _kv207(_File(lonely, settings))
    assert not _kv207(_File(lonely, Settings()))  # without the pair, vp is no V side
    assert not _kv207(_File(both, settings))
