"""The module-wide screens (KV105, KV207, KV208, KV209) let a file through exactly when its rule could
report, and a file they stop still gets its other rules' per-definition plan."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from benchmarks.equivalence import default_settings
from linter import dependencies
from linter.plan.module_screens import SCREENS, TEXT_SCREENS
from linter.plan.text_plan import parse_plan
from linter.rules import rules_by_code
from linter.runner import _lint_text, job_for
from linter.settings import Settings

HELPER = "def trim(x, n):\n    return x[:, :n]\n\n\n"


def _screen(code: str, text: str, path: str = "<test>") -> bool:
    return bool(_lines(code, text, path))


def _lines(code: str, text: str, path: str = "<test>") -> frozenset[int]:
    return SCREENS[code](ast.parse(text), Settings(), path)


def _package(root, modules: dict[str, str], linted: str):
    """A package ``serving`` under ``root`` with ``modules``; the (empty) linted file's path."""
    package = root / "serving"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in {**modules, linted: ""}.items():
        (package / name).write_text(text)
    return package / linted


@pytest.mark.parametrize("code", sorted(SCREENS))
def test_every_invalid_example_passes_its_module_screen(code: str) -> None:
    for example in rules_by_code()[code].INVALID:
        assert _screen(code, example.code), example.code


@pytest.mark.parametrize("code", sorted(TEXT_SCREENS))
def test_every_invalid_example_passes_its_text_screen(code: str) -> None:
    for example in rules_by_code()[code].INVALID:
        assert TEXT_SCREENS[code](example.code, Settings(), "<test>"), example.code


def test_kv105_stops_a_helper_that_builds_a_new_tensor() -> None:
    rotary = "def rotate(x, cos):\n    return torch.cat((-x[..., 1:], x[..., :1]), -1) * cos\n\n\n"
    caller = "def attention(q, k, v, cos):\n    k = rotate(k, cos)\n    return flash_attn_func(q, k, v)\n"
    assert not _screen("KV105", rotary.replace("torch.cat", "").replace(" * cos", "") + caller.replace("rotate", "other"))
    assert not _screen("KV105", "def rotate(x, cos):\n    return x, cos\n\n\n" + caller)
    assert _screen("KV105", HELPER + caller.replace("rotate(k, cos)", "trim(k, cos)"))


def test_kv105_needs_the_key_itself_as_the_argument() -> None:
    assert not _screen("KV105", HELPER + "def f(q, k, v, n):\n    q = trim(q, n)\n    return flash_attn_func(q, k, v)\n")
    # A key without its value twin anywhere in the file is no pair.
    assert not _screen("KV105", HELPER + "def f(q, k, n):\n    return index_scores(q, trim(k, n))\n")


def test_kv105_follows_a_returned_name_to_its_assignment() -> None:
    narrowed = "def window(x, s, n):\n    part = x.narrow(1, s, n)\n    return part\n\n\n"
    caller = "def f(q, k, v):\n    k = window(k, 0, 4)\n    return flash_attn_func(q, k, v)\n"
    assert _screen("KV105", narrowed + caller)
    assert not _screen("KV105", narrowed.replace("x.narrow(1, s, n)", "s + n") + caller)


def test_kv207_needs_one_side_redeclared_after_the_parent_init_on_a_known_base() -> None:
    base = "class Base(nn.Module):\n    def __init__(self, d, h, kv):\n        super().__init__()\n"
    base += "        self.k_proj = nn.Linear(d, kv)\n        self.v_proj = nn.Linear(d, kv)\n\n\n"
    child = "class Child(Base):\n    def __init__(self, d, h, kv):\n        super().__init__(d, h, kv)\n        self.v_proj = nn.Linear(d, h)\n"
    assert _screen("KV207", base + child)
    # Both sides redeclared: nothing inherited to compare with.
    both = child + "        self.k_proj = nn.Linear(d, h)\n"
    assert not _screen("KV207", base + both)
    # The base is neither a class of the module nor an imported name.
    assert not _screen("KV207", child)
    # The twin is named by no class of the module: nothing the rule could inherit it from.
    assert not _screen("KV207", base.replace("k_proj", "q_proj") + child)


def _kv207_reported(text: str) -> list[str]:
    job = replace(job_for(Settings(select=frozenset({"KV207"}))), prefilter=False)
    return [f.code for f in _lint_text(text, "<test>", job)]


def test_kv207_a_side_redeclared_with_its_twins_very_size_is_stopped() -> None:
    # A base building K; its subclass adds V with the same output size, spelled alike (sglang's
    # gated attention): one resolver reads both, so they name the same head count.
    base = ("class Base(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
            "        self.total_num_kv_heads = config.num_key_value_heads\n"
            "        self.k_proj = ColumnParallelLinear(\n            config.hidden_size,\n"
            "            self.total_num_kv_heads * self.head_dim,  # per rank below\n            bias=False,\n        )\n\n\n")
    child = ("class Child(Base):\n    def __init__(self, config):\n        super().__init__(config)\n"
             "        self.v_proj = ColumnParallelLinear(config.hidden_size, (self.total_num_kv_heads * self.head_dim), bias=False)\n")
    assert _kv207_reported(base + child) == []
    assert not _screen("KV207", base + child)
    # Another size, another spelling of a size, or a size behind ``*args``: the rule decides.
    for other in ("config.num_attention_heads * self.head_dim", "self.head_dim * self.total_num_kv_heads", "*sizes"):
        text = base + child.replace("(self.total_num_kv_heads * self.head_dim)", other)
        assert _screen("KV207", text), other
    different = base + child.replace("(self.total_num_kv_heads * self.head_dim)", "config.num_attention_heads * self.head_dim")
    assert _kv207_reported(different) == ["KV207"]
    # The twin declared twice in the ancestry, once with another size.
    grown = base + base.replace("class Base(nn.Module)", "class Wide(Base)").replace("self.total_num_kv_heads *", "self.num_heads *")
    assert _screen("KV207", grown + child.replace("(Base)", "(Wide)"))


def test_kv207_needs_the_twin_named_by_a_class_the_child_derives_from(tmp_path) -> None:
    # diffusers' shape: both sides built under ``if``/``else`` (so neither is surely defined),
    # a base from a package outside the tree, and other classes of the module naming the twin.
    child = ("class Child(nn.Module, Mixin):\n    def __init__(self, d, h, fused):\n        super().__init__()\n"
             "        if fused:\n            self.to_k = nn.Linear(d, h)\n        self.to_v = nn.Linear(d, h)\n")
    sibling = "class Sibling(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n        self.to_k = nn.Linear(d, d)\n\n\n"
    linted = _package(tmp_path, {}, "flux.py")
    assert not _screen("KV207", f"from diffusers.attention import Mixin\n\n\n{sibling}{child}", str(linted))
    assert not _screen("KV207", f"from .missing import Mixin\n\n\n{sibling}{child}", str(linted))
    # The same sibling as the child's base, directly or through a middle class, lends the twin.
    derived = child.replace("(nn.Module, Mixin)", "(Sibling)")
    assert _screen("KV207", sibling + derived, str(linted))
    assert _screen("KV207", sibling + "class Middle(Sibling):\n    pass\n\n\n" + derived.replace("(Sibling)", "(Middle)"), str(linted))


def test_kv207_needs_the_twin_named_where_an_imported_base_lives(tmp_path) -> None:
    child = ("class Child(Base):\n    def __init__(self, config):\n        super().__init__(config)\n"
             "        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim)\n")
    base = ("class Base(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
            "        self.head_dim = config.hidden_size // config.num_attention_heads\n"
            "        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)\n")
    runner = _package(tmp_path, {"paired.py": base, "fused.py": base.replace("k_proj", "qkv_proj")}, "runner.py")
    for importer in ("from .paired import Base", "from serving.paired import Base"):
        assert _screen("KV207", f"{importer}\n\n\n{child}", str(runner)), importer
    # The base's module never names ``k_proj``, or cannot be found in the tree.
    assert not _screen("KV207", f"from .fused import Base\n\n\n{child}", str(runner))
    assert not _screen("KV207", f"from .missing import Base\n\n\n{child}", str(runner))
    # Found as the rule finds it: a finding from the imported base, and none from the other.
    slow = replace(job_for(default_settings()), prefilter=False)
    for module, codes in (("paired", ["KV207"]), ("fused", [])):
        found = _lint_text(f"from .{module} import Base\n\n\n{child}", str(runner), slow)
        assert [f.code for f in found] == codes, module


def test_kv208_checks_the_pool_of_the_module_and_passes_an_imported_one() -> None:
    pool = "class Pool:\n    def __init__(self, size, head_dim, v_head_dim=None):\n        pass\n\n\n"
    build = "def build(cfg):\n    print(cfg.v_head_dim)\n    return Pool(8, head_dim=cfg.head_dim)\n"
    assert _screen("KV208", pool + build)
    assert not _screen("KV208", pool + build.replace("head_dim=cfg.head_dim)", "head_dim=cfg.head_dim, v_head_dim=cfg.v_head_dim)"))
    assert not _screen("KV208", pool + build.replace("Pool(8,", "Pool(8, 64, 32,"))
    assert not _screen("KV208", pool + build.replace("print(cfg.v_head_dim)", "pass"))
    assert not _screen("KV208", build)  # neither defined nor imported: the rule cannot resolve it


def test_kv208_reads_an_imported_pool_as_the_rule_does(tmp_path) -> None:
    runner = _package(tmp_path, {
        "pools.py": "class Pool:\n    def __init__(self, size, head_dim, v_head_dim=None):\n        pass\n",
        "plain.py": "class Pool:\n    def __init__(self, size, head_dim):\n        pass\n",
    }, "runner.py")
    package = runner.parent
    build = "def build(cfg):\n    print(cfg.v_head_dim)\n    return Pool(8, head_dim=cfg.head_dim)\n"
    for importer in ("from .pools import Pool", "from serving.pools import Pool"):
        assert _screen("KV208", f"{importer}\n\n\n{build}", str(runner)), importer
    # The pool's module takes no value head dim, or lies outside the linted package.
    assert not _screen("KV208", f"from .plain import Pool\n\n\n{build}", str(runner))
    assert not _screen("KV208", f"from sglang.pools import Pool\n\n\n{build}", str(runner))
    # Read the way the rule reads it: the file is a dependency of the result.
    with dependencies.collect() as reads:
        _screen("KV208", f"from .plain import Pool\n\n\n{build}", str(runner))
    assert str(package / "plain.py") in {path for path, _, _ in reads}


def test_kv208_text_screen_reads_the_imported_pool_before_the_file_is_parsed(tmp_path) -> None:
    from linter.rules.kv208.screen import kv208_text

    runner = _package(tmp_path, {
        "pools.py": "class Pool:\n    def __init__(self, size, head_dim, v_head_dim=None):\n        pass\n",
        "plain.py": "class Pool:\n    def __init__(self, size, head_dim):\n        pass\n",
        "both.py": "class Pool:\n    def __init__(self, size, head_dim, v_head_dim=None, value_head_dim=None):\n        pass\n",
    }, "runner.py")
    build = "def build(cfg):\n    print(cfg.v_head_dim)\n    return Pool(8, head_dim=cfg.head_dim)\n"
    settings = Settings()
    for importer in ("from .pools import Pool", "from serving.pools import Pool", "from .pools import (  # pools\n    Pool,\n)",
                     "from .plain import Pool as Plain\nfrom .pools import Pool"):
        text = f"{importer}\n\n\n{build}"
        assert kv208_text(text, settings, str(runner)) and _screen("KV208", text, str(runner)), importer
    # Where the ast screen says no from the pool's module alone, the text screen does too.
    for importer in ("from .plain import Pool", "from .both import Pool", "from sglang.pools import Pool",
                     "from .pools import Pool as Other\nfrom .plain import Pool"):
        text = f"{importer}\n\n\n{build}"
        assert not kv208_text(text, settings, str(runner)) and not _screen("KV208", text, str(runner)), importer
    # A pool the module defines is read from its own text: it must name a value head dim.
    local = "class Pool:\n    def __init__(self, n, head_dim, v_head_dim=None):\n        pass\n\n\n" + build
    assert kv208_text(local, settings, str(runner)) and _screen("KV208", local, str(runner))
    local = local.replace(", v_head_dim=None", "")
    assert not kv208_text(local, settings, str(runner)) and not _screen("KV208", local, str(runner))
    # It must take that head dim as an optional parameter of its ``__init__``, as the ast screen
    # reads it: a required one, a dataclass field or one only a default's call names is not.
    for pool in ("class Pool:\n    def __init__(self, n, head_dim, v_head_dim):\n        pass\n",
                 "@dataclass\nclass Pool:\n    head_dim: int\n    v_head_dim: int = 0\n",
                 "class Pool:\n    def __init__(self, n, head_dim=f(v_head_dim=1)):\n        pass\n"):
        local = pool + "\n\n" + build
        assert not kv208_text(local, settings, str(runner)) and not _screen("KV208", local, str(runner)), pool
    for pool in ("class Pool:\n    def __init__(\n        self,\n        n: Dict[str, int] = {},  # (\n        v_head_dim: Optional[int] = None,\n    ):\n        pass\n",
                 "class Pool:\n    def __init__(self, n, *, v_head_dim: int | None = None):\n        pass\n"):
        local = pool + "\n\n" + build
        assert kv208_text(local, settings, str(runner)) and _screen("KV208", local, str(runner)), pool
    # Where a quote on the call's line (or a bracket in a string) leaves the raw text unsure of
    # the callee, the code alone is read: ``Pool`` from the plain module again.
    for call in ('    return Pool(8, ")", head_dim=cfg.head_dim)\n',
                 '    n = len("(" * 4000)\n    n, head_dim = cfg.shape\n    return cfg\n'):
        text = "from .plain import Pool\n\n\ndef build(cfg):\n    print(cfg.v_head_dim)\n" + call
        assert not kv208_text(text, settings, str(runner)) and not _screen("KV208", text, str(runner)), call
        text = text.replace(".plain", ".pools")
        assert kv208_text(text, settings, str(runner)) == ("Pool(" in call), call


def test_a_file_the_module_screen_stops_still_reports_through_its_other_rules() -> None:
    # KV105's text condition holds (a helper cutting its parameter, called on the key) but its
    # screen does not (the call spreads a starred argument, which the rule does not follow);
    # KV101's inline cut is still found.
    text = ("def first(x, *rest):\n    return x[:1]\n\n\n"
            "def f(q, k, v, n, *extra):\n    a = first(k, *extra)\n    k = k[:, :n]\n    return flash_attn_func(q, k, v)\n")
    job = job_for(default_settings())
    assert parse_plan(text, job.rules, job.settings).module_rules == {"KV105"} and not _screen("KV105", text)
    codes = [f.code for f in _lint_text(text, "m.py", job)]
    assert codes == ["KV101"]


def test_kv105_reads_an_imported_helper_when_a_key_is_its_first_argument(tmp_path) -> None:
    model = _package(tmp_path, {"utils.py": "def trim(x, n):\n    return x[:, :n]\n\n\ndef rotate(x, cos):\n    return x * cos\n"}, "model.py")
    caller = "def f(q, k, v, n):\n    k = trim(k, n)\n    return flash_attn_func(q, k, v)\n"
    for importer in ("from .utils import trim", "from serving.utils import trim"):
        assert _screen("KV105", f"{importer}\n\n\n{caller}", str(model)), importer
    # A helper that builds a new tensor, the key not first, or a module outside the package.
    assert not _screen("KV105", f"from .utils import rotate as trim\n\n\n{caller}", str(model))
    assert not _screen("KV105", "from .utils import trim\n\n\n" + caller.replace("trim(k, n)", "trim(n, k)"), str(model))
    assert not _screen("KV105", f"from vllm.utils import trim\n\n\n{caller}", str(model))


def test_kv209_needs_a_viewing_helper_and_a_twin_viewed_otherwise() -> None:
    helper = "def heads(x, n):\n    return x.view(x.shape[0], n, -1)\n\n\n"
    caller = "def f(q, k, v):\n    k = heads(k, 8)\n    v = heads(v, 32)\n    return attn(q, k, v)\n"
    assert _screen("KV209", helper + caller)
    # The same helper with the same arguments views both alike.
    assert not _screen("KV209", helper + caller.replace("heads(v, 32)", "heads(v, 8)"))
    # A helper with no view in it (rotary, a norm) makes none.
    assert not _screen("KV209", helper.replace("x.view(x.shape[0], n, -1)", "rotate(x, n)") + caller)
    # The twin viewed inline.
    assert _screen("KV209", helper + caller.replace("heads(v, 32)", "v.view(v.shape[0], 32, -1)"))
    # Only the query through the helper.
    assert not _screen("KV209", helper + caller.replace("heads(k, 8)", "k").replace("heads(v, 32)", "heads(q, 32)"))


# A helper whose return views its first parameter only through names and axis-keeping steps,
# and look-alikes whose last view is of another view (a temporal convolution's round trip).
KV209_HELPERS = {
    "t = x.view(b, s, n, -1)\n        return t.transpose(1, 2)": True,
    "return x.transpose(1, 2).reshape(b, s, n, -1)": True,
    "x = x.view(b, s, n, -1)\n        return x.transpose(1, 2)": True,
    "y = x.view(b, s, n, -1).permute(0, 2, 1, 3).reshape(b * n, s, -1)\n        return y.reshape(b, n, s, -1)": False,
    "return x.view(b, s, n, -1).permute(0, 2, 1, 3).reshape(b, n, s, -1)": False,
    "return rearrange(x.view(b, s, -1), 'b s (h d) -> b h s d', h=n)": False,
}


@pytest.mark.parametrize(("body", "views"), KV209_HELPERS.items())
def test_kv209_reads_a_helpers_view_only_of_its_parameter_as_the_rule_does(body: str, views: bool) -> None:
    text = (
        "class Block(nn.Module):\n"
        "    def _heads(self, x, n):\n"
        "        b, s, _ = x.shape\n"
        f"        {body}\n\n"
        "    def forward(self, q, k, v):\n"
        "        k = self._heads(k.reshape(k.shape[0], k.shape[1], -1), 8)\n"
        "        v = v.view(v.shape[0], v.shape[1], 32, -1).transpose(1, 2)\n"
        "        return attn(q, k, v)\n"
    )
    job = job_for(default_settings())
    reported = [f.code for f in _lint_text(text, "m.py", replace(job, prefilter=False))]
    assert ("KV209" in reported) is views
    assert _screen("KV209", text) is views


def test_kv105_text_screen_reads_the_imported_helper_before_the_file_is_parsed(tmp_path) -> None:
    from linter.rules.kv105.screen import kv105_text

    model = _package(tmp_path, {"utils.py": "def trim(x, n):\n    return x[:, :n]\n\n\ndef rotate(x, cos):\n    return x * cos\n"}, "model.py")
    caller = "def f(q, k, v, n):\n    k = trim(k, n)\n    return flash_attn_func(q, k, v)\n"
    settings = Settings()
    for importer, cuts in (("from .utils import trim", True), ("from serving.utils import trim", True),
                           ("from .utils import rotate as trim", False), ("from vllm.utils import trim", False)):
        text = f"{importer}\n\n\n{caller}"
        assert kv105_text(text, settings, str(model)) == cuts == _screen("KV105", text, str(model)), importer
    # A helper the file defines is left to the ast screen, which reads its parameters.
    local = "def trim(x, n):\n    return x[:, :n]\n\n\n" + caller
    assert kv105_text(local, settings, str(model)) and _screen("KV105", local, str(model))


def test_kv209_text_screen_reads_the_imported_helper_before_the_file_is_parsed(tmp_path) -> None:
    from linter.rules.kv209.screen import kv209_text

    model = _package(tmp_path, {"heads.py": "def heads(x, n):\n    return x.view(x.shape[0], n, -1)\n\n\n"
                                            "def rotate(x, n):\n    return x * n\n"}, "model.py")
    caller = "def f(q, k, v):\n    k = heads(k, 8)\n    v = heads(v, 32)\n    return attn(q, k, v)\n"
    settings = Settings()
    for importer, views in (("from .heads import heads", True), ("from serving.heads import heads", True),
                            ("from .heads import rotate as heads", False), ("from vllm.heads import heads", False)):
        text = f"{importer}\n\n\n{caller}"
        assert kv209_text(text, settings, str(model)) == views == _screen("KV209", text, str(model)), importer
    # The same imported helper with the same arguments for both: no.
    same = "from .heads import heads\n\n\n" + caller.replace("heads(v, 32)", "heads(v, 8)")
    assert not kv209_text(same, settings, str(model)) and not _screen("KV209", same, str(model))
    # One through a helper the file defines, the other through one that views nothing: the
    # local helper keeps the text screen's yes (the twin is viewed inline).
    local = "def split(x, n):\n    return x.view(n, -1)\n\n\n" + "from .heads import rotate\n\n\n" + \
        "def f(q, k, v):\n    k = split(k, 8)\n    v = v.view(32, -1)\n    return attn(q, k, v)\n"
    assert kv209_text(local, settings, str(model)) and _screen("KV209", local, str(model))


def test_each_screen_names_the_lines_where_its_rule_may_report() -> None:
    # The runner keeps the top-level definitions holding these lines for libcst.
    kv105 = HELPER + "def f(q, k, v, n):\n    k = trim(k, n)\n    return flash_attn_func(q, k, v)\n\n\n" + \
        "def g(q, k, v, n):\n    q = trim(q, n)\n    k = trim(self.k,\n             n)\n    return q\n"
    assert _lines("KV105", kv105) == {6, 12}
    kv209 = ("def heads(x, n):\n    return x.view(x.shape[0], n, -1)\n\n\n"
             "def f(q, k, v):\n    k = heads(k, 8)\n    v = heads(v, 32)\n    return attn(q, k, v)\n")
    assert _lines("KV209", kv209) == {6, 7}
    kv208 = ("class Pool:\n    def __init__(self, n, head_dim, v_head_dim=None):\n        pass\n\n\n"
             "def build(cfg):\n    print(cfg.v_head_dim)\n    return Pool(8, head_dim=cfg.head_dim)\n")
    assert _lines("KV208", kv208) == {8}
    kv207 = ("class Base(nn.Module):\n    def __init__(self):\n        self.k_proj = nn.Linear(8, 8)\n        self.v_proj = nn.Linear(8, 8)\n\n\n"
             "@register\nclass Child(Base):\n    def __init__(self):\n        super().__init__()\n        self.k_proj = nn.Linear(8, 4)\n")
    assert _lines("KV207", kv207) == {8}


def _tops_by_full_parse(text: str, is_class: bool, name: str) -> list[str]:
    kinds = (ast.ClassDef,) if is_class else (ast.FunctionDef, ast.AsyncFunctionDef)
    return [ast.dump(s, include_attributes=True) for s in ast.parse(text).body if isinstance(s, kinds) and s.name == name]


_TOPS_TEXT = (
    "import torch\n\n\n@dataclass\nclass Pool:\n    def __init__(self, n, v_head_dim=None):\n"
    '        """class Fake:\ndef fake(): pass\n"""\n        pass\n\n\n'
    "async def helper(x):\n    return x[:1]\n\n\nif True:\n    class Hidden:\n        pass\n\n\n"
    "class Pool:\n    pass\n\n\ndef helper(y): return y\n"
)


@pytest.mark.parametrize("text", [_TOPS_TEXT, _TOPS_TEXT.replace("\n", "\r"), _TOPS_TEXT.replace("\n", "\r\n")])
def test_imported_tops_are_the_whole_modules_parsed_one_by_one(text: str) -> None:
    # Each definition asked for is parsed alone, with its own line numbers; a name only a
    # string or a nested block binds is no top-level definition; old Mac line ends read whole.
    from linter.plan.module_facts import _Tops

    tops = _Tops(text)
    for name in ("Pool", "helper", "Hidden", "Fake", "fake", "torch", "absent"):
        assert [ast.dump(c, include_attributes=True) for c in tops.classes(name)] == _tops_by_full_parse(text, True, name), name
        assert [ast.dump(f, include_attributes=True) for f in tops.functions(name)] == _tops_by_full_parse(text, False, name), name
    assert [c.lineno for c in tops.classes("Pool")] == [5, 22]


def test_imported_tops_of_the_repositorys_modules_read_alike() -> None:
    from pathlib import Path

    from linter.plan.module_facts import _Tops

    for path in sorted(Path(__file__).resolve().parents[2].joinpath("linter").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tops = _Tops(text)
        expected: dict[tuple[bool, str], list[str]] = {}
        for s in ast.parse(text).body:
            if isinstance(s, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                expected.setdefault((isinstance(s, ast.ClassDef), s.name), []).append(ast.dump(s, include_attributes=True))
        for (_, name) in list(expected):
            assert [ast.dump(c, include_attributes=True) for c in tops.classes(name)] == expected.get((True, name), []), (path, name)
            assert [ast.dump(f, include_attributes=True) for f in tops.functions(name)] == expected.get((False, name), []), (path, name)
        assert tops._whole is None, path  # every definition parsed alone


def test_kv207_text_screen_reads_the_ancestry_as_the_tree_screen_does(tmp_path) -> None:
    from linter.rules.kv207.screen import kv207_text

    child = ("class Child(nn.Module, Mixin):\n    def __init__(self, d, h, fused):\n        super().__init__()\n"
             "        if fused:\n            self.to_k = nn.Linear(d, h)\n        self.to_v = nn.Linear(d, h)\n")
    sibling = "class Sibling(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n        self.to_k = nn.Linear(d, d)\n\n\n"
    linted = _package(tmp_path, {"base.py": sibling}, "flux.py")
    cases = {
        # A base from outside the tree, or from a module the tree lacks: no lender.
        f"from diffusers.attention import Mixin\n\n\n{sibling}{child}": False,
        f"from .missing import Mixin\n\n\n{sibling}{child}": False,
        # A class of the module the child derives from, directly or through a middle class.
        sibling + child.replace("(nn.Module, Mixin)", "(Sibling)"): True,
        sibling + "class Middle(Sibling):\n    pass\n\n\n" + child.replace("(nn.Module, Mixin)", "(Middle)"): True,
        # A base read from a file of the tree: the tree screen asks more of it.
        "from .base import Sibling\n\n\n" + child.replace("(nn.Module, Mixin)", "(Sibling)"): True,
    }
    for text, expected in cases.items():
        assert kv207_text(text, Settings(), str(linted)) is expected, text
        assert _screen("KV207", text, str(linted)) is expected, text  # the two screens agree
