"""KV106 value-scale-from-key: a value scale that falls back to the key's scale."""

from __future__ import annotations

import libcst as cst

from linter.model.walk import children
from linter.model.names import is_scale_name, key_counterpart, kv_side
from linter.model.pairs import dotted_name, source_of
from linter.rules.base import Example, Rule
from linter.plan.triggers import PAIRED, AnyCase, Trigger


def _mentions(node: cst.CSTNode, name: str) -> bool:
    if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) == name:
        return True
    return any(_mentions(child, name) for child in children(node))


class ValueScaleFromKey(Rule):
    code = "KV106"
    # A K-side scale name (``k_scale``, ``K_SCALE``, ``k_amax``: ``names.is_scale_name``) and
    # its V twin.
    trigger = Trigger(AnyCase("scale", "amax"), PAIRED)
    name = "value-scale-from-key"
    summary = "Value scale that falls back to the key's scale while a value scale of its own exists"
    what = (
        "Finds a value quantisation scale (`v_scale`, `value_scale`, `self._v_scale`, "
        "`v_descale`) that takes the key's twin (`k_scale`) as its fallback: "
        "`v_scale = v_scale if v_scale is not None else k_scale`, `v_scale = v_scale or k_scale`, "
        "or `v_scale = k_scale` inside `if v_scale is None:`. The value scale exists (it is read "
        "in the fallback itself), and the key's is taken in its place. A plain `v_scale = "
        "k_scale` with no test of the value scale is not reported: a shared scale set once is a "
        "design, not a fallback."
    )
    why = (
        "K and V are quantised separately: their ranges differ, and FP8/INT8 KV caches keep a "
        "scale per side. A missing value scale silently replaced by the key's dequantises every "
        "value with the wrong factor; outputs drift without any error. A missing scale should "
        "fall back to the neutral 1.0 (or fail), never to the other side's."
    )
    bad = """\
def write_kv(cache, k, v, k_scale, v_scale=None):
    if v_scale is None:
        v_scale = k_scale
    cache.store(k / k_scale, v / v_scale)
"""
    good = """\
def write_kv(cache, k, v, k_scale, v_scale=None):
    if v_scale is None:
        v_scale = torch.ones_like(k_scale)
    cache.store(k / k_scale, v / v_scale)
"""
    fix_text = (
        "No automatic fix: fall back to a neutral scale (1.0) or require the value scale; "
        "use the key's only where the checkpoint documents one shared scale."
    )

    VALID = (
        Example(good),
        # One shared scale, set on purpose: no value scale is tested or replaced.
        Example("def load_scales(layer, kv_scale):\n    layer.k_scale = kv_scale\n    layer.v_scale = kv_scale\n"),
        # Each side falls back to its own default.
        Example("def scales(k_scale=None, v_scale=None):\n    k_scale = k_scale if k_scale is not None else 1.0\n"
                "    v_scale = v_scale if v_scale is not None else 1.0\n    return k_scale, v_scale\n"),
        # MXFP8: the value scales live on another axis; deriving their shape from the key's is no fallback.
        Example("def alloc(k_scales, v_scales):\n    if v_scales is None:\n"
                "        v_scales = k_scales.new_empty(k_scales.shape[::-1])\n    return v_scales\n"),
        # A K-only indexer cache: its scale has no value twin to replace.
        Example("def indexer_scale(k_scale=None):\n    if k_scale is None:\n        k_scale = 1.0\n    return k_scale\n"),
        # The keys serve as the values when none are given: a tensor fallback, not a scale's.
        Example("""\
class CrossAttention(nn.Module):
    def forward(self, query, key, value=None):
        # Self-attention over memory: the keys are the values when none are given.
        if value is None:
            value = key
        return F.scaled_dot_product_attention(query, key, value)
"""),
        # Scales stored by subscript: no named value scale falls back.
        Example("""\
def load_kv_scales(state_dict, prefix):
    scales = {}
    scales["k"] = state_dict[prefix + "k_scale"]
    scales["v"] = state_dict.get(prefix + "v_scale", 1.0)
    return scales
"""),
    )
    INVALID = (
        Example(bad, line=3),
        Example("def forward(self, q, k, v, k_scale=None, v_scale=None):\n"
                "    v_scale = v_scale if v_scale is not None else k_scale\n"
                "    return self.impl(q, k, v, k_scale, v_scale)\n", line=2),
        Example("class Attention:\n    def load(self, weights):\n        self._v_scale = self._v_scale or self._k_scale\n", line=3),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._tests: list[cst.BaseExpression] = []
        self._depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def visit_If(self, node: cst.If) -> None:
        self._tests.append(node.test)

    def leave_If(self, original_node: cst.If) -> None:
        self._tests.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._depth == 0 or len(node.targets) != 1:
            return
        target = dotted_name(node.targets[0].target)
        if target is None or not is_scale_name(target) or kv_side(target.rsplit(".", 1)[-1], self.extra_pairs) != "v":
            return
        key = _key_twin(target, self.extra_pairs)
        if key is None:
            return
        value = node.value
        if isinstance(value, (cst.IfExp, cst.BooleanOperation)):
            branches = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value.left, value.right)
            fallback = any(dotted_name(b) == key for b in branches) and any(dotted_name(b) == target for b in branches)
        else:
            # ``if v_scale is None: v_scale = k_scale``: the enclosing test reads the value scale.
            fallback = dotted_name(value) == key and any(_mentions(test, target) for test in self._tests)
        if not fallback:
            return
        self.report(
            node.value,
            f"value scale `{target}` falls back to the key's `{key}` (`{source_of(node.value)}`): "
            "K and V are quantised with scales of their own",
            suggestion=f"fall back to a neutral scale (1.0) for `{target}`, or require it; never to `{key}`",
        )


def _key_twin(target: str, extra_pairs) -> str | None:
    head, _, tail = target.rpartition(".")
    twin = key_counterpart(tail, extra_pairs)
    if twin is None:
        return None
    return f"{head}.{twin}" if head else twin
