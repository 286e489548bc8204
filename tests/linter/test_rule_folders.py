"""Each rule lives in one folder, ``linter/rules/kvNNN/``, and every registry is read from the
folders: a rule's parts (rule, screen, condition, examples) are all there, and no registry
lists a rule no folder declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from linter import rules
from linter.plan import module_screens, screens, text_plan
from linter.rules.base import Rule

FOLDER = Path(rules.__file__).parent
CODES = rules.rule_codes()


def _folder_codes() -> set[str]:
    return {p.name.upper() for p in FOLDER.iterdir() if p.is_dir() and p.name.startswith("kv")}


def test_every_kv_folder_is_a_rule_and_no_rule_module_lies_outside_one() -> None:
    assert set(CODES) == _folder_codes()
    assert len(CODES) >= 16
    loose = sorted(p.name for p in FOLDER.glob("kv*.py"))
    assert loose == [], f"rule modules outside a folder: {loose}"


@pytest.mark.parametrize("code", CODES)
def test_a_rule_folder_holds_its_rule_screen_condition_and_examples(code: str) -> None:
    folder = FOLDER / code.lower()
    assert sorted(p.name for p in folder.glob("*.py")) == ["__init__.py", "condition.py", "rule.py", "screen.py"]
    rule = rules.rule_class(code)
    assert issubclass(rule, Rule) and rule.code == code
    assert rule.__module__ == f"linter.rules.{code.lower()}.rule"
    # Examples: reported shapes with the line of each finding, and look-alikes it stays silent on.
    assert rule.INVALID and all(example.line for example in rule.INVALID)
    assert rule.VALID
    unit = rules.units()[code]
    assert unit in rules.UNITS
    condition = rules.conditions()[code]
    assert condition.__module__ == f"linter.rules.{code.lower()}.condition"
    if unit == "module":
        assert rules.module_screens()[code].__module__ == f"linter.rules.{code.lower()}.screen"
        assert rules.text_screens()[code].__module__ == f"linter.rules.{code.lower()}.screen"
        assert code not in rules.screens()
    else:
        assert rules.screens()[code].__module__ == f"linter.rules.{code.lower()}.screen"
        assert code not in rules.module_screens()


def test_no_registry_lists_a_rule_no_folder_declares() -> None:
    codes = set(CODES)
    module_rules = {code for code, unit in rules.units().items() if unit == "module"}
    assert set(rules.conditions()) == codes
    assert set(rules.rule_triggers()) == codes
    assert {rule.code for rule in rules.all_rules()} == codes
    assert set(screens.SCREENS) == codes - module_rules
    assert set(module_screens.SCREENS) == set(module_screens.TEXT_SCREENS) == module_rules
    assert set(screens.METHOD_SCOPED) == text_plan.BY_METHOD == {c for c, u in rules.units().items() if u == "method"}
    # The text plan knows every rule's condition, and a unit for each but the module rules.
    assert {text_plan.own_unit(code) is not None for code in module_rules} == {False}
    assert all(text_plan.own_unit(code) in ("definition", "class") for code in codes - module_rules)


def test_a_folder_missing_a_part_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # A rule half-added: its folder holds the rule but declares no condition.
    module = rules.part("KV101", "condition")
    monkeypatch.delattr(module, "CONDITION")
    with pytest.raises(RuntimeError, match=r"linter\.rules\.kv101\.condition must declare CONDITION"):
        rules._declared("KV101", "condition", "CONDITION")
