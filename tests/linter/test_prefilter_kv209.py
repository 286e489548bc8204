"""KV209's text condition (``rules.kv209.condition._kv209``): it reads which local helpers may return a
view, which names are a first argument's root and whether the key's and value's helper calls
differ, and must still admit every file its module screen (``rules.kv209.screen.kv209``) says yes
to."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linter.rules.kv209.screen import kv209 as screen
from linter.plan.text_plan import parse_plan
from linter.plan.file import _File
from linter.rules.kv209.condition import _kv209
from linter.rules import rules_by_code
from linter.settings import Settings

CALLER = (
    "def attend(q, k, v, x):\n"
    "    k = heads(k, 8)\n"
    "    v = heads(v, 32)\n"
    "    return sdpa(q, k, v)\n"
)


def admitted(text: str) -> bool:
    return _kv209(_File(text, Settings()))


def screened(text: str) -> bool:
    return bool(screen(ast.parse(text), Settings(), "<memory>"))


def helper(body: str, head: str = "def heads(x, n):\n") -> str:
    return head + body + "\n\n"


# Files the screen says yes to: the condition must admit each.
ADMIT = {
    "view returned": helper("    return x.view(x.shape[0], n, -1)") + CALLER,
    "axis-keeping steps after the view": helper(
        "    return x.view(x.shape[0], -1, n, 64).transpose(1, 2).contiguous()"
    ) + CALLER,
    "a name bound to a view, then moved": helper(
        "    t = x.view(x.shape[0], -1, n, 64)\n    t = t.permute(0, 2, 1, 3)\n    return t"
    ) + CALLER,
    "chained assignment": helper("    a = t = x.reshape(x.shape[0], n, -1)\n    return t") + CALLER,
    "annotated assignment": helper("    t: Tensor = x.unflatten(-1, (n, -1))\n    return t") + CALLER,
    "one-line def": "def heads(x, n): return x.view(x.shape[0], n, -1)\n\n" + CALLER,
    "return split over lines": helper("    return (\n        x\n        .view(x.shape[0], n, -1)\n    )") + CALLER,
    "async helper": helper("    return x.view(x.shape[0], n, -1)", "async def heads(x, n):\n") + CALLER,
    "rearrange by plain name": helper("    return rearrange(x, 'b s (h d) -> b h s d', h=n)") + CALLER,
    "every branch a view": helper(
        "    if n == 1:\n        return x.view(x.shape[0], 1, -1)\n    return x.reshape(x.shape[0], n, -1)"
    ) + CALLER,
    "the twin viewed inline": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("heads(v, 32)", "v.view(v.shape[0], 32, -1)"),
    # The screen's viewed names: in a view's receiver, its first argument, its target.
    "the twin in a view's first argument": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("v = heads(v, 32)", "w = x.view(v.size(0), 32, -1)"),
    "the twin's attribute assigned a view": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("v = heads(v, 32)", "v.data = w.view(2, 32, -1)"),
    "the twin subscripting a view's target": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("v = heads(v, 32)", "cache[v] = (\n        w.view(2, 32, -1)\n    )"),
    "the same helper, other arguments in a keyword": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("heads(k, 8)", "heads(k, n=8)").replace("heads(v, 32)", "heads(v, n=32)"),
    "two helpers": helper("    return x.view(x.shape[0], n, -1)")
    + helper("    return x.reshape(x.shape[0], n, -1)", "def heads2(x, n):\n")
    + CALLER.replace("heads(v, 32)", "heads2(v, 8)"),
    "method on self with a multi-line docstring": (
        "class Attention:\n"
        "    def _shape(self, t, n):\n"
        '        """Split the heads.\n\n        Returns a view.\n        """\n'
        "        return t.view(t.shape[0], -1, n, 64).transpose(1, 2)\n\n"
        "    def forward(self, x):\n"
        "        k = self._shape(self.k_proj(x), self.num_kv_heads)\n"
        "        v = self._shape(self.v_proj(x), self.num_heads)\n"
        "        return k, v\n"
    ),
    "first argument on its own line, after a chain's dot": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("heads(k, 8)", "heads(self.\n        k, 8)"),
    "a docstring line that looks like a definition ends no body": (
        "class Attention:\n"
        "    def _shape(self, t, n):\n"
        '        """Example:\n\n    def other(x):\n        return x\n        """\n'
        "        return t.view(t.shape[0], -1, n, 64)\n\n"
        "    def forward(self, x):\n"
        "        k = self._shape(self.k_proj(x), 8)\n"
        "        v = self._shape(self.v_proj(x), 32)\n"
        "        return k, v\n"
    ),
}

# Look-alikes the screen says no to, which the text condition used to admit and now rejects.
REJECT = {
    # transformers' repeat_kv: a view word in it, but a return is a name bound to an expand.
    "returns a name bound to no view": helper(
        "    if n == 1:\n        return x\n"
        "    x = x[:, :, None].expand(x.shape[0], x.shape[1], n, x.shape[2])\n"
        "    return x.reshape(x.shape[0], -1, x.shape[3])"
    ) + CALLER,
    "a bare return": helper("    if n == 0:\n        return\n    return x.view(x.shape[0], n, -1)") + CALLER,
    "returns a tuple of views": helper("    return x.view(x.shape[0], n, -1), n") + CALLER,
    "returns a new tensor": helper("    y = x.view(x.shape[0], n, -1)\n    return torch.cat([y, y], dim=1)") + CALLER,
    "the view word only in its docstring": helper(
        '    """Like x.view(b, n, -1), but padded."""\n    return pad(x, n)'
    ) + CALLER,
    "the same helper with the same arguments": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("heads(v, 32)", "heads(v, 8)"),
    "the key's attribute, not the key": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("heads(k, 8)", "heads(k.shape, 8)"),
    "the key in an operation": helper("    return x.view(x.shape[0], n, -1)")
    + CALLER.replace("heads(k, 8)", "heads(k * 2, 8)"),
    "an imported name called as a method": "from .norms import rms\n\n\n" + CALLER.replace(
        "heads(k, 8)", "self.rms(k, 8)"
    ).replace("heads(v, 32)", "self.rms(v, 32)"),
}


@pytest.mark.parametrize("name", sorted(ADMIT))
def test_every_shape_the_screen_says_yes_to_is_admitted(name: str) -> None:
    text = ADMIT[name]
    assert screened(text), name  # the shape is one the screen really reports on
    assert admitted(text), name


@pytest.mark.parametrize("name", sorted(REJECT))
def test_look_alikes_without_a_helper_view_are_rejected(name: str) -> None:
    text = REJECT[name]
    assert not screened(text), name  # rejecting it loses nothing
    assert not admitted(text), name


def test_an_imported_helper_called_by_its_plain_name_is_left_to_the_screen() -> None:
    # The screen reads the helper from its module; the text cannot, so it admits the file.
    for importer in ("from .utils import heads", "try: from .utils import heads", "from .utils import (  # f(x)\n    heads,\n)"):
        assert admitted(f"{importer}\n\n\n{CALLER}"), importer
    assert not admitted(f"from .utils import other\n\n\n{CALLER}")


def test_old_mac_line_ends_are_read_as_line_ends() -> None:
    for name in ("view returned", "method on self with a multi-line docstring", "first argument on its own line, after a chain's dot"):
        text = ADMIT[name].replace("\n", "\r")
        assert screened(text) and admitted(text), name
    assert not admitted(REJECT["returns a name bound to no view"].replace("\n", "\r"))


def test_a_nested_functions_returns_are_left_out_of_the_helpers() -> None:
    # Its own return is no view: the nested one's view is not the helper's.
    nested = helper("    def inner(y):\n        return y.view(-1)\n    return torch.cat([inner(x), x])")
    assert not screened(nested + CALLER)
    assert not admitted(nested + CALLER)
    # Its own return is a view, the nested one's no view: a helper.
    nested = helper("    def inner(y):\n        return y\n    return x.view(x.shape[0], n, -1)")
    assert screened(nested + CALLER)
    assert admitted(nested + CALLER)


def test_a_body_read_unsure_counts_as_a_helper() -> None:
    # Tab indents: the nested function's statements cannot be told by counting spaces.
    assert admitted(helper("\treturn x.view(x.shape[0], n, -1)") + CALLER)
    nested = helper("    def inner(y):\n\treturn y\n    return torch.cat([inner(x), x.view(-1)])")
    assert admitted(nested + CALLER)


def test_a_helper_call_whose_rest_holds_a_string_counts_as_different() -> None:
    # Brackets may hide in a string: the two calls are not compared, so they may differ.
    text = helper("    return x.view(x.shape[0], n, -1)") + CALLER.replace("heads(k, 8)", "heads(k, ')')").replace(
        "heads(v, 32)", "heads(v, ')')"
    )
    assert admitted(text)


def test_the_plan_leaves_kv209_out_of_a_rejected_file() -> None:
    kv209 = [rules_by_code()["KV209"]]
    assert parse_plan(ADMIT["view returned"], kv209, Settings()).module_rules == {"KV209"}
    assert not parse_plan(REJECT["returns a name bound to no view"], kv209, Settings()).module_rules


BODIES = (
    "return x.view(x.shape[0], n, -1)",
    "t = x.view(x.shape[0], n, -1)\nreturn t.transpose(1, 2)",
    "if n:\n    return x.reshape(n, -1)\nreturn x.unflatten(-1, (n, -1))",
    "y = x.contiguous()\nreturn y",
    "return rearrange(x, 'b (h d) -> b h d', h=n)",
    '"""Heads.\n\ndef fake(y):\n    return y\n"""\nreturn (x\n        .view(n, -1))',
    "t = x.reshape(n, -1); return t",
    "return x.view(n, -1) if n else x",
    "return x.view(n, -1)[0]",
    "def inner(y):\n    return y\nreturn inner(x).view(n, -1)",
)
HEADERS = (
    "def heads(x, n):",
    "async def heads(x, n):",
    "@cache\ndef heads(x, n):",
    "@register(\n    table.view(-1),\n)\ndef heads(x, n):",
    "def heads(\n    x,\n    n,\n):",
)
CALLS = (
    ("heads(k, 8)", "heads(v, 32)"),
    ("heads(k, 8)", "heads(v, 8)"),
    ("heads(k, 8)", "v.view(2, 32, -1)"),
    ("heads(\n            k, 8)", "scale(v)"),
    ("heads(k.float(), 8)", "heads(v, n=32)"),
)


def _indented(block: str, margin: str) -> str:
    return "".join(margin + line if line.strip() else line for line in block.splitlines(keepends=True))


def _layouts(header: str, body: str, key_call: str, value_call: str):
    helper_text = header + "\n" + _indented(body, "    ") + "\n"
    caller = f"k = {key_call}\nv = {value_call}\nreturn attend(q, k, v)\n"
    yield "module", helper_text + "\n\ndef forward(q, k, v):\n" + _indented(caller, "    ")
    method = helper_text.replace("heads(x", "heads(self, x").replace("heads(\n    x", "heads(\n    self,\n    x")
    self_caller = caller.replace("heads(", "self.heads(")
    yield "method", "class Attention:\n" + _indented(method, "    ") + "\n    def forward(self, q, k, v):\n" + _indented(self_caller, "        ")
    yield "nested", "def forward(q, k, v):\n" + _indented(helper_text, "    ") + _indented(caller, "    ")


@pytest.mark.parametrize("body", BODIES)
def test_the_condition_admits_whatever_the_screen_reports_on(body: str) -> None:
    # Every helper body, header, call and placement combined: where the screen says yes, the
    # condition must too. Some combinations must be screened yes, or the test proves little.
    yes = 0
    for header in HEADERS:
        for key_call, value_call in CALLS:
            for layout, text in _layouts(header, body, key_call, value_call):
                ast.parse(text)
                if screened(text):
                    yes += 1
                    assert admitted(text), (layout, text)
    # The rest return no view of the parameter (an expression around it, a contiguous copy):
    # the screen says no to them wherever they stand.
    if "if n else" not in body and "[0]" not in body and "inner" not in body and "contiguous" not in body:
        assert yes, body


_HEAD_PIECES = ["self", ".", "heads", "(", " ", "\n", "\\\n", "k_proj", "x", ",", "=", "é", "ключ", "\u3000", "# c\n", "1", ")", "\t"]


@given(
    st.lists(st.sampled_from(_HEAD_PIECES), max_size=80),
    st.sampled_from(["", "heads(", "self.heads(", "cls . heads (\n ", "f(self.k_proj(", "heads((", "x.heads("]),
)
@settings(max_examples=300)
def test_the_call_head_is_found_from_the_cut_window_as_from_the_whole(pieces: list[str], head: str) -> None:
    # The search for the call before a first argument starts after the last character that
    # cannot be part of it; from 200 characters back, it must find the same call.
    from linter.rules.kv209.condition import _BEFORE_ARGUMENT, _call_head_start

    text = "".join(pieces) + head + "k"
    end = len(text) - 1
    whole = _BEFORE_ARGUMENT.search(text, max(0, end - 200), end)
    cut = _BEFORE_ARGUMENT.search(text, _call_head_start(text, end), end)
    assert (whole and whole.span(), whole and whole.groups()) == (cut and cut.span(), cut and cut.groups())
