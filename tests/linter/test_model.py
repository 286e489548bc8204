"""The class and function models the cross-statement rules (KV104, KV204-KV206, KV301) share."""

from __future__ import annotations

import libcst as cst

from linter.model.classes import class_model
from linter.model.functions import function_model
from linter.model.twins import key_head_dim_twin


def _first(code: str, kind: type[cst.CSTNode]) -> cst.CSTNode:
    module = cst.parse_module(code)
    found = []

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind) and not found:
                found.append(node)
            return True

    module.visit(Finder())
    return found[0]


def test_class_model_reads_self_state_projections_and_tuple_assignments():
    node = _first(
        "class A(Base, mixins.M):\n"
        "    scale = 1.0\n"
        "    def __init__(self, h, kv):\n"
        "        self.heads, self.v_head_dim = h, kv\n"
        "        self.k_proj = nn.Linear(h, kv * 2)\n"
        "        self.v_proj = None if shared else ColumnParallelLinear(input_size=h, output_size=kv)\n"
        "    def forward(self, x):\n"
        "        self.cache = x\n",
        cst.ClassDef,
    )
    model = class_model(node)
    assert model.bases == ("Base", "mixins.M")
    assert {"scale", "heads", "v_head_dim", "k_proj", "v_proj", "cache", "forward"} <= (
        set(model.attrs) | set(model.methods)
    )
    assert model.defines("v_head_dim") and not model.defines("k_head_dim")
    assert cst.Module([]).code_for_node(model.projections["k_proj"].size) == "kv * 2"
    assert cst.Module([]).code_for_node(model.projections["v_proj"].size) == "kv"
    assert class_model(node) is model  # cached: every rule of a traversal shares it


def test_function_model_orders_bindings_reads_and_unpacking():
    node = _first(
        "def f(q, key, value=None, *, enc=None):\n"
        "    b, s, h = q.size()\n"
        "    k = self.k_proj(key)\n"
        "    k = repeat(k)\n"
        "    key[0] = value\n"
        "    return k.view(b, s, -1)\n",
        cst.FunctionDef,
    )
    model = function_model(node)
    assert model.params == ("q", "key", "value", "enc")
    assert model.optional == frozenset({"value", "enc"})
    assert [(a.name, a.position) for a in model.assignments] == [
        ("b", 0), ("s", 1), ("h", 2), ("k", None), ("k", None),
    ]
    view_order = next(
        o for o, c in model.calls_in_order()
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "view"
    )
    last_k = model.binding_before("k", view_order)
    assert cst.Module([]).code_for_node(last_k.value) == "repeat(k)"
    assert model.binding_before("b", view_order) is None  # unpacked: no single value
    assert [s.base for s in model.stores] == ["key"]
    assert model.read_before("value", model.stores[0].order + 1)
    assert not model.mentions("enc")


def test_nested_definitions_are_their_own_model():
    node = _first("def f(k):\n    def g():\n        v = k\n    return g\n", cst.FunctionDef)
    model = function_model(node)
    assert model.assignments == [] and not model.mentions("v")


def test_key_head_dim_twins():
    assert key_head_dim_twin("qk_head_dim") == "v_head_dim"
    assert key_head_dim_twin("k_head_dim") == "v_head_dim"
    assert key_head_dim_twin("head_k_dim") == "head_v_dim"
    assert key_head_dim_twin("d_k") == "d_v"
    # Not a key head dim: a value one, a head count, a rope part.
    assert key_head_dim_twin("v_head_dim") is None
    assert key_head_dim_twin("num_k_heads") is None
    assert key_head_dim_twin("qk_rope_head_dim") == "v_rope_head_dim"
