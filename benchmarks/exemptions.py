"""Mutation testing of the rules' exemptions against their own examples and tests:
``python -m benchmarks.exemptions [KV104 ...] [--examples-only] [--update]``.

An exemption is a condition that keeps a rule silent: the test of an ``if`` whose body ends in
``return`` or ``continue`` in ``linter/rules/kvNNN/rule.py``, and every ``and``/``or``
operand and ``not`` inside it. Each is mutated alone (the test made ``False``, so the rule
stays silent less often; with ``--taken-more`` also made ``True``, so it stays silent more
often) and the rule's VALID and INVALID examples are run against the mutant in this process,
then ``tests/linter/test_kvNNN.py`` (where there is one) with the mutant in the registry's
place. A mutant nothing tells apart from the rule survives: a VALID example should reach the
exemption and be reported without it, or the exemption is equivalent and says why, or it is
dead code.

Every survivor that remains is listed, with the reason it is equivalent, in
``benchmarks/exemption_survivors.toml``. The command fails on a survivor that file does not
list (or lists without a reason) and on a listed one that no longer survives; ``--update``
rewrites the file from this run, keeping the reasons of the survivors it already lists and
leaving new ones without a reason to write. ``--examples-only`` runs the examples alone and
lists what survives them, without the comparison.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib
import io
import json
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SURVIVORS = ROOT / "benchmarks" / "exemption_survivors.toml"


@dataclass(frozen=True)
class Mutant:
    code: str
    line: int
    what: str
    source: str


def _ends_silent(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue))


def _guards(tree: ast.AST) -> Iterator[ast.If]:
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _ends_silent(node.body):
            yield node


def _operands(test: ast.expr) -> Iterator[tuple[ast.expr, bool]]:
    """Every sub-condition of ``test`` (the test itself, ``and``/``or`` operands, ``not``
    expressions; not what a ``not`` negates, the same mutant), with whether making it true
    makes ``test`` true."""
    stack = [(test, True, True)]
    while stack:
        node, positive, own = stack.pop()
        if own:
            yield node, positive
        if isinstance(node, ast.BoolOp):
            stack.extend((value, positive, True) for value in reversed(node.values))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            stack.append((node.operand, not positive, False))


def _replace(guard: ast.If, node: ast.expr, value: bool) -> None:
    replacement = ast.Constant(value=value)
    if guard.test is node:
        guard.test = replacement
        return
    for parent in ast.walk(guard.test):
        if isinstance(parent, ast.BoolOp) and any(v is node for v in parent.values):
            parent.values = [replacement if v is node else v for v in parent.values]
            return
        if isinstance(parent, ast.UnaryOp) and parent.operand is node:
            parent.operand = replacement
            return


def mutants(code: str, path: Path, taken_more: bool = False) -> Iterator[Mutant]:
    """One mutant per guard operand that makes the guard taken less often (the rule stays
    silent less: a VALID example should tell), and with ``taken_more`` one that makes it
    taken more often (an INVALID example should tell)."""
    text = path.read_text()
    tree = ast.parse(text)
    seen: set[str] = set()
    guards = len(list(_guards(tree)))
    for g in range(guards):
        count = len(list(_operands(list(_guards(tree))[g].test)))
        for o in range(count):
            for more in (False, True) if taken_more else (False,):
                copied = copy.deepcopy(tree)
                guard = list(_guards(copied))[g]
                node, positive = list(_operands(guard.test))[o]
                _replace(guard, node, positive == more)
                snippet = " ".join((ast.get_source_segment(text, list(_operands(list(_guards(tree))[g].test))[o][0]) or "").split())
                what = f"guard taken {'more' if more else 'less'}, `{snippet[:90]}` made {positive == more}"
                source = ast.unparse(ast.fix_missing_locations(copied))
                if source not in seen:
                    seen.add(source)
                    yield Mutant(code, node.lineno, what, source)


def _load(rule_module: str, source: str) -> type | None:
    """Put ``source`` (a mutant of ``rule_module``) in ``rule_module``'s place and return its
    rule; None when it does not load. The registry's caches are cleared so every lookup
    finds the mutant."""
    from linter import rules
    from linter.rules.base import Rule

    module = type(sys)(rule_module)
    module.__file__ = str(ROOT / (rule_module.replace(".", "/") + ".py"))
    sys.modules[rule_module] = module
    rules.rule_class.cache_clear()
    rules.all_rules.cache_clear()
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except Exception:  # noqa: BLE001 - a mutant that does not load is killed
        return None
    return next(v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Rule) and v is not Rule and v.__module__ == rule_module)


def _examples_fail(rule: type) -> bool:
    """Does some VALID or INVALID example of ``rule`` fail?"""
    import libcst as cst

    from linter.engine import lint_module
    from linter.settings import Settings

    try:
        for example in rule.VALID:
            if lint_module(cst.parse_module(example.code), "<example>", Settings(), [rule]):
                return True
        for example in rule.INVALID:
            rows = {f.span.row for f in lint_module(cst.parse_module(example.code), "<example>", Settings(), [rule])}
            if not rows or (example.line is not None and example.line not in rows):
                return True
    except Exception:  # noqa: BLE001 - a mutant that crashes is killed
        return True
    return False


def _tests_fail(code: str) -> bool | None:
    """Does ``tests/linter/test_kvNNN.py`` fail with the loaded mutant (run in this process, the
    test module imported afresh)? None when the rule has no such file."""
    import pytest

    test = ROOT / "tests" / "linter" / f"test_{code.lower()}.py"
    if not test.exists():
        return None
    for name in [m for m in sys.modules if m.startswith("tests.linter.test_kv")]:
        del sys.modules[name]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = pytest.main(["-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", "-W", "ignore", str(test)])
    return status != 0


def listed(path: Path = SURVIVORS) -> list[dict]:
    """The survivors ``path`` explains: dicts of rule, line, mutation and reason."""
    if not path.exists():
        return []
    return tomllib.loads(path.read_text()).get("survivor", [])


def compare(found: list[dict], known: list[dict], codes: list[str]) -> list[str]:
    """What is wrong between this run's survivors of ``codes`` and the listed ones: a survivor
    not listed, listed without a reason, or listed but killed. Survivors are told apart by
    rule and mutation (lines move as rules change); a mutation a rule has twice needs two
    entries."""
    key = lambda entry: (entry["rule"], entry["mutation"])  # noqa: E731
    listed_keys = Counter(key(e) for e in known if e["rule"] in codes)
    found_keys = Counter(key(e) for e in found)
    problems = []
    for entry in found:
        k = key(entry)
        if listed_keys[k] <= 0:
            problems.append(f"{entry['rule']} line {entry['line']}: {entry['mutation']}: survives, not in {SURVIVORS.name}")
        listed_keys[k] -= 1
    for entry in known:
        if entry["rule"] in codes and not entry.get("reason", "").strip() and found_keys[key(entry)] > 0:
            problems.append(f"{entry['rule']} line {entry['line']}: {entry['mutation']}: listed without a reason")
    for (rule, mutation), left in listed_keys.items():
        if left > 0:
            problems.append(f"{rule}: {mutation}: listed in {SURVIVORS.name} but killed now (run --update)")
    return problems


def write(found: list[dict], known: list[dict], codes: list[str], path: Path = SURVIVORS) -> None:
    """Rewrite ``path`` with this run's survivors of ``codes`` (the other rules' entries kept),
    each with the reason already listed for it (a repeated mutation matched in line order), or
    none."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for entry in sorted(known, key=lambda e: e["line"]):
        reasons.setdefault((entry["rule"], entry["mutation"]), []).append(entry.get("reason", ""))
    entries = [e for e in known if e["rule"] not in codes]
    # A mutation a rule has twice keeps its reasons in line order (the mutator's is not).
    for entry in sorted(found, key=lambda e: e["line"]):
        waiting = reasons.get((entry["rule"], entry["mutation"]), [])
        entries.append({**entry, "reason": waiting.pop(0) if waiting else ""})
    order = {code: i for i, code in enumerate(sorted({e["rule"] for e in entries}))}
    entries.sort(key=lambda e: (order[e["rule"]], e["line"]))
    lines = [
        "# Survivors of `python -m benchmarks.exemptions`: mutants of a rule's silencing conditions",
        "# that neither its examples nor tests/linter/test_kvNNN.py tell apart from the rule. Each",
        "# reason opens with its kind: equivalent (no input tells the mutant apart), unpinned (a real",
        "# condition no example reaches yet), limit (a scope limit: widened, only more true findings),",
        "# bound (a recursion depth), message only / fix only, duplicate guard, not examined.",
        "# The command fails on a survivor missing here; regenerate with",
        "# `python -m benchmarks.exemptions [CODE ...] --update`, then give each new entry its reason.",
    ]
    for entry in entries:
        lines += ["", "[[survivor]]", f"rule = {json.dumps(entry['rule'])}", f"line = {entry['line']}",
                  f"mutation = {json.dumps(entry['mutation'])}", f"reason = {json.dumps(entry.get('reason', ''))}"]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("codes", nargs="*", metavar="CODE", help="rules to mutate (default: all)")
    parser.add_argument("--examples-only", action="store_true",
                        help="run the examples alone, not tests/linter/test_kvNNN.py, and list survivors without comparing")
    parser.add_argument("--taken-more", action="store_true",
                        help="also mutate each guard to be taken more often (lists survivors without comparing)")
    parser.add_argument("--update", action="store_true", help=f"rewrite {SURVIVORS.name} from this run, keeping listed reasons")
    args = parser.parse_args(argv)
    from linter import rules
    from linter.rules import rule_codes

    codes = [c.upper() for c in args.codes] or list(rule_codes())
    unknown = sorted(set(codes) - set(rule_codes()))
    if unknown:
        parser.error(f"no such rule: {', '.join(unknown)} (rules: {', '.join(rule_codes())})")
    found: list[dict] = []
    broken: list[str] = []
    for code in codes:
        name = f"linter.rules.{code.lower()}.rule"
        path = ROOT / "linter" / "rules" / code.lower() / "rule.py"
        original = importlib.import_module(name)
        # A rule whose own examples or tests fail would have every mutant look killed.
        baseline = _load(name, path.read_text())
        if baseline is None or _examples_fail(baseline) or (not args.examples_only and _tests_fail(code)):
            sys.modules[name] = original
            rules.rule_class.cache_clear()
            rules.all_rules.cache_clear()
            broken.append(code)
            print(f"{code}: the unmutated rule fails its own examples or tests; no mutant is judged", file=sys.stderr)
            continue
        total = killed = 0
        try:
            for mutant in mutants(code, path, args.taken_more):
                total += 1
                rule = _load(name, mutant.source)
                if rule is None or _examples_fail(rule) or (not args.examples_only and _tests_fail(code)):
                    killed += 1
                    continue
                found.append({"rule": code, "line": mutant.line, "mutation": mutant.what})
                print(f"{path.relative_to(ROOT)}:{mutant.line}: {code} survives: {mutant.what}", flush=True)
        finally:
            sys.modules[name] = original
            rules.rule_class.cache_clear()
            rules.all_rules.cache_clear()
        print(f"{code}: {killed}/{total} mutants killed", file=sys.stderr, flush=True)
    if broken:
        return 1
    if args.examples_only or args.taken_more:
        return 1 if found else 0
    known = listed()
    if args.update:
        write(found, known, codes)
        known = listed()
    problems = compare(found, known, codes)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"{len(found)} survivors; {len(problems)} not as {SURVIVORS.relative_to(ROOT)} lists them", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
