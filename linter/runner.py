"""The per-file pipeline and the pool that runs it over many files.

read bytes -> (cache) -> decode -> pre-filter (nothing / some definitions / the whole file)
-> parse -> rules -> ``# noqa`` -> per-file-ignores
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
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import accumulate, repeat
from bisect import bisect_right
from pathlib import Path
from typing import TYPE_CHECKING

from linter import dependencies, files
from linter.cache import Cache
from linter.config import enabled_codes
from linter.diagnostics import FileProblem
from linter.finding import Finding
from linter.fixes import apply_fixes, has_applicable_fix
from linter.plan.code_only import code_only
from linter.plan.text_plan import ParsePlan, excerpt, parse_plan
from linter.plan.words import identifier_set
from linter.plan.lines import _LONE_CR
from linter.plan.segments import Segment, bound_name, top_level_segments
from linter.rules import rule_class, rules_by_code
from linter.settings import Settings
from linter.suppress import invalid_directives, unsuppressed

if TYPE_CHECKING:
    from linter.rules.base import Rule

# Fixes that overlap are applied on later passes; a fix that keeps re-creating work stops here.
MAX_FIX_PASSES = 10
# libcst's native parser crashes the process (not an exception) somewhere past ~1,000 nested
# brackets; CPython itself refuses more than 200, so deeper files are not valid Python anyway.
_SAFE_BRACKET_DEPTH = 200
# libcst needs about 4 KB of memory per token and time that grows faster than the file (a 10 MB
# file of one long list took 12 minutes and 13 GB); a file this large is generated data, not
# attention code someone edits. The largest .py in torch is 1.4 MB.
MAX_SOURCE_CHARS = 2_000_000
_BRACKETS = re.compile(r"[()\[\]{}]")
# Below this many files a process pool costs more to start than it saves.
POOL_THRESHOLD = 16
# At most this many lines outside the planned definitions: libcst parses the definitions in
# place at once instead of as an excerpt first (which, on a finding, is parsed in place again).
_IN_PLACE_FIRST = 50


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


def check_paths(paths: Sequence[str], job: Job, jobs: int) -> list[FileResult]:
    with _fewer_collections():
        return _check_paths(paths, job, jobs)


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


def _check_paths(paths: Sequence[str], job: Job, jobs: int) -> list[FileResult]:
    if jobs <= 1 or len(paths) < POOL_THRESHOLD:
        return [check_file(p, job) for p in paths]
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


class _Unlintable(Exception):
    def __init__(self, problem: FileProblem) -> None:
        super().__init__(problem.line())
        self.problem = problem


def _lint_text(text: str, path: str, job: Job) -> list[Finding]:
    if not job.rules:
        return []
    python: ast.Module | SyntaxError | None = None
    live: frozenset[str | None] | None = None  # None: every rule of the job
    if job.prefilter:
        plan = parse_plan(text, job.rules, job.settings)
        module_rules = _text_screened(plan.module_rules, text, job, path)
        if plan.whole:
            python = _python_tree(text, path)
            live = _reporting(python, job, plan.rules - (plan.module_rules - module_rules), path, text)
            # The module's scope holds a candidate: it goes to libcst with the definitions whose
            # own code the screens let through; every other definition keeps only its header.
            cut = _cut_of_whole(text, python, job, live, path) if live and None not in live else None
            if cut is not None:
                try:
                    findings = _parse_and_lint(cut, path, job, _PARSED, live)
                except _Unlintable:
                    pass  # the cut was wrong: the whole file gives the verdict
                else:
                    return _not_ignored(unsuppressed(findings, text), path, job.settings)
        # A module-wide rule's screen reads the whole file's tree and names the lines where its
        # rule may report: their top-level definitions go to libcst in place, with every
        # definition they name (a helper, a base class, a pool) and the planned units.
        elif module_rules and (None in module_rules or isinstance(python := _python_tree(text, path), SyntaxError)):
            # A rule of unknown conditions (no screen names its lines), or a file CPython
            # cannot read: the whole file.
            python = _python_tree(text, path) if python is None else python
            live = _reporting(python, job, module_rules, path, text) | _reporting(python, job, plan.rules - plan.module_rules, path, text)
        elif module_rules and (seeds := _module_seeds(python, job, module_rules, path)):
            units, _, live = _screened_units(text, plan, job, python)
            segments = top_level_segments(code_only(text))
            units = [*units, *_definitions_holding(segments, frozenset().union(*seeds.values()))]
            try:
                findings = _parse_and_lint(_in_place(text, units, segments), path, job, _PARSED, live | seeds.keys())
            except _Unlintable:
                # The cut was wrong: the whole file gives the verdict.
                live = seeds.keys() | _reporting(python, job, plan.rules - plan.module_rules, path, text)
            else:
                return _not_ignored(unsuppressed(findings, text), path, job.settings)
        else:
            units, parsed, live = _screened_units(text, plan, job, python)
            if not units:
                return []
            if text.count("\n") + 1 - sum(end - start for start, end in units) <= _IN_PLACE_FIRST:
                # The definitions are nearly the whole file: parsing them in place costs about
                # what the excerpt does, and a finding there (a small file under edit is the
                # likely case) then needs no second parse.
                python = _python_tree(text, path) if python is None else python
            elif _excerpt_is_clean(excerpt(text, units), path, job, parsed, live):
                return []
            # A finding: reported from the definitions in place, once CPython has read the
            # whole file (a syntax error anywhere in it is reported instead, by libcst's verdict
            # on the whole file, as before).
            if python is None:
                python = _python_tree(text, path)
            if not isinstance(python, SyntaxError):
                try:
                    findings = _parse_and_lint(_in_place(text, units), path, job, _PARSED, live)
                except _Unlintable:
                    pass  # the cut was wrong: the whole file gives the verdict
                else:
                    return _not_ignored(unsuppressed(findings, text), path, job.settings)
        if not live:
            return []
    return _not_ignored(unsuppressed(_parse_and_lint(text, path, job, python, live), text), path, job.settings)


def _in_place(text: str, units: list[tuple[int, int]], segments: list[Segment] | None = None) -> str:
    """``text`` with only the lines of ``units`` and of the module's own statements (imports,
    assignments, ``if``/``try`` blocks) kept, every other line left empty: the rules see each
    kept definition where it stands, with the module's names around it, so their findings'
    positions and fixes are the file's own without parsing the definitions no rule can report
    in. ``segments``: the text's ``top_level_segments`` where the caller has them."""
    lines = text.split("\n")
    kept = bytearray(len(lines))
    for start, end in units:
        kept[start:end] = b"\1" * (end - start)
    for segment in segments if segments is not None else top_level_segments(code_only(text)):
        if not segment.definition:
            kept[segment.start:segment.end] = b"\1" * (segment.end - segment.start)
    return "\n".join(line if keep else "" for line, keep in zip(lines, kept))


def _cut_of_whole(
    text: str, python: ast.Module | SyntaxError, job: Job, live: frozenset[str | None], path: str
) -> str | None:
    """For a file planned whole (the module's own statements meet a rule's condition),
    ``text`` with every top-level definition no finding of the ``live`` rules can lie in
    reduced to its header and ``...``, lines kept; None when the file cannot be cut
    (CPython cannot read it, or its statements and segments disagree).

    A rule whose unit is a definition reasons inside one function or class, or in the
    module's scope: a definition its screen passes alone is kept whole, and the module's
    statements and every header stay. A rule whose unit is a class reads the module and its
    functions as one more: those are kept whole when its screen passes them as one, with the
    classes its screen passes alone. A module-wide rule keeps the definitions its screen names
    and every definition those name.
    """
    from linter.plan.screens import reporting
    from linter.plan.text_plan import own_unit

    if not isinstance(python, ast.Module) or _LONE_CR.search(text):
        return None  # the segments count lines by "\n" only
    segments = top_level_segments(code_only(text))
    starts = [segment.start for segment in segments]
    held: list[list[ast.stmt]] = [[] for _ in segments]
    for statement in python.body:
        held[bisect_right(starts, _first_line(statement) - 1) - 1].append(statement)
    definitions = []
    for segment, statements in zip(segments, held):
        if segment.definition:
            if len(statements) != 1 or not isinstance(statements[0], (*_FUNCTIONS, ast.ClassDef)):
                return None
            definitions.append((segment, statements[0]))
    lines = text.split("\n")
    source = (lines, 0)
    units = {code: own_unit(code) for code in live}
    by_definition = frozenset(code for code, unit in units.items() if unit == "definition")
    by_class = frozenset(code for code, unit in units.items() if unit == "class")
    kept: set[int] = set()  # first lines of the definitions kept whole
    # A class-unit rule's other unit: the module's statements and its functions, as one.
    functions_too = bool(by_class) and bool(reporting(
        ast.Module(body=[s for s in python.body if not isinstance(s, ast.ClassDef)], type_ignores=[]),
        by_class, job.settings, source,
    ))
    for segment, d in definitions:
        alone = ast.Module(body=[d], type_ignores=[])
        if (
            (functions_too and not isinstance(d, ast.ClassDef))
            or (by_definition and reporting(alone, by_definition, job.settings, source))
            or (by_class and reporting(alone, by_class, job.settings, source))
        ):
            kept.add(segment.start)
    module = frozenset(code for code, unit in units.items() if unit is None)
    if module and (seeds := _module_seeds(python, job, module, path)):
        kept.update(start for start, _ in _definitions_holding(segments, frozenset().union(*seeds.values())))
    for segment, d in definitions:
        if segment.start in kept:
            continue
        body = d.body[0].lineno - 1  # 0-based
        indent = lines[body][:len(lines[body]) - len(lines[body].lstrip())] if body < len(lines) else ""
        if body <= d.lineno - 1 or not indent:
            continue  # ``def f(): return x`` on one line: kept whole
        lines[body] = indent + "..."
        for i in range(body + 1, segment.end):
            lines[i] = ""
    return "\n".join(lines)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _module_seeds(python: ast.Module, job: Job, rules: frozenset[str | None], path: str) -> dict[str, frozenset[int]]:
    """The lines where each of the module-wide ``rules`` may report, by its ``ast`` screen
    (``module_screens.SCREENS``); a rule whose screen names none is left out."""
    from linter.plan.module_screens import SCREENS

    found = {code: SCREENS[code](python, job.settings, path) for code in rules if code in SCREENS}
    return {code: lines for code, lines in found.items() if lines}


def _definitions_holding(segments: list[Segment], lines: frozenset[int]) -> list[tuple[int, int]]:
    """The line ranges of the top-level definitions among ``segments`` (a file's
    ``top_level_segments``) holding ``lines`` (1-based), and of every
    top-level definition their code names, directly or through the module's statements
    (``Alias = Base``), and so on: a module rule reads a helper, a base class or a pool by
    its name."""
    named: dict[str, list[Segment]] = {}  # a name -> the definitions binding it, the statements naming it
    for segment in segments:
        if segment.definition:
            bound = bound_name(segment)
            if bound is not None:
                named.setdefault(bound, []).append(segment)
        else:
            for name in identifier_set(segment.text):
                named.setdefault(name, []).append(segment)
    todo = [s for s in segments if s.definition and any(s.start < line <= s.end for line in lines)]
    kept, seen = set(todo), set()
    while todo:
        for name in identifier_set(todo.pop().text) - seen:
            seen.add(name)
            for segment in named.get(name, ()):
                if segment not in kept:
                    kept.add(segment)
                    todo.append(segment)
    return [(s.start, s.end) for s in kept if s.definition]



def _text_screened(rules: frozenset[str | None], text: str, job: Job, path: str) -> frozenset[str | None]:
    """``rules`` less the module rules whose text screen says no: they need no ``ast`` tree
    of the file."""
    if not rules:
        return rules
    from linter.plan.module_screens import TEXT_SCREENS

    return frozenset(code for code in rules if code not in TEXT_SCREENS or TEXT_SCREENS[code](text, job.settings, path))


def _reporting(
    python: ast.Module | SyntaxError, job: Job, rules: frozenset[str | None], path: str, text: str
) -> frozenset[str | None]:
    """The ``rules`` whose ``ast`` screens let ``text`` through to libcst (all of them where
    CPython cannot read it)."""
    if isinstance(python, SyntaxError):
        return rules  # CPython cannot read it; libcst gives the verdict
    from linter.plan.screens import reporting
    from linter.plan.module_screens import SCREENS

    module = rules & SCREENS.keys()
    passing = frozenset(code for code in module if SCREENS[code](python, job.settings, path))
    return passing | reporting(python, rules - module, job.settings, (text.split("\n"), 0))


def _screened_units(
    text: str, plan: ParsePlan, job: Job, python: ast.Module | SyntaxError | None = None
) -> tuple[list[tuple[int, int]], bool, frozenset[str | None]]:
    """The line ranges of the planned definitions that the ``ast`` screens of their own live
    rules let through, whether CPython parsed every one of them, and the rules that may still
    report on them.

    Each definition is parsed alone (a top-level definition is a module by itself), or taken
    from ``python``, the whole file's tree, where a module screen already built it; one
    CPython cannot parse alone is kept whole, and the excerpt's own checks decide. A class
    whose live rules all reason within one function (``METHOD_SCOPED``) is cut further: its
    header and the methods a screen lets through, nothing else.
    """
    from linter.plan.screens import METHOD_SCOPED, reporting

    lines = text.split("\n")
    whole = python.body if isinstance(python, ast.Module) else None
    kept = []
    parsed = True
    live: set[str | None] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like are not ours to report
        for (start, end), rules, members in zip(plan.ranges, plan.range_rules, plan.range_members or repeat(None)):
            # Line numbers of ``tree`` count from ``offset + 1``.
            statements = [s for s in whole if start < _first_line(s) <= end] if whole is not None else None
            if statements:
                tree, offset, members = ast.Module(body=statements, type_ignores=[]), 0, None
            else:
                try:
                    tree, offset = ast.parse(_class_text(lines, start, end, members)), start
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    kept.append((start, end))
                    live.update(rules)
                    parsed = False
                    continue
            rules = reporting(tree, rules, job.settings, (lines, offset))
            if not rules:
                continue
            live.update(rules)
            cls = tree.body[-1] if tree.body else None
            if isinstance(cls, ast.ClassDef) and len(tree.body) == 1 and rules <= METHOD_SCOPED:
                kept.extend(_screened_methods(cls, start, end, (lines, offset), rules, job, members and members[0]))
            else:
                kept.append((start, end))
    return kept, parsed, frozenset(live)


def _class_text(lines: list[str], start: int, end: int, members: tuple[int, tuple[tuple[int, int], ...]] | None) -> str:
    """Lines ``start``-``end`` of ``lines``; of a class the plan read member by member
    (``ParsePlan.range_members``), its header and the planned members only, every other line
    of its body left empty, so the tree's line numbers stay the file's."""
    if members is None:
        return "\n".join(lines[start:end])
    body, planned = members
    kept = bytearray(end - body)
    for first, stop in planned:
        kept[first - body:stop - body] = b"\1" * (stop - first)
    return "\n".join([*lines[start:body], *(line if kept[i] else "" for i, line in enumerate(lines[body:end]))])


def _screened_methods(
    cls: ast.ClassDef, start: int, end: int, source: tuple[list[str], int], rules: frozenset[str | None], job: Job,
    body: int | None = None,
) -> list[tuple[int, int]]:
    """``cls`` (lines ``start``-``end``; ``source``: the file's lines, and the offset its line
    numbers count from, plus one): its header and the methods (or nested classes) of its body
    that a screen of ``rules`` lets through, as absolute line ranges; the whole class where it
    cannot be cut. ``body``: where the body starts, when ``cls`` holds only some of its
    statements (``_class_text``)."""
    from linter.plan.screens import may_report

    offset = source[1]
    first = _first_line(cls.body[0])
    if first <= cls.lineno:
        return [(start, end)]  # ``class A: ...`` on one line
    header_end = offset + first - 1 if body is None else body
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    kept = [s for s in cls.body if isinstance(s, definitions) and may_report(s, rules, job.settings, source)]
    # The rest of the body (attributes, ``if``/``try`` blocks that may hold methods) is kept
    # when the screens pass it as one: findings there can pair statements with each other.
    rest = [s for s in cls.body if not isinstance(s, definitions)]
    if rest and may_report(ast.Module(body=rest, type_ignores=[]), rules, job.settings, source):
        kept.extend(rest)
    if not kept:
        return []
    kept.sort(key=_first_line)
    return [(start, header_end), *((offset + _first_line(s) - 1, offset + s.end_lineno) for s in kept)]


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(statement.lineno, *(d.lineno for d in decorators)) if decorators else statement.lineno


def _excerpt_is_clean(
    excerpt: str, path: str, job: Job, parsed: bool = False, rules: frozenset[str | None] | None = None
) -> bool:
    """Do the rules report nothing on the planned definitions alone?

    A finding sends the definitions again, in place among the module's statements
    (``_in_place``), so findings, their positions and fixes come from the file's own lines;
    an excerpt that does not parse (the cut was wrong) sends the whole file.
    """
    try:
        # Top-level statements CPython parsed one by one are safe for libcst together.
        return not _parse_and_lint(excerpt, path, job, _PARSED if parsed else None, rules)
    except _Unlintable:
        return False


def _classes_of(job: Job, rules: frozenset[str | None]) -> tuple[type[Rule], ...]:
    """The job's rule classes whose code is in ``rules``; a rule that is not kvlint's own
    (its conditions unknown, so None in ``rules``) with them."""
    if None not in rules and all(isinstance(r, str) for r in job.rules):
        return tuple(rule_class(code) for code in job.rules if code in rules)
    return tuple(
        rule for rule in job.rule_classes
        if (rule.code if rule.__module__.startswith("linter.rules.") else None) in rules
    )


# Stands for "CPython parsed this text" where the tree itself is not at hand.
_PARSED = ast.Module(body=[], type_ignores=[])


def _parse_and_lint(
    text: str, path: str, job: Job, python: ast.Module | SyntaxError | None = None,
    rules: frozenset[str | None] | None = None,
) -> list[Finding]:
    """Findings of libcst's pass over ``text``; ``python`` is ``_python_tree(text)`` where the
    caller already has it (None: not yet checked). ``rules``: the codes of the job's rules that
    may report (None stands for the rules of unknown conditions); None: all of them. Each rule
    visits every node, so a pass that runs one rule instead of fifteen costs a fraction."""
    if python is None:
        python = _python_tree(text, path)
    import libcst as cst

    from linter.engine import lint_module

    try:
        module = cst.parse_module(text)
        return lint_module(module, path, job.settings, job.rule_classes if rules is None else _classes_of(job, rules))
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


def _python_tree(text: str, path: str) -> ast.Module | SyntaxError:
    """CPython's syntax tree of ``text``, or its SyntaxError where libcst may still read the
    text (newer syntax); raises for a file libcst cannot be trusted with, before it takes
    minutes or crashes.

    Too large: refused outright. Too deep: CPython's own parser gives the verdict, because
    libcst overflows the C stack (a segfault, not an exception) on expressions nested a few
    thousand deep (``a.b.b...``, ``x[0][0]...``, ``lambda: lambda: ...``, brackets), all of
    which CPython refuses too. Any other syntax error is left to libcst, which may know newer
    syntax than this interpreter; the bracket count (strings and comments included) only
    decides whether a syntax error must be reported here.
    """
    if len(text) > MAX_SOURCE_CHARS:
        raise _Unlintable(FileProblem(
            path, "EKV005",
            f"too large to lint ({len(text):,} characters, the limit is {MAX_SOURCE_CHARS:,}); exclude generated files",
        ))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are not ours to report
            return ast.parse(text)
    except SyntaxError as exc:
        if _bracket_depth(text) > _SAFE_BRACKET_DEPTH:
            raise _Unlintable(FileProblem(path, "E999", f"syntax error: {exc.msg}", exc.lineno or 1, exc.offset or 1)) from None
        return exc
    except (RecursionError, MemoryError):
        raise _Unlintable(FileProblem(path, "EKV003", "nested too deeply to parse; split the expression or statement")) from None


def _bracket_depth(text: str) -> int:
    if text.count("(") + text.count("[") + text.count("{") <= _SAFE_BRACKET_DEPTH:
        return 0
    return max(accumulate(1 if b in "([{" else -1 for b in _BRACKETS.findall(text)), default=0)


def _not_ignored(findings: list[Finding], path: str, settings: Settings) -> list[Finding]:
    if not settings.per_file_ignores or not findings:
        return findings
    absolute = files.posix_absolute(path)
    ignored = frozenset().union(*(codes for pattern, codes in settings.per_file_ignores if files.path_matches(absolute, pattern)))
    return [f for f in findings if f.code not in ignored]
