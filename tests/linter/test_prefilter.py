"""The pre-filter: which texts it proves finding-free, and which it must let through."""

from __future__ import annotations

from linter.prefilter import may_have_findings, units
from linter.rules import all_rules, rules_by_code
from linter.settings import Settings
from tests.linter.fakes import FlagMe

RULES = all_rules()


def test_a_file_without_any_kv_pair_or_head_count_is_rejected() -> None:
    assert not may_have_findings("def add(a, b):\n    return a[0] + b[1]\n", RULES, Settings())


def test_every_invalid_example_passes_its_own_rule_condition() -> None:
    for rule in RULES:
        for example in rule.INVALID:
            assert may_have_findings(example.code, [rule], Settings()), (rule.code, example.code)


def test_a_comment_between_the_key_and_its_subscript_does_not_hide_the_slice() -> None:
    text = ("def attention(q, k, v, t):\n    k = (k  # trim\n         [:t])\n"
            "    return flash_attn_func(q, k, v)\n")
    assert may_have_findings(text, [rules_by_code()["KV101"]], Settings())


def test_kv_names_without_attention_context_are_rejected_for_kv101() -> None:
    text = "def take(k, v, n):\n    k = k[:n]\n    return combine(k, v)\n"
    assert not may_have_findings(text, [rules_by_code()["KV101"]], Settings())


def test_a_rule_the_prefilter_does_not_know_always_runs() -> None:
    assert may_have_findings("x = 1\n", [FlagMe], Settings())


def test_a_column_0_def_inside_a_docstring_does_not_split_the_function() -> None:
    text = 'def attention(k, v):\n    """Example:\ndef other(): pass\n"""\n    return k[:1], v\n'
    assert text in units(text)


def test_module_level_code_after_a_function_joins_the_module_unit() -> None:
    text = "import torch\n\ndef f():\n    pass\nk = k_cache[:1]\n"
    assert any("import torch" in unit and "k = k_cache[:1]" in unit for unit in units(text))
