"""The attention codebases kvlint is measured on: where their unpacked trees are, and fetching them.

A tree is the Python files of one released wheel, unpacked as ``DIR/<name>/<package>/...``.
``python -m benchmarks --trees DIR`` (or ``KVLINT_TREES=DIR``, the root ``benchmarks.calibrate``
reads too) uses trees already
unpacked there; ``--fetch CACHE`` (or ``KVLINT_BENCH_CACHE=CACHE``) downloads the wheels with
``pip download --no-deps`` into ``CACHE/wheels`` and unpacks their ``.py`` files into
``CACHE/trees`` first (once: a tree already unpacked is kept). A tree that is in neither place
is skipped, with a line that says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

# name -> (pip requirement, the package directory inside the wheel)
TREES = {
    "vllm": ("vllm==0.33.0", "vllm"),
    "sglang": ("sglang==0.5.23", "sglang"),
    "transformers": ("transformers==5.25.0", "transformers"),
}


def trees_from_env() -> str | None:
    """``$KVLINT_TREES``, else the trees fetched into ``$KVLINT_BENCH_CACHE``, else None."""
    if os.environ.get("KVLINT_TREES"):
        return os.environ["KVLINT_TREES"]
    cache = os.environ.get("KVLINT_BENCH_CACHE")
    return str(Path(cache) / "trees") if cache else None


def locate(trees_dir: str | None) -> dict[str, Path | None]:
    """Each benchmark tree's directory under ``trees_dir``, or None where it is absent."""
    found: dict[str, Path | None] = {}
    for name, (_, package) in TREES.items():
        path = Path(trees_dir) / name if trees_dir else None
        found[name] = path if path is not None and (path / package).is_dir() else None
    return found


def fetch(cache_dir: str) -> str:
    """Download and unpack every tree not yet in ``cache_dir``; returns the trees directory."""
    cache = Path(cache_dir)
    wheels, trees = cache / "wheels", cache / "trees"
    wheels.mkdir(parents=True, exist_ok=True)
    for name, (requirement, package) in TREES.items():
        target = trees / name
        if (target / package).is_dir():
            continue
        wheel = _wheel(wheels, name)
        if wheel is None:
            print(f"benchmarks: pip download --no-deps {requirement} -> {wheels}", file=sys.stderr)
            result = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", str(wheels), requirement],
                capture_output=True, text=True,
            )
            wheel = _wheel(wheels, name)
            if result.returncode != 0 or wheel is None:
                print(f"benchmarks: could not download {requirement}: {result.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith(f"{package}/") and m.endswith(".py")]
            archive.extractall(target, members)
    return str(trees)


def _wheel(wheels: Path, name: str) -> Path | None:
    version = TREES[name][0].split("==")[1]
    return next(iter(sorted(wheels.glob(f"{name}-{version}-*.whl"))), None)
