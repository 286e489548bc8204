from dataclasses import replace

from linter.runner import check_file, check_paths, check_stdin
from linter.settings import Settings
from tests.linter.fakes import fake_job


def _file(tmp_path, text: str, name: str = "m.py"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def test_findings_come_from_the_injected_rules(tmp_path):
    result = check_file(_file(tmp_path, "flag_me(v)\n"), fake_job())
    assert [(f.code, f.span.row) for f in result.findings] == [("KV900", 1)] and result.problems == []


def test_noqa_suppresses_a_finding(tmp_path):
    result = check_file(_file(tmp_path, "flag_me(v)  # noqa: KV900\nflag_me(w)\n"), fake_job())
    assert [f.span.row for f in result.findings] == [2]


def test_per_file_ignores_drop_codes_for_matching_paths(tmp_path):
    settings = Settings(per_file_ignores=((f"{tmp_path.as_posix()}/gen_*.py", frozenset({"KV900"})),))
    ignored = check_file(_file(tmp_path, "flag_me(v)\n", "gen_a.py"), fake_job(settings))
    kept = check_file(_file(tmp_path, "flag_me(v)\n", "b.py"), fake_job(settings))
    assert ignored.findings == [] and len(kept.findings) == 1


def test_a_syntax_error_is_one_e999_diagnostic(tmp_path):
    result = check_file(_file(tmp_path, "x = (\n"), fake_job())
    assert [p.code for p in result.problems] == ["E999"] and result.findings == []


def test_nesting_deeper_than_python_allows_is_a_diagnostic_not_a_crash(tmp_path):
    text = "x = " + "(" * 3000 + "1" + ")" * 3000 + "\n"
    result = check_file(_file(tmp_path, text), fake_job())
    assert [p.code for p in result.problems] == ["E999"] and "nested" in result.problems[0].message


def test_a_failing_rule_costs_one_file_with_an_internal_error_diagnostic(tmp_path):
    result = check_file(_file(tmp_path, "explode()\n"), fake_job())
    assert [p.code for p in result.problems] == ["EKV999"] and "ZeroDivisionError" in result.problems[0].message


def test_crlf_tabs_and_bom_files_are_linted(tmp_path):
    result = check_file(_file(tmp_path, b"\xef\xbb\xbfif x:\r\n\tflag_me(v)\r\n"), fake_job())
    assert [(f.span.row, f.span.column) for f in result.findings] == [(2, 2)]


def test_empty_file_has_no_findings_and_no_problems(tmp_path):
    result = check_file(_file(tmp_path, ""), fake_job())
    assert result.findings == [] and result.problems == []


def test_fixing_applies_until_nothing_more_applies(tmp_path):
    result = check_file(_file(tmp_path, "flag_me(flag_me(v))\n"), fake_job(fix=True))
    assert result.text == "fixed_me(fixed_me(v))\n" and result.findings == [] and result.fixed_count == 2


def test_fixing_a_file_without_fixable_findings_changes_nothing(tmp_path):
    result = check_file(_file(tmp_path, "x = 1\n"), fake_job(fix=True))
    assert not result.fixed


def test_the_pool_reports_what_a_single_process_reports(tmp_path):
    paths = [_file(tmp_path, "x = 1\n" * i + "flag_me(v)\n", f"m{i}.py") for i in range(40)]
    serial = check_paths(paths, fake_job(), jobs=1)
    pooled = check_paths(paths, fake_job(), jobs=2)
    assert [(r.path, r.findings) for r in serial] == [(r.path, r.findings) for r in pooled]


def test_stdin_is_linted_under_its_display_name():
    result = check_stdin(b"flag_me(v)\n", "pkg/mod.py", fake_job())
    assert result.findings[0].path == "pkg/mod.py"


def test_stdin_never_touches_the_cache(tmp_path):
    job = replace(fake_job(), cache_dir=str(tmp_path / "cache"))
    check_stdin(b"flag_me(v)\n", "mod.py", job)
    assert not (tmp_path / "cache").exists()


def test_a_rule_failing_on_fixed_text_leaves_the_file_unfixed_with_a_diagnostic(tmp_path, monkeypatch):
    # The fake's fix turns flag_me into fixed_me; make the re-lint of the fixed text blow up.
    monkeypatch.setattr("tests.linter.fakes.FIXED_NAME", "explode")
    result = check_file(_file(tmp_path, "flag_me(v)\n"), fake_job(fix=True))
    assert not result.fixed and [p.code for p in result.problems] == ["EKV999"]


def test_a_run_collects_cycles_less_often_and_restores_the_callers_threshold(tmp_path, monkeypatch):
    import gc

    from linter import runner

    seen = []
    check = runner.check_file
    monkeypatch.setattr(runner, "check_file", lambda path, job: seen.append(gc.get_threshold()) or check(path, job))
    before = gc.get_threshold()
    results = check_paths([_file(tmp_path, "flag_me(v)\n")], fake_job(), 1)
    assert [f.code for f in results[0].findings] == ["KV900"]
    assert seen == [runner._GC_THRESHOLD] != [before]
    assert gc.get_threshold() == before


def _libcst_texts(monkeypatch, text):
    """The texts libcst parses to lint ``text`` with every rule, and the findings' codes."""
    from linter import runner
    from linter.settings import Settings

    parsed = []
    parse_and_lint = runner._parse_and_lint

    def counting(source, *args, **kwargs):
        parsed.append(source)
        return parse_and_lint(source, *args, **kwargs)

    monkeypatch.setattr(runner, "_parse_and_lint", counting)
    job = runner.job_for(Settings(select=frozenset(runner.rules_by_code())))
    codes = [f.code for f in runner._lint_text(text, "m.py", job)]
    fast = list(parsed)
    assert codes == [f.code for f in runner._lint_text(text, "m.py", replace(job, prefilter=False))]
    return fast, codes


_ATTENTION = "def attention(q, k, v, t):\n    k = k[:, :t]\n    return flash_attn_func(q, k, v)\n"


def test_a_file_that_is_mostly_its_planned_definitions_is_parsed_once_in_place(monkeypatch):
    # A finding in an excerpt is parsed again in place; a small file goes in place at once.
    text = "import torch\n\n\n" + _ATTENTION
    parsed, codes = _libcst_texts(monkeypatch, text)
    assert codes == ["KV101"] and len(parsed) == 1 and parsed[0].split("\n")[3] == "def attention(q, k, v, t):"


def test_a_file_with_much_else_is_screened_as_an_excerpt_first(monkeypatch):
    other = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(40))
    parsed, codes = _libcst_texts(monkeypatch, "import torch\n\n" + other + _ATTENTION)
    assert codes == ["KV101"] and len(parsed) == 2 and parsed[0].startswith("def attention")
