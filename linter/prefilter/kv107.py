"""KV107 needs a K-side name and its V twin in the unit's code: every broken twin pairs a K
statement with a V statement that renames its K names (and a kept K name counts only where
its V counterpart exists), so both sides of some pair are always there. The ``ast`` screen
(``ast_screens._kv107``) then runs the rule's own model.
"""

from __future__ import annotations

from linter.prefilter.file import _File


def _kv107(f: _File) -> bool:
    return bool(f.k_names)
