"""Mutation testing of the guard's validators against the per-op case table (op_cases.py).

Run from the repository root: ``python -m tests.runtime_guard.mutate_validators [module[:function] ...]``
(default: runtime_guard.validators and runtime_guard.checks; ``runtime_guard.validators:attention``
mutates one function). Each mutant changes one
thing in one function: an ``if`` (or conditional expression) test deleted (never taken) or
negated, or one comparison operator swapped (== and !=, < and >=, > and <=, is and is not,
in and not in). The mutated function's code replaces the real one's in place, every case of
op_cases.CASES runs through the installed guard (the double's torch_npu), and the mutant is
killed when a valid call is rejected or a mutation is not rejected by its check. Survivors are
printed with their line; exit status 1 when any survives.
"""

from __future__ import annotations

import ast
import copy
import importlib
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "runtime_guard" / "double"))

SWAPS = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def mutants(tree: ast.Module):
    """(function name, line, description, mutated function node) for every mutation point."""
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        nodes = list(ast.walk(function))
        for index, node in enumerate(nodes):
            if isinstance(node, (ast.If, ast.IfExp)):
                for label, make in (("deleted", lambda test: ast.Constant(False)), ("negated", lambda test: ast.UnaryOp(ast.Not(), test))):
                    copied = copy.deepcopy(function)
                    target = list(ast.walk(copied))[index]
                    target.test = make(target.test)
                    yield function.name, node.lineno, f"condition {label}: {ast.unparse(node.test)[:70]}", copied
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in SWAPS:
                copied = copy.deepcopy(function)
                target = list(ast.walk(copied))[index]
                target.ops = [SWAPS[type(node.ops[0])]()]
                yield function.name, node.lineno, f"comparison swapped: {ast.unparse(node)[:70]} -> {ast.unparse(target)[:70]}", copied


def killed(cases: dict, guarded) -> bool:
    """True when the case table tells the mutant from the real code."""
    from runtime_guard import KVConsistencyError
    from tests.runtime_guard.test_every_op import mutated

    for op_name, op_cases in cases.items():
        for case in op_cases:
            op = guarded(op_name, case.overload)
            try:
                op(*case.build()[0], **case.build()[1])
            except Exception:  # noqa: BLE001 - a valid call rejected (or broken): killed
                return True
            for mutation in case.mutations:
                args, kwargs = mutated(op, *case.build(), mutation.change())
                try:
                    op(*args, **kwargs)
                except KVConsistencyError as error:
                    if error.check != mutation.check:
                        return True
                    continue
                except Exception:  # noqa: BLE001
                    return True
                return True  # not rejected
    return False


def main(argv: list[str]) -> int:
    import runtime_guard
    from tests.runtime_guard.op_cases import CASES
    from tests.runtime_guard.test_every_op import guarded_op

    warnings.simplefilter("ignore")
    runtime_guard.install("raise")
    assert not killed(CASES, guarded_op), "the unmutated guard fails its own case table"
    survivors = total = 0
    for target in argv or ["runtime_guard.validators", "runtime_guard.checks"]:
        name, _, only = target.partition(":")
        module = importlib.import_module(name)
        path = Path(module.__file__)
        tree = ast.parse(path.read_text())
        for function_name, line, what, node in mutants(tree):
            if only and function_name != only:
                continue
            real = getattr(module, function_name)
            namespace: dict = {}
            exec(compile(ast.fix_missing_locations(ast.Module([node], [])), str(path), "exec"), module.__dict__, namespace)  # noqa: S102 - the mutant's code only
            total += 1
            real_code, real.__code__ = real.__code__, namespace[function_name].__code__
            try:
                alive = not killed(CASES, guarded_op)
            finally:
                real.__code__ = real_code
            if alive:
                survivors += 1
                print(f"SURVIVED {path.name}:{line} {function_name}: {what}", flush=True)
    print(f"{total} mutants, {total - survivors} killed, {survivors} survived")
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
