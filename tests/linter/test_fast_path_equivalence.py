"""The pre-filter never changes what kvlint reports: fast path == slow path (every file parsed).

The corpus here is every rule's own VALID/INVALID example plus the attention, transformer and
activation modules of the installed torch (about 23k lines, where K/V names and attention code
are densest), the whole torch tree (the tree issue 5 measures on), and the attention trees
issue 15 measures on (vllm, sglang, transformers: ``benchmarks/trees.py``) where they are
unpacked under ``$KVLINT_TREES`` (or fetched into ``$KVLINT_BENCH_CACHE`` by
``python -m benchmarks --fetch``); ``python -m benchmarks --tree PATH`` compares any other tree.
"""

from __future__ import annotations

import importlib.util
import keyword
import os
import re
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.equivalence import default_settings, differences, findings
from benchmarks.trees import TREES, locate, trees_from_env
from linter.rules import all_rules


def _torch_sample() -> list[str]:
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "torch is a test dependency"
    root = Path(next(iter(spec.submodule_search_locations)))
    words = ("attention", "transformer", "activation", "multihead")
    return sorted(str(p) for p in root.rglob("*.py") if any(w in p.name.lower() for w in words))


@pytest.fixture(scope="module")
def example_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("examples")
    paths = []
    for rule in all_rules():
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for i, example in enumerate(examples):
                path = root / f"{rule.code}_{kind}_{i}.py"
                path.write_text(example.code)
                paths.append(str(path))
    return paths


def test_rule_examples_give_the_same_findings_with_and_without_the_prefilter(example_files: list[str]) -> None:
    assert differences(example_files, jobs=1) == ([], [])


def test_every_invalid_example_still_reports_through_the_fast_path(example_files: list[str]) -> None:
    reported = {path for path, *_ in findings(example_files, prefilter=True, jobs=1)}
    invalid = {p for p in example_files if "_invalid_" in p}
    assert invalid <= reported


# Spellings real code uses that the examples do not: constants, other K/V names, a trailing
# comment on every line, code one class deeper, calls broken over lines. Each rewrite keeps
# the example's meaning, so the slow path still reports on most of them; the fast path must
# report whatever the slow path does.
_KEEP = frozenset({"self", "super", "print", "len", "range", "torch", "nn", "F"})
REWRITES = {
    "upper-case names": lambda code: re.sub(
        r"\b[A-Za-z_]\w*\b", lambda m: m.group() if keyword.iskeyword(m.group()) or m.group() in _KEEP else m.group().upper(), code
    ),
    "k/v as key/value": lambda code: re.sub(r"\bk\b", "key", re.sub(r"\bv\b", "value", code)),
    "k_x as x_k": lambda code: re.sub(r"\bk_(\w+)", r"\1_k", re.sub(r"\bv_(\w+)", r"\1_v", code)),
    "key as keys": lambda code: re.sub(r"\bkey\b", "keys", re.sub(r"\bvalue\b", "values", code)),
    "calls over lines": lambda code: code.replace("(", "(\n    ").replace(",", " ,"),
    "inside a class": lambda code: "class Holder:\n" + textwrap.indent(code, "    "),
    "trailing comments": lambda code: code.replace("\n", "  # k v\n"),
    "annotated assignments": lambda code: re.sub(
        r"^([ \t]*)([A-Za-z_][\w.]*)[ \t]*=(?!=)(?=[^\n]*[^,(\[{\n]$)", r"\1\2: Any =", code, flags=re.MULTILINE
    ),
}


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_rewritten_invalid_examples_lose_no_finding_on_the_fast_path(rewrite: str, tmp_path: Path) -> None:
    paths = []
    for rule in all_rules():
        for i, example in enumerate(rule.INVALID):
            path = tmp_path / f"{rule.code}_{i}.py"
            path.write_text(REWRITES[rewrite](example.code))
            paths.append(str(path))
    slow = findings(paths, prefilter=False, jobs=1)
    assert len({path for path, *_ in slow}) > len(paths) // 3, "the rewrite must keep most examples reporting"
    assert sorted(set(slow) - set(findings(paths, prefilter=True, jobs=1))) == []


def test_extra_pairs_from_settings_reach_the_prefilter(tmp_path: Path) -> None:
    path = tmp_path / "ring.py"
    path.write_text("def f(q, keys_in, vals_in, t):\n    keys_in = keys_in[:t]\n"
                    "    return flash_attn_func(q, keys_in, vals_in)\n")
    settings = replace(default_settings(), extra_pairs=(("keys_in", "vals_in"),))
    slow = findings([str(path)], prefilter=False, jobs=1, settings=settings)
    assert slow, "the slow path must report this custom pair for the comparison to mean anything"
    assert findings([str(path)], prefilter=True, jobs=1, settings=settings) == slow


def test_torch_attention_modules_give_the_same_findings_with_and_without_the_prefilter() -> None:
    sample = _torch_sample()
    assert len(sample) > 20
    assert differences(sample, jobs=1) == ([], [])


@pytest.mark.slow  # every file of the torch tree parsed: about a minute
def test_the_whole_torch_tree_gives_the_same_findings_with_and_without_the_prefilter() -> None:
    # The yardstick tree: every file parsed (minutes on 2 cores) against the fast path.
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    root = next(iter(spec.submodule_search_locations))
    paths = [str(p) for p in Path(root).rglob("*.py")]
    assert len(paths) > 2000
    assert differences(paths, jobs=2) == ([], [])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TREES))
def test_an_attention_tree_gives_the_same_findings_with_and_without_the_prefilter(name: str) -> None:
    # Every file parsed and visited against the fast path, on the code kvlint exists for.
    root = locate(trees_from_env())[name]
    if root is None:
        pytest.skip(f"{TREES[name][0]} is not unpacked: set KVLINT_TREES=DIR (DIR/{name}/...) "
                    "or run python -m benchmarks --fetch CACHE and set KVLINT_BENCH_CACHE=CACHE")
    paths = [str(p) for p in root.rglob("*.py")]
    assert len(paths) > 1000
    assert differences(paths, jobs=len(os.sched_getaffinity(0))) == ([], [])


# KV203's text condition reads the split call's arguments (``rules.kv203.condition._may_be_thirds``):
# every spelling of an equal-thirds split the rule reports must reach it, each other split may
# be left out. Written in the shape of a GQA attention's forward.
_KV203_MODULE = '''\
class SelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.qkv_proj = nn.Linear(
            config.hidden_size, (self.num_heads + 2 * self.num_key_value_heads) * self.head_dim
        )

    def forward(self, hidden_states):
        qkv = self.qkv_proj(hidden_states)
        h = self.head_dim * self.num_heads
{split}
        return q, k, v
'''
_KV203_REPORTED = {
    "list of three": "        q, k, v = qkv.split([h, h, h], -1)",
    "tuple, blanks, trailing comma": "        q, k, v = qkv.split(( h,h , h, ), dim=-1)",
    "list times three": "        q, k, v = qkv.split([h] * 3, dim=-1)",
    "torch.split": "        q, k, v = torch.split(qkv, [h, h, h], -1)",
    "torch.chunk": "        q, k, v = torch.chunk(qkv, 3, -1)",
    "chunks by keyword": "        q, k, v = qkv.chunk(chunks=3, dim=-1)",
    "dim first by keyword": "        q, k, v = qkv.chunk(dim=-1, chunks=3)",
    "parenthesized 3": "        q, k, v = qkv.chunk((3), dim=-1)",
    "hex 3, axis in brackets": "        q, k, v = qkv.tensor_split(0x3, (-1))",
    "one size, three names": "        q, k, v = qkv.split(self.hidden_size, dim=-1)",
    "sizes by name": "        sizes = [h, h, h]\n        q, k, v = qkv.split(sizes, -1)",
    "over lines": "        q, k, v = qkv.split(\n            [h,\n             h, h],  # equal\n            dim=-1,\n        )",
    "line continuations": "        q, k, v = qkv.split([h, \\\n            h, h], \\\n            -1)",
    "no qkv root, k and v targets": "        x = qkv\n        query, key, value = x.split([h, h, h], dim=-1)",
    "fused weight on dim 0": "        q, k, v = self.qkv_proj.weight.chunk(3, dim=0)",
    "fused bias, no dim": "        qb, kb, vb = self.qkv_proj.bias.data.chunk(3)",
    "weights named by the parts": "        wq, wk, wv = torch.split(state[0], [h, h, h])",
}
_KV203_NOT_REPORTED = {
    "unequal sizes": "        q, k, v = qkv.split([h, h // 2, h // 2], dim=-1)",
    "dim 0": "        q, k, v = qkv.chunk(3, dim=0)",
    "dim by name": "        q, k, v = qkv.chunk(3, dim=self.axis)",
    "no dim": "        q, k, v = qkv.chunk(3)",
    "weight that is no fused QKV": "        q = k = v = 0\n        a, b, c = self.out_proj.weight.chunk(3, dim=0)",
    "two parts": "        q, kv = qkv.chunk(2, dim=-1)\n        k, v = kv, kv",
}


@pytest.mark.parametrize("spelling", sorted(_KV203_REPORTED))
def test_kv203_splits_reach_the_rule_in_every_spelling(spelling: str, tmp_path: Path) -> None:
    _reported_alike_on_both_paths(tmp_path, _KV203_MODULE.format(split=_KV203_REPORTED[spelling]), "KV203")


@pytest.mark.parametrize("spelling", sorted(_KV203_NOT_REPORTED))
def test_kv203_splits_the_rule_cannot_report_are_not_parsed(spelling: str) -> None:
    _silent_and_not_planned(_KV203_MODULE.format(split=_KV203_NOT_REPORTED[spelling]), "KV203")


def _reported_alike_on_both_paths(tmp_path: Path, text: str, code: str) -> None:
    path = tmp_path / "module.py"
    path.write_text(text)
    slow = findings([str(path)], prefilter=False, jobs=1)
    # Another rule may report the same line (KV210 reads every K/V size KV206 reads): the
    # spelling must reach ``code``, and both paths must agree on all of them.
    assert [found for _, found, *_ in slow if found == code] == [code], "the slow path must report it"
    assert findings([str(path)], prefilter=True, jobs=1) == slow


def _silent_and_not_planned(text: str, code: str) -> None:
    from linter.plan.text_plan import parse_plan
    from linter.rules import rules_by_code
    from linter.runner import _lint_text, job_for

    assert _lint_text(text, "module.py", replace(job_for(default_settings()), prefilter=False)) == []
    assert not parse_plan(text, [rules_by_code()[code]], default_settings()).needed, text


# KV104's "written into the key side" finding needs the key cache subscripted as (part of) an
# assignment's target (``rules.kv104.condition._assigned_through_a_subscript``): every spelling of
# such a store must reach the rule; a subscript read in an expression need not (one followed by
# a comma or a closing bracket counts where an assignment follows it: a tuple target's element).
_KV104_MODULE = '''\
def write(key_cache, value_cache, slots, key, value, other):
{store}
    return key_cache
'''
_KV104_STORES = {
    "plain": "    key_cache[slots] = value",
    "blank before the bracket": "    key_cache [slots] = value",
    "annotated": "    key_cache[slots]: torch.Tensor = value",
    "tuple target": "    key_cache[slots], other = value, key",
    "parenthesized tuple target": "    (key_cache[slots], other) = (value, key)",
    "list target": "    [other, key_cache[slots]] = [key, value]",
    "over lines": "    key_cache[\n        slots,  # the new tokens\n    ] = value",
}


@pytest.mark.parametrize("spelling", sorted(_KV104_STORES))
def test_kv104_key_cache_stores_reach_the_rule_in_every_spelling(spelling: str, tmp_path: Path) -> None:
    _reported_alike_on_both_paths(tmp_path, _KV104_MODULE.format(store=_KV104_STORES[spelling]), "KV104")


# KV104's dead value parameter (``value = key.view(...)`` before ``value`` is read): the
# condition reads the first name assigned to the value (``_File.assigned_names``).
_KV104_OVERWRITES = {
    "plain": "    value = key.view(n, -1)",
    "parenthesized": "    value = (key.view(n, -1))",
    "annotated": "    value: torch.Tensor = key.view(n, -1)",
    "annotated over lines": "    value: Optional[\n        torch.Tensor\n    ] = key.view(n, -1)",
}


@pytest.mark.parametrize("spelling", sorted(_KV104_OVERWRITES))
def test_kv104_a_value_parameter_overwritten_from_the_key_reaches_the_rule(spelling: str, tmp_path: Path) -> None:
    text = (
        "def attend(query, key, value, n):\n" + _KV104_OVERWRITES[spelling] + "\n"
        "    return flash_attn_func(query, key, value)\n"
    )
    _reported_alike_on_both_paths(tmp_path, text, "KV104")


def test_kv104_a_key_cache_read_by_subscript_is_not_parsed() -> None:
    for read in ("    other = key_cache[slots] * value_cache[slots] + value",
                 "    other = key_cache[slots].float() @ value",
                 "    store(key_cache[slots], value_cache[slots], key, value)",
                 "    other = torch.cat([key_cache[slots], key]) + value"):
        _silent_and_not_planned(_KV104_MODULE.format(store=read), "KV104")


# KV206 reads the key head dim in a view's or an allocation's arguments
# (``rules.kv206.condition._passed_to_a_use``): each spelling of such a call must reach the rule.
_KV206_MODULE = '''\
class Attention(nn.Module):
    def __init__(self, hidden, heads, qk_head_dim, v_head_dim):
        super().__init__()
        self.heads, self.qk_head_dim, self.v_head_dim = heads, qk_head_dim, v_head_dim
        self.v_proj = nn.Linear(hidden, heads * v_head_dim)
        self.scale = self.qk_head_dim ** -0.5

    def forward(self, x, b, s):
{use}
'''
_KV206_USES = {
    "view": "        return self.v_proj(x).view(b, s, self.heads, self.qk_head_dim)",
    "view over lines": "        return self.v_proj(x).view(\n            b, s,  # tokens\n            self.heads, self.qk_head_dim,\n        )",
    "reshape of a tuple": "        return self.v_proj(x).reshape((b, s, self.heads, self.qk_head_dim))",
    "allocation": "        v_cache = torch.zeros(\n            (b, s, self.heads, self.qk_head_dim))\n        return v_cache",
}


@pytest.mark.parametrize("spelling", sorted(_KV206_USES))
def test_kv206_key_head_dims_in_a_value_view_reach_the_rule_in_every_spelling(spelling: str, tmp_path: Path) -> None:
    _reported_alike_on_both_paths(tmp_path, _KV206_MODULE.format(use=_KV206_USES[spelling]), "KV206")


def test_kv206_a_key_head_dim_outside_every_view_is_not_parsed() -> None:
    use = "        return self.v_proj(x).view(b, s, self.heads, self.v_head_dim) * self.scale"
    _silent_and_not_planned(_KV206_MODULE.format(use=use), "KV206")
