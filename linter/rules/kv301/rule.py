"""KV301: a method trims, rolls, re-indexes or reshapes one side of a K/V pair its class owns."""

from __future__ import annotations

import libcst as cst

from linter.model.classes import ClassModel, class_model
from linter.model.functions import FunctionModel, function_model
from linter.model.walk import children
from linter.model.names import is_kv_tensor_name, kv_side, value_counterpart
from linter.model.pairs import dotted_name, source_of
from linter.rules.base import Example, Rule
from linter.plan.triggers import PAIRED, Trigger


def _mentions(node: cst.CSTNode, dotted: str) -> bool:
    if isinstance(node, (cst.Attribute, cst.Name)) and dotted_name(node) == dotted:
        return True
    return any(_mentions(child, dotted) for child in children(node))


def owned_pairs(owner: ClassModel, extra_pairs=()) -> list[tuple[str, str]]:
    """(K attribute, V attribute) pairs of tensors set together in one method (``__init__``,
    a lazy initialiser, a reset)."""
    pairs = []
    for set_here in owner.set_in.values():
        for attr in set_here:
            if kv_side(attr, extra_pairs) != "k" or not is_kv_tensor_name(attr, extra_pairs):
                continue
            twin = value_counterpart(attr, extra_pairs)
            if twin in set_here and (attr, twin) not in pairs:
                pairs.append((attr, twin))
    return pairs


class ClassCacheOneSide(Rule):
    code = "KV301"
    # A class whose methods set a ``self.`` K/V pair.
    trigger = Trigger(("class",), ("self",), PAIRED)
    name = "class-cache-one-side"
    summary = "A method updates one side of a K/V pair its class owns and never touches the other"
    what = (
        "A K/V pair that a class sets up together (`self.k_cache`/`self.v_cache`, "
        "`self.past_key`/`self.past_value`, `self.cache_k`/`self.cache_v` assigned in "
        "one method, such as `__init__`) is attention state in every method of the class. This rule finds a method "
        "that rebuilds one side from itself (trims `self.k_cache = self.k_cache[:, -n:]`, rolls, "
        "re-indexes, reshapes, concatenates) or shifts it in place (`self.k_cache[:, :-1] = "
        "self.k_cache[:, 1:]`) and never mentions the other side."
    )
    why = (
        "After such a method the key and value caches describe different tokens (or have "
        "different shapes): the next attention call either fails or pairs keys with the wrong "
        "values. Caches only ever change together; a K-only cache (an indexer's) has no value "
        "twin and is not reported."
    )
    bad = """\
class KVCache(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.k_cache = torch.zeros(shape)
        self.v_cache = torch.zeros(shape)

    def evict(self, keep):
        self.k_cache = self.k_cache[:, :, -keep:]
"""
    good = bad + "        self.v_cache = self.v_cache[:, :, -keep:]\n"
    fix_text = "Apply the same operation to the other side in the same method."

    VALID = (
        Example(good),
        # A K-only cache (a sparse-attention indexer's): no value twin.
        Example("""\
class IndexerCache:
    def __init__(self, shape):
        self.k_cache = torch.zeros(shape)

    def evict(self, keep):
        self.k_cache = self.k_cache[:, -keep:]
"""),
        # Both sides handed to a helper that updates them.
        Example("""\
class KVCache:
    def __init__(self, shape):
        self.k_cache = torch.zeros(shape)
        self.v_cache = torch.zeros(shape)

    def evict(self, keep):
        self.k_cache = self.k_cache[:, -keep:]
        self._evict_value(self.v_cache, keep)
"""),
        # Writing new keys into the cache is not a one-sided reshape.
        Example("""\
class KVCache:
    def __init__(self, shape):
        self.k_cache = torch.zeros(shape)
        self.v_cache = torch.zeros(shape)

    def update_keys(self, pos, k):
        self.k_cache[:, pos] = k
"""),
        # Scales set up together are bookkeeping, not a K/V pair: per-channel key scales keep a
        # running maximum while per-token value scales are computed afresh.
        Example("""\
class KIVIQuantState:
    def __init__(self, num_heads, head_dim):
        self.k_scale = torch.ones(num_heads, 1, head_dim)
        self.v_scale = torch.ones(num_heads, 1, 1)

    def observe_keys(self, key):
        self.k_scale = torch.maximum(self.k_scale, key.abs().amax(dim=-2, keepdim=True) / 127)
"""),
    )
    INVALID = (
        Example(bad, line=8),
        # A rolling window shifts the keys only.
        Example("""\
class RollingCache:
    def __init__(self, b, w, h, d):
        self.cache_k = torch.zeros(b, w, h, d)
        self.cache_v = torch.zeros(b, w, h, d)

    def roll(self, n):
        self.cache_k[:, :-n] = self.cache_k[:, n:].clone()
""", line=7),
        # Appending only the new values.
        Example("""\
class Cache:
    def __init__(self):
        self.past_key = torch.empty(0)
        self.past_value = torch.empty(0)

    def append(self, k, v):
        self.past_value = torch.cat([self.past_value, v], dim=-2)
        return self.past_value
""", line=7),
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        owner = class_model(node)
        pairs = owned_pairs(owner, self.extra_pairs)
        if not pairs:
            return
        for method in owner.methods.values():
            # A method that sets both sides mentions the twin, so it is never reported.
            model = function_model(method)
            for k_attr, v_attr in pairs:
                self._check(model, k_attr, v_attr)
                self._check(model, v_attr, k_attr)

    def _check(self, model: FunctionModel, attr: str, twin: str) -> None:
        if model.mentions(twin):
            return  # the other side is handled here, however differently
        dotted = f"self.{attr}"
        for assignment in model.assignments:
            if assignment.name == dotted and assignment.position is None and _mentions(assignment.value, dotted):
                self._report(assignment.target, attr, twin, source_of(assignment.value))
                return
        for store in model.stores:
            if store.base == dotted and _mentions(store.value, dotted):
                self._report(store.node, attr, twin, source_of(store.value))
                return

    def _report(self, node: cst.CSTNode, attr: str, twin: str, how: str) -> None:
        side = "key" if kv_side(attr, self.extra_pairs) == "k" else "value"
        self.report(
            node,
            f"`self.{attr}` is rebuilt from itself (`{how}`) but its {'value' if side == 'key' else 'key'} "
            f"twin `self.{twin}`, set up with it, is never touched in this method",
            suggestion=f"apply the same operation to `self.{twin}`",
        )


