"""The per-scope model: one pass records bindings, accesses and calls the data-flow rules query."""

from __future__ import annotations

from textwrap import dedent

import libcst as cst

from linter.model.pairs import source_of
from linter.model.scopes import DIFFER, SAME, exclusive, mismatches, scope_of


def function_scope(source: str, enclosing: tuple[str, ...] = ("f",)):
    module = cst.parse_module(dedent(source))
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    return scope_of(function, enclosing)


def test_parameters_and_assignments_are_bindings_in_source_order():
    scope = function_scope(
        """
        def f(k, v):
            k = k[:1]
            k = k.float()
        """
    )
    kinds = [binding.kind for binding in scope.bindings["k"]]
    assert kinds == ["param", "assign", "assign"]
    orders = [binding.order for binding in scope.bindings["k"]]
    assert orders == sorted(orders)


def test_binding_before_is_the_last_binding_ahead_of_a_point():
    scope = function_scope(
        """
        def f(k):
            k = k[:1]
            use(k)
            k = k.float()
        """
    )
    use = next(site for site in scope.calls if site.tail == "use")
    binding = scope.binding_before("k", use.order)
    assert cst.Module([]).code_for_node(binding.value) == "k[:1]"


def test_rebound_between_sees_only_bindings_inside_the_window():
    scope = function_scope(
        """
        def f(v):
            a()
            v = v.float()
            b()
        """
    )
    a, b = (site for site in scope.calls if site.tail in {"a", "b"})
    assert scope.rebound_between("v", a.order, b.order)
    assert not scope.rebound_between("v", b.order, b.order + 100)


def test_assignment_records_the_line_it_is_alone_on():
    scope = function_scope(
        """
        def f(k):
            k_chunk = k[1:2]
            a = 1; b = k[0:1]
        """
    )
    assert isinstance(scope.bindings["k_chunk"][0].line, cst.SimpleStatementLine)
    assert scope.bindings["b"][0].line is None


def test_tuple_assignment_binds_each_name_to_its_own_element_without_a_line():
    scope = function_scope(
        """
        def f(q, k, n):
            q, k = q[:n], k.chunk(n)
        """
    )
    q, k = scope.bindings["q"][-1], scope.bindings["k"][-1]
    assert (cst.Module([]).code_for_node(q.value), cst.Module([]).code_for_node(k.value)) == ("q[:n]", "k.chunk(n)")
    assert (q.kind, k.kind, q.line, k.line) == ("assign", "assign", None, None)
    # Each value range holds only its own element: the chunk call is inside k's, not q's.
    assert [c.tail for c in scope.calls_within(q.value_orders)] == []
    assert [c.tail for c in scope.calls_within(k.value_orders)] == ["chunk"]


def test_zip_loop_binds_each_target_to_its_own_iterable():
    scope = function_scope(
        """
        def f(k, v, n):
            for k_c, v_c in zip(k.chunk(n), [v] * n):
                pass
        """
    )
    k_c, v_c = scope.bindings["k_c"][0], scope.bindings["v_c"][0]
    assert (k_c.kind, v_c.kind) == ("loop", "loop")
    assert (cst.Module([]).code_for_node(k_c.value), cst.Module([]).code_for_node(v_c.value)) == (
        "k.chunk(n)", "[v] * n"
    )


def test_value_orders_enclose_the_accesses_and_calls_of_the_value():
    scope = function_scope(
        """
        def f(v, idx):
            v = torch.cat([v[idx], v])
        """
    )
    binding = scope.bindings["v"][1]
    assert [a.base for a in scope.accesses_within(binding.value_orders)] == ["v"]
    assert [c.tail for c in scope.calls_within(binding.value_orders)] == ["cat"]


def test_loop_targets_over_items_range_and_enumerate_counters_are_not_tensors():
    # enumerate's counter is a counter; its items are what the iterable holds (``x``, tensors
    # of ``xs`` like ``kk``), keys only when it enumerates keys (``j, (a, b)``).
    scope = function_scope(
        """
        def f(d, xs, n):
            for key, value in d.items():
                pass
            for k in range(n):
                pass
            for i, x in enumerate(xs):
                pass
            for j, (a, b) in enumerate(d.items()):
                pass
            for kk in xs:
                pass
            names = [kv for kv in d.keys()]
            for kd in sorted(list(d.keys())):
                pass
        """
    )
    assert scope.non_tensors == {"key", "value", "k", "i", "j", "a", "b", "kv", "kd"}


def test_asserts_logging_and_fstrings_are_quiet():
    scope = function_scope(
        """
        def f(k, n):
            assert k[:n].sum() > 0
            logger.info("k %s", k[:n])
            msg = f"{k[:n]}"
            out = g(k[:n])
        """
    )
    assert [access.quiet for access in scope.accesses] == [True, True, True, False]


def test_subscript_chain_is_one_access_on_its_base():
    scope = function_scope(
        """
        def f(self, layer, loc):
            self.k_buf[layer][loc] = 0
        """
    )
    (access,) = scope.accesses
    assert access.base == "self.k_buf"
    assert access.store
    assert len(access.chain) == 2


def test_nested_functions_and_classes_are_scopes_of_their_own():
    scope = function_scope(
        """
        def f(k):
            def inner(k):
                return k[:1]
            class C:
                x = k[:2]
            return inner
        """
    )
    assert scope.accesses == []
    assert scope.bindings["inner"][0].kind == "other"


def test_attention_code_by_name_call_or_projection():
    assert function_scope("def f(q):\n    pass\n", ("LlamaAttention", "forward")).is_attention_code()
    assert function_scope("def f(q, k, v):\n    flash_attn_func(q, k, v)\n").is_attention_code()
    assert function_scope("def f(self, x):\n    k = self.k_proj(x)\n").is_attention_code()
    assert function_scope("def f(self, x):\n    return self.attn(x)\n").is_attention_code()
    assert function_scope("def f(q):\n    pass\n", ("DeepseekV2MLA", "forward")).is_attention_code()
    assert function_scope("def f(q):\n    pass\n", ("forward_mla",)).is_attention_code()
    assert not function_scope("def f(q):\n    pass\n", ("formlayout",)).is_attention_code()
    assert not function_scope("def f(k, v):\n    return merge(k, v)\n").is_attention_code()


def test_hand_written_attention_needs_scores_softmax_and_value_product():
    full = ("def f(q, key_states, value_states):\n"
            "    w = torch.matmul(q, key_states.transpose(2, 3))\n"
            "    return w.softmax(-1) @ value_states\n")
    scope = function_scope(full)
    assert scope.is_attention_code()
    [hand] = scope.hand_attention()
    assert source_of(hand.key) == "key_states" and source_of(hand.value) == "value_states"
    # Without the softmax, without the transposed key, or without the value's product: no attention.
    assert not function_scope(full.replace("w.softmax(-1)", "w")).is_attention_code()
    assert not function_scope(full.replace("key_states.transpose(2, 3)", "key_states")).is_attention_code()
    assert not function_scope(full.replace("@ value_states", "@ other")).is_attention_code()
    # A key's bookkeeping (a scale) is no key.
    assert not function_scope(full.replace("key_states", "key_scale").replace("value_states", "value_scale")).is_attention_code()


def test_names_unpacked_from_a_split_are_its_pieces():
    scope = function_scope("def f(k, a, b):\n    k1, k2 = torch.split(k, [a, b], dim=1)\n    x, y = g(k)\n")
    assert [b.kind for b in scope.bindings["k1"]] == ["piece"]
    assert source_of(scope.bindings["k2"][0].value) == "torch.split(k, [a, b], dim=1)"
    assert scope.bindings["x"][0].kind == "other"


def test_a_subscript_after_axis_moves_is_an_access_on_the_tensor_underneath():
    scope = function_scope("def f(k, n):\n    return k.transpose(1, 2).contiguous()[:, :n], k.view(2, -1)[:1]\n")
    [access] = scope.accesses
    assert access.base == "k" and access.through == ".transpose(1,2).contiguous()"


def test_extra_attention_callables_count_as_attention_calls():
    scope = function_scope("def f(q, k, v):\n    my_kernel(q, k, v)\n")
    assert not scope.is_attention_code()
    assert scope.is_attention_code(("my_kernel",))


def test_every_rule_of_a_traversal_shares_one_model_per_scope():
    module = cst.parse_module("def f(k):\n    return k[:1]\n")
    function = module.body[0]
    assert scope_of(function, ("f",)) is scope_of(function, ("f",))


class Site:
    def __init__(self, text: str, order: int, store: bool = False) -> None:
        self.text, self.order, self.store = text, order, store


def _same_text(k: Site, v: Site) -> str:
    return SAME if k.text == v.text else DIFFER


def test_mismatches_skip_a_key_with_any_equal_value():
    k, other, equal = Site("a", 1), Site("b", 2), Site("a", 9)
    # The key is matched; only the leftover value read with no equal key is reported.
    found = mismatches([k], [other, equal], _same_text)
    assert [(m.key, m.value, m.anchor) for m in found] == [(k, other, "v")]
    assert mismatches([k], [equal], _same_text) == []


def test_mismatches_ignore_a_leftover_value_written_to():
    # ``v[6:] += 100`` after a matched pair: a test perturbing V on purpose.
    k, perturbed, equal = Site("a", 1), Site("b", 2, store=True), Site("a", 9)
    assert mismatches([k], [perturbed, equal], _same_text) == []


def test_mismatches_pair_an_unmatched_key_with_the_nearest_differing_value():
    k, near, far = Site("a", 10), Site("b", 11), Site("c", 1)
    found = mismatches([k], [far, near], _same_text)
    assert [(m.key, m.value, m.anchor) for m in found] == [(k, near, "k"), (k, far, "v")]


def test_mismatches_report_keys_sharing_one_value_once_at_the_nearest_key():
    keys = [Site("a", 1), Site("a", 2), Site("c", 3), Site("d", 8)]
    v = Site("b", 9)
    found = mismatches(keys, [v], _same_text)
    assert [(m.key, m.value, m.anchor) for m in found] == [(keys[3], v, "k")]


def test_mismatches_report_each_differing_value_once():
    k1, k2 = Site("a", 1), Site("c", 20)
    v1, v2 = Site("b", 2), Site("d", 21)
    found = mismatches([k1, k2], [v1, v2], _same_text)
    assert [(m.key, m.value, m.anchor) for m in found] == [(k1, v1, "k"), (k2, v2, "k")]


def test_mismatches_stay_silent_when_sites_cannot_be_compared():
    assert mismatches([Site("a", 1)], [Site("b", 2)], lambda k, v: None) == []


def test_sites_in_different_arms_of_one_if_are_never_compared():
    scope = function_scope(
        "def f(k_pool, v_pool, is_v, a, b):\n"
        "    if is_v:\n        x = v_pool[a]\n"
        "    elif a:\n        x = k_pool[b]\n        y = v_pool[b]\n"
        "    else:\n        x = k_pool[a]\n"
    )
    v_a, k_b, v_b, k_a = scope.accesses
    assert exclusive(v_a, k_b) and exclusive(v_a, k_a) and exclusive(k_b, k_a)
    assert not exclusive(k_b, v_b)
    # In different arms the verdict is "cannot compare": no mismatch, no match.
    assert mismatches([k_a], [v_a], lambda k, v: DIFFER) == []
