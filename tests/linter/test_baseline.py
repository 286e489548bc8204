import json

import pytest

from linter.baseline import BaselineError, new_findings, write_baseline
from linter.finding import Finding, Span


def _at(row: int, code: str = "KV101", path: str = "a.py") -> Finding:
    return Finding(code, "m", path, Span(row, 5, row, 10), "s", noqa_row=row)


TEXT = "def f(q, k, v):\n    k = k[:n]\n    return attn(q, k, v)\n"


def test_recorded_findings_are_not_new(tmp_path):
    base = tmp_path / "baseline.json"
    write_baseline(base, [(_at(2), TEXT)])
    assert new_findings(base, [(_at(2), TEXT)]) == []


def test_matching_survives_lines_added_above(tmp_path):
    base = tmp_path / "baseline.json"
    write_baseline(base, [(_at(2), TEXT)])
    moved = "import os\n\n\n" + TEXT
    assert new_findings(base, [(_at(5), moved)]) == []


def test_matching_ignores_reindentation(tmp_path):
    base = tmp_path / "baseline.json"
    write_baseline(base, [(_at(2), TEXT)])
    assert new_findings(base, [(_at(2), TEXT.replace("    k = k[:n]", "        k  =  k[:n]"))]) == []


def test_a_finding_on_changed_text_is_new(tmp_path):
    base = tmp_path / "baseline.json"
    write_baseline(base, [(_at(2), TEXT)])
    changed = TEXT.replace("k[:n]", "k[:m]")
    assert new_findings(base, [(_at(2), changed)]) == [_at(2)]


def test_a_second_copy_of_a_recorded_finding_is_new(tmp_path):
    base = tmp_path / "baseline.json"
    doubled = TEXT + TEXT
    write_baseline(base, [(_at(2), doubled)])
    assert new_findings(base, [(_at(2), doubled), (_at(5), doubled)]) == [_at(5)]


def test_other_codes_and_paths_are_new(tmp_path):
    base = tmp_path / "baseline.json"
    write_baseline(base, [(_at(2), TEXT)])
    assert len(new_findings(base, [(_at(2, "KV102"), TEXT), (_at(2, path="b.py"), TEXT)])) == 2


def test_paths_are_stored_relative_to_the_baseline_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    base = tmp_path / "sub" / "baseline.json"
    write_baseline(base, [(_at(2, path="pkg/a.py"), TEXT)])
    assert json.loads(base.read_text())["findings"][0]["path"] == "../pkg/a.py"


def test_a_file_that_is_not_a_baseline_is_a_one_line_error(tmp_path):
    base = tmp_path / "baseline.json"
    base.write_text("[1, 2]")
    with pytest.raises(BaselineError, match="not a kvlint baseline"):
        new_findings(base, [])


def test_a_missing_baseline_is_an_error_naming_it(tmp_path):
    with pytest.raises(BaselineError, match="nope.json"):
        new_findings(tmp_path / "nope.json", [])
