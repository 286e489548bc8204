"""The real-bug benchmark's manifest rules and verdict table; no network (downloads are benchmark-only)."""

from __future__ import annotations

import hashlib

import pytest

from benchmarks.realbugs.fetch import _archives, read_member
from benchmarks.realbugs.manifest import (
    CLASSES,
    ManifestError,
    check_lines,
    load,
    parse_case,
    split_of,
)
from benchmarks.realbugs.table import Result, found, render, verdict


def _case(**overrides) -> dict:
    table = {
        "id": "proj-v-cache-from-k", "project": "proj", "repo": "owner/proj", "fix_commit": "a" * 40,
        "class": "twin-name", "description": "V cache allocated from K's shape", "lines": [10, 40],
        "buggy": {"requirement": "proj==1.0", "path": "proj/attn.py"},
        "fixed": {"requirement": "proj==1.1", "path": "proj/attn.py"},
    }
    table["split"] = split_of(overrides.get("id", table["id"]))
    table.update(overrides)
    return table


def test_the_split_is_the_sha1_rule_of_the_id():
    for case_id in ("a", "vllm-kv-heads", "fla-path-attn-bwd-dkv-v-tile"):
        expected = "measure" if int(hashlib.sha1(case_id.encode()).hexdigest(), 16) % 3 == 0 else "dev"
        assert split_of(case_id) == expected


def test_the_committed_manifest_obeys_its_rules():
    cases = load()
    assert cases, "the manifest has no cases"
    assert all(c.split == split_of(c.id) for c in cases)
    assert all(c.kind in CLASSES for c in cases)
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        assert (c.buggy is not None and c.fixed is not None) if c.released else c.path
    # At least a quarter is held out; when a new case tips this, add cases until it holds again.
    assert 4 * sum(c.split == "measure" for c in cases) >= len(cases)


@pytest.mark.parametrize("overrides, message", [
    ({"split": "measure" if split_of("proj-v-cache-from-k") == "dev" else "dev"}, "split rule gives"),
    ({"class": "typo"}, "is not one of"),
    ({"lines": []}, "non-empty list"),
    ({"lines": [0]}, "1-based"),
    ({"description": "two\nlines"}, "one line"),
    ({"buggy": {"requirement": "proj>=1.0", "path": "proj/attn.py"}}, "name==version"),
    ({"fixed": {"requirement": "proj==1.1"}}, "fixed.path"),
    ({"fix_commit": "abc123"}, "40-character"),
    ({"snippet": "k = v"}, "unknown fields"),
    ({"released": False, "buggy": None, "fixed": None}, "needs `path`"),
])
def test_a_case_breaking_a_rule_is_refused_with_its_id_and_field(overrides, message):
    table = {k: v for k, v in _case(**overrides).items() if v is not None}
    with pytest.raises(ManifestError, match=message) as caught:
        parse_case(table)
    assert "proj-v-cache-from-k" in str(caught.value)


def test_a_released_case_may_leave_its_fix_commit_out_but_an_unreleased_one_may_not():
    table = _case()
    del table["fix_commit"]
    assert parse_case(table).fix_commit is None
    unreleased = {k: v for k, v in _case(released=False, buggy=None, fixed=None, path="proj/attn.py").items() if v is not None}
    del unreleased["fix_commit"]
    with pytest.raises(ManifestError, match="40-character"):
        parse_case(unreleased)


def test_a_case_without_a_field_names_it():
    table = _case()
    del table["repo"]
    with pytest.raises(ManifestError, match=r"missing fields \['repo'\]"):
        parse_case(table)


def test_bug_lines_past_the_end_of_the_released_file_are_refused():
    case = parse_case(_case())
    check_lines(case, "x\n" * 40)
    with pytest.raises(ManifestError, match=r"\[40\] lie past the end of proj==1.0:proj/attn.py \(39 lines\)"):
        check_lines(case, "x\n" * 39)


def test_a_finding_within_three_lines_of_a_bug_line_finds_it():
    case = parse_case(_case())
    assert found(case, (13,)) and found(case, (37,))
    assert not found(case, (14,)) and not found(case, (36, 44, 1))
    assert not found(case, ())


def test_verdicts_order_false_alarms_before_hits():
    case = parse_case(_case())
    assert verdict(Result(case, (11,), ())) == "found"
    assert verdict(Result(case, (25,), ())) == "missed"
    assert verdict(Result(case, (11,), (11,))) == "false alarm on fixed"
    assert verdict(Result(case, error="cannot download proj==1.0")) == "not run"


def test_a_finding_at_a_bug_the_fix_left_is_no_false_alarm_on_the_fixed_file():
    case = parse_case(_case(still_buggy_in_fixed=[60]))
    assert verdict(Result(case, (11,), (62,))) == "found"
    assert verdict(Result(case, (11,), (64,))) == "false alarm on fixed"
    text = render([Result(case, (11,), (62, 80))])
    assert "findings on fixed files: 1 (and 1 at bugs the fix left)" in text


def test_still_buggy_lines_must_be_line_numbers():
    with pytest.raises(ManifestError, match="still_buggy_in_fixed"):
        parse_case(_case(still_buggy_in_fixed=["66"]))


def test_the_table_reports_recall_per_split_and_the_fixed_findings():
    dev_id = next(i for i in (f"c{n}" for n in range(100)) if split_of(i) == "dev")
    measure_id = next(i for i in (f"c{n}" for n in range(100)) if split_of(i) == "measure")
    dev = parse_case(_case(id=dev_id))
    measure = parse_case(_case(id=measure_id))
    text = render([Result(dev, (10,), ()), Result(dev, (), (3, 4)), Result(measure, (), ()),
                   Result(measure, error="cannot download")])
    assert "recall dev: 1/2 (50%)" in text
    assert "recall measure: 0/1 (0%)" in text
    assert "recall all: 1/3 (33%)" in text
    assert "findings on fixed files: 2" in text
    assert "not run: 1" in text
    rows = {line.split()[0]: line for line in text.splitlines()[1:5]}
    assert rows[measure_id].rstrip().endswith("not run")


def test_downloaded_archives_are_matched_by_name_and_version(tmp_path):
    for name in ("optimum-intel-1.11.1.tar.gz", "optimum_intel-1.12.0-py3-none-any.whl", "optimum-1.11.1.tar.gz"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in _archives(tmp_path, "optimum-intel==1.11.1")] == ["optimum-intel-1.11.1.tar.gz"]
    assert [p.name for p in _archives(tmp_path, "optimum_intel==1.12.0")] == ["optimum_intel-1.12.0-py3-none-any.whl"]


def test_a_file_is_read_from_a_wheel_or_below_an_sdists_top_folder(tmp_path):
    import tarfile
    import zipfile

    wheel = tmp_path / "proj-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("proj/attn.py", "k = 1\n")
    sdist = tmp_path / "proj-1.0.tar.gz"
    source = tmp_path / "attn.py"
    source.write_text("v = 2\n")
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(source, arcname="proj-1.0/src/proj/attn.py")
    assert read_member(wheel, "proj/attn.py") == "k = 1\n"
    assert read_member(sdist, "src/proj/attn.py") == "v = 2\n"
    with pytest.raises(Exception, match="has no file proj/other.py"):
        read_member(wheel, "proj/other.py")


@pytest.mark.parametrize("old, new, expected", [
    ("values = self.k_cache.update(vs, 2)", "values = self.v_cache.update(vs, 2)", True),
    ("p_v = make_block_ptr(v, (T, K), (BT, BK))", "p_v = make_block_ptr(v, (T, V), (BT, BV))", True),
    ("v = self.to_k(x)", "v = self.to_v(x)", True),
    # a rename on both sides, or another edit beside the swap, is no one-sided fix
    ("k, v = a, b", "v, k = a, b", False),
    ("v = self.to_k(x)", "v = self.to_v(y)", False),
    ("v = self.to_v(x)", "v = self.to_v(x)", False),
])
def test_the_miner_sees_a_one_sided_k_to_v_rename(old, new, expected):
    from benchmarks.realbugs.mine import is_swap

    assert is_swap(old, new) is expected


def test_the_miner_sees_a_size_that_became_a_kv_one():
    from benchmarks.realbugs.mine import is_kv_size_fix

    assert is_kv_size_fix("shape = (b, self.num_heads, n, d)", "shape = (b, self.num_kv_heads, n, d)")
    assert is_kv_size_fix("v = v.view(b, t, h, self.head_dim)", "v = v.view(b, t, h, self.v_head_dim)")
    assert not is_kv_size_fix("shape = (b, self.num_kv_heads, n, d)", "shape = (b, self.num_kv_heads, m, d)")
    assert not is_kv_size_fix("x = 1", "self.num_key_value_heads = config.num_key_value_heads")
