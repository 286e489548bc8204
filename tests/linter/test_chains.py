"""``chains``: does a name start, or get assigned, a method chain reaching a view call?"""

from __future__ import annotations

import ast

import pytest

from linter.rules.kv101.screen import _cuts
from linter.plan.screen_facts import _only_slices
from linter.model.names import SEE_THROUGH
from linter.plan.chains import assigned_reaches, cut_reading, root_reaches
from linter.model.tensor_roots import SAME_TENSOR_METHODS

VIEWS = frozenset({"view", "reshape", "unflatten", "rearrange"})


def _root(text: str, name: str = "k") -> bool:
    return root_reaches(text, name, VIEWS, SAME_TENSOR_METHODS)


def _assigned(text: str, name: str = "k") -> bool:
    return assigned_reaches(text, name, VIEWS)


def test_a_direct_method_call_is_reached() -> None:
    assert _root("y = k.view(b, s, h, d)")


def test_a_chain_through_same_tensor_methods_and_their_calls_is_reached() -> None:
    assert _root("y = k.transpose(1, 2).contiguous().view(b, s, h, d)")


def test_a_chain_through_a_subscript_is_reached() -> None:
    assert _root("y = k[:, :t].float()[0].reshape(b, -1)")


def test_a_parenthesised_root_is_reached() -> None:
    assert _root("y = (k).view(b, s, h, d)")


def test_whitespace_and_newlines_inside_brackets_are_stepped_over() -> None:
    assert _root("y = (k\n    .transpose(1,\n 2)\n    .view(b, s, h, d))")


def test_a_backslash_continuation_is_stepped_over() -> None:
    assert _root("y = k.transpose(1, 2) \\\n    .view(b, s, h, d)")


def test_an_attribute_of_the_root_object_is_a_chain_from_its_name() -> None:
    assert _root("y = self.k.view(b, s, h, d)")


def test_a_tensor_attribute_that_is_not_a_same_tensor_method_stops_the_chain() -> None:
    assert not _root("y = k.shape.view(b, s)")


def test_an_unknown_method_stops_the_chain() -> None:
    assert not _root("y = k.gather(1, i).view(b, s)")


def test_a_longer_name_with_the_same_start_is_not_the_root() -> None:
    assert not _root("y = kk.view(b, s) + k_cache.view(b, s)")


def test_a_name_used_elsewhere_than_as_a_root_is_not_a_chain() -> None:
    assert not _root("y = x.view(k, s)")


def test_an_unclosed_call_ends_the_search_without_error() -> None:
    assert not _root("y = k.transpose(1, 2")


@pytest.mark.parametrize(
    "text",
    ["k = x.view(b, s, h, d)", "k = torch.reshape(x, (b, s, h, d))", "k = rearrange(x, 'b s (h d) -> b s h d', h=h)"],
    ids=["method", "torch-function", "einops"],
)
def test_an_assigned_view_is_reached(text: str) -> None:
    assert _assigned(text)


def test_an_assignment_to_an_attribute_with_the_name_counts() -> None:
    assert _assigned("self.k = self.k_proj(x).view(b, s, h, d)")


def test_an_assigned_chain_passes_any_method() -> None:
    assert _assigned("k = self.k_proj(x).gather(1, i).view(b, s, h, d)")


def test_a_parenthesised_value_is_stepped_over() -> None:
    assert _assigned("k = (x + y).view(b, s, h, d)")


def test_a_comparison_is_not_an_assignment() -> None:
    assert not _assigned("ok = k == x.view(b, s)")


def test_an_assigned_value_without_a_view_is_not_reached() -> None:
    assert not _assigned("k = x.transpose(1, 2)")


def test_a_view_inside_an_argument_is_not_the_outer_chain() -> None:
    assert not _assigned("k = torch.cat([x.view(b, s), y])")


def test_a_view_of_another_name_on_its_own_line_is_not_an_assignment_of_the_name() -> None:
    assert not _assigned("k = x\ny = z.view(b, s)")


# Raw text (strings and comments still there): anything that could hide a bracket is a "maybe".

def test_on_raw_text_a_string_inside_a_group_makes_the_answer_maybe() -> None:
    text = 'y = k.transpose(")").view(b, s, h, d)'
    assert root_reaches(text, "k", VIEWS, SAME_TENSOR_METHODS, raw=True)


def test_on_raw_text_a_comment_inside_the_chain_makes_the_answer_maybe() -> None:
    text = "y = (k  # note\n     .view(b, s, h, d))"
    assert root_reaches(text, "k", VIEWS, SAME_TENSOR_METHODS, raw=True)


def test_on_raw_text_a_chain_without_strings_or_comments_is_still_read_exactly() -> None:
    assert not root_reaches("y = k.transpose(1, 2).sum()", "k", VIEWS, SAME_TENSOR_METHODS, raw=True)
    assert not assigned_reaches("k = x.transpose(1, 2).sum()", "k", VIEWS, raw=True)


def test_on_raw_text_an_assigned_value_in_brackets_with_a_string_is_maybe() -> None:
    assert assigned_reaches("k = (x, ']')[0]", "k", VIEWS, raw=True)


# ``cut_reading``: what a chain reaches, as KV101's and KV102's screens read a cut.

SUBSCRIPTS = [
    "k[:n]", "k[0]", "k[:, None]", "k[..., :64]", "k[-1]", "k[True]", "k[idx]", "k[1:2, ...]",
    "k[None]", "k[:]", "k[::]", "k[0x1F]", "k[1.0]", "k[:n,]", "k[a, b]", "k[0, :, 1]", "k[1_000]",
    "k[::2]", "k[:, :, 0]", "k[..., None, :t]", "k[(1)]", "k[lambda: 0]", "k[f(x)[0]:]", "k[0b1]",
]


@pytest.mark.parametrize("text", SUBSCRIPTS)
def test_a_subscript_is_read_as_the_screens_read_its_tree(text: str) -> None:
    node = ast.parse(text).body[0].value
    expected = ({"[cut"} if _cuts(node) else set()) | ({"[slices"} if _only_slices(node) else set())
    read = cut_reading(text, "k", SEE_THROUGH, raw=False) & {"[cut", "[slices"}
    assert read >= expected  # never less: the text may only let more through
    if text not in ("k[(1)]", "k[lambda: 0]"):  # read as more than they are, harmlessly
        assert read == expected


def test_axis_moving_steps_are_seen_through_to_a_subscript_or_a_call() -> None:
    assert {"[cut", "transpose"} <= cut_reading("y = k.transpose(1, 2)[:, :t]", "k", SEE_THROUGH, raw=False)
    assert "narrow" in cut_reading("y = k.contiguous().narrow(0, 0, t)", "k", SEE_THROUGH, raw=False)
    # A step alone cuts nothing; after one, the chain may end an argument (``narrow(k.float(), ...)``).
    assert cut_reading("y = k.float()\n", "k", SEE_THROUGH, raw=False) == {"float"}
    assert "," in cut_reading("narrow(k.float(), 0, 0, t)", "k", SEE_THROUGH, raw=False)
    # Another method or an attribute ends the chain: ``k.shape[0]`` is no cut of ``k``.
    assert "[cut" not in cut_reading("n = k.shape[0]", "k", SEE_THROUGH, raw=False)
    assert "[cut" not in cut_reading("y = k.new_zeros(3)[:t]", "k", SEE_THROUGH, raw=False)
    # A subscript ends it too: ``k[0][:t]`` cuts the first row, not ``k``.
    assert "[cut" not in cut_reading("y = k[0][:t]", "k", SEE_THROUGH, raw=False)


def test_on_raw_text_a_string_or_comment_in_a_chain_makes_the_reading_maybe() -> None:
    assert "?" in cut_reading("y = k.to('cpu')[:t]", "k", SEE_THROUGH, raw=True)
    assert "?" in cut_reading("y = (k  # trimmed\n     [:t])", "k", SEE_THROUGH, raw=True)
    assert "?" in cut_reading("y = k[:t", "k", SEE_THROUGH, raw=False)  # unclosed
