"""Calibration on real code: ``python -m benchmarks.calibrate [TREE...]``.

Runs every kvlint rule (no cache) over whichever calibration trees are present (vllm, sglang,
transformers, vllm-ascend by default; every tree of ``benchmarks/calibration_trees.toml`` with
``--all``, or one split of it with ``--split tune|measure``) and prints the findings per tree and
rule, then per split; ``--show`` prints each finding too. Precision is judged here: every finding
this prints must be a real bug or a warning the project's maintainers would accept.

The trees live under one root: ``--root``, else ``$KVLINT_TREES``, else ``./.trees``. A tree
argument may also be a path. ``--fetch CACHE`` downloads the pinned releases of the chosen trees
(``pip download --no-deps``, wheel or sdist) and unpacks their ``.py`` files under
``CACHE/trees`` first, then uses that as the root. An absent tree is skipped with a line saying
so, never silently.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.calibration_trees import fetch_trees, manifest
from linter import runner
from linter.files import discover
from linter.finding import Finding
from linter.rules import rule_codes
from linter.settings import Settings

TREES = ("vllm", "sglang", "transformers", "vllm-ascend")


@dataclass
class TreeRun:
    name: str
    path: Path
    files: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def default_root() -> Path:
    return Path(os.environ.get("KVLINT_TREES") or ".trees")


def resolve_trees(names: list[str], root: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(name, path) of every tree present, and a line for each one that is not."""
    present, absent = [], []
    for name in names or TREES:
        path = Path(name) if os.sep in name or Path(name).is_absolute() else root / name
        if path.is_dir():
            present.append((path.name, path))
        else:
            absent.append(f"skipped {name}: no directory at {path}")
    return present, absent


def lint_tree(name: str, path: Path, jobs: int = 1, fix: bool = False) -> TreeRun:
    """Every rule over ``path`` as ``kvlint check --no-cache`` runs them (config files ignored:
    a tree's own settings must not hide findings from calibration)."""
    codes = rule_codes()
    settings = Settings(select=frozenset(codes))
    job = runner.job_for(settings, cache_dir=None, fix=fix)
    run = TreeRun(name, path)
    start = time.perf_counter()
    paths, problems = discover([str(path)], settings)
    results = runner.check_paths(paths, job, jobs)
    run.seconds = time.perf_counter() - start
    run.files = len(paths)
    run.findings = sorted((f for r in results for f in r.findings), key=lambda f: f.sort_key)
    run.problems = [p.line() for p in problems] + [p.line() for r in results for p in r.problems]
    return run


def table(runs: list[TreeRun]) -> str:
    codes = sorted({f.code for run in runs for f in run.findings} | set(rule_codes()))
    header = ["tree", "files", "seconds", *codes, "total", "safe fixes"]
    rows = []
    for run in runs:
        counts = Counter(f.code for f in run.findings)
        safe = sum(1 for f in run.findings if f.fix is not None and f.fix.applicability == "safe")
        rows.append([run.name, str(run.files), f"{run.seconds:.1f}", *(str(counts[c]) for c in codes),
                     str(len(run.findings)), str(safe)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in [header, *rows]]
    return "\n".join(lines)


def describe(finding: Finding, root: Path) -> str:
    try:
        path = os.path.relpath(finding.path, root)
    except ValueError:
        path = finding.path
    text = f"{path}:{finding.span.row}:{finding.span.column}: {finding.code} {finding.message}"
    if finding.fix is not None:
        text += f"\n    fix ({finding.fix.applicability}): {finding.fix.message}"
    else:
        text += f"\n    suggestion: {finding.suggestion}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", metavar="TREE", help=f"tree names under the root, or paths (default: {', '.join(TREES)})")
    parser.add_argument("--root", type=Path, default=None, help="directory holding the trees (default: $KVLINT_TREES or ./.trees)")
    parser.add_argument("--all", action="store_true", help="every tree of benchmarks/calibration_trees.toml")
    parser.add_argument("--split", choices=("tune", "measure"), help="the trees of one split of the manifest")
    parser.add_argument("--fetch", type=Path, metavar="CACHE", help="download and unpack the chosen trees under CACHE first")
    parser.add_argument("--show", action="store_true", help="print every finding with its suggestion or fix")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="worker processes")
    args = parser.parse_args(argv)

    names = list(args.trees)
    if args.all or args.split:
        names += [tree.name for tree in manifest() if args.split in (None, tree.split)]
    root = args.root or default_root()
    if args.fetch:
        wanted = [tree for tree in manifest() if tree.name in (names or TREES)]
        for line in fetch_trees(wanted, args.fetch):
            print(line, file=sys.stderr)
        root = args.fetch / "trees"
    present, absent = resolve_trees(names, root)
    for line in absent:
        print(line)
    if not present:
        print(f"no calibration tree found under {root}; set --root or KVLINT_TREES")
        return 1
    runs = []
    for name, path in present:
        run = lint_tree(name, path, args.jobs)
        runs.append(run)
        if args.show:
            print(f"== {name} ({len(run.findings)} findings)")
            for finding in run.findings:
                print(describe(finding, path.parent))
        for problem in run.problems:
            print(f"{name}: {problem}", file=sys.stderr)
    print(table(runs))
    splits = {tree.name: tree.split for tree in manifest()}
    print(split_summary(runs, splits))
    return 0


def split_summary(runs: list[TreeRun], splits: dict[str, str]) -> str:
    """One line per split: trees, files and findings (``unlisted`` for a tree the manifest lacks)."""
    totals: dict[str, list[int]] = {}
    for run in runs:
        row = totals.setdefault(splits.get(run.name, "unlisted"), [0, 0, 0])
        row[0] += 1
        row[1] += run.files
        row[2] += len(run.findings)
    return "\n".join(
        f"{split}: {trees} trees, {files} files, {found} findings" for split, (trees, files, found) in sorted(totals.items())
    )


if __name__ == "__main__":
    raise SystemExit(main())
