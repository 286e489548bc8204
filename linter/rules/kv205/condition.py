"""KV205 needs a class, a ``*Linear`` constructor, a view/reshape call, a query head count's
name (or a ``getattr``, whose string names what it reads) and a KV head count's or KV width's
name, as ``screen._kv205`` reads them (``names.name_role``, any case): the view's shape
names the one, the projection's output size the other.
"""

from __future__ import annotations

from linter.model.names import Role, name_role
from linter.plan.file import _File


def _kv205(f: _File) -> bool:
    # No "head" needed in the text: in code-only text ``getattr(config, "num_heads")`` has none.
    if not ("class" in f.text and "Linear" in f.text and f.has_any(("view", "reshape")) and f.has_class()):
        return False
    heads = {name_role(n) for n in f.names_containing("head", ignore_case=True)}
    if Role.Q_HEADS not in heads and not f.has_any(("getattr",)):
        return False
    # A KV head count has "head" (``num_key_value_heads``) or "group" (``num_query_groups``) in
    # its name; a KV width is ``kv_dim``, ``inner_kv_dim`` and the like.
    return (
        Role.KV_HEADS in heads
        or any(name_role(n) is Role.KV_HEADS for n in f.names_containing("group", ignore_case=True))
        or any(name_role(n) is Role.KV_WIDTH for n in f.names_containing("kv_", ignore_case=True))
    )


CONDITION = _kv205
