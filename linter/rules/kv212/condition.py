"""KV212 needs, among the code's identifiers, a concatenation or a cache update (``cat``,
``concat``, ``concatenate``, ``update``), a query length (``q_len``, ``tgt_len``) and a KV
length (``kv_seq_len``, ``k_len``): ``model.extended_kv`` reads the rest on the tree."""

from __future__ import annotations

from linter.model.extended_kv import EXTENDERS, query_length
from linter.model.size_roles import kv_length_name
from linter.plan.file import _File


def _kv212(f: _File) -> bool:
    names = f.identifiers
    if not names & EXTENDERS:
        return False
    lengths = [n for n in names if "len" in n.lower()]
    return any(query_length(n) for n in lengths) and any(kv_length_name(n) for n in lengths)


CONDITION = _kv212
