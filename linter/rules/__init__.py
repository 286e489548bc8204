"""Rule registry: every ``kvNNN_*.py`` module in this package defines exactly one Rule.

The codes come from the file names, so knowing which rules exist (for configuration and the
pre-filter) imports neither the rules nor libcst, nor does reading their triggers; ``all_rules``
imports them.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from linter.rules.base import Rule
    from linter.triggers import Trigger


@cache
def rule_codes() -> tuple[str, ...]:
    """``("KV101", ...)``, from the ``kvNNN_*.py`` module names."""
    names = os.listdir(__path__[0])
    return tuple(sorted(n.split("_", 1)[0].upper() for n in names if n.startswith("kv") and n.endswith(".py")))


@cache
def rule_triggers() -> dict[str, Trigger | None]:
    """Each rule's declared ``trigger``, read from its source file without importing it."""
    from linter.triggers import declared_trigger

    found = {}
    for name in os.listdir(__path__[0]):
        if name.startswith("kv") and name.endswith(".py"):
            found[name.split("_", 1)[0].upper()] = declared_trigger(os.path.join(__path__[0], name))
    return found


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found = [_rule_in(info.name) for info in pkgutil.iter_modules(__path__) if info.name.startswith("kv")]
    return tuple(sorted(found, key=lambda r: r.code))


@cache
def rule_class(code: str) -> type[Rule]:
    """The rule ``code`` (``"KV101"``), importing its module alone: a run whose screens leave
    one rule live needs none of the others' modules (about 15 ms of a one-file run)."""
    prefix = f"{code.lower()}_"
    names = [n[:-3] for n in os.listdir(__path__[0]) if n.startswith(prefix) and n.endswith(".py")]
    if len(names) != 1:
        raise KeyError(code)
    return _rule_in(names[0])


def _rule_in(name: str) -> type[Rule]:
    from linter.rules.base import Rule

    module = importlib.import_module(f"{__name__}.{name}")
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
