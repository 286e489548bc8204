"""KV106 needs a V-side scale name (``v_scale``, ``value_descale``, ``v_amax``, any case) assigned a value
that names its K twin (``v_scale = v_scale or k_scale``, ``self._v_scale = self._k_scale``), as
``screen._kv106`` reads one: the twin is a branch of the value. In raw text, where a
string or comment may hide where the statement ends, any assignment to the V-side name
counts.
"""

from __future__ import annotations

import re

from linter.model.names import is_scale_name, key_counterpart, kv_side
from linter.plan.file import _File
from linter.plan.statements import _statement_end
from linter.plan.words import _GAP, _compiled, word_first


def _kv106(f: _File) -> bool:
    if "scale" not in f.lower_names and "amax" not in f.lower_names:
        return False
    extra = f.settings.extra_pairs
    text = f.text
    for v in f.names_containing("scale", ignore_case=True) | f.names_containing("amax", ignore_case=True):
        if kv_side(v, extra) != "v" or not is_scale_name(v):
            continue
        k = key_counterpart(v, extra)
        if k is None or not f.has_any((k,)):
            continue
        # ``v_scale =`` or ``v_scale: float =``, not ``==`` (an augmented ``+=`` is no assignment
        # the rule reads).
        for target in _compiled(rf"{re.escape(v)}(?<![A-Za-z0-9_]{re.escape(v)}){_GAP}(?::[^=\n]*)?=(?!=)").finditer(text):
            if not f._starts_word(target.start()):
                continue
            if not f.reduced:
                return True
            end = _statement_end(text, target.end(), len(text))
            if end is None or _compiled(rf"{word_first((k,))}(?!\w)").search(text, target.end(), end):
                return True
    return False


CONDITION = _kv106
