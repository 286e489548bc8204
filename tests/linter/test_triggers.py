"""Each rule's trigger: read from its source as declared, and passed by every file it reports on."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from linter.plan.screens import SCREENS, may_report
from linter.plan.text_plan import parse_plan
from linter.rules import all_rules, rule_triggers
from linter.settings import Settings
from linter.plan.triggers import (
    ATTENTION,
    PAIRED,
    AnyCase,
    Scanner,
    Trigger,
    declared_trigger,
)


def test_the_trigger_read_from_source_is_the_class_attribute() -> None:
    triggers = rule_triggers()
    for rule in all_rules():
        assert rule.trigger is not None, f"{rule.code} declares no trigger: every file would reach its conditions"
        assert triggers[rule.code] == rule.trigger


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_every_invalid_example_passes_its_rule_trigger_and_screen(rule) -> None:
    scanner = Scanner({rule.code: rule.trigger})
    for example in rule.INVALID:
        assert scanner.passing(example.code) == {rule.code}, example.code
        assert may_report(ast.parse(example.code), [rule.code], Settings()), example.code


def test_a_file_needs_one_word_of_every_group() -> None:
    scanner = Scanner({"A": Trigger(("chunk", "split"), ("head",)), "B": None})
    assert scanner.passing("x.split(n)  # heads") == {"A", "B"}
    assert scanner.passing("x.split(n)") == {"B"}


def test_any_case_words_match_in_any_case() -> None:
    scanner = Scanner({"A": Trigger(AnyCase("Cache"))})
    assert scanner.passing("self.KV_CACHE = None") == {"A"}
    assert scanner.passing("self.pool = None") == set()


def test_any_case_words_are_looked_for_in_the_lowered_identifiers_the_caller_keeps() -> None:
    scanner = Scanner({"A": Trigger(AnyCase("cache"))})
    names = "self\nKV_CACHE"
    assert scanner.passing("self.KV_CACHE = None", words=lambda: names) == {"A"}
    # The caller's lowered list is the one read (here, one that lacks the word).
    assert scanner.passing("self.KV_CACHE = None", words=lambda: names, lower_words=lambda: "self\nkv") == set()


def test_attention_takes_any_spelling_and_the_configured_callables() -> None:
    trigger = Trigger(ATTENTION)
    assert Scanner({"A": trigger}).passing("class MyAtTeNtIoN: pass") == {"A"}
    assert Scanner({"A": trigger}).passing("out = ring_kernel(q, k, v)") == set()
    assert Scanner({"A": trigger}, ["mylib.ring_kernel"]).passing("out = ring_kernel(q, k, v)") == {"A"}


def test_a_trigger_that_is_not_a_literal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kv999_rule.py"
    path.write_text("class R:\n    trigger = Trigger(tuple(WORDS))\n")
    with pytest.raises(ValueError, match="kv999_rule.py:2: a trigger is written with strings"):
        declared_trigger(str(path))


def test_a_group_must_hold_words() -> None:
    with pytest.raises(TypeError, match="non-empty tuple of words"):
        Trigger("chunk")


def test_every_screen_belongs_to_a_rule() -> None:
    assert set(SCREENS) <= {r.code for r in all_rules()}


def test_paired_asks_the_caller_once_and_fails_without_a_pair() -> None:
    asked = []

    def paired(answer: bool):
        def ask() -> bool:
            asked.append(answer)
            return answer
        return ask

    scanner = Scanner({"A": Trigger(("class",), PAIRED), "B": Trigger(PAIRED), "C": Trigger(("split",))})
    assert scanner.passing("class A: k = v = 1", paired(False)) == set()
    assert asked == [False]
    assert scanner.passing("class A: k_cache = v_cache = 1", paired(True)) == {"A", "B"}
    # Without the group's words the pair is never asked for.
    asked.clear()
    assert Scanner({"A": Trigger(("class",), PAIRED)}).passing("def f(): pass", paired(True)) == set()
    assert asked == []


def test_the_pair_rules_settle_a_file_without_a_kv_pair_from_text() -> None:
    # Attention words, subscripts, calls and returns, but no K name with its V twin.
    text = "class Attention:\n    def forward(self, q, k, mask):\n        k = k[:, :8]\n        return self.attn(q, k, mask), k\n"
    pair_rules = [r for r in all_rules() if PAIRED in r.trigger.groups]
    assert {r.code for r in pair_rules} >= {"KV101", "KV102", "KV103", "KV104", "KV301"}
    assert not parse_plan(text, pair_rules, Settings()).needed
    assert parse_plan(text.replace("mask", "v"), pair_rules, Settings()).needed


def test_words_of_word_characters_are_found_among_the_identifiers_as_in_the_text() -> None:
    from linter.plan.words import identifier_set

    scanner = Scanner({
        "A": Trigger(("attn",), ("[",)), "B": Trigger(AnyCase("cache"), ("=",)),
        "C": Trigger(("Linear",), ("__init__",)), "D": Trigger(ATTENTION),
    })
    texts = (
        "self.self_attn = x[0]",  # inside a longer identifier, and a bracket from the text
        "KV_CACHE_SIZE = 2",  # any case
        "y = 3Linear + __init__",  # after leading digits
        "s = 'attn'  # a string still counts, as in the text",
        "nothing(here)",
        "élan_attn[0] = Σcache",  # non-ASCII identifiers
    )
    asked = []

    def words(text: str):
        def joined() -> str:
            asked.append(text)
            return "\n".join(identifier_set(text))
        return joined

    for text in texts:
        assert scanner.passing(text, words=words(text)) == scanner.passing(text), text
    assert len(asked) == len(texts)  # asked once per text, not once per word
