"""Words the conditions of more than one rule look for: KV202's view calls (read by ``_File``
and KV209's condition too) and the parts of a head-dim name (KV206, KV208).
"""

from __future__ import annotations


# Mirrors of the rules' own vocabularies (KV202's views here, KV203's splits in ``kv203``;
# KV103's are shared through ``names``); a rule that grows its vocabulary must grow these too,
# and the equivalence test fails until it does.
_VIEW_CALLS = frozenset({"view", "reshape", "unflatten", "rearrange"})


# Every key head-dim name (``names.name_role``) has one of these in it, in any case; a value
# head dim's may have ``d_v`` or ``dv`` instead.
_HEAD_DIM_PARTS = ("head", "channels", "rope", "nope", "rotary", "d_k", "dk")
