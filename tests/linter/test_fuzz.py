"""Generated Python (hypothesmith) never crashes the linter, alone or mixed with attention code.

``lint_source`` may refuse text that is not valid Python (``SourceError``) and nothing else;
the full per-file pipeline (``check_stdin``: decode, pre-filter, depth guard, parse, rules,
noqa, fixes) never reports an internal error; every finding's span lies inside the file.
The attention snippets are the rules' own examples, so the rules have something to look at.
CI runs the ``kvlint-ci`` profile; ``KVLINT_HYPOTHESIS_PROFILE=kvlint-thorough`` runs more.
"""

from __future__ import annotations

import os

import hypothesmith
import pytest
import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linter.config import CliOptions, load_settings
from linter.engine import SourceError, lint_source
from linter.files import source_lines
from linter.finding import Finding
from linter.rules import all_rules
from linter.runner import check_stdin, job_for

# hypothesmith compiles each generated program to check it; programs such as ``1()`` draw a
# SyntaxWarning ("'int' object is not callable") that says nothing about kvlint.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

_COMMON = {
    "deadline": None,  # libcst parse time varies with the generated program's size
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    "database": None,
}
settings.register_profile("kvlint-ci", max_examples=60, **_COMMON)
settings.register_profile("kvlint-thorough", max_examples=2000, **_COMMON)
PROFILE = settings.get_profile(os.environ.get("KVLINT_HYPOTHESIS_PROFILE", "kvlint-ci"))

SNIPPETS = [example.code for rule in all_rules() for example in (*rule.INVALID, *rule.VALID)]
FIX_JOB = job_for(load_settings(None, CliOptions(), [r.code for r in all_rules()]), fix=True, unsafe_fixes=True)
FOUND: set[str] = set()  # rule codes the generated attention code triggered
FIXED_CASES: list[str] = []  # generated programs --fix changed


def _assert_spans_inside(findings: list[Finding], text: str) -> None:
    rows = source_lines(text)
    for f in findings:
        for span in (f.span, *(r.span for r in f.related)):
            assert 1 <= span.row <= span.end_row <= len(rows) + 1, f
            assert span.column >= 1 and (span.row, span.column) <= (span.end_row, span.end_column), f
            if span.row <= len(rows):
                assert span.column <= len(rows[span.row - 1]) + 1, f


def _lint_or_refuse(text: str) -> list[Finding]:
    try:
        findings = lint_source(text)
    except SourceError:
        return []
    _assert_spans_inside(findings, text)
    return findings


def _pipeline(text: str) -> None:
    result = check_stdin(text.encode("utf-8", "surrogatepass"), "gen.py", FIX_JOB)
    assert not [p for p in result.problems if p.code == "EKV999"], result.problems
    _assert_spans_inside(result.findings, result.text or text)
    if result.fixed:
        cst.parse_module(result.text)


# Programs from hypothesmith's grammar, mixed with attention snippets at the top, in the middle
# (indented into a function) or at the end.
_mixed = st.builds(
    lambda program, snippet, where: {
        "before": snippet + program,
        "after": program + "\n" + snippet,
        "inside": "def _outer():\n" + "".join(f"    {line}\n" for line in (program + "\n" + snippet).splitlines()) + "    pass\n",
    }[where],
    hypothesmith.from_grammar(),
    st.sampled_from(SNIPPETS),
    st.sampled_from(["before", "after", "inside"]),
)


# Attention code built from the vocabulary the rules look for, so findings and fixes happen:
# K/V name pairs, reshapes applied to one side or both, and the attention call.
_PAIRS = [("k", "v"), ("key_states", "value_states"), ("cache_k", "cache_v"), ("k_chunk", "v_chunk"), ("wk", "wv")]
_RESHAPES = ["{x}[:n]", "{x}[:, :n]", "{x}.view(b, s, h, d)", "{x}.reshape(-1, h, d)", "{x}.chunk(2)[0]",
             "{x}.narrow(0, 0, n)", "{x}.transpose(1, 2)", "{x}[idx]", "torch.narrow({x}, 1, 0, n)", "{x}"]
_CALLS = ["flash_attn_func({q}, {k}, {v})", "torch_npu.npu_fusion_attention({q}, {k}, {v}, 8, 'TND')",
          "F.scaled_dot_product_attention({q}, {k}, {v})", "self.attn({q}, {k}, {v})"]


@st.composite
def _attention_programs(draw) -> str:
    lines = ["import torch", "import torch_npu", "import torch.nn.functional as F", "", "def attend(q, k, v, n, b, s, h, d, idx):"]
    names = ["k", "v"]
    for _ in range(draw(st.integers(1, 5))):
        k_name, v_name = draw(st.sampled_from(_PAIRS))
        k_src, v_src = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        lines.append(f"    {k_name} = {draw(st.sampled_from(_RESHAPES)).format(x=k_src)}")
        names.append(k_name)
        if draw(st.booleans()):
            lines.append(f"    {v_name} = {draw(st.sampled_from(_RESHAPES)).format(x=v_src)}")
            names.append(v_name)
    k_arg = draw(st.sampled_from([n for n in names if "v" not in n] or ["k"]))
    v_arg = draw(st.sampled_from([n for n in names if "k" not in n] or ["v"]))
    k_expr = draw(st.sampled_from(_RESHAPES)).format(x=k_arg)
    lines.append("    return " + draw(st.sampled_from(_CALLS)).format(q="q", k=k_expr, v=v_arg))
    return "\n".join(lines) + "\n"


@PROFILE
@given(_attention_programs())
def test_generated_attention_code_never_crashes_the_rules_and_fixes_are_idempotent(text):
    findings = _lint_or_refuse(text)
    FOUND.update(f.code for f in findings)
    result = check_stdin(text.encode(), "gen.py", FIX_JOB)
    assert not result.problems, result.problems
    if result.fixed:
        FIXED_CASES.append(text)
        cst.parse_module(result.text)
        again = check_stdin(result.text.encode(), "gen.py", FIX_JOB)
        assert not again.fixed or again.text == result.text


def test_the_attention_generator_makes_the_rules_fire_and_fix():
    # Runs after the property above (file order): generated code that no rule reports would
    # exercise only the parser.
    assert "KV101" in FOUND and FIXED_CASES


@PROFILE
@given(hypothesmith.from_grammar())
def test_grammar_programs_never_crash_the_rules(text):
    _lint_or_refuse(text)


@PROFILE
@given(hypothesmith.from_node())
def test_node_programs_never_crash_the_rules(text):
    _lint_or_refuse(text)


@PROFILE
@given(_mixed)
def test_programs_mixed_with_attention_code_never_crash_the_rules(text):
    _lint_or_refuse(text)


@PROFILE
@given(st.one_of(_mixed, hypothesmith.from_node()))
def test_the_whole_pipeline_with_fixes_never_fails_internally(text):
    _pipeline(text)
