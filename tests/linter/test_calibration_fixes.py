"""No ``safe`` fix changes the meaning of correct code: every safe fix kvlint offers on the
calibration trees (real inference code: vllm, sglang, transformers, vllm-ascend) and on the
examples is applied in a scratch copy; the result must parse and a re-run must offer no finding
on the lines the fix wrote (a fix that only moved the problem, or created one, fails).

The trees are found as ``python -m benchmarks.calibrate`` finds them ($KVLINT_TREES, else
./.trees); when none is present the tree part is skipped with a reason, never silently.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import libcst as cst
import pytest

from benchmarks.calibrate import TREES, default_root, lint_tree, resolve_trees
from linter import runner
from linter.finding import Finding
from linter.fixes import apply_fixes
from linter.rules import rule_codes
from linter.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
JOB = runner.job_for(Settings(select=frozenset(rule_codes())))


def _safe(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.fix is not None and f.fix.applicability == "safe"]


def _written_rows(before: str, after: str) -> set[int]:
    """1-based rows of ``after`` that the fix inserted or changed."""
    rows: set[int] = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            rows.update(range(j1 + 1, j2 + 1))
    return rows


def _check_fixed(path: str, findings: list[Finding], scratch: Path) -> list[str]:
    """Apply the safe fixes of one file in ``scratch``; return what went wrong."""
    original = Path(path).read_text(encoding="utf-8")
    fixed = apply_fixes(original, findings)
    if fixed == original:
        return [f"{path}: a safe fix was offered but nothing was applied"]
    try:
        cst.parse_module(fixed)
    except cst.ParserSyntaxError as exc:
        return [f"{path}: fixed text does not parse: {exc.message}"]
    copy = scratch / f"{len(list(scratch.iterdir()))}_{Path(path).name}"
    copy.write_text(fixed, encoding="utf-8")
    rerun = runner.check_file(str(copy), JOB)
    written = _written_rows(original, fixed)
    return [
        f"{path}: after the fix, {f.code} at fixed line {f.span.row}: {f.message}"
        for f in rerun.findings
        if f.span.row in written or (f.noqa_row in written)
    ] + [f"{path}: {p.line()}" for p in rerun.problems if not p.warning]


def test_every_safe_fix_on_the_examples_parses_and_leaves_its_lines_clean(tmp_path):
    # Always present: the part of the property that no missing tree can skip.
    checked = 0
    problems: list[str] = []
    for buggy in sorted(ROOT.glob("examples/*/buggy.py")):
        result = runner.check_file(str(buggy), JOB)
        safe = _safe(result.findings)
        if safe:
            checked += 1
            problems += _check_fixed(str(buggy), safe, tmp_path)
    assert checked >= 1, "no example offers a safe fix: the property is not exercised"
    assert problems == []


@pytest.mark.slow
def test_every_safe_fix_on_the_calibration_trees_parses_and_leaves_its_lines_clean(tmp_path):
    present, absent = resolve_trees(list(TREES), default_root())
    if not present:
        pytest.skip(f"no calibration tree under {default_root()} (set KVLINT_TREES): {'; '.join(absent)}")
    problems: list[str] = []
    offered = 0
    for name, path in present:
        run = lint_tree(name, path, jobs=2)
        by_file: dict[str, list[Finding]] = {}
        for finding in _safe(run.findings):
            by_file.setdefault(finding.path, []).append(finding)
        offered += sum(len(found) for found in by_file.values())
        for file, found in sorted(by_file.items()):
            problems += _check_fixed(file, found, tmp_path)
    print(f"safe fixes offered on {', '.join(n for n, _ in present)}: {offered}")
    assert problems == []
