"""``python -m benchmarks.realbugs``: download, lint and tabulate the real-bug cases."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from benchmarks.realbugs.fetch import FetchError, commit_file, release_file
from benchmarks.realbugs.manifest import (
    MANIFEST,
    Case,
    ManifestError,
    check_lines,
    load,
)
from benchmarks.realbugs.table import Result, render

DEFAULT_CACHE = Path.home() / ".cache" / "kvlint-realbugs"


class LintError(RuntimeError):
    pass


def lint_rows(kvlint: list[str], path: Path) -> tuple[int, ...]:
    """Rows of every finding kvlint reports on ``path``: all rules, no cache, no configuration."""
    cmd = [*kvlint, "check", "--isolated", "--select", "ALL", "--preview", "--no-cache", "--exit-zero",
           "--output-format", "json", "--jobs", "1", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        findings = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LintError(f"kvlint gave no JSON for {path} (exit {done.returncode}): {tail}\n"
                        f"  command: {shlex.join(cmd)}") from None
    return tuple(sorted(f["location"]["row"] for f in findings))


def run_case(case: Case, cache: Path, kvlint: list[str], repos: Path | None = None) -> Result:
    if not case.released and repos is None:
        return Result(case, error=f"not released: pass --repos DIR with a git copy of {case.repo} "
                                  f"at DIR/{case.repo.replace('/', '+')} to run it")
    try:
        if case.released:
            buggy = release_file(case.buggy, cache)
        else:
            buggy = commit_file(repos, case.repo, case.fix_commit + "^", case.path, cache)
        check_lines(case, buggy.read_text(encoding="utf-8"))
        if case.released:
            fixed = release_file(case.fixed, cache)
        else:
            fixed = commit_file(repos, case.repo, case.fix_commit, case.path, cache)
        return Result(case, lint_rows(kvlint, buggy), lint_rows(kvlint, fixed))
    except (FetchError, ManifestError, LintError) as exc:
        return Result(case, error=str(exc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realbugs", description=__doc__)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                        help=f"where releases are downloaded and unpacked (default: {DEFAULT_CACHE})")
    parser.add_argument("--split", choices=("dev", "measure", "all"), default="all")
    parser.add_argument("--kvlint", default=f"{shlex.quote(sys.executable)} -m linter", metavar="CMD",
                        help="the kvlint command (default: this interpreter's -m linter, so PYTHONPATH picks the code)")
    parser.add_argument("--repos", type=Path, metavar="DIR",
                        help="git copies of the repositories, as DIR/OWNER+NAME[/repo], for the unreleased cases")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only these cases (repeatable)")
    args = parser.parse_args(argv)
    try:
        cases = load(args.manifest)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cases = [c for c in cases if args.split in ("all", c.split) and (not args.case or c.id in args.case)]
    results = [run_case(c, args.cache, shlex.split(args.kvlint), args.repos) for c in cases]
    for r in results:
        if r.error is not None:
            print(f"{r.case.id}: {r.error}", file=sys.stderr)
    print(render(results))
    return 0
