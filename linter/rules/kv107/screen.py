"""KV107's ``ast`` screen: can this unit's tree hold a finding of KV107? It may say yes for
code without findings, never no for code with one (``linter.plan.screens``)."""

from __future__ import annotations

from linter.model.symmetry import breaks
from linter.plan.screen_facts import Facts
from linter.settings import Settings


def _kv107(facts: Facts, settings: Settings) -> bool:
    """The rule's own model (``model.symmetry``), on the same ``ast`` tree: exact."""
    return bool(breaks(facts.tree, settings.extra_pairs))


SCREEN = _kv107
