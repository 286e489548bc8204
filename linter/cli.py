"""The ``kvlint`` command: ``check``, ``rules``, ``rule CODE``.

Exit codes: 0 no findings (warnings such as KV408 alone exit 0 unless ``--warnings-as-errors``);
1 findings (or, with ``--diff``, files that would change); 2 a usage
or configuration error, or a file that could not be read or parsed (every other file is still
checked and reported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
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
    project_root,
)
from linter.diagnostics import FileProblem
from linter.files import discover, is_excluded
from linter.fixes import write_atomic
from linter.report import FORMATS, Outcome, is_fixable, progress, renderer, severity
from linter.report.summary import summary
from linter.rule_docs import rule_url
from linter.rules import preview_codes, rule_codes


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
    check.add_argument("--stdin-filename", metavar="NAME", help="read stdin and report it (and match config against it) as NAME")
    # Repeated list options merge, as in ruff: --select KV101 --select KV201 selects both.
    check.add_argument("--select", type=_codes, action="extend", metavar="CODES", help="comma-separated codes or prefixes to run (replaces the config's select)")
    check.add_argument("--extend-select", type=_codes, action="extend", default=[], metavar="CODES", help="codes to run in addition")
    check.add_argument("--ignore", type=_codes, action="extend", default=[], metavar="CODES", help="codes not to run")
    check.add_argument("-e", "--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--preview", action=argparse.BooleanOptionalAction, default=None, help="run the preview rules too (KV107, KV210; default: the config's preview, false)")
    check.add_argument("--warnings-as-errors", action=argparse.BooleanOptionalAction, default=None, help="exit 1 on warnings (KV408, WKV001) too (default: the config's warnings-as-errors, false)")
    check.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when --fix changed a file, even if nothing remains")
    check.add_argument("--statistics", action="store_true", help="print a count per rule instead of each finding")
    check.add_argument("--fix", action=argparse.BooleanOptionalAction, default=False, help="apply safe fixes (on stdin: print the fixed text)")
    check.add_argument("--unsafe-fixes", action=argparse.BooleanOptionalAction, default=False, help="with --fix or --diff, apply unsafe fixes too")
    check.add_argument("--show-fixes", action=argparse.BooleanOptionalAction, default=False, help="list the fixes --fix applied, per file and rule")
    check.add_argument("--show-files", action="store_true", help="print the files that would be linted, and exit")
    check.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing (also with --fix)")
    check.add_argument("--output-format", "--format", dest="format", choices=FORMATS, default="full", help="output format (default: full)")
    check.add_argument("-o", "--output-file", type=Path, metavar="FILE", help="write the report to FILE instead of stdout")
    check.add_argument("--config", type=Path, metavar="FILE", help="configuration file: pyproject.toml ([tool.kvlint]) or kvlint.toml (top-level keys)")
    check.add_argument("--isolated", action="store_true", help="read no configuration file")
    check.add_argument("--exclude", type=_codes, action="extend", metavar="PATTERNS", help="comma-separated patterns to exclude, replacing the config's exclude")
    check.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction, default=None, help="skip files .gitignore ignores (default: the config's, true)")
    check.add_argument("--extend-exclude", type=_codes, action="extend", default=[], metavar="PATTERNS", help="comma-separated patterns to exclude in addition to the config's")
    force = check.add_mutually_exclusive_group()
    force.add_argument("--force-exclude", action="store_true", default=None, help="apply excludes to paths named on the command line too (for pre-commit)")
    force.add_argument("--no-force-exclude", dest="force_exclude", action="store_false", help="lint named paths even when excluded (the default)")
    check.add_argument("-n", "--no-cache", action="store_true", help="neither read nor write the cache")
    check.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour in the full format (default: auto, on a terminal without NO_COLOR)")
    check.add_argument("--cache-dir", metavar="DIR", help=f"cache directory (default: {DEFAULT_DIR} in the project root)")
    check.add_argument("--baseline", type=Path, metavar="FILE", help="report only findings not recorded in FILE")
    check.add_argument("--write-baseline", type=Path, metavar="FILE", help="record every current finding in FILE and exit 0")
    check.add_argument("--tp", type=int, action="append", default=[], metavar="N", help="also check model paths for tensor-parallel size N (repeatable; KV407/KV408)")
    check.add_argument("--jobs", type=int, default=_cpu_count(), metavar="N", help="worker processes (default: CPU count)")
    quiet = check.add_mutually_exclusive_group()
    quiet.add_argument("-q", "--quiet", action="store_true", help="print findings only: no summary line, no warnings")
    quiet.add_argument("-s", "--silent", action="store_true", help="print nothing; the exit code still tells")

    rules = sub.add_parser("rules", help="list the rules")
    rules.add_argument("--output-format", "--format", dest="format", choices=("text", "json"), default="text", help="text (default) or json")
    rule = sub.add_parser("rule", help="explain a rule (or every rule with --all)")
    rule.add_argument("code", nargs="?", metavar="RULE", help="a rule code (KV101) or name (key-only-reshape)")
    rule.add_argument("--all", action="store_true", help="explain every rule")
    rule.add_argument("--output-format", "--format", dest="format", choices=("text", "json"), default="text", help="text (default) or json")
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
            return _list_rules(args.format, sys.stdout)
        if args.command == "rule":
            return _explain(args.code, args.all, args.format, sys.stdout)
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


def _rule_object(rule) -> dict:
    """One rule as JSON, in the shape of ``ruff rule --output-format json``."""
    return {
        "name": rule.name,
        "code": rule.code,
        "linter": "kvlint",
        "summary": rule.summary,
        "fix": "Fix is sometimes available." if is_fixable(rule) else "Fix is not available.",
        "fixable": is_fixable(rule),
        "explanation": rule.doc_text(),
        "url": rule_url(rule.code),
    }


def _rules_by_code() -> dict:
    return {r.code: r for r in checkpoint.documented_rules()}


def _list_rules(fmt: str, out: TextIO) -> int:
    rules = checkpoint.documented_rules()
    if fmt == "json":
        json.dump([_rule_object(r) for r in rules], out, indent=2)
        out.write("\n")
        return 0
    width = max(len(r.name) for r in rules)
    out.write(f"{'code':<6} {'name':<{width}} {'fixable':<7} summary\n")
    for r in rules:
        out.write(f"{r.code:<6} {r.name:<{width}} {'yes' if is_fixable(r) else 'no':<7} {r.summary}\n")
    return 0


def _explain(code: str | None, every: bool, fmt: str, out: TextIO) -> int:
    if every == (code is not None):
        raise UsageError("kvlint rule takes a rule code or name, or --all")
    if every:
        chosen = list(checkpoint.documented_rules())
    else:
        by_name = {r.name: r for r in checkpoint.documented_rules()}
        rule = _rules_by_code().get(code.upper()) or by_name.get(code.lower())
        if rule is None:
            raise UsageError(f"unknown rule {code!r}; valid codes: {', '.join(_rules_by_code())}")
        chosen = [rule]
    if fmt == "json":
        payload = [_rule_object(r) for r in chosen]
        json.dump(payload if every else payload[0], out, indent=2)
        out.write("\n")
    else:
        out.write("\n".join(r.doc_text() for r in chosen))
    return 0


def _check(args: argparse.Namespace) -> int:
    # --stdin-filename alone reads stdin, as in ruff; '-' may still be given.
    paths = args.paths or (["-"] if args.stdin_filename else ["."])
    stdin = paths == ["-"]
    if "-" in paths and not stdin:
        raise UsageError("'-' (stdin) cannot be combined with other paths")
    if args.stdin_filename and not stdin:
        raise UsageError("--stdin-filename reads stdin; it cannot be combined with paths")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if any(n < 1 for n in args.tp):
        raise UsageError("--tp must be at least 1")
    if args.baseline and args.write_baseline:
        raise UsageError("--baseline and --write-baseline cannot be combined")
    if args.isolated and args.config:
        raise UsageError("--isolated reads no configuration; drop --config")
    # --fix --diff shows the fixes and writes nothing (ruff: --diff implies not writing).
    writes = args.fix and not args.diff

    display = args.stdin_filename or "-"
    start = common_directory([args.stdin_filename or "."] if stdin else paths)
    config = None if args.isolated else args.config or find_config(start)
    codes = rule_codes() + checkpoint.checkpoint_codes()
    cli = CliOptions(
        args.select, args.extend_select, args.ignore, args.extend_exclude, args.force_exclude,
        args.exclude, args.respect_gitignore, args.warnings_as_errors, args.preview,
    )
    settings = load_settings(config, cli, codes, preview_codes())
    cache_dir = args.cache_dir or str(project_root(config, start) / DEFAULT_DIR)
    job = runner.job_for(
        checkpoint.code_settings(settings),
        cache_dir=None if args.no_cache else cache_dir,
        fix=args.fix or args.diff,
        unsafe_fixes=args.unsafe_fixes,
    )

    if stdin:
        data = sys.stdin.buffer.read()
        skipped = args.stdin_filename and settings.force_exclude and is_excluded(args.stdin_filename, settings)
        # An excluded stdin file is passed through untouched (ruff does the same).
        results, problems = ([] if skipped else [runner.check_stdin(data, display, job)]), []
        if skipped and writes:
            sys.stdout.buffer.write(data)
    else:
        models, paths = checkpoint.split_paths(paths)
        files, problems = discover(paths, settings)
        if args.show_files:
            for path in sorted(os.path.abspath(f) for f in files):
                print(path)
            _report_problems(problems, args)
            return 2 if problems else 0
        if not files and not models and not problems and not args.silent:
            print("warning: No Python files found under the given path(s)", file=sys.stderr)
        results = _check_files(files, job, args) + checkpoint.check(models, settings, args.tp)

    problems = problems + [p for r in results for p in r.problems]
    # With --fix on stdin, stdout carries the source; the report goes to stderr.
    stream = sys.stderr if stdin and writes else sys.stdout
    changed = _apply_fixes(results, args, writes, data if stdin else None, problems)

    pairs = [(f, r.text) for r in results for f in r.findings]
    if args.write_baseline:
        count = baseline.write_baseline(args.write_baseline, pairs)
        _report_problems(problems, args)
        if not args.silent:
            print(f"Recorded {count} finding{'s' * (count != 1)} in {args.write_baseline}.", file=sys.stderr)
        return 2 if _failed(problems) else 0
    findings = [f for f, _ in pairs]
    if args.baseline:
        findings = baseline.new_findings(args.baseline, pairs)
    findings.sort(key=lambda f: f.sort_key)
    problems.sort(key=lambda p: (p.path, p.row))

    outcome = Outcome(
        findings=findings,
        problems=problems,
        texts={r.path: r.text for r in results if r.text is not None},
        fixed=sum(r.fixed_count for r in results) if writes else 0,
        cells={r.path: r.cells for r in results if r.cells is not None},
        quiet=args.quiet,
        unsafe_fixes=args.unsafe_fixes,
        rule_docs_url=settings.rule_docs_url,
    )
    _report_problems(problems, args)
    if not args.silent:
        with _report_stream(args.output_file, stream) as out:
            if args.show_fixes and writes and not args.quiet:
                _show_fixes(results, out)
            if args.statistics:
                _statistics(outcome, args.format, out)
            elif args.diff and args.format in ("full", "concise"):
                if not args.quiet:
                    _would_fix(results, findings, args.unsafe_fixes, out)
            else:
                renderer(args.format)(outcome, out, _color(out, args.color))
    if _failed(problems):
        return 2
    if args.diff:
        return 1 if changed else 0
    if args.exit_non_zero_on_fix and writes and changed:
        return 1
    return 1 if _fails(findings, problems, settings.warnings_as_errors) and not args.exit_zero else 0


def _fails(findings: list, problems: list[FileProblem], warnings_as_errors: bool) -> bool:
    """Findings fail the run; warnings (KV408's replicated heads, WKV001) only when asked."""
    if warnings_as_errors:
        return bool(findings) or any(p.warning for p in problems)
    return any(severity(f.code) == "error" for f in findings)


def _check_files(files: list[str], job: runner.Job, args: argparse.Namespace) -> list[runner.FileResult]:
    """The files' results, with a progress bar on a terminal if checking takes a while."""
    if args.silent or not progress.wanted(sys.stderr, args.format, args.quiet):
        return runner.check_paths(files, job, args.jobs)
    bar = progress.Bar(len(files), sys.stderr)
    try:
        return runner.check_paths(files, job, args.jobs, bar.advance)
    finally:
        bar.close()


@contextmanager
def _report_stream(path: Path | None, default: TextIO) -> Iterator[TextIO]:
    if path is None:
        yield default
        return
    try:
        handle = open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write --output-file {path}: {exc.strerror}") from None
    with handle:
        yield handle


def _apply_fixes(
    results: list[runner.FileResult], args: argparse.Namespace, writes: bool, stdin_data: bytes | None, problems: list[FileProblem],
) -> int:
    """Write, print or diff fixed files; returns how many files changed (or would)."""
    changed = 0
    for result in results:
        if stdin_data is not None and writes:
            sys.stdout.buffer.write(result.text.encode(result.encoding) if result.fixed else stdin_data)
            sys.stdout.flush()
        if not result.fixed:
            continue
        changed += 1
        if args.diff:
            import difflib

            if not args.silent:
                sys.stdout.writelines(difflib.unified_diff(
                    result.original.splitlines(keepends=True), result.text.splitlines(keepends=True),
                    fromfile=f"a/{result.path}", tofile=f"b/{result.path}",
                ))
        elif writes and stdin_data is None:
            try:
                write_atomic(result.path, result.text.encode(result.encoding))
            except (OSError, UnicodeEncodeError) as exc:
                problems.append(FileProblem(result.path, "EKV004", f"fix not written: {exc}"))
    return changed


def _failed(problems: list[FileProblem]) -> bool:
    """Files that could not be checked (exit 2); warnings such as WKV001 do not count."""
    return any(not p.warning for p in problems)


def _report_problems(problems: list[FileProblem], args: argparse.Namespace) -> None:
    if args.silent:
        return
    for problem in problems:
        print(problem.line(), file=sys.stderr)


def _show_fixes(results: list[runner.FileResult], out: TextIO) -> None:
    """ruff's --show-fixes enumeration: each fixed file, then a count per rule."""
    fixed = [r for r in results if r.fixed_codes]
    if not fixed:
        return
    total = sum(sum(r.fixed_codes.values()) for r in fixed)
    by_code = _rules_by_code()
    out.write(f"Fixed {total} finding{'s' * (total != 1)}:\n")
    for result in sorted(fixed, key=lambda r: r.path):
        out.write(f"- {result.path}:\n")
        for code, n in sorted(result.fixed_codes.items()):
            name = by_code[code].name if code in by_code else code
            out.write(f"    {n} × {code} ({name})\n")
    out.write("\n")


def _would_fix(results: list[runner.FileResult], findings: list, unsafe_fixes: bool, out: TextIO) -> None:
    """ruff's closing line of --diff: how many findings the diff fixes, and what --unsafe-fixes would add."""
    fixes = sum(r.fixed_count for r in results if r.fixed)
    more = 0 if unsafe_fixes else sum(1 for f in findings if f.fix is not None and f.fix.applicability == "unsafe")
    hint = f" ({more} more with --unsafe-fixes)" if more else ""
    if fixes:
        out.write(f"\nWould fix {fixes} finding{'s' * (fixes != 1)}{hint}.\n")
    elif more:
        out.write(f"No findings would be fixed{hint}.\n")


def _statistics(outcome: Outcome, fmt: str, out: TextIO) -> None:
    findings = outcome.findings
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if f.fix is not None}
    by_code = _rules_by_code()
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        # ruff's --statistics --output-format json: one object per rule.
        json.dump([
            {"code": code, "name": by_code[code].name if code in by_code else "", "count": n, "fixable": code in fixable}
            for code, n in rows
        ], out, indent=2)
        out.write("\n")
        return
    for code, n in rows:
        name = by_code[code].name if code in by_code else ""
        out.write(f"{n:>5}\t{code}\t{'[*]' if code in fixable else '[ ]'} {name}\n")
    # ruff closes the table with its summary line, and prints nothing at all for a clean run.
    if (findings or outcome.problems) and not outcome.quiet:
        out.write(summary(outcome) + "\n")


def _color(out: TextIO, when: str = "auto") -> bool:
    if when != "auto":
        return when == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(out, "isatty") and out.isatty()
