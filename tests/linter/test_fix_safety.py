"""Fix safety is a rule of the engine: a fix is ``safe`` only when it provably mirrors the key's
operation onto the value; anything else is offered as ``unsafe`` (``--unsafe-fixes``) whatever
the rule asked for. Suggestions name only what is in scope where they would be written."""

from __future__ import annotations

from textwrap import dedent

import libcst as cst

from linter.engine import lint_source
from linter.finding import Edit, Fix, Span
from linter.fixes import apply_fixes
from linter.rules.base import Mirror, Rule, RuleContext, mirror_is_proven
from linter.model.scopes import scope_of
from linter.settings import Settings


def kv101(source: str):
    return lint_source(dedent(source), codes=["KV101"])


def applicability(source: str) -> str | None:
    (finding,) = kv101(source)
    return None if finding.fix is None else finding.fix.applicability


def test_a_plain_value_at_an_attention_kernel_gets_a_safe_fix():
    assert applicability("""
        def f(q, k, v, n):
            return flash_attn_func(q, k[:n], v)
        """) == "safe"
    assert applicability("""
        def f(q, k, v, a, b):
            k_chunk = k[a:b]
            return flash_attn_func(q, k_chunk, v)
        """) == "safe"


def test_a_value_operated_on_elsewhere_in_the_function_makes_the_fix_unsafe():
    # ``v[:0]`` inline in another call: the value is cut somewhere, so mirroring may double it.
    assert applicability("""
        def attention(q, k, v, n, out):
            prefix_attn(q, k[:0], v[:0], out)
            return flash_attn_func(q, k[:n], v)
        """) == "unsafe"
    # A value resized by a rebinding: KV101 itself stays silent.
    assert kv101("""
        def attention(q, k, v, n, extra):
            v = torch.cat([v, extra])
            return flash_attn_func(q, k[:n], v)
        """) == []


def test_a_call_of_unknown_signature_never_gets_a_safe_fix():
    # The callee may take an unused or None value (a latent pool's ``cache_v``).
    assert applicability("""
        class Attention:
            def forward(self, q, k, v, idx):
                return self.core(q, k[idx], v)
        """) == "unsafe"


def test_a_name_changed_between_the_key_and_the_call_makes_the_fix_unsafe():
    assert applicability("""
        def f(q, k, v, a, b):
            k_chunk = k[a:b]
            b = b + 1
            return flash_attn_func(q, k_chunk, v)
        """) == "unsafe"


def test_a_global_in_the_mirrored_expression_makes_the_fix_unsafe():
    assert applicability("""
        def f(q, k, v, n):
            return flash_attn_func(q, k[:LIMIT], v)
        """) == "unsafe"


def test_unsafe_fixes_are_applied_only_when_asked():
    source = "class Attention:\n    def forward(self, q, k, v, idx):\n        return self.core(q, k[idx], v)\n"
    findings = lint_source(source, codes=["KV101"])
    assert apply_fixes(source, findings) == source
    assert "v[idx]" in apply_fixes(source, findings, unsafe=True)


def _rule_for(source: str) -> tuple[Rule, cst.FunctionDef]:
    module = cst.parse_module(source)
    function = module.body[0]
    rule = Rule(RuleContext("<t>", Settings(), position=lambda node: _Range()))
    rule.code = "KV999"  # type: ignore[misc]
    return rule, function


class _Pos:
    line, column = 1, 0


class _Range:
    start = end = _Pos()


def test_the_engine_demotes_a_safe_fix_without_a_proven_mirror():
    rule, function = _rule_for("def f(q, k, v):\n    return flash_attn_func(q, k, v)\n")
    fix = Fix("rewrite", (Edit(Span(1, 1, 1, 1), "x"),))
    rule.report(function, "m", suggestion="s", fix=fix)
    assert rule.findings[-1].fix.applicability == "unsafe"
    scope = scope_of(function, ("f",))
    call = scope.calls[0]
    value = call.node.args[2].value
    proven = Mirror(scope, value, "v[:1]", call.order, call.order, kernel=True)
    rule.report(function, "m", suggestion="s", fix=fix, mirror=proven)
    assert rule.findings[-1].fix.applicability == "safe"


def test_a_mirror_reading_a_name_bound_only_later_is_not_proven():
    source = "def f(q, k, x, a):\n    k1 = k[:a]\n    v = x\n    return flash_attn_func(q, k1, v)\n"
    function = cst.parse_module(source).body[0]
    scope = scope_of(function, ("f",))
    call = scope.calls[-1]
    value = call.node.args[2].value
    k_line = scope.bindings["k1"][0].order
    assert not mirror_is_proven(Mirror(scope, value, "v[:a]", k_line, call.order, kernel=True))


def test_a_suggestion_is_moved_to_the_call_when_the_value_is_bound_only_later():
    (finding,) = kv101("""
        def attention(self, q, x, k, a, b):
            k_chunk = k[a:b]
            v = self.v_proj(x)
            return flash_attn_func(q, k_chunk, v)
        """)
    assert finding.fix is None
    assert "after the key's line" not in finding.suggestion
    assert "`v[a:b]`" in finding.suggestion


def test_an_inline_fix_inside_a_comprehension_reads_the_comprehension_variables_safely():
    source = dedent("""
        def attention(q, k, v, spans):
            return [flash_attn_func(q, k[s:e], v) for s, e in spans]
        """)
    (finding,) = lint_source(source, codes=["KV101"])
    assert finding.fix is not None and finding.fix.applicability == "safe"
    assert "flash_attn_func(q, k[s:e], v[s:e]) for s, e in spans" in apply_fixes(source, [finding])


def test_a_key_walked_in_pieces_suggests_walking_the_value_alongside():
    (finding,) = kv101("""
        def ring_attention(q, k, v, n):
            for k_chunk in k.chunk(n):
                out = flash_attn_func(q, k_chunk, v)
        """)
    assert finding.fix is None
    assert finding.suggestion.endswith("`for k_chunk, v_chunk in zip(k.chunk(n), v.chunk(n))`")
