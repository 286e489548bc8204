"""The calibration trees (``calibration_trees.toml``): which releases, which split, and fetching them.

A tree is the ``.py`` files of one pinned release, unpacked as ``CACHE/trees/<name>/``. A wheel
is unpacked as it is; an sdist keeps its top folder (``colossalai-0.5.0/...``). Nothing is
imported from a tree: it is only read.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

MANIFEST = Path(__file__).with_name("calibration_trees.toml")
SPLITS = ("tune", "measure")


@dataclass(frozen=True)
class Tree:
    name: str
    requirement: str
    split: str

    @property
    def project(self) -> str:
        return self.requirement.split("==", 1)[0]

    @property
    def version(self) -> str:
        return self.requirement.split("==", 1)[1]


def manifest(path: Path = MANIFEST) -> list[Tree]:
    """Every tree of the manifest, in its order; a malformed entry is a ValueError naming it."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    trees = []
    for name, entry in data.get("trees", {}).items():
        requirement, split = entry.get("requirement", ""), entry.get("split")
        if "==" not in requirement:
            raise ValueError(f"{path}: tree {name!r} needs a pinned requirement (name==version), got {requirement!r}")
        if split not in SPLITS:
            raise ValueError(f"{path}: tree {name!r} has split {split!r}; use one of {', '.join(SPLITS)}")
        trees.append(Tree(name, requirement, split))
    return trees


def fetch_trees(trees: list[Tree], cache: Path) -> list[str]:
    """Download and unpack each tree not yet under ``cache/trees``; a line for each one that failed."""
    archives, unpacked = cache / "archives", cache / "trees"
    archives.mkdir(parents=True, exist_ok=True)
    failed = []
    for tree in trees:
        target = unpacked / tree.name
        if target.is_dir() and any(target.iterdir()):
            continue
        archive = _archive(archives, tree) or _download(archives, tree)
        if archive is None:
            failed.append(f"could not download {tree.requirement}; retry with: pip download --no-deps {tree.requirement} -d {archives}")
            continue
        target.mkdir(parents=True, exist_ok=True)
        _unpack_python_files(archive, target)
    return failed


def _archive(archives: Path, tree: Tree) -> Path | None:
    stem = tree.project.replace("-", "_").lower()
    for path in sorted(archives.iterdir()):
        name = path.name.lower().replace("-", "_")
        if name.startswith(f"{stem}_{tree.version}") and (name.endswith(".whl") or name.endswith(".tar.gz")):
            return path
    return None


def _download(archives: Path, tree: Tree) -> Path | None:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-build-isolation",
               "--dest", str(archives), tree.requirement]
    print(f"calibrate: {' '.join(command[2:])}", file=sys.stderr)
    subprocess.run(command, capture_output=True, text=True)
    return _archive(archives, tree)


def _unpack_python_files(archive: Path, target: Path) -> None:
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            wheel.extractall(target, [m for m in wheel.namelist() if m.endswith(".py")])
        return
    with tarfile.open(archive) as sdist:
        members = [m for m in sdist.getmembers() if m.isfile() and m.name.endswith(".py")]
        sdist.extractall(target, members, filter="data")
