"""The runner's per-definition ast screens: what of a planned file reaches libcst."""

from __future__ import annotations

import ast
from dataclasses import replace

from linter.plan.code_only import code_only
from linter.plan.text_plan import excerpt, parse_plan
from linter.plan.file import _File
from linter.rules.kv101.condition import _kv101
from linter.rules import rules_by_code
from linter.plan.units import _class_text, _screened_units
from linter.runner import check_stdin, job_for
from linter.settings import Settings

SETTINGS = Settings(select=frozenset({"KV102"}))
JOB = job_for(SETTINGS)

# A class whose only finding-capable method is ``forward``; ``reset`` names K and V but
# slices neither, ``_helper`` has no K/V at all.
CLASS = '''\
class Attention(nn.Module):
    """Keys and values."""

    scale = 0.5

    def reset(self, k, v):
        self.k, self.v = k, v

    @torch.no_grad()
    def forward(self, q, cache_k, cache_v, b, p, s):
        keys = cache_k[:b, :p + s]
        values = cache_v[:b, :p]
        return F.scaled_dot_product_attention(q, keys, values)

    def _helper(self, x):
        return x + 1
'''


def test_a_class_live_for_a_method_scoped_rule_is_cut_to_its_header_and_that_method() -> None:
    plan = parse_plan(CLASS, [rules_by_code()["KV102"]], SETTINGS)
    assert not plan.whole and plan.range_rules == (frozenset({"KV102"}),)
    units, parsed, live = _screened_units(CLASS, plan, JOB)
    assert parsed and live == {"KV102"}
    kept = excerpt(CLASS, units)
    assert "class Attention(nn.Module):" in kept and "def forward" in kept and "@torch.no_grad()" in kept
    assert "def reset" not in kept and "_helper" not in kept and "scale = 0.5" not in kept


def test_the_finding_in_the_cut_class_is_reported_as_the_slow_path_reports_it() -> None:
    fast = check_stdin(CLASS.encode(), "attention.py", JOB).findings
    slow = check_stdin(CLASS.encode(), "attention.py", replace(JOB, prefilter=False)).findings
    assert [f.code for f in fast] == ["KV102"]
    assert [(f.span.row, f.span.column, f.message) for f in fast] == [(f.span.row, f.span.column, f.message) for f in slow]
    assert fast[0].span.row in (11, 12)  # the key or value line of ``forward``, in the file


def test_a_definition_no_screen_lets_through_never_reaches_libcst() -> None:
    # K and V both sliced (the text condition holds), but alike: the rule reports a site only
    # where no site of the other side matches it, and the screen knows it.
    text = CLASS.replace("cache_k[:b, :p + s]", "cache_k[:b, :p]")
    plan = parse_plan(text, [rules_by_code()["KV102"]], SETTINGS)
    assert plan.needed
    assert _screened_units(text, plan, JOB)[0] == []


def test_the_whole_files_tree_gives_the_units_parsing_each_definition_alone_gives() -> None:
    # Module-wide rules' screens build the whole tree first; the units cut from it must be the
    # same lines, also for a class that does not start the file.
    text = "import torch\n\n\ndef unrelated(x):\n    return x\n\n\n" + CLASS
    plan = parse_plan(text, [rules_by_code()["KV102"]], SETTINGS)
    alone = _screened_units(text, plan, JOB)
    assert alone[0] and alone == _screened_units(text, plan, JOB, ast.parse(text))
    assert "def forward" in excerpt(text, alone[0]) and "def reset" not in excerpt(text, alone[0])


def test_a_method_defined_under_a_class_level_if_still_reaches_libcst() -> None:
    # Cutting a class to its methods once dropped every statement that was not a ``def``,
    # and with it the methods an ``if``/``try`` at class level holds.
    text = CLASS.replace("    @torch.no_grad()\n    def forward", "    if HAS_FLASH:\n        def forward").replace(
        "        keys = cache_k", "            keys = cache_k").replace(
        "        values = cache_v", "            values = cache_v").replace(
        "        return F.scaled", "            return F.scaled")
    fast = check_stdin(text.encode(), "attention.py", JOB).findings
    slow = check_stdin(text.encode(), "attention.py", replace(JOB, prefilter=False)).findings
    assert [f.code for f in slow] == ["KV102"]
    assert [(f.span.row, f.message) for f in fast] == [(f.span.row, f.message) for f in slow]


def test_libcst_runs_only_the_rules_the_screens_left_live(monkeypatch) -> None:
    # Every rule enabled; only a few can report on the class (the slice rules and KV103, whose
    # screens pass ``forward``), so libcst's one pass over the class in place (the file is
    # little more than it) runs those alone, and the finding is the one the slow path (all
    # rules) reports.
    from linter import engine

    job = job_for(Settings(select=frozenset(rules_by_code())))
    ran = []
    real = engine.lint_module

    def recording(module, path, settings, rules, *rest, **named):
        ran.append(sorted(r.code for r in rules))
        return real(module, path, settings, rules, *rest, **named)

    monkeypatch.setattr(engine, "lint_module", recording)
    fast = check_stdin(CLASS.encode(), "attention.py", job).findings
    assert len(ran) == 1 and "KV102" in ran[0] and len(ran[0]) <= 3
    slow = check_stdin(CLASS.encode(), "attention.py", replace(job, prefilter=False)).findings
    assert len(ran[-1]) == len(job.rules) > 1
    assert [(f.code, f.span.row) for f in fast] == [(f.code, f.span.row) for f in slow] != []


def test_a_finding_in_a_kept_definition_is_reported_from_it_in_place_not_from_the_whole_file(monkeypatch) -> None:
    import linter.runner as runner

    module = (
        "import torch.nn.functional as F\n\nWINDOW = 128\n\n\n"
        "def unrelated(a, b):\n    return a[0] + b[1]\n\n\n" + CLASS + "\n\ndef tail(x):\n    return x\n"
    )
    seen: list[str] = []
    real = runner._parse_and_lint

    def recording(text, *args, **kwargs):
        seen.append(text)
        return real(text, *args, **kwargs)

    slow = check_stdin(module.encode(), "m.py", replace(JOB, prefilter=False)).findings
    monkeypatch.setattr(runner, "_parse_and_lint", recording)
    fast = check_stdin(module.encode(), "m.py", JOB).findings
    assert fast == slow and [f.code for f in fast] == ["KV102"]
    in_place = seen[-1]
    # The kept lines (the module's import and constant, the cut class) in the file's order,
    # the other definitions left out; the finding sits on the file's row all the same.
    assert module not in seen and in_place.count("\n") < module.count("\n")
    kept = [line for line in in_place.split("\n") if line]
    assert kept == [line for line in module.split("\n") if line in kept]
    assert "WINDOW = 128" in in_place and "import torch" in in_place and "keys = cache_k[:b, :p + s]" in in_place
    assert "def unrelated" not in in_place and "def reset" not in in_place and "def tail" not in in_place


def test_a_fix_in_a_definition_parsed_without_the_others_lands_on_the_file_s_rows() -> None:
    # The in-place text leaves the unrelated definitions out; the fix's inserted line is
    # indented as its own row of the file and lands there, as parsing the whole file puts it.
    module = (
        "import torch\n\n\n" + "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(30))
        + "def f(q, k, v, t):\n\tk = k[:t]\n\treturn flash_attn_func(q, k, v)\n"
        + "".join(f"\n\ndef tail_{i}(x):\n    return x - {i}\n" for i in range(30))
    )
    job = job_for(Settings(select=frozenset({"KV101"})), fix=True, unsafe_fixes=True)
    fast = check_stdin(module.encode(), "m.py", job)
    slow = check_stdin(module.encode(), "m.py", replace(job, prefilter=False))
    assert fast.findings == slow.findings and [f.code for f in fast.findings] == []
    assert fast.text == slow.text and "\tk = k[:t]\n\tv = v[:t]\n\treturn flash_attn_func" in fast.text
    assert fast.text.count("\n") == module.count("\n") + 1


def test_a_rule_that_places_findings_by_the_module_s_lines_keeps_the_file_s_rows() -> None:
    # KV107 reads CPython's tree of the module's text and places its findings by its line
    # numbers: the text libcst gets must keep every row of the file for it.
    from linter.rules import rule_class

    example = rule_class("KV107").INVALID[0]
    helpers = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(60))
    module = "import torch\n\n\n" + helpers + example.code
    job = job_for(Settings(select=frozenset({"KV107"})))
    fast = check_stdin(module.encode(), "m.py", job).findings
    slow = check_stdin(module.encode(), "m.py", replace(job, prefilter=False)).findings
    assert fast == slow and [f.span.row for f in fast] == [module[:module.index(example.code)].count("\n") + example.line]


# A class whose live rules each reason within one method is read member by member by the plan:
# only the members meeting a condition under the class's header are parsed.
MEMBERS = '''\
import torch


@register(
    "attention")
class SelfAttention(
    nn.Module,
):
    """Keys and values.
    Cached."""

    scale = {"a": 1,
"b": 2}

    def __init__(self, k_proj, v_proj):
        super().__init__()
        self.k_proj, self.v_proj = k_proj, v_proj

    @torch.no_grad()
    def forward(self, q, k, v, t):
        k = k[:, :t]
        scores = torch.matmul(q, k.transpose(-2, -1)).softmax(-1)
        return torch.matmul(scores, v)

    def describe(self):
        text = """k and v
are trimmed alike"""
        return text
'''


def test_a_class_is_planned_member_by_member_for_method_scoped_rules() -> None:
    plan = parse_plan(MEMBERS, [rules_by_code()["KV101"]], Settings(select=frozenset({"KV101"})))
    lines = MEMBERS.split("\n")
    assert plan.ranges == ((3, 29),)
    body, members = plan.range_members[0]
    # The header (decorators included) ends where the body starts; only ``forward`` meets the
    # condition alone: the class's name is its attention context, read with it.
    assert lines[body - 1] == "):" and [lines[a:b][1].strip() for a, b in members] == ["def forward(self, q, k, v, t):"]


def test_a_member_cut_parses_at_the_files_own_lines_and_reports_as_the_slow_path() -> None:
    job = job_for(Settings(select=frozenset({"KV101"})))
    plan = parse_plan(MEMBERS, job.rules, job.settings)
    body, members = plan.range_members[0]
    tree = ast.parse(_class_text(MEMBERS.split("\n"), 3, 29, (body, members)))
    cls = tree.body[0]
    assert [s.name for s in cls.body] == ["forward"] and cls.body[0].lineno - 1 == members[0][0] - 3 + 1
    fast = check_stdin(MEMBERS.encode(), "attention.py", job).findings
    slow = check_stdin(MEMBERS.encode(), "attention.py", replace(job, prefilter=False)).findings
    assert [(f.code, f.span.row, f.message) for f in fast] == [(f.code, f.span.row, f.message) for f in slow]
    assert [f.code for f in slow] == ["KV101"]


def test_a_class_no_member_of_which_meets_a_condition_alone_is_not_planned() -> None:
    # The key cut in a method that never names the value: KV101 pairs them within one function.
    split = MEMBERS.replace("        k = k[:, :t]\n", "").replace(
        "    def describe(self):", "    def trim(self, k, t):\n        return k[:, :t]\n\n    def describe(self):")
    plan = parse_plan(split, [rules_by_code()["KV101"]], Settings(select=frozenset({"KV101"})))
    assert plan.ranges == () and not plan.needed
    # Read whole, the class meets the condition: only the member reading stops it.
    assert _kv101(_File(code_only(split), Settings(), reduced=True))


def test_the_plan_reads_by_method_exactly_the_rules_the_screens_read_by_method() -> None:
    from linter.plan.screens import METHOD_SCOPED
    from linter.plan.text_plan import BY_METHOD

    assert BY_METHOD == METHOD_SCOPED
