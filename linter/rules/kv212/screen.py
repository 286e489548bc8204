"""KV212's ``ast`` screen: the rule's own reading (``model.extended_kv``), on the unit's tree."""

from __future__ import annotations

from linter.model.extended_kv import query_length_shapes
from linter.settings import Settings


def _kv212(facts, settings: Settings) -> bool:
    return bool(query_length_shapes(facts.tree, settings.extra_pairs))


SCREEN = _kv212
