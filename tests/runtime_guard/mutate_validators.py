"""Mutation testing of the guard's validators against the per-op case table (op_cases.py):
``python -m tests.runtime_guard.mutate_validators [MODULE[:FUNCTION] ...] [--update]``.

Run from the repository root. Default: runtime_guard.validators and runtime_guard.checks;
``runtime_guard.validators:attention`` mutates one function. Each mutant changes one thing in one
function: an ``if`` (or conditional expression) test deleted (never taken) or negated, or one
comparison operator swapped (== and !=, < and >=, > and <=, is and is not, in and not in). The
mutated function's code replaces the real one's in place, every case of op_cases.CASES runs
through the installed guard (the double's torch_npu), and the mutant is killed when a case tells
it from the real code: a valid call rejected, let through by a failure of the guard, or judged
where its case says it goes to the kernel unjudged (or the reverse), or a mutation not rejected
by its check with the words its case names.

Every survivor that remains is listed, with why no case can kill it, in
``tests/runtime_guard/validator_survivors.toml``, keyed by file, function and mutation (lines
move as the code changes). The command fails on a survivor that file does not list or lists
without a reason, and on a listed one that is killed now; ``--update`` rewrites the entries of
the functions it ran from this run, keeping the reasons already written and leaving new
survivors without one, to be written.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import json
import sys
import tomllib
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SURVIVORS = ROOT / "tests" / "runtime_guard" / "validator_survivors.toml"
DEFAULT_TARGETS = ("runtime_guard.validators", "runtime_guard.checks")
sys.path.insert(0, str(ROOT / "tests" / "runtime_guard" / "double"))  # its torch_npu, never the real one

SWAPS = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}

# How a reason opens: what kind of survivor it is.
KINDS = ("equivalent", "speed only", "message only", "double gap", "unpinned")


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


def first_problem(cases: dict) -> str | None:
    """The first thing the case table finds wrong with the installed guard (None: nothing)."""
    import torch_npu

    from tests.runtime_guard.test_every_op import guarded_op, mutation_problem, valid_call_problem

    try:
        for key, op_cases in cases.items():
            for index, case in enumerate(op_cases):
                op = guarded_op(key, case.overload)
                problem = valid_call_problem(op, case) or next((p for mutation in case.mutations if (p := mutation_problem(op, case, mutation))), None)
                if problem:
                    return f"{'.'.join(key)} case {index}: {problem}"
        return None
    finally:
        torch_npu.calls.clear()  # the double records every call: cleared, a run's memory stays flat


def listed(path: Path = SURVIVORS) -> list[dict]:
    """The survivors ``path`` explains: dicts of file, function, line, mutation and reason."""
    if not path.exists():
        return []
    return tomllib.loads(path.read_text()).get("survivor", [])


def _key(entry: dict) -> tuple:
    return entry["file"], entry["function"], entry["mutation"]


def in_scope(entry: dict, scope: dict) -> bool:
    """``scope``: file -> the functions run (None: all of them)."""
    functions = scope.get(entry["file"], ())
    return functions is None or entry["function"] in functions


def compare(found: list[dict], known: list[dict], scope: dict) -> list[str]:
    """What is wrong between this run's survivors and the listed ones in ``scope``: a survivor not
    listed, listed without a reason, or listed but killed. A mutation a function has twice needs
    two entries."""
    known = [e for e in known if in_scope(e, scope)]
    listed_keys = Counter(_key(e) for e in known)
    found_keys = Counter(_key(e) for e in found)
    problems = []
    for entry in found:
        if listed_keys[_key(entry)] <= 0:
            problems.append(f"{entry['file']}:{entry['line']} {entry['function']}: {entry['mutation']}: survives, not in {SURVIVORS.name}")
        listed_keys[_key(entry)] -= 1
    for entry in known:
        if not entry.get("reason", "").strip() and found_keys[_key(entry)] > 0:
            problems.append(f"{entry['file']}:{entry['line']} {entry['function']}: {entry['mutation']}: listed without a reason")
    for (file, function, mutation), left in listed_keys.items():
        if left > 0:
            problems.append(f"{file} {function}: {mutation}: listed in {SURVIVORS.name} but killed now (run --update)")
    return problems


def write(found: list[dict], known: list[dict], scope: dict, path: Path = SURVIVORS) -> None:
    """Rewrite ``path`` with this run's survivors in ``scope`` (other entries kept), each with the
    reason already listed for it (a repeated mutation matched in line order), or none."""
    reasons: dict[tuple, list[str]] = {}
    for entry in sorted(known, key=lambda e: e["line"]):
        reasons.setdefault(_key(entry), []).append(entry.get("reason", ""))
    entries = [e for e in known if not in_scope(e, scope)]
    for entry in sorted(found, key=lambda e: e["line"]):
        waiting = reasons.get(_key(entry), [])
        entries.append({**entry, "reason": waiting.pop(0) if waiting else ""})
    entries.sort(key=lambda e: (e["file"], e["line"], e["mutation"]))
    lines = [
        "# Survivors of `python -m tests.runtime_guard.mutate_validators`: mutants of the guard's",
        "# validators and checks that no case of tests/runtime_guard/op_cases.py tells apart from the",
        "# real code. Keyed by file, function and mutation (the line is for reading). Each reason opens",
        "# with its kind: equivalent (no input tells the mutant apart), speed only (an inline shortcut",
        "# whose check decides anyway), message only (the same check, worded otherwise where no case",
        "# can reach the difference), double gap (a real difference the test double cannot express),",
        "# unpinned (a call would tell it apart; no case makes it yet: the reason names the call).",
        "# The command fails on a survivor missing here; regenerate with `--update`, then give each",
        "# new entry its reason.",
    ]
    for entry in entries:
        lines += ["", "[[survivor]]", f"file = {json.dumps(entry['file'])}", f"function = {json.dumps(entry['function'])}", f"line = {entry['line']}",
                  f"mutation = {json.dumps(entry['mutation'])}", f"reason = {json.dumps(entry.get('reason', ''))}"]
    path.write_text("\n".join(lines) + "\n")


def _targets(parser: argparse.ArgumentParser, given: list[str]) -> list[tuple]:
    """(module, its file relative to the root, the functions to mutate or None) per target."""
    found = []
    for target in given or DEFAULT_TARGETS:
        name, _, only = target.partition(":")
        if not name.startswith("runtime_guard."):
            parser.error(f"{target!r}: name a module of runtime_guard, such as {' or '.join(DEFAULT_TARGETS)}")
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            parser.error(f"{target!r}: no module {name} ({error})")
        path = Path(module.__file__).resolve()
        functions = [node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)]
        if only and only not in functions:
            parser.error(f"{target!r}: {name} has no top-level function {only} (it has: {', '.join(functions)})")
        found.append((module, path, {only} if only else None))
    return found


def scope_of(targets: list[tuple]) -> dict:
    """file -> the functions the targets mutate in it (None: all); several targets in one file add up."""
    scope: dict = {}
    for _, path, only in targets:
        file = path.relative_to(ROOT).as_posix()
        scope[file] = None if only is None or (file in scope and scope[file] is None) else scope.get(file, set()) | only
    return scope


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.runtime_guard.mutate_validators", description=__doc__.split("\n")[0].rstrip(":"))
    parser.add_argument("targets", nargs="*", metavar="MODULE[:FUNCTION]", help=f"what to mutate (default: {' '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--update", action="store_true", help=f"rewrite {SURVIVORS.name} from this run, keeping the reasons listed")
    args = parser.parse_args(argv)
    import runtime_guard
    from runtime_guard import checks
    from tests.runtime_guard.op_cases import CASES

    targets = _targets(parser, args.targets)
    warnings.simplefilter("ignore")
    runtime_guard.install("raise")
    if problem := first_problem(CASES):
        print(f"the unmutated guard fails its own case table, so no mutant can be judged: {problem}", file=sys.stderr)
        return 1
    found: list[dict] = []
    scope = scope_of(targets)
    total = 0
    for module, path, only in targets:
        file = path.relative_to(ROOT).as_posix()
        for function_name, line, what, node in mutants(ast.parse(path.read_text())):
            if only and function_name not in only:
                continue
            real = getattr(module, function_name)
            namespace: dict = {}
            exec(compile(ast.fix_missing_locations(ast.Module([node], [])), str(path), "exec"), module.__dict__, namespace)  # noqa: S102 - the mutant's code only
            total += 1
            real_code, real.__code__ = real.__code__, namespace[function_name].__code__
            known_types = set(checks.TENSOR_TYPES)  # a mutant of is_tensor_like must not teach the next one
            try:
                alive = first_problem(CASES) is None
            finally:
                real.__code__ = real_code
                checks.TENSOR_TYPES.clear()
                checks.TENSOR_TYPES.update(known_types)
            if alive:
                found.append({"file": file, "function": function_name, "line": line, "mutation": what})
                print(f"SURVIVED {file}:{line} {function_name}: {what}", flush=True)
    print(f"{total} mutants, {total - len(found)} killed, {len(found)} survived")
    known = listed()
    if args.update:
        write(found, known, scope)
        known = listed()
    problems = compare(found, known, scope)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"{len(found)} survivors; {len(problems)} not as {SURVIVORS.relative_to(ROOT)} lists them", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
