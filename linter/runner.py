"""The per-file pipeline and the pool that runs it over many files.

read bytes -> (cache) -> decode -> plan (``linter.plan``: nothing, some definitions, or the
whole file) -> parse -> rules -> ``# noqa`` -> per-file-ignores
[-> fix, re-lint, until nothing more applies]. Every way a file can fail becomes a
``FileProblem`` for that file; nothing a file contains can stop the run. Rules are injected
(``Job.rules``) so tests can run the pipeline with rules of their own.

libcst and the rules are imported only when a file needs parsing: most files never do, and a
pre-commit run on one such file should cost little more than starting Python.
"""

from __future__ import annotations

import ast
import gc
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from linter import dependencies, files, plan
from linter.cache import Cache
from linter.config import enabled_codes
from linter.diagnostics import FileProblem
from linter.finding import Finding
from linter.fixes import apply_fixes, has_applicable_fix
from linter.plan.python_tree import Unlintable as _Unlintable, python_tree
from linter.rules import rule_class, rules_by_code
from linter.settings import Settings
from linter.suppress import invalid_directives, unsuppressed

if TYPE_CHECKING:
    from linter.rules.base import Rule

# Fixes that overlap are applied on later passes; a fix that keeps re-creating work stops here.
MAX_FIX_PASSES = 10
# Below this many files a process pool costs more to start than it saves.
POOL_THRESHOLD = 16


@dataclass(frozen=True)
class Job:
    settings: Settings
    # kvlint's own rules by code, or Rule classes (tests bring their own).
    rules: tuple[str | type[Rule], ...]
    cache_dir: str | None = None
    fix: bool = False  # compute fixed text (for --fix and --diff)
    unsafe_fixes: bool = False
    # False parses every file: the slow path the pre-filter is checked against.
    prefilter: bool = True

    @cached_property
    def cache(self) -> Cache | None:
        # Built once per job (per worker), not per file: its salt hashes settings and rules.
        if self.cache_dir is None:
            return None
        rule_ids = [r if isinstance(r, str) else f"{r.__module__}.{r.__qualname__}" for r in self.rules]
        return Cache(Path(self.cache_dir), self.settings.fingerprint(), rule_ids)

    @cached_property
    def rule_classes(self) -> tuple[type[Rule], ...]:
        known = rules_by_code() if any(isinstance(r, str) for r in self.rules) else {}
        return tuple(known[r] if isinstance(r, str) else r for r in self.rules)


def job_for(settings: Settings, cache_dir: str | None = None, fix: bool = False, unsafe_fixes: bool = False) -> Job:
    """A job running the rules that ``settings`` enable."""
    return Job(settings, tuple(sorted(enabled_codes(settings))), cache_dir, fix, unsafe_fixes)


@dataclass
class FileResult:
    path: str
    findings: list[Finding]
    problems: list[FileProblem]
    # The text the findings refer to (after fixes, when fixing), kept for code frames and
    # baselines; None when there is nothing to show.
    text: str | None = None
    # Set when fixing changed the text: what it was, and how to encode the new text.
    original: str | None = None
    encoding: str = "utf-8"
    fixed_count: int = 0
    fixed_codes: dict[str, int] = field(default_factory=dict)  # for --show-fixes
    # A notebook's (first row, cell number) per code cell (linter.notebook); None for .py files.
    cells: tuple[tuple[int, int], ...] | None = None

    @property
    def fixed(self) -> bool:
        return self.original is not None


def check_file(path: str, job: Job) -> FileResult:
    try:
        return _check_bytes(path, files.read_bytes(path), job)
    except files.Unreadable as exc:
        return FileResult(path, [], [exc.problem])


def check_stdin(data: bytes, path: str, job: Job) -> FileResult:
    # Stdin is never cached: there is no file whose content the key could stand for.
    return _check_bytes(path, data, replace(job, cache_dir=None))


def check_paths(paths: Sequence[str], job: Job, jobs: int, checked: Callable[[], None] | None = None) -> list[FileResult]:
    """One result per path, in order; ``checked`` is called as each file is done (a progress bar)."""
    with _fewer_collections():
        return _check_paths(paths, job, jobs, checked or (lambda: None))


# Parsing allocates millions of tree nodes that die by reference counting (neither ``ast``
# nor libcst trees hold cycles), and every 700 of them CPython's default threshold starts a
# cycle collection that finds nothing. Measured in one process on vllm, sglang and
# transformers: 7-12% less CPU with a threshold of 50,000, peak memory within 2 MB; each
# collection still walked the tree being built, and 500,000 took 1.1% more off over sglang
# and vllm (four A/B runs; peak RSS of a two-worker run on sglang and transformers within 2 MB).
_GC_THRESHOLD = (500_000, 20, 100)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _check_paths(paths: Sequence[str], job: Job, jobs: int, checked: Callable[[], None]) -> list[FileResult]:
    if jobs <= 1 or len(paths) < POOL_THRESHOLD:
        results = []
        for p in paths:
            results.append(check_file(p, job))
            checked()
        return results
    # Largest files first, in small chunks: file sizes vary by orders of magnitude, and a big
    # file (or chunk) started last would leave the other workers idle while it finishes.
    order = sorted(range(len(paths)), key=lambda i: _size(paths[i]), reverse=True)
    chunksize = max(1, min(8, len(paths) // (jobs * 8)))
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs, initializer=_set_worker_job, initargs=(job,)) as pool:
        done = pool.map(_worker_check, [paths[i] for i in order], chunksize=chunksize)
        results: list[FileResult] = [None] * len(paths)  # type: ignore[list-item]
        for i, result in zip(order, done):
            results[i] = result
            checked()
        return results


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # reading it will say what is wrong


_worker_job: Job | None = None


def _set_worker_job(job: Job) -> None:
    global _worker_job
    _worker_job = job
    gc.set_threshold(*_GC_THRESHOLD)  # for the worker's life (a spawned one starts with the default)


def _worker_check(path: str) -> FileResult:
    assert _worker_job is not None
    return check_file(path, _worker_job)


def _check_bytes(path: str, data: bytes, job: Job) -> FileResult:
    if not path.endswith(".ipynb"):
        return _check_python(path, data, job)
    from linter import notebook

    try:
        converted = notebook.to_python(path, data)
    except files.Unreadable as exc:
        return FileResult(path, [], [exc.problem])
    # The fixed text is Python, not the notebook's JSON: never write it back.
    result = _check_python(path, converted.text.encode(), replace(job, fix=False) if job.fix else job)
    result.cells = converted.cell_starts
    return result


def _check_python(path: str, data: bytes, job: Job) -> FileResult:
    cache, key = job.cache, None
    if cache is not None:
        key = cache.key(path, data)
        hit = cache.get(key)
        if hit is not None:
            findings = [replace(f, path=path) for f in hit[0]]
            problems = [replace(p, path=path) for p in hit[1]]
            if not (job.fix and has_applicable_fix(findings, job.unsafe_fixes)):
                return FileResult(path, findings, problems, _text_for(path, data) if findings else None)
    try:
        source = files.decode(path, data)
    except files.Unreadable as exc:
        return FileResult(path, [], [exc.problem])
    try:
        with dependencies.collect() as depends:
            findings = _lint_text(source.text, path, job)
    except _Unlintable as exc:
        findings, problems = [], [exc.problem]
    except Exception as exc:  # noqa: BLE001 - a bug in a rule must cost one file, not the run
        findings, problems = [], [_internal_error(path, exc)]
    else:
        problems = invalid_directives(findings, source.text, path)
    if key is not None and not any(p.code == "EKV999" for p in problems):
        cache.put(key, findings, problems, depends)
    result = FileResult(path, findings, problems, source.text if findings else None, encoding=source.encoding)
    if job.fix and findings:
        try:
            _fix(result, job)
        except Exception as exc:  # noqa: BLE001 - keep the unfixed result
            result.problems.append(_internal_error(path, exc, "while fixing; the file was left unchanged"))
    return result


def _internal_error(path: str, exc: BaseException, when: str = "") -> FileProblem:
    where = f" {when}" if when else ""
    return FileProblem(path, "EKV999", f"internal error{where} ({type(exc).__name__}: {exc}); please report it with this file")


def _text_for(path: str, data: bytes) -> str | None:
    try:
        return files.decode(path, data).text
    except files.Unreadable:
        return None


def _fix(result: FileResult, job: Job) -> None:
    text = result.text
    assert text is not None
    findings = result.findings
    for _ in range(MAX_FIX_PASSES):
        if not has_applicable_fix(findings, job.unsafe_fixes):
            break
        fixed = apply_fixes(text, findings, unsafe=job.unsafe_fixes)
        if fixed == text:
            break
        text = fixed
        findings = _lint_text(text, result.path, job)
    if text != result.text:
        result.fixed_count = max(0, len(result.findings) - len(findings))
        result.fixed_codes = dict(Counter(f.code for f in result.findings) - Counter(f.code for f in findings))
        result.original, result.text, result.findings = result.text, text, findings

def _lint_text(text: str, path: str, job: Job) -> list[Finding]:
    """Plan, parse what is planned, run the rules that may report, report."""
    if not job.rules:
        return []
    for parse in plan.parses(text, path, job):
        try:
            findings = _parse_and_lint(parse.text, path, job, parse.python, parse.rules, parse.rows)
        except _Unlintable:
            if parse.last:
                raise
            continue  # the cut was wrong: the next parse (the whole file last) gives the verdict
        if parse.probe:
            if not findings:
                return []
            continue  # a finding: reported from the next parse, the definitions in place
        return _not_ignored(unsuppressed(findings, text), path, job.settings)
    return []


def _classes_of(job: Job, rules: frozenset[str | None]) -> tuple[type[Rule], ...]:
    """The job's rule classes whose code is in ``rules``; a rule that is not kvlint's own
    (its conditions unknown, so None in ``rules``) with them."""
    if None not in rules and all(isinstance(r, str) for r in job.rules):
        return tuple(rule_class(code) for code in job.rules if code in rules)
    return tuple(
        rule for rule in job.rule_classes
        if (rule.code if rule.__module__.startswith("linter.rules.") else None) in rules
    )

def _parse_and_lint(
    text: str, path: str, job: Job, python: ast.Module | SyntaxError | None = None,
    rules: frozenset[str | None] | None = None, rows: tuple[int, ...] | None = None,
) -> list[Finding]:
    """Findings of libcst's pass over ``text``; ``python`` is ``python_tree(text)`` where the
    caller already has it (None: not yet checked). ``rules``: the codes of the job's rules that
    may report (None stands for the rules of unknown conditions); None: all of them. Each rule
    visits every node, so a pass that runs one rule instead of fifteen costs a fraction.
    ``rows``: the file's row of each line of ``text`` (None: its own)."""
    if python is None:
        python = python_tree(text, path)
    import libcst as cst

    from linter.engine import lint_module

    try:
        module = cst.parse_module(text)
        return lint_module(module, path, job.settings, job.rule_classes if rules is None else _classes_of(job, rules), rows,
                           text=text)
    except cst.ParserSyntaxError as exc:
        raise _Unlintable(_syntax_problem(path, exc, python if isinstance(python, SyntaxError) else None)) from None
    except RecursionError:
        raise _Unlintable(FileProblem(path, "EKV003", "nested too deeply to parse; split the expression or statement")) from None


def _syntax_problem(path: str, exc: Exception, python_error: SyntaxError | None) -> FileProblem:
    """E999 whose message and position come from one parser: CPython's when it refuses the
    text too (its messages name the cause: "'(' was never closed"), else libcst's, without the
    "error at R:C" that libcst counts differently from the position reported."""
    if python_error is not None:
        return FileProblem(path, "E999", f"syntax error: {python_error.msg}", python_error.lineno or 1, python_error.offset or 1)
    message = _LIBCST_AT.sub("", exc.message)
    return FileProblem(path, "E999", f"syntax error: {message}", exc.editor_line, exc.editor_column)


_LIBCST_AT = re.compile(r"^parser error: error at \d+:\d+: ")

def _not_ignored(findings: list[Finding], path: str, settings: Settings) -> list[Finding]:
    if not settings.per_file_ignores or not findings:
        return findings
    absolute = files.posix_absolute(path)
    ignored = frozenset().union(*(codes for pattern, codes in settings.per_file_ignores if files.path_matches(absolute, pattern)))
    return [f for f in findings if f.code not in ignored]
