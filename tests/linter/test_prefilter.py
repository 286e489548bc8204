"""The pre-filter: which texts it proves finding-free, and which it must let through."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from linter.plan.text_plan import parse_plan
from linter.rules import all_rules, rules_by_code
from linter.settings import Settings
from tests.linter.fakes import FlagMe

RULES = all_rules()


def test_a_file_without_any_kv_pair_or_head_count_is_rejected() -> None:
    assert not parse_plan("def add(a, b):\n    return a[0] + b[1]\n", RULES, Settings()).needed


def test_every_invalid_example_passes_its_own_rule_condition() -> None:
    for rule in RULES:
        for example in rule.INVALID:
            assert parse_plan(example.code, [rule], Settings()).needed, (rule.code, example.code)


def test_a_comment_between_the_key_and_its_subscript_does_not_hide_the_slice() -> None:
    text = ("def attention(q, k, v, t):\n    k = (k  # trim\n         [:t])\n"
            "    return flash_attn_func(q, k, v)\n")
    assert parse_plan(text, [rules_by_code()["KV101"]], Settings()).needed


def test_kv_names_without_attention_context_are_rejected_for_kv101() -> None:
    text = "def take(k, v, n):\n    k = k[:n]\n    return combine(k, v)\n"
    assert not parse_plan(text, [rules_by_code()["KV101"]], Settings()).needed


def test_a_rule_the_prefilter_does_not_know_always_runs() -> None:
    assert parse_plan("x = 1\n", [FlagMe], Settings()).needed


KV101 = [rules_by_code()["KV101"]]
ATTENTION = "def attention(q, k, v, t):\n    k = k[:, :t]\n    return flash_attn_func(q, k, v)\n"


def test_only_the_definition_with_attention_code_is_planned_for_parsing() -> None:
    text = "import torch\n\ndef helper(a):\n    return a + 1\n\n" + ATTENTION + "\ndef other():\n    pass\n"
    plan = parse_plan(text, KV101, Settings())
    assert not plan.whole
    assert plan.excerpt(text).strip() == ATTENTION.strip()


def test_a_column_0_def_inside_a_docstring_does_not_split_the_function() -> None:
    text = 'def attention(q, k, v, t):\n    """Example:\ndef other(): pass\n"""\n    k = k[:t]\n    return flash_attn_func(q, k, v)\n'
    assert parse_plan(text, KV101, Settings()).excerpt(text).strip() == text.strip()


def test_decorators_stay_with_their_definition() -> None:
    text = "@torch.no_grad()\n@other(\n    1)\n" + ATTENTION
    assert parse_plan(text, KV101, Settings()).excerpt(text).strip() == text.strip()


def test_kv_code_at_module_level_sends_the_whole_file() -> None:
    text = "import torch\n\ndef f():\n    pass\nk = k_cache[:1]\nout = flash_attn_func(q, k, v_cache)\n"
    assert parse_plan(text, KV101, Settings()).whole


def test_kv_code_only_in_strings_and_comments_needs_no_parse() -> None:
    code = "    k = k[:, :t]\n    out = flash_attn_func(q, k, v)\n"
    as_code = "def doc(q, k, v, t):\n" + code
    as_text = 'def doc(q, k, v, t):\n    """\n' + code + '    """\n' + "".join(f"    # {line}\n" for line in code.splitlines())
    assert parse_plan(as_code, KV101, Settings()).needed
    assert not parse_plan(as_text, KV101, Settings()).needed


_USAGE = "def trim(x, n):\n    return x[:n]\n\nkey = trim(key, n)\nvalue = value\n"
_TAIL = "import torch\n\n\ndef attention_scale(x):\n    return x * 2\n"
_CALLER = "def trim(x, n):\n    return x[:n]\n\n\ndef f(k, v, n, w):\n    k = trim(k, n)\n    return {}, v\n"
_ATTENTION = "def trim(x, n):\n    return x[:n]\n\n\ndef attention(q, k, v, n):\n    {}return softmax(q @ k.T) @ v\n"
_DOCUMENTED = '"""Use as ``k = trim(k, n)``."""\n' + _ATTENTION.format("")


@pytest.mark.parametrize(
    ("in_code", "in_prose"),
    [
        # A helper that cuts and a key passed to it: in code, or in the module docstring's
        # example (column 0, so read as text it looks like code), with no pair in code...
        (f'"""Attention helpers."""\n{_USAGE}{_TAIL}', f'"""Attention helpers. Usage:\n\n{_USAGE}"""\n{_TAIL}'),
        # ... or beside another pair in code.
        (
            f'"""Attention helpers."""\n{_USAGE}{_TAIL}',
            f'"""Attention helpers. Usage:\n\n{_USAGE}"""\n{_TAIL}\n\ndef project(k, v):\n    return k @ v\n',
        ),
        # K/V projection names, which make attention code: called, or named in a comment.
        (_CALLER.format("k_proj(k), v_proj(v)"), "# w is k_proj, beside v_proj\n" + _CALLER.format("w")),
        # The word "attention" in the module's docstring is no attention code either.
        (_CALLER.format("k_proj(k), v_proj(v)"), '"""Attention helpers."""\n' + _CALLER.format("w")),
        # The helper's call on a key: in code, or only in the docstring.
        (_ATTENTION.format("k = trim(k, n)\n    "), _DOCUMENTED),
    ],
)
def test_kv105_reads_its_evidence_in_code_not_in_comments_or_docstrings(in_code: str, in_prose: str) -> None:
    rules = [rules_by_code()["KV105"], rules_by_code()["KV209"]]
    assert parse_plan(in_code, rules, Settings()).module_rules == {"KV105"}
    assert not parse_plan(in_prose, rules, Settings()).needed


def test_a_module_rules_text_screen_is_given_what_its_condition_found_in_the_code() -> None:
    from linter.rules.kv105.condition import kv105_helpers

    parse_plan(_DOCUMENTED, [rules_by_code()["KV105"]], Settings())
    assert kv105_helpers(_DOCUMENTED, Settings()) == set()
    # Asked of another text, the screen reads the whole text, and finds the docstring's call.
    assert kv105_helpers(_DOCUMENTED + " ", Settings()) == {""}


@given(
    st.lists(st.sampled_from(["Attention", "ATTN", "x", "1", "2mla", "_", " ", "\n", "#", "é", "İ", "K", "(", "."]), max_size=30),
    st.sampled_from(["attn", "attention", "mla", "kv", "cache", "qkv", "scale"]),
)
def test_a_word_is_in_the_lower_cased_names_as_in_the_lower_cased_text(pieces: list[str], word: str) -> None:
    from linter.plan.file import _File

    text = "".join(pieces)
    assert (word in _File(text, Settings()).lower_names) == (word in text.lower())


def test_a_module_wide_rule_always_sees_the_whole_file() -> None:
    text = ("num_key_value_heads = 2\n\ndef split(qkv, num_heads):\n"
            "    q, k, v = qkv.chunk(3, dim=-1)\n    return q, k, v\n")
    assert parse_plan(text, [rules_by_code()["KV203"]], Settings()).whole


def test_a_file_with_old_mac_line_ends_is_parsed_whole() -> None:
    # code_only and segments count lines by "\n"; a lone "\r" ends a line for Python too.
    text = ("# note\ndef attention(q, k, v, n):\n    k = k[:n]\n    v = v[:n - 1]\n"
            "    return F.scaled_dot_product_attention(q, k, v)\n").replace("\n", "\r")
    assert parse_plan(text, [rules_by_code()["KV102"]], Settings()).whole


def test_a_latent_attention_scope_counts_as_attention_code() -> None:
    # scopes.py reads ``forward_mla`` as attention code, with no "attn" anywhere.
    text = "def forward_mla(self, q, k, v, n):\n    k = k[:, :n]\n    return self.core(q, k, v)\n"
    assert parse_plan(text, KV101, Settings()).needed


def test_kv105_needs_a_helper_called_with_a_key_and_then_leaves_the_file_to_its_module_screen() -> None:
    kv105 = [rules_by_code()["KV105"]]
    helper = "def trim(x, n):\n    return x[:, :n]\n\n\n"
    called = helper + "def attention(q, k, v, n):\n    return flash_attn_func(q, trim(k, n), v)\n"
    plan = parse_plan(called, kv105, Settings())
    assert plan.module_rules == {"KV105"} and plan.needed and not plan.ranges
    # The helper called on the query only: no key can be cut by it.
    on_query = helper + "def attention(q, k, v, n):\n    return flash_attn_func(trim(q, n), k, v)\n"
    assert not parse_plan(on_query, kv105, Settings()).needed


def test_kv208_needs_a_head_dim_keyword_not_an_assignment() -> None:
    kv208 = [rules_by_code()["KV208"]]
    keyword = "from .pool import Pool\n\n\ndef build(cfg):\n    print(cfg.v_head_dim)\n    return Pool(8, head_dim=cfg.head_dim)\n"
    assert parse_plan(keyword, kv208, Settings()).module_rules == {"KV208"}
    assigned = "def build(cfg):\n    head_dim = cfg.head_dim\n    return cfg.v_head_dim, head_dim\n"
    assert not parse_plan(assigned, kv208, Settings()).needed



def test_kv208_needs_the_keyword_and_the_value_head_dim_in_one_top_level_definition() -> None:
    kv208 = [rules_by_code()["KV208"]]
    pool = "class Pool:\n    def __init__(self, n, head_dim, v_head_dim=None):\n        pass\n\n\n"
    together = pool + "class Runner:\n    def build(self):\n        log(self.cfg.v_head_dim)\n        return Pool(8, head_dim=4)\n"
    assert parse_plan(together, kv208, Settings()).module_rules == {"KV208"}
    decorated = pool + "@cache(v_head_dim=2)\n@other\ndef build(cfg):\n    return Pool(8, head_dim=4)\n"
    assert parse_plan(decorated, kv208, Settings()).module_rules == {"KV208"}
    # The value head dim read only in another top-level definition than the call.
    apart = ("from .pool import Pool\n\n\ndef sizes(cfg):\n    return cfg.v_head_dim\n\n\n"
             "def build(cfg):\n    return Pool(8, head_dim=cfg.head_dim)\n")
    assert not parse_plan(apart, kv208, Settings()).needed
    # A parameter default, a method's call, a function the module defines: no class to read.
    for call in ("def build(cfg, head_dim=4, v_head_dim=None):\n    return cfg\n",
                 "def build(cfg):\n    return self.pools.Pool(cfg.v_head_dim, head_dim=4)\n",
                 "def make(**kw):\n    return kw\n\n\ndef build(cfg):\n    return make(cfg.v_head_dim, head_dim=4)\n"):
        assert not parse_plan(call, kv208, Settings()).needed, call
    imported = "from .pool import Pool\n\n\ndef build(cfg):\n    return Pool(cfg.v_head_dim, head_dim=4)\n"
    assert parse_plan(imported, kv208, Settings()).module_rules == {"KV208"}

KV105 = [rules_by_code()["KV105"]]
ATTENTION_CALL = "    return flash_attn_func(q, k, v)\n"


def test_kv105_reads_every_local_helper_call_through_nested_brackets() -> None:
    # Many helpers, and the key inside a nested argument: the call's brackets are counted.
    helpers = "".join(f"def cut{i}(x, n):\n    return x[:, :n]\n\n\n" for i in range(12))
    nested = helpers + "def attention(q, k, v, n):\n    k = cut7(pick(k, 0), len([n]))\n" + ATTENTION_CALL
    assert parse_plan(nested, KV105, Settings()).module_rules == {"KV105"}
    # Every call of every helper on something else: no key can be cut.
    elsewhere = helpers + "def attention(q, k, v, n):\n    q = cut7(q, n)\n    n = cut3(mask, n)\n" + ATTENTION_CALL
    assert not parse_plan(elsewhere, KV105, Settings()).needed


def test_kv105_a_local_helper_needs_the_key_passed_as_an_argument_by_itself() -> None:
    helper = "def trim(x, n):\n    return x[:, :n]\n\n\n"
    for call in ("    k = trim(self.k, n)\n", "    k = trim(\n        (k),  # recent\n        n)\n", "    k = trim(n=n, x=k)\n"):
        assert parse_plan(helper + "def attention(q, k, v, n):\n" + call + ATTENTION_CALL, KV105, Settings()).module_rules == {"KV105"}, call
    # The helper's own definition names the key; a call passes a method's result, or names
    # the key only as a keyword.
    own = "def trim(k, v, n):\n    return k[:, :n]\n\n\ndef attention(q, k, v, n):\n    x = trim(q, v, n)\n" + ATTENTION_CALL
    for text in (own, helper + "def attention(q, k, v, n):\n    x = trim(k.t(), n)\n" + ATTENTION_CALL,
                 helper + "def attention(q, k, v, n):\n    x = trim(q, k=n)\n" + ATTENTION_CALL):
        assert not parse_plan(text, KV105, Settings()).needed, text


def test_kv105_an_imported_helper_needs_a_key_first_and_its_result_used() -> None:
    head = "from .windows import keep_recent\n\n\ndef attention(q, k, v, n):\n"
    for used in ("    k = keep_recent(k, n)\n", "    out = attn(q, keep_recent(self.k, n), v)\n",
                 "    k = (  # recent tokens only\n        keep_recent(k, n))\n",
                 # A comment between the bracket and the key, with a bracket and a comma of its own.
                 "    k = keep_recent(  # the key (trimmed), n tokens\n        k, n)\n",
                 "    k = keep_recent(self.  # the cache\n        k, n)\n"):
        assert parse_plan(head + used + ATTENTION_CALL, KV105, Settings()).module_rules == {"KV105"}, used
    for unused in ("    keep_recent(k, n)\n", "    ok = n == keep_recent(k, n)\n", "    k = lib.keep_recent(k, n)\n",
                   "    q = keep_recent(q, k)\n"):
        assert not parse_plan(head + unused + ATTENTION_CALL, KV105, Settings()).needed, unused


def test_kv105_a_helper_needs_every_return_to_be_a_cut() -> None:
    call = "\n\ndef attention(q, k, v, n):\n    k = trim(k, n)\n" + ATTENTION_CALL
    may_cut = (
        "def trim(x, n):\n    return x[:, :n]\n",
        "def trim(x, n):\n    if n is None:\n        return x.narrow(1, 0, 4)\n    return x[:n]\n",
        "def trim(x, n):\n    out = (x\n           [:n])\n    return (out)\n",
        "def trim(x, n):\n    return torch.narrow(\n        x, 1, 0, n)\n",
        # A nested function's returns are its own, not the helper's.
        "def trim(x, n):\n    def inner():\n        return None\n    return x[:n]\n",
        "def trim(x, n):\n    @cache\n    class Box:\n        def get(self):\n            return None\n    return x[:n]\n",
        # Returns after something on their line, which the rule reads like any other.
        "def trim(x, n): return x[:, :n]\n",
        "def trim(x, n):\n    if n: return x[:n]\n    else: return x.narrow(1, 0, 4)\n",
        "def trim(x, n):\n    return x.transpose(1, 2)[..., :n].contiguous()\n",
    )
    for helper in may_cut:
        assert parse_plan(helper + call, KV105, Settings()).module_rules == {"KV105"}, helper
    cannot = (
        "def trim(x, n):\n    return torch.empty(\n        n)\n",  # allocates
        "def trim(x, n):\n    out = torch.empty(n)\n    return out\n",
        "def trim(x, n):\n    if n:\n        return x[:n]\n    return None\n",
        "def trim(x, n):\n    x[:n] = 0\n    return\n",
        "def trim(x, n):\n    return x  # x[:n] was too slow\n",
        "def trim(x, n):\n    \"\"\"Like x[:n].\"\"\"\n    return torch.cat((x, x))\n",
        # A subscript that is not the returned value, or not of a parameter.
        "def trim(x, n):\n    return x.shape[1]\n",
        "def trim(x, n):\n    return pad(x[:n])\n",
        "def trim(x, n):\n    return x[:n] * 2\n",
        "def trim(x, n):\n    return x[:n], x[n:]\n",
        "def trim(x, n):\n    return self.cache[:n]\n",
        "def trim(x, n):\n    return CACHE[:n]\n",
        # A returned name passed to a call with a keyword argument: no assignment.
        "def trim(x, n):\n    check(x, n=n)\n    return x\n",
        # Only a nested function's return is a cut.
        "def trim(x, n):\n    def inner(y):\n        return y[:n]\n    return torch.cat((inner(x), x))\n",
        "def trim(x, n):\n    def inner(\n        y,\n    ):\n        return y[:n]\n    return pad(inner(x))\n",
    )
    for helper in cannot:
        assert not parse_plan(helper + call, KV105, Settings()).needed, helper


def test_a_name_inside_another_names_attribute_is_still_read() -> None:
    # ``self.k.k[0]``: the second ``k`` is subscripted although the first one's attribute is it.
    text = "def attention(q, v, n):\n    k = self.k.k[:n]\n    return flash_attn_func(q, k, v)\n"
    assert parse_plan(text, KV101, Settings()).needed


def test_value_head_dim_names_are_read_in_any_case() -> None:
    # ``twins.is_value_head_dim`` and KV208 read ``V_HEAD_DIM`` as ``v_head_dim``; the condition
    # read only lower-case "dim" names and missed this pool, which the slow path reports.
    kv208 = rules_by_code()["KV208"]
    upper = kv208.INVALID[0].code.replace("v_head_dim", "V_HEAD_DIM")
    assert "V_HEAD_DIM" in upper and parse_plan(upper, [kv208], Settings()).module_rules == {"KV208"}


def test_kv207_admits_every_k_v_side_attribute_the_rule_reads_as_a_projection() -> None:
    # The rule compares any K/V-side ``self.`` attribute built by a ``*Linear`` (BERT's
    # ``self.key``/``self.value``), not only names with a projection word in them.
    kv207 = rules_by_code()["KV207"]
    bert = kv207.INVALID[0].code.replace("k_proj", "key").replace("v_proj", "value")
    assert "self.value = nn.Linear" in bert
    assert parse_plan(bert, [kv207], Settings()).module_rules == {"KV207"}


def test_scale_and_head_words_are_read_in_any_case() -> None:
    # KV106 reads ``K_SCALE``/``V_SCALE``, KV205 ``NUM_HEADS``/``HEAD_DIM``, as the slow path
    # does: their triggers and conditions must too.
    for code, word in (("KV106", "scale"), ("KV205", "head")):
        rule = rules_by_code()[code]
        for example in rule.INVALID:
            loud = re.sub(rf"\w*{word}\w*", lambda m: m.group().upper(), example.code)
            assert word not in loud and parse_plan(loud, [rule], Settings()).needed, (code, loud)


def test_definition_lines_are_the_lines_the_definition_pattern_finds() -> None:
    from linter.plan.lines import definition_lines
    from linter.plan.lines import _DEFINITION

    text = ("import x\ndef f():\n    pass\n  async  def g(): ...\nclass A:\n    @property\n    def default(self):\n"
            "        undef = 1  # def\n        x = a @ b\n@dec\nclassy = 2\nasync def\tz(): pass\ndef")
    assert definition_lines(text) == [m.end() for m in _DEFINITION.finditer(text)]
    assert len(definition_lines(text)) == 8


def test_a_top_level_class_header_or_a_dataclass_import_does_not_send_the_file_whole() -> None:
    # KV205 asks for a class; the rest of this module (imports, a helper that reshapes, the
    # classes' header lines) has the words but no class body: the class goes alone.
    text = ("from dataclasses import dataclass\n\n\ndef repeat_heads(x, n_head):\n    return x.reshape(n_head, -1)\n\n\n"
            "class FusedLinear(nn.Module):\n    def __init__(self, config):\n        self.k_proj = nn.Linear(8, config.num_key_value_heads * 4)\n\n"
            "    def forward(self, x):\n        return self.k_proj(x).view(2, self.num_heads, 4)\n")
    plan = parse_plan(text, [rules_by_code()["KV205"]], Settings())
    assert not plan.whole and plan.ranges == ((7, 14),)
    # A class nested in a module-level statement is in the rest: that one goes whole.
    nested = text.replace("def repeat_heads(x, n_head):\n    return x.reshape(n_head, -1)\n",
                          "if USE_FUSED:\n    class Local(nn.Module):\n        def f(self):\n            self.k_proj = nn.Linear(8, self.num_kv_heads * self.head_dim)\n            return self.k_proj(x).view(2, self.num_heads, 4)\n")
    assert parse_plan(nested, [rules_by_code()["KV205"]], Settings()).whole


def test_identifier_set_reads_non_ascii_text_as_the_identifier_pattern_does() -> None:
    from linter.plan.words import identifier_set
    from linter.plan.words import _IDENTIFIER

    text = "x×y = 3·k_cache  # 形状 2d→3d, 4ª café_crème\nv\u00a0w ½z 7seg\n"
    assert identifier_set(text) == frozenset(_IDENTIFIER.findall(text))
    # Digits first, hex, dunders, a lone surrogate (text decoded with surrogateescape).
    for odd in ("0x1f __init__ 9_a 12 _3", "k\udcffv = 1\n", text + "0x1f __init__ 9_a"):
        assert identifier_set(odd) == frozenset(_IDENTIFIER.findall(odd)), odd
    assert {"x", "y", "k_cache", "形状", "d", "café_crème", "v", "w", "seg"} <= identifier_set(text)


def test_k_candidates_are_the_identifiers_with_a_k_side_part() -> None:
    from linter.plan.file import _k_candidates

    ids = ["k", "__k", "k__x", "xk", "k_k", "q_k_v", "kk", "key_states", "my_keys", "Keys", "KEY", "a_K", "bk", "keyed"]
    assert _k_candidates(ids) == {"k", "__k", "k__x", "xk", "k_k", "q_k_v", "key_states", "my_keys", "Keys", "KEY", "a_K"}


def test_kv104_needs_a_key_side_call_to_feed_a_value_side_target() -> None:
    kv104 = [rules_by_code()["KV104"]]
    head = "class Attention(nn.Module):\n    def forward(self, x):\n"
    tail = "        return q, k, v\n"
    own = ("        q = self.q_proj(x)\n        k = self.k_proj(x)\n        v = self.v_proj(x)\n")
    assert not parse_plan(head + own + tail, kv104, Settings()).needed
    for fed in ("        v = self.k_proj(x)\n",
                "        value = torch.cat([a,\n            self.k_proj(x)])\n",
                "        v = (a\n             @ self.k_proj(x))\n",
                "        self.v_cache = torch.empty(self.k_proj(x).shape) \\\n            if x else None\n",
                "        q, v = self.q_proj(x), self.k_proj(x)\n",
                "        self.v_cache = torch.stack(\n            [a,\n             self.k_proj(x)])\n",
                "        out = attend(q,\n            value=self.k_proj(x))\n"):
        text = head + own.replace("        v = self.v_proj(x)\n", fed) + "        v_proj = self.v_proj\n" + tail
        assert parse_plan(text, kv104, Settings()).needed, fed
    # A key-side call inside brackets opened on an earlier line, in a statement that assigns
    # no value-side target: ``keys()`` of a dict, with ``values`` about.
    for unfed in ("        names = sorted(\n            cache.keys())\n",
                  "        log(\"x\",\n            list(cache.keys()), values)\n"):
        text = head + own + unfed + "        values = None\n" + tail
        assert not parse_plan(text, kv104, Settings()).needed, unfed


def test_kv203_needs_a_fused_qkv_or_both_sides_named_where_the_split_is() -> None:
    kv203 = [rules_by_code()["KV203"]]
    head = "class Mixer(nn.Module):\n    def __init__(self, cfg):\n        self.num_key_value_heads = cfg.num_key_value_heads\n\n"
    for split in ("    def forward(self, x):\n        q, k, v = self.proj(x).chunk(3, dim=-1)\n",
                  "    def forward(self, x):\n        a, b, c = self.qkv(x).chunk(3, dim=-1)\n"):
        assert parse_plan(head + split, kv203, Settings()).needed, split
    # Gates split in three, no fused QKV and no K/V names where the split is.
    gates = "    def forward(self, x):\n        i, f, o = self.gates(x).chunk(3, dim=-1)\n"
    assert not parse_plan(head + gates, kv203, Settings()).needed


def test_kv106_needs_the_value_scale_assigned_a_value_naming_the_key_scale() -> None:
    kv106 = [rules_by_code()["KV106"]]
    head = "def forward(self, q, k, v, k_scale, v_scale):\n"
    for body in ("    v_scale = v_scale or k_scale\n",
                 "    self._v_scale = (\n        self._v_scale if self._v_scale is not None else self._k_scale)\n",
                 "    if v_scale is None:\n        v_scale: float = k_scale\n"):
        assert parse_plan(head + body + "    return attn(q, k, v)\n", kv106, Settings()).needed, body
    for body in ("    v_scale = torch.ones(1)\n    return attn(q, k, v, k_scale, v_scale)\n",
                 "    assert v_scale == k_scale\n",
                 "    v_scale += k_scale\n",
                 "    v_scale = 1.0  # k_scale\n"):
        assert not parse_plan(head + body, kv106, Settings()).needed, body


def test_kv106_reads_amax_scales_as_the_rule_does() -> None:
    # ``names.is_scale_name`` takes ``amax`` for a scale: a file without "scale" in it is the
    # rule's too (the trigger and the condition once asked for "scale" and missed it).
    from dataclasses import replace

    from benchmarks.equivalence import default_settings
    from linter.runner import _lint_text, job_for

    text = ("def attend(q, k, v, k_amax, v_amax=None):\n"
            "    v_amax = v_amax if v_amax is not None else k_amax\n"
            "    return fp8_attention(q, k, v, k_amax, v_amax)\n")
    job = job_for(default_settings())
    assert [f.code for f in _lint_text(text, "m.py", job)] == ["KV106"]
    assert _lint_text(text, "m.py", job) == _lint_text(text, "m.py", replace(job, prefilter=False))


def test_kv205_needs_a_query_head_count_and_a_kv_head_count_or_width_in_the_class() -> None:
    kv205 = [rules_by_code()["KV205"]]
    head = "class Attention(nn.Module):\n    def __init__(self, config):\n"
    view = "\n    def forward(self, x):\n        return self.k_proj(x).view(2, {heads}, 4)\n"
    for size, heads in (("config.num_key_value_heads * 4", "self.num_heads"),
                        ("config.NUM_KV_HEADS * 4", "self.NUM_HEADS"),
                        ("self.kv_dim", "self.n_heads"),
                        # No "head" in its code: the condition once asked for one and missed it.
                        ("config.num_query_groups * 4", "getattr(config, 'num_attention_heads')")):
        text = head + f"        self.k_proj = nn.Linear(8, {size})\n" + view.format(heads=heads)
        assert parse_plan(text, kv205, Settings()).needed, (size, heads)
    # No KV head count or width where the projections are declared, or no query head count.
    for size, heads in (("8 * self.head_dim", "self.num_heads"), ("config.num_key_value_heads * 4", "self.num_kv_heads")):
        text = head + f"        self.k_proj = nn.Linear(8, {size})\n" + view.format(heads=heads)
        assert not parse_plan(text, kv205, Settings()).needed, (size, heads)


def test_kv301_needs_an_attribute_of_the_pair_rebuilt_from_itself() -> None:
    kv301 = [rules_by_code()["KV301"]]
    head = "class Cache:\n    def __init__(self):\n        self.k_cache = None\n        self.v_cache = None\n\n    def append(self, k, v):\n"
    for body in ("        self.k_cache = torch.cat([self.k_cache, k])\n",
                 "        self.v_cache = torch.cat(\n            [self.v_cache,\n             v])\n",
                 "        self.k_cache[0] = self.k_cache[1]\n"):
        assert parse_plan(head + body, kv301, Settings()).needed, body
    for body in ("        return self.k_cache, self.v_cache\n",
                 "        if self.k_cache is None or self.k_cache.shape[0] < 4:\n            return k\n",
                 "        out = self.k_cache  # self.k_cache\n"):
        assert not parse_plan(head + body, kv301, Settings()).needed, body


def test_a_reshape_call_s_first_dotted_argument_is_read_where_each_call_name_ends() -> None:
    from linter.plan.file import _File

    text = (
        "a = torch.narrow(self.k_cache, 0, 0, n)\n"
        "b = torch.split(*parts, key_states)\n"
        "c = splitter(value_states)\n"  # not a reshape call: a longer word
        "d = chunk((q), 2)\n"
        "e = x.expand(2, -1)\n"  # a number first: no name
        "f = split(torch.narrow, k)\n"  # a reshape name inside the arguments, not called
    )
    f = _File(text, Settings())
    read = {n for n in ("k_cache", "key_states", "value_states", "q", "narrow", "x", "k") if f.argument_reshaped(n)}
    assert read == {"k_cache", "key_states", "q", "narrow"}


def test_kv104_reads_every_return_of_one_name_twice_in_one_pass() -> None:
    from linter.rules.kv104.condition import _returned_twice

    assert _returned_twice("def f(k):\n    return k, k\n") == {"k"}
    assert _returned_twice("    return self.key, key.view(2, -1)\n") == {"key"}
    assert _returned_twice("    return (k_cache,  # both\n            self.k_cache)\n") == {"k_cache"}
    # A return inside the pair an earlier one reads is tried too.
    assert _returned_twice("    return x,\n    return k, k\n") == {"k"}
    # Not twice: another name, a name only a comment holds, a first element that is a call.
    assert _returned_twice("    return k, k_x\n") == set()
    assert _returned_twice("    return k, self.  # k\n v\n") == set()
    assert _returned_twice("    return f(k), k\n") == set()
    assert _returned_twice("    self.returned_k, k = 1, 2\n") == set()


def _possessive_patterns() -> dict[str, re.Pattern[str]]:
    from linter.plan import file
    from linter.rules.kv104 import condition as kv104
    from linter.rules.kv105 import condition as kv105
    from linter.rules.kv207 import condition as kv207
    from linter.rules.kv209 import condition as kv209
    from linter.plan import words

    found = {}
    for module in (file, kv104, kv105, kv207, kv209, words):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and ("*+" in value.pattern or "++" in value.pattern):
                found[f"{module.__name__}.{name}"] = value
    return found


_PATTERN_PIECES = ["return", "self", "k", "v_x", "ключ", "1", ".", ",", "(", ")", "[", "=", "==", "*", " ", "\t", "\n",
                   "\\\n", "# c\n", "#", "'"]


def test_the_gap_and_name_chains_are_possessive() -> None:
    # What stands between tokens, and a name before a dot, can never give back what it took:
    # 3.5% less CPU over sglang and vllm than backtracking, KV104's returns read in one pass.
    patterns = _possessive_patterns()
    assert {"linter.plan.words._DOT", "linter.rules.kv104.condition._RETURNED_PAIR", "linter.rules.kv209.condition._BEFORE_ARGUMENT"} <= set(patterns)


@given(st.lists(st.sampled_from(_PATTERN_PIECES), max_size=60))
def test_possessive_patterns_match_as_their_backtracking_forms(pieces: list[str]) -> None:
    # Each possessive quantifier stands before what it cannot match (a bracket, a dot, a
    # comma), so giving back would never let the pattern match elsewhere or otherwise.
    text = "".join(pieces)
    for name, pattern in _possessive_patterns().items():
        loose = re.compile(pattern.pattern.replace("*+", "*").replace("++", "+"), pattern.flags)
        found = [(m.span(), m.groups()) for m in pattern.finditer(text)]
        assert found == [(m.span(), m.groups()) for m in loose.finditer(text)], name


_WORD_PIECES = ["k", "key", "k_cache", "self", "é", "_", "1", " ", ".", "(", "\n", "kk", "ключ"]


@given(st.lists(st.sampled_from(_WORD_PIECES), max_size=120), st.sampled_from(["k", "key", "k_cache", "self", "ключ"]))
def test_word_spans_are_the_whole_word_matches(pieces: list[str], word: str) -> None:
    from linter.plan.words import _FEW, word_spans

    text = "".join(pieces)
    expected = [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text)]
    assert list(word_spans(text, (word,))) == expected
    # Past ``_FEW`` occurrences the rest are found by a pattern, with the same answers.
    many = " ".join([text] * (_FEW + 2))
    assert list(word_spans(many, (word,))) == [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", many)]


@given(
    st.lists(st.sampled_from(_WORD_PIECES), max_size=60),
    st.lists(st.sampled_from(_WORD_PIECES), max_size=60),
    st.sampled_from(["k", "key", "k_cache", "ключ"]),
)
def test_word_spans_asked_again_answer_for_the_text_asked_about(first: list[str], second: list[str], word: str) -> None:
    from linter.plan.words import word_spans

    def spans(text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text)]

    a, b = "".join(first), "".join(second) + " k"
    # A search left half-way, another text asked in between, the first asked again: each
    # answer is its own text's, whatever the spans kept from the one before.
    partial = word_spans(a, (word,))
    next(partial, None)
    assert list(word_spans(b, (word,))) == spans(b)
    assert list(word_spans(a, (word, word))) == spans(a) * 2
    assert list(word_spans(a, (word,))) == spans(a)
    assert list(word_spans(b, (word,))) == spans(b)


def test_self_attributes_read_ascii_and_other_text_alike() -> None:
    from linter.plan.file import _File

    text = "x = self.k_cache\ny = self . v_cache[0]\nz = obj.self.inner\nmyself.not_this = 1\nself(k)\n"
    expected = {"k_cache", "v_cache", "inner"}
    assert _File(text, Settings()).self_attributes == expected
    # Text with a letter of another script takes the per-occurrence path, with one more rule:
    # ``éself`` is one identifier, not ``self``.
    other = text + "# ключ\néself.nor_this = 2\n"
    assert _File(other, Settings()).self_attributes == expected


_STATEMENT_PIECES = ["    x = f(", "k", ")", "]", "[", "\\", "\n", "\n", "def g():\n", "    return (", " \"", "y", "  "]


@given(st.lists(st.sampled_from(_STATEMENT_PIECES), max_size=40))
def test_a_statement_start_is_what_a_walk_from_the_chunk_start_finds(pieces: list[str]) -> None:
    from linter.plan.file import _File
    from linter.plan.statements import _statement_end

    def walked(code: str, start: int, at: int) -> int | None:
        # Statement by statement from the chunk's start, each end looked for before ``at``.
        while True:
            end = _statement_end(code, start, at)
            if end is None:
                return None
            if end >= at:
                return start
            start = end + 1

    code = "".join(pieces) + "k"
    f = _File(code, Settings(), reduced=True)
    for at in (m.start() for m in re.finditer("k", code)):
        assert f.statement_start(at) == walked(code, f.chunk_start(at), at), (code, at)


def test_own_statements_leave_out_nested_definitions() -> None:
    from linter.plan.code_only import code_only
    from linter.plan.statements import own_statements

    body = code_only(
        "(x, n):\n"
        "    def inner(\n        a,\n    ):\n        return a[0]\n"  # a signature over lines: no dedent
        "    @dec\n    class C:\n        def m(self): return 1\n"
        "    y = x[:n]\n"
        "    if n:\n        async def g(): return 2\n        return y\n"  # a one-line definition, then a dedent
        "    s = \"\"\"\n    def fake():\n        return 3\n    \"\"\"\n"  # a string's rest on a later line
        "    return x.narrow(0, 0, n)\n"
    )
    own = own_statements(body)
    assert own is not None
    assert [line.strip() for line in own.split("\n") if line.strip()] == [
        "(x, n):", "@dec", "y = x[:n]", "if n:", "return y", "s =", '""', "return x.narrow(0, 0, n)",
    ]
    # Indentation a count of spaces cannot read, brackets that do not add up: unknown.
    assert own_statements("(x):\n\tdef f():\n\t\treturn 1\n") is None
    assert own_statements("(x):\n    return (x\n") is not None  # closed by the end of the text
    assert own_statements("(x):\n    def f():\n        return x)\n    return y\n") is None


# ``imports._FROM_IMPORT`` as first written, each character of the list or line through an
# alternation: the oracle for the form that reads them in runs.
_FROM_IMPORT_BY_CHARACTER = re.compile(
    r"from(?<![\w.]from)(?=[ \t.\\])(?:[ \t]|\\\r?\n)*(?=[\w.])(\.*)([\w.]*)(?:[ \t]|\\\r?\n)*import(?!\w)[ \t]*"
    r"(\((?:[^)#]|#[^\n]*(?![^\n]))*\)|(?:[^\n\\]|\\(?:\r?\n|.))*)"
)
_IMPORT_PIECES = ["from x import ", "from .y.z import (", "from \\\n x import ", "from", " ", ".", "x", "import",
                  "(", ")", ",", "#", "# c )", "\\", "\n", "\r\n", "\t", " as ", "é"]


@given(st.lists(st.sampled_from(_IMPORT_PIECES), max_size=40))
def test_from_imports_read_in_runs_as_character_by_character(pieces: list[str]) -> None:
    from linter.plan.imports import _FROM_IMPORT

    text = "".join(pieces)
    found = [(m.span(), m.groups()) for m in _FROM_IMPORT.finditer(text)]
    assert found == [(m.span(), m.groups()) for m in _FROM_IMPORT_BY_CHARACTER.finditer(text)]


def test_a_rule_asked_after_the_pair_keeps_its_trigger_words_in_strings() -> None:
    # ``--select KV104,KV205``: KV104's pair is asked first and the code read from then on,
    # but KV205 reads a head count named in a string (``getattr(config, "...")``): its
    # trigger words are looked for among all the text's identifiers, as when it runs alone.
    rules = rules_by_code()
    text = (
        "class Attention(nn.Module):\n    def __init__(self, config):\n"
        "        self.k_proj = nn.Linear(8, config.num_query_groups * 4)\n"
        "        self.v_proj = nn.Linear(8, config.num_query_groups * 4)\n\n"
        "    def forward(self, x):\n"
        "        k = self.k_proj(x).view(2, getattr(config, 'num_attention_heads'), 4)\n"
        "        return k, self.v_proj(x)\n"
    )
    assert "KV205" in parse_plan(text, [rules["KV205"]], Settings()).rules
    assert "KV205" in parse_plan(text, [rules["KV104"], rules["KV205"]], Settings()).rules


@pytest.mark.parametrize("code", sorted(rules_by_code()))
def test_every_invalid_example_is_planned_whatever_rule_asks_for_the_pair_first(code: str) -> None:
    rules = rules_by_code()
    for example in rules[code].INVALID:
        alone = parse_plan(example.code, [rules[code]], Settings())
        after_a_pair = parse_plan(example.code, [rules["KV104"], rules[code]], Settings())
        assert code in alone.rules and code in after_a_pair.rules, example.code


KV102 = [rules_by_code()["KV102"]]


def test_kv101_needs_a_cut_of_the_key_not_a_step_or_an_index() -> None:
    # sglang's shape: the key cast and rotated in place, never cut; and a row taken by index.
    cast = ("def forward(self, q, k, v):\n    q, k = q.float(), k.float()\n"
            "    q, k = self.rotary_emb(q, k)\n    return self.attn(q, k, v)\n")
    assert not parse_plan(cast, KV101, Settings()).needed
    assert not parse_plan(cast.replace("k.float()", "k[0]"), KV101, Settings()).needed
    for cut in ("k.float()[:, :t]", "k.transpose(1, 2)[..., :t]", "k.float().narrow(1, 0, t)", "torch.narrow(k.float(), 1, 0, t)"):
        assert parse_plan(cast.replace("k.float()", cut), KV101, Settings()).needed, cut


def test_kv102_needs_both_sides_sliced_or_split_not_indexed() -> None:
    indexed = ("def forward(self, q, k, v, slots):\n    k = k[slots]\n    v = v[slots]\n"
               "    return flash_attn_func(q, k, v)\n")
    assert not parse_plan(indexed, KV102, Settings()).needed
    assert not parse_plan(indexed.replace("[slots]", ".float()"), KV102, Settings()).needed
    for cut in ("[:, :t]", ".transpose(1, 2)[..., :t]", ".transpose(1, 2).split(t)[0]"):
        assert parse_plan(indexed.replace("[slots]", cut), KV102, Settings()).needed, cut
