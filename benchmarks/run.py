"""One command for every speed target: ``python -m benchmarks``.

Prints one table: each target, what was measured, the ratio against its reference from the same
run, and PASS/FAIL. The torch tree (``DIR/torch/torch`` under ``--trees DIR``, else the
installed torch package, found without importing torch) is measured with ``--trees-only`` too;
the attention trees (vllm, sglang, transformers: ``benchmarks/trees.py``) are measured
when present under ``--trees DIR`` or fetched with ``--fetch CACHE``, and skipped with a line
otherwise; ``--tree`` adds more trees for the findings-equivalence check.
``--skip-slow-path`` leaves out the parse-everything runs (minutes each on 2 cores).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
GUARD_BATCH = 64


@dataclass
class Row:
    target: str
    measured: str
    ratio: float | None
    limit: float | None

    @property
    def verdict(self) -> str:
        if self.limit is None:
            return "info"
        return "PASS" if self.ratio is not None and self.ratio <= self.limit else "FAIL"


class BenchmarkRunFailed(SystemExit):
    """A timed command that failed or answered differently: its time measures nothing."""


def _tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and every live descendant (kB), read from /proc."""
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/status") as status:
                total += next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    pending += map(int, children.read().split())
        except (OSError, ValueError):
            continue  # gone between two reads
    return total


def timed(cmd: list[str], env: dict | None = None, expect: str | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB of the whole process tree, stdout).

    The tree's RSS (the process and its worker processes, summed) is sampled every 5 ms from
    /proc by a thread of this process, and the answer is never below the largest single
    process's own peak (``wait4``: the process and its reaped children): a sample can miss a
    peak shorter than 5 ms, the sum is never overstated. A non-zero exit status, or an output
    other than ``expect`` when given (a reference run's), fails the benchmark loudly: a command
    that crashed at once would otherwise meet every speed target.
    """
    import threading

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    peak_kb, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak_kb
        while not done.is_set():
            peak_kb = max(peak_kb, _tree_rss_kb(proc.pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    reader = threading.Thread(target=lambda: setattr(proc, "captured", proc.stdout.read()), daemon=True)
    reader.start()  # a full pipe would stall the command
    errors = proc.stderr.read()
    reader.join()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    output = proc.captured.decode(errors="replace")
    if proc.returncode != 0:
        raise BenchmarkRunFailed(f"benchmarks: {' '.join(cmd)} exited with {proc.returncode}:\n{errors.decode(errors='replace')[-2000:]}")
    if expect is not None and output != expect:
        raise BenchmarkRunFailed(f"benchmarks: {' '.join(cmd)} answered differently from its reference run "
                                 f"({len(output.splitlines())} lines against {len(expect.splitlines())})")
    return elapsed, max(peak_kb, usage.ru_maxrss) // 1024, output


def torch_tree(trees_dir: str | None = None, required: bool = True) -> str | None:
    """The torch tree: ``DIR/torch/torch`` where ``--trees DIR`` holds one unpacked, else the
    installed torch package (found without importing it); without either, None (with a line
    on stderr) unless ``required``."""
    if trees_dir and (Path(trees_dir) / "torch" / "torch").is_dir():
        return str(Path(trees_dir) / "torch" / "torch")
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        return next(iter(spec.submodule_search_locations))
    if required:
        raise SystemExit("benchmarks: torch is not installed; pass --tree PATH")
    print("benchmarks: skipped torch: not installed, nor unpacked as DIR/torch/torch under --trees DIR", file=sys.stderr)
    return None


def tree_rows(tree: str, label: str = "", rounds: int = 3) -> list[Row]:
    """ruff, cold kvlint and warm kvlint on ``tree``, in turn, round after round."""
    ruff = [str(BIN / "ruff"), "check", "--select", "E,F", "--no-cache", "--isolated", "--exit-zero", "--output-format", "concise", tree]
    kvlint = [str(BIN / "kvlint"), "check", "--exit-zero", "--format", "concise"]
    # In turn rather than in blocks: the machine's load drifts, and a drift between two blocks
    # of runs would land on one side of the ratio only. Each run must print what the first
    # (reference) run of its command printed: the findings of a run that ran short differ.
    ruff_runs, cold_runs, warm_runs = [], [], []
    with tempfile.TemporaryDirectory() as cache:
        reference = timed([*kvlint, "--cache-dir", cache, tree])[2]
        ruff_reference = timed(ruff)[2]
        for _ in range(rounds):
            ruff_runs.append(timed(ruff, expect=ruff_reference)[0])
            cold_runs.append(timed([*kvlint, "--no-cache", tree], expect=reference)[:2])
            warm_runs.append(timed([*kvlint, "--cache-dir", cache, tree], expect=reference)[0])
    ruff_s = statistics.median(ruff_runs)
    cold_s = statistics.median(t for t, _ in cold_runs)
    peak = max(rss for _, rss in cold_runs)
    warm_s = statistics.median(warm_runs)
    # Each round's own ratio too: under load the spread says how far to trust the median.
    spread = sorted(c / r for (c, _), r in zip(cold_runs, ruff_runs))
    prefix = f"{label}: " if label else ""
    # A line as soon as a tree is done: a run of several trees takes minutes.
    print(f"benchmarks: {label or tree}: ruff {ruff_s:.2f} s, kvlint cold {cold_s:.2f} s ({cold_s / ruff_s:.2f}x), "
          f"warm {warm_s:.2f} s ({warm_s / ruff_s:.2f}x), {peak} MB", file=sys.stderr)
    return [
        Row(f"{prefix}reference: ruff check --select E,F --no-cache", f"{ruff_s:.2f} s", None, None),
        Row(f"{prefix}cold kvlint check, no cache <= 3x ruff", f"{cold_s:.2f} s (rounds {spread[0]:.1f}x-{spread[-1]:.1f}x)",
            cold_s / ruff_s, 3.0),
        Row(f"{prefix}cold kvlint peak RSS, whole process tree (sampled) <= 300 MB", f"{peak} MB", peak / 300, 1.0),
        Row(f"{prefix}warm kvlint check (cache) <= 1x ruff cold", f"{warm_s:.2f} s", warm_s / ruff_s, 1.0),
    ]


def small_file_rows(small_files: dict[str, str]) -> list[Row]:
    kvlint = [str(BIN / "kvlint"), "check", "--exit-zero", "--format", "concise"]
    # The reference and each file in turn, round after round: start-up times drift with the
    # machine's load, and a drift between two blocks of runs would land on one side only.
    commands = {"reference": [sys.executable, "-c", "import libcst, rich"]}
    commands.update({label: [*kvlint, "--no-cache", path] for label, path in small_files.items()})
    times: dict[str, list[float]] = {label: [] for label in commands}
    references = {label: timed(cmd)[2] for label, cmd in commands.items()}
    for _ in range(11):
        for label, cmd in commands.items():
            times[label].append(timed(cmd, expect=references[label])[0])
    imports_s = statistics.median(times.pop("reference"))
    small = {label: statistics.median(t) for label, t in times.items()}
    return [
        Row(f"kvlint check FILE ({label}) <= 1.5x import libcst, rich", f"{t:.2f} s vs {imports_s:.2f} s", t / imports_s, 1.5)
        for label, t in small.items()
    ]


def attention_tree_rows(trees_dir: str | None, rounds: int) -> tuple[list[Row], list[str]]:
    """Rows for every attention tree present under ``trees_dir``; a line for each absent one."""
    from benchmarks.trees import TREES, locate

    rows, present = [], []
    for name, path in locate(trees_dir).items():
        if path is None:
            where = f"under {trees_dir}" if trees_dir else "(no --trees DIR / KVLINT_TREES)"
            print(f"benchmarks: skipped {TREES[name][0]}: not unpacked {where}; --fetch CACHE downloads it", file=sys.stderr)
            rows.append(Row(f"{name}: skipped, tree absent", "", None, None))
            continue
        present.append(str(path))
        rows += tree_rows(str(path), name, rounds)
    return rows, present


def plan_rows(tree: str) -> list[Row]:
    """How much of the tree the pre-filter leaves for libcst (in-process, no parsing)."""
    from benchmarks.equivalence import default_settings
    from linter import runner
    from linter.plan.text_plan import parse_plan

    settings = default_settings()
    job = runner.job_for(settings)
    files = whole = screened = lines = parsed = 0
    for path in python_files(tree):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        files += 1
        lines += text.count("\n")
        plan = parse_plan(text, job.rules, settings)
        if plan.whole:
            whole += 1
            parsed += text.count("\n")
        else:
            screened += bool(plan.module_rules)
            if plan.ranges:
                parsed += plan.excerpt(text).count("\n")
    return [Row("text pre-filter: lines left for ast/libcst",
                f"{parsed:,} of {lines:,} ({whole} of {files:,} files whole, {screened} more to the module screens)",
                None, None)]


def python_files(tree: str) -> list[str]:
    from linter.files import discover
    from linter.settings import Settings

    return discover([tree], Settings())[0]


def equivalence_rows(trees: list[str], jobs: int) -> list[Row]:
    from benchmarks.equivalence import findings

    rows = []
    for tree in trees:
        paths = python_files(tree)
        start = time.perf_counter()
        slow = set(findings(paths, prefilter=False, jobs=jobs))
        slow_s = time.perf_counter() - start
        start = time.perf_counter()
        fast = set(findings(paths, prefilter=True, jobs=jobs))
        fast_s = time.perf_counter() - start
        missed, extra = slow - fast, fast - slow
        for item in sorted(missed)[:5]:
            print(f"  fast path misses: {item}", file=sys.stderr)
        name = Path(tree).name
        rows.append(Row(f"{name}: libcst parse-everything (slow path)", f"{slow_s:.1f} s, {len(slow)} findings", None, None))
        rows.append(Row(f"{name}: fast path, same findings", f"{fast_s:.1f} s; {len(missed)} missed, {len(extra)} extra",
                        float(len(missed) + len(extra)), 0.0))
    return rows


def guard_rows() -> list[Row]:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "guard_bench.py")], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise BenchmarkRunFailed(f"benchmarks: guard_bench.py exited with {out.returncode}:\n{out.stderr[-2000:]}")
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    check = raw.pop("lengths_check")
    data = {int(k): v for k, v in raw.items()}
    added = {b: d["guarded_added"] for b, d in data.items()}
    pure = {b: d["guarded_py_added"] for b, d in data.items()}
    tight = {b: d["tight_added"] for b, d in data.items()}
    slack = {b: d["baseline_added"] for b, d in data.items()}
    rows = [
        Row(f"guard added cost, batch {b} (tight validator {tight[b]:.1f} us, slack {slack[b]:.1f} us, pure-Python length check {pure[b]:.1f} us)", f"{added[b]:.1f} us", None, None)
        for b in sorted(data)
    ]
    batches = sorted(data)
    growth = (added[batches[-1]] - added[batches[0]]) / (batches[-1] - batches[0])
    rows += [
        Row(f"guard added cost, batch {GUARD_BATCH} <= 10 us ({check} length check)", f"{added[GUARD_BATCH]:.1f} us", added[GUARD_BATCH] / 10, 1.0),
        Row(f"guard added cost, batch {GUARD_BATCH} <= tight hand-written validator (same checks, each shape read once)",
            f"{added[GUARD_BATCH]:.1f} vs {tight[GUARD_BATCH]:.1f} us", added[GUARD_BATCH] / max(tight[GUARD_BATCH], 1e-9), 1.0),
        Row("  same, against the slack hand-written validator (12 .shape reads)", f"{added[GUARD_BATCH]:.1f} vs {slack[GUARD_BATCH]:.1f} us",
            added[GUARD_BATCH] / max(slack[GUARD_BATCH], 1e-9), None),
        Row("  same, pure-Python length check (a build without a C compiler)", f"{pure[GUARD_BATCH]:.1f} vs {tight[GUARD_BATCH]:.1f} us",
            pure[GUARD_BATCH] / max(tight[GUARD_BATCH], 1e-9), None),
        Row("guard growth per extra sequence < 0.05 us", f"{growth:.4f} us", growth / 0.05, 1.0),
    ]
    return rows


def idle_rows() -> list[Row]:
    env = {k: v for k, v in os.environ.items() if k not in ("KVGUARD", "KVGUARD_LOG")}  # KVGUARD_LOG alone turns the guard on
    probe = "import sys; print(sorted(m for m in ('torch', 'torch_npu', 'runtime_guard') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True).stdout.strip()
    pth = next(Path(p) / "kvlint_guard.pth" for p in sys.path if (Path(p) / "kvlint_guard.pth").exists())
    line = pth.read_text().strip()
    code = compile(line, str(pth), "exec")
    saved = {name: os.environ.pop(name) for name in ("KVGUARD", "KVGUARD_LOG") if name in os.environ}
    try:
        count = 20000
        start = time.perf_counter()
        for _ in range(count):
            exec(code, {})  # noqa: S102 - timing the .pth line itself, as site.py runs it
        per_start_us = (time.perf_counter() - start) / count * 1e6
    finally:
        os.environ.update(saved)
    import_probe = "import sys, time; t = time.perf_counter(); import runtime_guard; print(time.perf_counter() - t, 'torch' in sys.modules)"
    import_s, torch_loaded = subprocess.run([sys.executable, "-c", import_probe], capture_output=True, text=True, env=env, check=True).stdout.split()
    return [
        Row("KVGUARD unset: modules loaded at start-up", loaded, float(loaded != "[]"), 0.0),
        Row("KVGUARD unset: .pth hook cost per interpreter start", f"{per_start_us:.2f} us", per_start_us / 1000, 1.0),
        Row("KVGUARD unset: import runtime_guard (no torch)", f"{float(import_s) * 1000:.1f} ms, torch loaded: {torch_loaded}",
            float(torch_loaded == "True"), 0.0),
    ]


def checkpoint_rows() -> list[Row]:
    """issue 16: a 1,000-tensor sharded checkpoint (headers only) checks in under a second."""
    from benchmarks.checkpoint_bench import own_reader_seconds, safetensors_package_seconds, write_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model"
        count = write_checkpoint(model)
        command = [str(BIN / "kvlint"), "check", "--no-cache", "--exit-zero", str(model)]
        reference = timed(command)[2]
        cli = statistics.median(timed(command, expect=reference)[0] for _ in range(5))
        own = statistics.median(own_reader_seconds(model) for _ in range(5))
        # Run last: its first call imports numpy (framework="numpy"; the other frameworks need torch).
        first = safetensors_package_seconds(model)
        warm = statistics.median(safetensors_package_seconds(model) or 0.0 for _ in range(5)) if first is not None else None
    rows = [
        Row(f"kvlint check DIR, {count:,}-tensor sharded checkpoint < 1 s", f"{cli:.2f} s", cli / 1.0, 1.0),
        Row("  of which: reading the 10 shard headers + index (in-process)", f"{own * 1000:.1f} ms", None, None),
    ]
    if first is not None and warm is not None:
        rows += [
            Row("  reference: same headers via safetensors.safe_open, 1st call", f"{first * 1000:.1f} ms", own / first, None),
            Row("  reference: same headers via safetensors.safe_open, warm", f"{warm * 1000:.1f} ms", own / warm, None),
        ]
    return rows


def print_table(rows: list[Row]) -> None:
    width = max(len(r.target) for r in rows)
    measured = max(len(r.measured) for r in rows)
    print(f"{'target':<{width}}  {'measured':<{measured}}  {'ratio':>7}  verdict")
    for r in rows:
        ratio = "" if r.ratio is None else f"{r.ratio:7.2f}"
        print(f"{r.target:<{width}}  {r.measured:<{measured}}  {ratio:>7}  {r.verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="extra tree for the equivalence check")
    parser.add_argument("--trees", default=os.environ.get("KVLINT_TREES"), metavar="DIR",
                        help="directory holding the unpacked attention trees (vllm/, sglang/, transformers/); "
                             "default $KVLINT_TREES")
    parser.add_argument("--fetch", default=os.environ.get("KVLINT_BENCH_CACHE"), metavar="CACHE",
                        help="pip download the attention trees' wheels into CACHE and unpack them there "
                             "(default $KVLINT_BENCH_CACHE); overrides --trees")
    parser.add_argument("--trees-only", action="store_true", help="only the attention-tree rows")
    parser.add_argument("--skip-slow-path", action="store_true", help="skip the parse-everything equivalence run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of ruff/cold/warm per tree (median)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    # pip byte-compiles an installed package, libcst included; an editable checkout may not
    # have been (PYTHONDONTWRITEBYTECODE), and recompiling kvlint on every start is not what
    # users pay.
    compileall.compile_dir(str(ROOT / "linter"), quiet=1)
    trees_dir = args.trees
    if args.fetch:
        from benchmarks.trees import fetch

        trees_dir = fetch(args.fetch)
    rows, attention_trees = attention_tree_rows(trees_dir, args.rounds)
    # torch is one of the trees the speed targets name: measured with --trees-only too.
    tree = torch_tree(trees_dir, required=not args.trees_only) or ""
    if tree:
        rows += tree_rows(tree, "torch", args.rounds)
    if not args.trees_only:
        small = {
            "no K/V code": str(ROOT / "linter" / "settings.py"),
            # A file with a finding: libcst surely parses it (the screens settle fixed.py alone).
            "attention code, parsed": str(ROOT / "examples" / "ring_attention" / "buggy.py"),
        }
        rows += small_file_rows(small) + plan_rows(tree)
    if not args.skip_slow_path:
        rows += equivalence_rows([*([tree] if tree else []), *attention_trees, *args.tree], args.jobs)
    if not args.trees_only:
        rows += guard_rows() + idle_rows() + checkpoint_rows()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    load = Path("/proc/loadavg").read_text().split()[0]
    from linter.plan import code_only
    from linter.plan import words

    # kvlint runs from this environment: its text helpers are loaded as these imports load them.
    compiled = [name for name, helper in (("identifier sets", words._compiled_identifiers),
                                          ("code_only", code_only._compiled_reduced)) if helper is not None]
    helpers = f"compiled: {', '.join(compiled)}" if compiled else "pure Python (not built)"
    print(f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {cpu}, load average {load}; "
          f"torch tree: {tree or 'not measured'}; pre-filter text helpers {helpers}")
    print_table(rows)
    return 1 if any(r.verdict == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
