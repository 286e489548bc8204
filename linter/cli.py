"""The ``kvlint`` command: ``check``, ``rules``, ``rule CODE``.

Exit codes: 0 no findings; 1 findings (or, with ``--diff``, files that would change); 2 a usage
or configuration error, or a file that could not be read or parsed (every other file is still
checked and reported).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

import linter
from linter import baseline, checkpoint, runner
from linter.cache import DEFAULT_DIR
from linter.config import (
    CliOptions,
    ConfigError,
    common_directory,
    find_config,
    load_settings,
)
from linter.diagnostics import FileProblem
from linter.files import discover
from linter.fixes import write_atomic
from linter.report import FORMATS, Outcome, is_fixable, renderer
from linter.rules import rule_codes


class UsageError(Exception):
    """A one-line error about how kvlint was called; exit 2."""


def _codes(text: str) -> list[str]:
    return [c for c in text.split(",") if c.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvlint", description="Find K/V drift in attention code.")
    parser.add_argument("--version", action="version", version=f"kvlint {linter.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,rules,rule}")

    check = sub.add_parser("check", help="lint files and directories")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); - reads stdin")
    check.add_argument("--stdin-filename", metavar="NAME", help="the path to report (and match config against) for stdin")
    check.add_argument("--select", type=_codes, metavar="CODES", help="comma-separated codes or prefixes to run (replaces the config's select)")
    check.add_argument("--extend-select", type=_codes, default=[], metavar="CODES", help="codes to run in addition")
    check.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="codes not to run")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--statistics", action="store_true", help="print a count per rule instead of each finding")
    check.add_argument("--fix", action="store_true", help="apply safe fixes (on stdin: print the fixed text)")
    check.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff, apply unsafe fixes too")
    check.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    check.add_argument("--format", choices=FORMATS, default="full", help="output format (default: full)")
    check.add_argument("--config", type=Path, metavar="FILE", help="pyproject.toml to read [tool.kvlint] from")
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    check.add_argument("--cache-dir", metavar="DIR", default=DEFAULT_DIR, help=f"cache directory (default: {DEFAULT_DIR})")
    check.add_argument("--baseline", type=Path, metavar="FILE", help="report only findings not recorded in FILE")
    check.add_argument("--write-baseline", type=Path, metavar="FILE", help="record every current finding in FILE and exit 0")
    check.add_argument("--tp", type=int, action="append", default=[], metavar="N", help="also check model paths for tensor-parallel size N (repeatable; KV407/KV408)")
    check.add_argument("--jobs", type=int, default=_cpu_count(), metavar="N", help="worker processes (default: CPU count)")

    sub.add_parser("rules", help="list the rules")
    rule = sub.add_parser("rule", help="explain one rule")
    rule.add_argument("code", help="a rule code such as KV101")
    return parser


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "rules":
            return _list_rules(sys.stdout)
        if args.command == "rule":
            return _explain(args.code, sys.stdout)
        return _check(args)
    except (UsageError, ConfigError, baseline.BaselineError) as exc:
        print(f"kvlint: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (``| head``) went away; say nothing more and do not let the interpreter
        # complain about flushing stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _list_rules(out: TextIO) -> int:
    rules = checkpoint.documented_rules()
    width = max(len(r.name) for r in rules)
    out.write(f"{'code':<6} {'name':<{width}} {'fixable':<7} summary\n")
    for r in rules:
        out.write(f"{r.code:<6} {r.name:<{width}} {'yes' if is_fixable(r) else 'no':<7} {r.summary}\n")
    return 0


def _explain(code: str, out: TextIO) -> int:
    known = {r.code: r for r in checkpoint.documented_rules()}
    rule = known.get(code.upper())
    if rule is None:
        raise UsageError(f"unknown rule code {code!r}; valid codes: {', '.join(known)}")
    out.write(rule.doc_text())
    return 0


def _check(args: argparse.Namespace) -> int:
    paths = args.paths or ["."]
    stdin = paths == ["-"]
    if "-" in paths and not stdin:
        raise UsageError("'-' (stdin) cannot be combined with other paths")
    if args.diff and args.fix:
        raise UsageError("--fix writes files and --diff only shows changes; pass one of them")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if any(n < 1 for n in args.tp):
        raise UsageError("--tp must be at least 1")
    if args.baseline and args.write_baseline:
        raise UsageError("--baseline and --write-baseline cannot be combined")
    if args.stdin_filename and not stdin:
        raise UsageError("--stdin-filename needs '-' as the path")

    display = args.stdin_filename or "-"
    config = args.config or find_config(common_directory([args.stdin_filename or "."] if stdin else paths))
    codes = rule_codes() + checkpoint.checkpoint_codes()
    settings = load_settings(config, CliOptions(args.select, args.extend_select, args.ignore), codes)
    job = runner.job_for(
        checkpoint.code_settings(settings),
        cache_dir=None if args.no_cache else args.cache_dir,
        fix=args.fix or args.diff,
        unsafe_fixes=args.unsafe_fixes,
    )

    if stdin:
        data = sys.stdin.buffer.read()
        results, problems = [runner.check_stdin(data, display, job)], []
    else:
        models, paths = checkpoint.split_paths(paths)
        files, problems = discover(paths, settings)
        results = runner.check_paths(files, job, args.jobs) + checkpoint.check(models, settings, args.tp)

    problems = problems + [p for r in results for p in r.problems]
    # With --fix on stdin, stdout carries the source; the report goes to stderr.
    out = sys.stderr if stdin and args.fix else sys.stdout
    changed = _apply_fixes(results, args, data if stdin else None, problems)

    pairs = [(f, r.text) for r in results for f in r.findings]
    if args.write_baseline:
        count = baseline.write_baseline(args.write_baseline, pairs)
        _report_problems(problems)
        print(f"Recorded {count} finding{'s' * (count != 1)} in {args.write_baseline}.", file=sys.stderr)
        return 2 if problems else 0
    findings = [f for f, _ in pairs]
    if args.baseline:
        findings = baseline.new_findings(args.baseline, pairs)
    findings.sort(key=lambda f: f.sort_key)
    problems.sort(key=lambda p: (p.path, p.row))

    outcome = Outcome(
        findings=findings,
        problems=problems,
        texts={r.path: r.text for r in results if r.text is not None},
        fixed=sum(r.fixed_count for r in results) if args.fix else 0,
    )
    _report_problems(problems)
    if args.statistics:
        _statistics(findings, out)
    elif not (args.diff and args.format in ("full", "concise")):
        renderer(args.format)(outcome, out, _color(out))
    if problems:
        return 2
    if args.diff:
        return 1 if changed else 0
    return 1 if findings and not args.exit_zero else 0


def _apply_fixes(results: list[runner.FileResult], args: argparse.Namespace, stdin_data: bytes | None, problems: list[FileProblem]) -> int:
    """Write, print or diff fixed files; returns how many files changed (or would)."""
    changed = 0
    for result in results:
        if stdin_data is not None and args.fix:
            sys.stdout.buffer.write(result.text.encode(result.encoding) if result.fixed else stdin_data)
            sys.stdout.flush()
        if not result.fixed:
            continue
        changed += 1
        if args.diff:
            import difflib

            sys.stdout.writelines(difflib.unified_diff(
                result.original.splitlines(keepends=True), result.text.splitlines(keepends=True),
                fromfile=f"a/{result.path}", tofile=f"b/{result.path}",
            ))
        elif args.fix and stdin_data is None:
            try:
                write_atomic(result.path, result.text.encode(result.encoding))
            except (OSError, UnicodeEncodeError) as exc:
                problems.append(FileProblem(result.path, "EKV004", f"fix not written: {exc}"))
    return changed


def _report_problems(problems: list[FileProblem]) -> None:
    for problem in problems:
        print(problem.line(), file=sys.stderr)


def _statistics(findings: list, out: TextIO) -> None:
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if f.fix is not None}
    by_code = {r.code: r for r in checkpoint.documented_rules()}
    for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        name = by_code[code].name if code in by_code else ""
        out.write(f"{n:>5}\t{code}\t{'[*]' if code in fixable else '[ ]'} {name}\n")


def _color(out: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(out, "isatty") and out.isatty()
