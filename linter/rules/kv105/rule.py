"""KV105 key-cut-by-helper: a helper of the module cuts the key along tokens/heads; the value
goes to attention whole."""

from __future__ import annotations

import libcst as cst

from linter.model.functions import function_model, params_of
from linter.model.hierarchy import function_at, import_sources
from linter.model.names import kv_side
from linter.model.pairs import dotted_name
from linter.model.reshapes import (
    PIECEWISE,
    TOKEN_HEAD,
    Reshape,
    reshape_of,
    strip_shape_keeping,
)
from linter.rules.base import Example
from linter.rules.kv101.rule import KeyOnlyReshape
from linter.model.scopes import Scope
from linter.plan.triggers import ATTENTION, PAIRED, Trigger


class KeyCutByHelper(KeyOnlyReshape):
    code = "KV105"
    # A helper of the module (``def``) or an imported one called on a key, in attention code,
    # with the key's V twin.
    trigger = Trigger(("def", "import"), ATTENTION, PAIRED)
    name = "key-cut-by-helper"
    summary = "Key passed through a helper of the module (or one it imports) that cuts it along tokens/heads; value left whole"
    what = (
        "Reads every top-level function of the module once: a helper whose every `return` gives "
        "one of its parameters sliced, narrowed or gathered along a token or head axis "
        "(`return x[:, :n]`, `y = x.narrow(1, s, n); return y`) cuts that parameter. A call of "
        "such a helper on a key (`k = trim(k, n)`) is a cut of the key, judged as KV101 judges "
        "an inline one: reported when the key then meets its paired value in attention (a kernel "
        "call, an attention-named callee, hand-written attention) and the value was neither cut "
        "nor passed through any helper of the module. Helpers imported from a module of the "
        "linted tree are read from their file when the key is their first argument: by a "
        "relative import (`from .utils import trim`) or an absolute one naming the file's own "
        "package (`from vllm.attention.utils import trim` inside `vllm/`)."
    )
    why = (
        "A helper hides the cut from the line that pairs K and V: the key loses tokens or heads "
        "the value keeps, so K and V describe different sequences. Packed NPU kernels fail with "
        "shape errors; broadcasting kernels attend to the wrong values."
    )
    bad = """\
def keep_recent(x, window):
    return x[:, -window:]


def sliding_attention(q, k, v, window):
    k = keep_recent(k, window)
    return F.scaled_dot_product_attention(q, k, v)
"""
    good = """\
def keep_recent(x, window):
    return x[:, -window:]


def sliding_attention(q, k, v, window):
    k = keep_recent(k, window)
    v = keep_recent(v, window)
    return F.scaled_dot_product_attention(q, k, v)
"""
    fix_text = (
        "Pass the value through the same helper (the finding suggests the mirrored line). "
        "kvlint does not edit the code: it cannot prove what the helper does beyond the cut."
    )

    VALID = (
        Example(good),
        # The helper cuts the head dim (RoPE part): no token/head change.
        Example("def rotary_part(x, rot):\n    return x[..., :rot]\n\n\n"
                "def attention(q, k, v, rot):\n    k = rotary_part(k, rot)\n"
                "    return flash_attn_func(q, k, v)\n"),
        # The value goes through a helper of its own.
        Example("def take_keys(x, n):\n    return x[:, :n]\n\n\ndef take_values(x, n):\n    return x.narrow(1, 0, n)\n\n\n"
                "def attention(q, k, v, n):\n    k = take_keys(k, n)\n    v = take_values(v, n)\n"
                "    return flash_attn_func(q, k, v)\n"),
        # A helper that returns its input whole on some path does not always cut it.
        Example("def maybe_trim(x, n):\n    if n is None:\n        return x\n    return x[:, :n]\n\n\n"
                "def attention(q, k, v, n):\n    k = maybe_trim(k, n)\n    return flash_attn_func(q, k, v)\n"),
        # K-only indexer cache: the helper's result is no attention key next to a value.
        Example("def top_tokens(x, idx):\n    return x[:, idx]\n\n\n"
                "def index_scores(q, k, v, idx):\n    k = top_tokens(k, idx)\n    return q @ k.transpose(-1, -2)\n"),
        # MLA: K is the latent and V the same tensor.
        Example("def recent(x, n):\n    return x[-n:]\n\n\n"
                "def mla_decode(q, kv, n):\n    kv = recent(kv, n)\n    return flash_attn_func(q, kv, kv)\n"),
        # A helper taking its tensor by keyword only: no position to read the argument from,
        # so it is not summarised (and here K and V both go through it).
        Example("""\
def keep_recent(*, tokens, window):
    return tokens[:, -window:]


def sliding_window_attention(q, k, v, window):
    k = keep_recent(tokens=k, window=window)
    v = keep_recent(tokens=v, window=window)
    return flash_attn_func(q, k, v)
"""),
        # A plain slice of the key in a scope that calls a helper: KV101's finding (which it
        # cannot fix here, the value being no plain name), not this rule's.
        Example("""\
def trim_to_window(x, window):
    return x[:, -window:]


def attention(q, k, v, n, window):
    q = trim_to_window(q, window)
    k = k[:, :n]
    return flash_attn_func(q, k, v.contiguous())
"""),
    )
    INVALID = (
        Example(bad, line=6),
        # The helper narrows through a local name; the attention is written out.
        Example("def window(x, start, length):\n    part = x.narrow(1, start, length)\n    return part\n\n\n"
                "def forward(q, key_states, value_states, start, length):\n"
                "    key_states = window(key_states, start, length)\n"
                "    scores = torch.matmul(q, key_states.transpose(2, 3))\n"
                "    return torch.matmul(scores.softmax(-1), value_states)\n", line=7),
        # Inline in the call, helper defined after its caller.
        Example("class Attention(nn.Module):\n    def forward(self, q, k, v, n):\n"
                "        return self.core(q, drop_prefix(k, n), v)\n\n\n"
                "def drop_prefix(x, n):\n    return x[:, n:]\n", line=3),
    )

    def visit_Module(self, node: cst.Module) -> None:
        super().visit_Module(node)
        self._helpers: dict[str, cst.FunctionDef | None] = {
            statement.name.value: statement for statement in node.body if isinstance(statement, cst.FunctionDef)
        }
        # Helpers imported from a module of the linted tree (``from .utils import trim``,
        # ``from vllm.attention.utils import trim``), read from their file on first use.
        self._imported = {
            local: source for local, source in import_sources(node, self.context.path, absolute=True).items()
            if local not in self._helpers
        }
        self._summaries: dict[str, tuple[str, int, Reshape] | None] = {}
        self._calls_helper = [False]  # per open function, the module's code first

    def _is_helper(self, call: cst.Call) -> bool:
        return isinstance(call.func, cst.Name) and (call.func.value in self._helpers or call.func.value in self._imported)

    def _may_cut_key(self, call: cst.Call) -> bool:
        """A call of a helper of the module, or of an imported one with a key as its first
        argument: an imported helper is read from its file only then (what a cutting helper
        takes first; the prefilter can then tell such calls from the many imported calls that
        take a key somewhere, kernels and rotary alike)."""
        if not isinstance(call.func, cst.Name):
            return False
        if call.func.value in self._helpers:
            return True
        return call.func.value in self._imported and _key_first(call, self.extra_pairs)

    # Only scopes that call a helper can hold a helper's cut: the calls are noted as the
    # traversal meets them, so the scope model (dear on large files) is built for those only.
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self._calls_helper.append(False)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self._calls_helper.pop():
            super().leave_FunctionDef(original_node)
        else:
            self._enclosing.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if not self._calls_helper[-1] and self._may_cut_key(node):
            self._calls_helper[-1] = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._calls_helper.pop():
            super().leave_Module(original_node)

    def check_scope(self, scope: Scope) -> None:
        if any(self._may_cut_key(c.node) for c in scope.calls):
            super().check_scope(scope)

    def _call_reshape(self, call: cst.Call) -> Reshape | None:
        if not self._may_cut_key(call):
            return None
        imported = call.func.value not in self._helpers
        summary = self._summary(call.func.value)
        if summary is None:
            return None
        param, index, cut = summary
        if imported and index != 0:
            return None
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if any(arg.star for arg in call.args):
            return None
        argument = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == param), None)
        if argument is None and index < len(positional):
            argument = positional[index]
        base = None if argument is None else dotted_name(argument)
        return None if base is None else Reshape(call, base, "helper", cut.axes)

    def _summary(self, name: str) -> tuple[str, int, Reshape] | None:
        """(parameter, its position, the cut) when every return of helper ``name`` is one
        parameter cut along a token/head axis."""
        if name not in self._summaries:
            helper = self._helpers.get(name)
            if helper is None and name in self._imported:
                helper = function_at(*self._imported[name])
            self._summaries[name] = None if helper is None else _cut_parameter(helper)
        return self._summaries[name]

    def _describe(self, reshape: Reshape, op_text: str) -> str:
        return f"is cut along a token/head axis by the helper call `{op_text}`"

    def _report(self, scope: Scope, origin, site, key, value) -> None:
        if origin.reshape.kind != "helper":
            return  # every other cut is KV101's
        partner = dotted_name(strip_shape_keeping(value))
        if partner is not None and self._through_helper(scope, partner):
            return
        super()._report(scope, origin, site, key, value)

    def _through_helper(self, scope: Scope, name: str) -> bool:
        """Is ``name`` an argument of a call of any helper of the module in this scope?"""
        return any(
            self._is_helper(c.node) and any(dotted_name(arg.value) == name for arg in c.node.args)
            for c in scope.calls
        )

    def _fix(self, scope, origin, site, key, value):
        # What the helper does beyond the cut is unknown: the mirrored call is only suggested.
        return None, None


def _key_first(call: cst.Call, extra_pairs) -> bool:
    """``helper(k, ...)``, ``helper(self.key, ...)``: a K-side name as the first positional argument."""
    first = call.args[0] if call.args else None
    if first is None or first.keyword is not None or first.star:
        return False
    base = dotted_name(first.value)
    return base is not None and kv_side(base.rsplit(".", 1)[-1], extra_pairs) == "k"


def _cut_parameter(helper: cst.FunctionDef) -> tuple[str, int, Reshape] | None:
    params = [p.name.value for p in params_of(helper.params)]
    positional = [p.name.value for p in (*helper.params.posonly_params, *helper.params.params)]
    model = function_model(helper)
    if not model.returns:
        return None
    assigned: dict[str, list[cst.BaseExpression]] = {}
    for assignment in model.assignments:
        assigned.setdefault(assignment.name, []).append(assignment.value)
    found: set[tuple[str, str]] = set()
    cut = None
    for statement in model.returns:
        value = statement.value
        if isinstance(value, cst.Name) and len(assigned.get(value.value, ())) == 1:
            value = assigned[value.value][0]
        reshape = None if value is None else reshape_of(strip_shape_keeping(value))
        if (reshape is None or reshape.kind in PIECEWISE or reshape.base not in params
                or reshape.base in assigned or reshape.role(None) != TOKEN_HEAD):
            return None
        found.add((reshape.base, reshape.kind))
        cut = reshape
    if len({base for base, _ in found}) != 1 or cut is None or cut.base not in positional:
        return None
    return cut.base, positional.index(cut.base), cut
