"""Mutation testing of the rules' exemptions against their own examples:
``python -m benchmarks.exemptions [KV104 ...] [--tests]``.

An exemption is a condition that keeps a rule silent: the test of an ``if`` whose body ends in
``return`` or ``continue`` in ``linter/rules/kvNNN/rule.py``, and every ``and``/``or``
operand and ``not`` inside it. Each is mutated alone (the test made ``False``, so the rule
stays silent less often; made ``True``, so it stays silent more often; an operand dropped
from its ``and``/``or``) and the rule's VALID and INVALID examples are run against the mutant
in this process. A mutant no example tells apart from the rule survives: a VALID example
should reach the exemption and be reported without it (or an INVALID one be missed with the
exemption widened), or the exemption is equivalent and should say why, or it is dead code.
``--tests`` also runs ``tests/linter/test_kvNNN.py`` (where there is one) on each mutant the
examples let through, in this process with the mutant in the registry's place.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("codes", nargs="*", metavar="CODE", help="rules to mutate (default: all)")
    parser.add_argument("--tests", action="store_true", help="also run tests/linter/test_kvNNN.py on each survivor")
    parser.add_argument("--taken-more", action="store_true", help="also mutate each guard to be taken more often")
    args = parser.parse_args(argv)
    from linter import rules
    from linter.rules import rule_codes

    codes = [c.upper() for c in args.codes] or list(rule_codes())
    survivors = 0
    for code in codes:
        name = f"linter.rules.{code.lower()}.rule"
        path = ROOT / "linter" / "rules" / code.lower() / "rule.py"
        original = importlib.import_module(name)
        total = killed = 0
        try:
            for mutant in mutants(code, path, args.taken_more):
                total += 1
                rule = _load(name, mutant.source)
                if rule is None or _examples_fail(rule) or (args.tests and _tests_fail(code)):
                    killed += 1
                    continue
                survivors += 1
                print(f"{path.relative_to(ROOT)}:{mutant.line}: {code} survives: {mutant.what}")
        finally:
            sys.modules[name] = original
            rules.rule_class.cache_clear()
            rules.all_rules.cache_clear()
        print(f"{code}: {killed}/{total} mutants killed", file=sys.stderr)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
