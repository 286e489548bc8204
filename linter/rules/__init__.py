"""Rule registry: every ``kvNNN/`` folder in this package is one rule, and holds all of it.

- ``rule.py``: the libcst rule (one ``Rule`` subclass), its docs, its VALID and INVALID examples
  and its ``trigger``.
- ``screen.py``: its stdlib-``ast`` screen, ``SCREEN`` for a rule whose findings lie in one
  top-level definition, or ``MODULE_SCREEN`` and ``TEXT_SCREEN`` for one whose facts lie in
  different definitions or files (``UNIT = "module"``).
- ``condition.py``: its text condition, ``CONDITION`` (``linter.plan.text_plan``).
- ``__init__.py``: ``UNIT``, where all the facts of one finding lie (``UNITS``).

Every registry below is read from the folders, so a rule cannot be registered in one place and
missing from another: a folder without one of its parts fails on first use, and
``tests/linter/test_rule_folders.py`` lists each folder's parts.

The codes come from the folder names, so knowing which rules exist (for configuration and the
pre-filter) imports neither the rules nor libcst, nor does reading their triggers; ``all_rules``
imports them.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from linter.rules.base import Rule
    from linter.plan.triggers import Trigger

# Where the facts of one finding lie, as a folder's ``UNIT`` says: in one top-level function
# or class, and within a class in one method, the enclosing classes' names aside
# (``"method"``: a class is read member by member); in one top-level ``"definition"``; in one
# ``"class"`` (the module and its functions being one more); or in different top-level
# definitions or files (``"module"``: its screens are module screens).
UNITS = ("method", "definition", "class", "module")

_FOLDER = re.compile(r"kv\d{3}")


@cache
def _folders() -> tuple[str, ...]:
    here = __path__[0]
    return tuple(sorted(
        name for name in os.listdir(here) if _FOLDER.fullmatch(name) and os.path.isdir(os.path.join(here, name))
    ))


@cache
def rule_codes() -> tuple[str, ...]:
    """``("KV101", ...)``, from the ``kvNNN/`` folder names."""
    return tuple(name.upper() for name in _folders())


@cache
def rule_triggers() -> dict[str, Trigger | None]:
    """Each rule's declared ``trigger``, read from its ``rule.py`` without importing it."""
    from linter.plan.triggers import declared_trigger

    return {name.upper(): declared_trigger(os.path.join(__path__[0], name, "rule.py")) for name in _folders()}


@cache
def all_rules() -> tuple[type[Rule], ...]:
    return tuple(rule_class(code) for code in rule_codes())


@cache
def rule_class(code: str) -> type[Rule]:
    """The rule ``code`` (``"KV101"``), importing its module alone: a run whose screens leave
    one rule live needs none of the others' modules (about 15 ms of a one-file run)."""
    if code.lower() not in _folders():
        raise KeyError(code)
    from linter.rules.base import Rule

    module = part(code, "rule")
    rules = [
        obj for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule
        and obj.__module__ == module.__name__
    ]
    if len(rules) != 1:
        raise RuntimeError(f"{module.__name__} must define exactly one Rule, found {len(rules)}")
    return rules[0]


def rules_by_code() -> dict[str, type[Rule]]:
    return {rule.code: rule for rule in all_rules()}


def part(code: str, name: str) -> ModuleType:
    """The module ``name`` (``"rule"``, ``"screen"``, ``"condition"``) of rule ``code``'s folder."""
    return importlib.import_module(f"{__name__}.{code.lower()}.{name}")


def _declared(code: str, name: str, attribute: str) -> Any:
    module = part(code, name)
    if not hasattr(module, attribute):
        raise RuntimeError(f"{module.__name__} must declare {attribute}")
    return getattr(module, attribute)


@cache
def preview_codes() -> frozenset[str]:
    """The rules whose folder declares ``PREVIEW = True``: run only with ``--preview`` (or
    ``preview = true``) or when selected by their exact code, until their precision on
    held-out code and their cost meet the other rules'."""
    return frozenset(
        code for code in rule_codes()
        if getattr(importlib.import_module(f"{__name__}.{code.lower()}"), "PREVIEW", False)
    )


@cache
def units() -> dict[str, str]:
    """Each rule's ``UNIT``."""
    found = {}
    for code in rule_codes():
        unit = getattr(importlib.import_module(f"{__name__}.{code.lower()}"), "UNIT", None)
        if unit not in UNITS:
            raise RuntimeError(f"{__name__}.{code.lower()} must declare UNIT, one of {', '.join(UNITS)}")
        found[code] = unit
    return found


@cache
def conditions() -> dict[str, Callable]:
    """Each rule's text condition (``condition.CONDITION``)."""
    return {code: _declared(code, "condition", "CONDITION") for code in rule_codes()}


@cache
def screens() -> dict[str, Callable]:
    """The ``ast`` screen of each rule whose findings lie in one top-level definition
    (``screen.SCREEN``)."""
    return {code: _declared(code, "screen", "SCREEN") for code, unit in units().items() if unit != "module"}


@cache
def module_screens() -> dict[str, Callable]:
    """The module screen of each rule whose facts lie in different definitions
    (``screen.MODULE_SCREEN``)."""
    return {code: _declared(code, "screen", "MODULE_SCREEN") for code, unit in units().items() if unit == "module"}


@cache
def text_screens() -> dict[str, Callable]:
    """The text screen of each module rule (``screen.TEXT_SCREEN``)."""
    return {code: _declared(code, "screen", "TEXT_SCREEN") for code, unit in units().items() if unit == "module"}
