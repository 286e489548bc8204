"""KV209 kv-view-heads-through-helper: KV202 carried through a helper the key (or value) is passed to."""

from __future__ import annotations

import textwrap

import pytest

from linter.engine import lint_source
from linter.rules import rules_by_code

SPLIT = """\
def split_heads(x, heads, head_dim):
    b, s, _ = x.shape
    return x.view(b, s, heads, head_dim).transpose(1, 2)


"""


def findings(source: str, path: str = "<test>", codes=("KV209",)):
    return lint_source(textwrap.dedent(source), path=path, codes=list(codes))


def _caller(k_line: str, v_line: str) -> str:
    return (
        "class Attention(nn.Module):\n"
        "    def forward(self, hidden):\n"
        "        b, s, _ = hidden.shape\n"
        f"        {k_line}\n        {v_line}\n"
        "        return self.attn(self.q_proj(hidden), k, v)\n"
    )


@pytest.mark.parametrize(
    ("k_line", "v_line"),
    [
        pytest.param(
            "k = split_heads(self.k_proj(hidden), self.num_heads, self.head_dim)",
            "v = self.v_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim)",
            id="key-through-helper-value-inline",
        ),
        pytest.param(
            "k = self.k_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim)",
            "v = split_heads(self.v_proj(hidden), self.num_heads, self.head_dim)",
            id="value-through-helper-key-inline",
        ),
        pytest.param(
            "k = split_heads(self.k_proj(hidden), self.num_kv_heads, self.head_dim)",
            "v = split_heads(self.v_proj(hidden), heads=self.num_heads, head_dim=self.head_dim)",
            id="both-through-helper-keyword-arguments",
        ),
        pytest.param(
            "k = split_heads(self.k_proj(hidden), 1, self.head_dim)",
            "v = split_heads(self.v_proj(hidden), self.num_heads, self.head_dim)",
            id="mqa-one-head",
        ),
        pytest.param(
            "k = split_heads(self.k_proj(hidden), 8, 128)",
            "v = split_heads(self.v_proj(hidden), 32, 128)",
            id="integer-head-counts",
        ),
    ],
)
def test_a_helper_view_with_another_head_count_than_its_twin_is_reported(k_line, v_line):
    [finding] = findings(SPLIT + _caller(k_line, v_line))
    assert finding.code == "KV209" and finding.span.row == 9
    assert "split_heads" in finding.message


@pytest.mark.parametrize(
    ("k_line", "v_line"),
    [
        pytest.param(
            "k = split_heads(self.k_proj(hidden), self.num_kv_heads, self.head_dim)",
            "v = split_heads(self.v_proj(hidden), self.num_kv_heads, self.head_dim)",
            id="same-arguments",
        ),
        pytest.param(
            "k = split_heads(self.k_proj(hidden), self.num_kv_heads, self.qk_head_dim)",
            "v = split_heads(self.v_proj(hidden), self.num_kv_heads, self.v_head_dim)",
            id="mla-head-dims-differ",
        ),
        pytest.param(
            "k = split_heads(self.k_proj(hidden), self.num_kv_heads, self.head_dim)",
            "v = self.v_proj(hidden).view(b, s, -1, self.head_dim)",
            id="value-left-to-minus-one",
        ),
        pytest.param(
            "k = split_heads(self.k_proj(hidden), self.num_k_heads, self.head_k_dim)",
            "v = split_heads(self.v_proj(hidden), self.num_v_heads, self.head_v_dim)",
            id="linear-attention-own-counts",
        ),
        pytest.param(
            "k = split_heads(self.q_proj(hidden), self.num_heads, self.head_dim)",
            "v = self.v_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim)",
            id="the-query-through-the-helper",
        ),
    ],
)
def test_legitimate_helper_views_are_silent(k_line, v_line):
    assert findings(SPLIT + _caller(k_line, v_line)) == []


def test_inline_views_on_both_sides_are_left_to_kv202():
    source = _caller(
        "k = self.k_proj(hidden).view(b, s, self.num_kv_heads, self.head_dim)",
        "v = self.v_proj(hidden).view(b, s, self.num_heads, self.head_dim)",
    )
    assert findings(source) == []
    assert [f.code for f in findings(source, codes=("KV202", "KV209"))] == ["KV202"]


def test_a_helper_that_flattens_its_view_back_is_no_view():
    # A per-head K norm (vllm's commandr, sglang's persimmon shape): split, norm, merge back.
    helper = (
        "def norm_heads(x, n, d, norm):\n    y = x.view(-1, n, d)\n    y = norm(y)\n    return y.view(-1, n * d)\n\n\n"
    )
    caller = (
        "def forward(self, k, v):\n    k = norm_heads(k, self.num_heads, self.head_dim, self.k_norm)\n"
        "    v = v.view(-1, self.num_kv_heads, self.head_dim)\n    return attn(k, v)\n"
    )
    assert findings(helper + caller) == []
    # Returning the split view (no call after it) is one.
    split = helper.replace("    y = norm(y)\n", "").replace("    return y.view(-1, n * d)\n", "    return y.contiguous()\n")
    assert len(findings(split + caller)) == 1


def test_a_helper_on_some_other_tensor_or_with_a_rebound_parameter_is_no_view():
    caller = (
        "def forward(self, k, v):\n    k = heads(k, self.num_heads)\n"
        "    v = v.view(v.shape[0], self.num_kv_heads, -1)\n    return attn(k, v)\n"
    )
    assert len(findings("def heads(x, n):\n    return x.view(x.shape[0], n, -1)\n\n\n" + caller)) == 1
    assert findings("def heads(x, n):\n    return self.cache.view(x.shape[0], n, -1)\n\n\n" + caller) == []
    assert findings("def heads(x, n):\n    x = pad(x)\n    return x.view(x.shape[0], n, -1)\n\n\n" + caller) == []
    # Some return gives the tensor unviewed.
    assert findings("def heads(x, n):\n    if n is None:\n        return x\n    return x.view(x.shape[0], n, -1)\n\n\n" + caller) == []


def test_a_count_read_off_the_tensor_inside_the_helper_is_not_the_callers():
    # The helper's local ``num_heads`` is the tensor's own; the caller's name means nothing there.
    helper = "def heads(x, d):\n    num_heads = x.shape[-1] // d\n    return x.view(x.shape[0], num_heads, d)\n\n\n"
    caller = (
        "def forward(self, k, v, num_heads):\n    k = heads(k, self.head_dim)\n"
        "    v = v.view(v.shape[0], self.num_kv_heads, self.head_dim)\n    return attn(k, v)\n"
    )
    assert findings(helper + caller) == []


def test_a_local_of_the_helper_bound_to_a_count_is_read_through():
    helper = (
        "class A(nn.Module):\n    def _heads(self, x):\n        n = self.num_heads\n"
        "        return x.view(x.shape[0], x.shape[1], n, self.head_dim)\n\n"
    )
    caller = (
        "    def forward(self, k, v):\n        k = self._heads(k)\n"
        "        v = v.view(v.shape[0], v.shape[1], self.num_kv_heads, self.head_dim)\n        return attn(k, v)\n"
    )
    [finding] = findings(helper + caller)
    assert finding.span.row == 7 and "self.num_heads" in finding.message


def test_a_static_method_helper_takes_the_tensor_first():
    source = (
        "class A(nn.Module):\n    @staticmethod\n    def _heads(x, n, d):\n        return x.unflatten(-1, (n, d))\n\n"
        "    def forward(self, k, v):\n        k = self._heads(k, self.num_heads, self.head_dim)\n"
        "        v = self._heads(v, self.num_kv_heads, self.head_dim)\n        return attn(k, v)\n"
    )
    [finding] = findings(source)
    assert finding.span.row == 7


def test_a_view_keeping_the_leading_axes_compares_from_the_end():
    helper = "def heads(x, n, d):\n    return x.view(*x.shape[:-1], n, d)\n\n\n"
    caller = (
        "def forward(self, k, v, b, s):\n    k = heads(k, self.num_heads, self.head_dim)\n"
        "    v = v.view(b, s, self.num_kv_heads, self.head_dim)\n    return attn(k, v)\n"
    )
    [finding] = findings(helper + caller)
    assert "axis -2" in finding.message
    assert findings(helper + caller.replace("self.num_heads", "self.num_kv_heads")) == []


def test_a_helper_imported_from_a_module_of_the_tree(tmp_path):
    package = tmp_path / "serving"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "heads.py").write_text("def split_heads(x, n, d):\n    return x.view(x.shape[0], x.shape[1], n, d)\n")
    caller = (
        "from .heads import split_heads\n\n\n"
        "def forward(self, k, v):\n    k = split_heads(k, self.num_heads, self.head_dim)\n"
        "    v = split_heads(v, self.num_kv_heads, self.head_dim)\n    return attn(k, v)\n"
    )
    runner = package / "runner.py"
    runner.write_text(caller)
    [finding] = findings(caller, path=str(runner))
    assert finding.span.row == 5
    assert findings(caller.replace("self.num_heads", "self.num_kv_heads"), path=str(runner)) == []


def test_every_invalid_example_is_new_to_the_other_rules():
    # What KV209 reports no other rule did before it: the head count hides behind the call.
    others = [code for code in rules_by_code() if code != "KV209"]
    for example in rules_by_code()["KV209"].INVALID:
        assert lint_source(example.code, codes=others) == [], example.code


def _plan_admits(source: str) -> bool:
    from linter.plan.text_plan import parse_plan
    from linter.settings import Settings

    return "KV209" in parse_plan(textwrap.dedent(source), ("KV209",), Settings()).module_rules


def test_the_text_condition_finds_the_argument_after_comments_and_continuations():
    helper = "def heads(x, n):\n    return x.view(x.shape[0], n, -1)\n\n\n"
    caller = "def f(self, k, v):\n    k = heads({arg}, 8)\n    v = heads(v, 32)\n    return attn(k, v)\n"
    for arg in ("k", "(k)", "  k", "# the key\n        k", "\\\n        k", "self.k", "self.cache.k.float()"):
        source = helper + caller.format(arg=arg)
        assert _plan_admits(source), arg
    # A method of the class through ``self``.
    method = "class A:\n    def heads(self, x, n):\n        return x.view(x.shape[0], n, -1)\n\n" \
             "    def f(self, k, v):\n        k = self.heads(k, 8)\n        v = self.heads(v, 32)\n"
    assert _plan_admits(method) and len(findings(method)) == 1


def test_the_text_condition_needs_a_helper_with_a_view_and_the_twin():
    caller = "def f(self, k, v):\n    k = heads(k, 8)\n    v = heads(v, 32)\n    return attn(k, v)\n"
    assert not _plan_admits("def heads(x, n):\n    return rotate(x, n)\n\n\n" + caller)
    assert not _plan_admits(caller)  # neither defined nor imported
    assert _plan_admits("from .ops import heads\n\n\n" + caller)
    # Another receiver's method is no helper of the rule.
    assert not _plan_admits("def heads(x, n):\n    return x.view(x.shape[0], n, -1)\n\n\n" + caller.replace("heads(", "ops.heads("))


# NumPy's `reshape` takes the new shape as separate arguments and the memory order as a
# keyword. A view with any keyword is not read as a suffix view, so `order="C"` is never taken
# for an axis (read as one, it would put K's head dim where V's head count is).
_NUMPY_REFERENCE = """\
def split_heads(x, heads, head_dim):
    return x.reshape(*x.shape[:-1], heads, head_dim{order})


def reference_attention(q, k, v):
    k = split_heads(k, 8, 64)
    v = v.reshape(*v.shape[:-1], {v_heads}, 64)
    return attention_ref(q, k, v)
"""


def test_a_numpy_reshape_with_a_memory_order_keyword_is_not_read_as_axes():
    assert findings(_NUMPY_REFERENCE.format(order=', order="C"', v_heads=8)) == []
    # The same helper without the keyword is read, and a V head count unlike K's is reported.
    [finding] = findings(_NUMPY_REFERENCE.format(order="", v_heads=4))
    assert finding.span.row == 6 and "axis -2" in finding.message


# A helper taking `*lead` (here optional leading sizes to check) is not summarized: a call's
# extra positional arguments go to `*lead` at run time, though the keyword-only `heads` after
# it would take the first of them if they were bound by position.
def test_a_helper_with_star_args_before_keyword_only_heads_is_not_read():
    helper = """\
def split_kv_heads(x, *lead, heads=8, head_dim=64):
    if lead and tuple(x.shape[:-1]) != lead:
        raise ValueError(f"expected leading sizes {lead}, got {tuple(x.shape[:-1])}")
    return x.view(*x.shape[:-1], heads, head_dim)


def reference_decode_step(q, k, v):
    k = split_kv_heads(k, 1, 1)
    v = v.view(1, 1, 8, 64)
    return attn(q, k, v)
"""
    assert findings(helper) == []
    # Without `*lead` the 1 is the head count, unlike V's 8.
    positional = (
        "def split_kv_heads(x, heads=8, head_dim=64):\n    return x.view(*x.shape[:-1], heads, head_dim)\n\n\n"
        + helper[helper.index("def reference_decode_step"):].replace("split_kv_heads(k, 1, 1)", "split_kv_heads(k, 1)")
    )
    [finding] = findings(positional)
    assert finding.span.row == 6 and "one head" in finding.message


# Layers where one projection serves as key and value (K=V global layers, here with as many
# KV heads as query heads) read `value_states` off `k_proj`. That view is no K view to pair
# with the `v_proj` view of the other layers: its heads belong to the K=V layer alone.
_K_EQ_V_LAYER = """\
def split_heads(x, heads, head_dim):
    b, s, _ = x.shape
    return x.view(b, s, heads, head_dim).transpose(1, 2)


class Attention(nn.Module):
    def forward(self, hidden):
        b, s, _ = hidden.shape
        if self.attention_k_eq_v:
            key_states = self.k_proj(hidden).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
            value_states = self.k_proj(hidden).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        else:
            key_states = split_heads(self.k_proj(hidden), self.num_kv_heads, self.head_dim)
            value_states = split_heads(self.v_proj(hidden), {v_heads}, self.head_dim)
        return self.attn(self.q_proj(hidden), key_states, value_states)
"""


def test_a_value_read_off_the_key_projection_is_not_paired_as_a_key():
    assert findings(_K_EQ_V_LAYER.format(v_heads="self.num_kv_heads")) == []
    # The `v_proj` layers' own key and value on different head counts are still reported.
    [finding] = findings(_K_EQ_V_LAYER.format(v_heads="self.num_heads"))
    assert (finding.span.row, [r.span.row for r in finding.related]) == (13, [14])
    assert "self.num_kv_heads" in finding.message
