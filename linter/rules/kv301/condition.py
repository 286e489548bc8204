"""KV301 needs a class and a ``self.`` attribute pair, one of them named twice in one
statement with an ``=`` in it: rebuilt from itself (``self.k_cache = torch.cat([self.k_cache,
k])``), as ``screen._kv301`` reads it. In raw text, where a string or comment may hide
where a statement ends, twice anywhere after one another counts.
"""

from __future__ import annotations

import re

from linter.model.names import is_kv_tensor_name, value_counterpart
from linter.plan.file import _File
from linter.plan.statements import _statement_end
from linter.plan.words import _GAP, _compiled


def _kv301(f: _File) -> bool:
    if "class" not in f.text or "self" not in f.text or not f.has_class():
        return False
    extra = f.settings.extra_pairs
    attributes = f.self_attributes
    return any(
        is_kv_tensor_name(k, extra) and (v := value_counterpart(k, extra) or k) in attributes
        and (_rebuilt(f, k) or _rebuilt(f, v))
        for k in f.k_names if k in attributes
    )


def _rebuilt(f: _File, attr: str) -> bool:
    """Is ``self.attr`` named twice in one statement that has an ``=`` (no comparison) in it?"""
    text = f.text
    sites = [m.start() for m in _compiled(rf"self(?<![A-Za-z0-9_]self){_GAP}\.{_GAP}{re.escape(attr)}\b").finditer(text)]
    for here, there in zip(sites, sites[1:]):
        if not f.reduced:
            return True
        line = text.rfind("\n", 0, here) + 1
        end = _statement_end(text, line, len(text))
        if end is None or (there < end and _ASSIGNMENT.search(text, line, end)):
            return True
    return False


_ASSIGNMENT = re.compile(r"(?<![=!<>])=(?!=)")


CONDITION = _kv301
