"""The calibration manifest: pinned releases, a held-out split, and unpacking without a network."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from benchmarks.calibrate import TreeRun, split_summary
from benchmarks.calibration_trees import Tree, fetch_trees, manifest


def test_the_manifest_holds_twenty_trees_a_quarter_of_them_held_out():
    trees = manifest()
    assert len({t.name for t in trees}) == len(trees) >= 20
    held_out = [t for t in trees if t.split == "measure"]
    assert len(held_out) * 4 >= len(trees)
    assert all(t.version for t in trees)


def test_a_tree_without_a_pinned_version_is_named_in_the_error(tmp_path):
    bad = tmp_path / "trees.toml"
    bad.write_text('[trees.peft]\nrequirement = "peft"\nsplit = "tune"\n')
    with pytest.raises(ValueError, match="'peft' needs a pinned requirement"):
        manifest(bad)


def test_a_tree_with_an_unknown_split_is_named_in_the_error(tmp_path):
    bad = tmp_path / "trees.toml"
    bad.write_text('[trees.peft]\nrequirement = "peft==1.0"\nsplit = "train"\n')
    with pytest.raises(ValueError, match="'peft' has split 'train'"):
        manifest(bad)


def _wheel(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/attn.py", "k = 1\n")
        archive.writestr("pkg/data.json", "{}")


def _sdist(path: Path) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in (("proj-2.0/proj/attn.py", b"v = 2\n"), ("proj-2.0/README", b"hi")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text))


def test_archives_already_in_the_cache_are_unpacked_python_files_only(tmp_path):
    archives = tmp_path / "archives"
    archives.mkdir()
    _wheel(archives / "my_pkg-1.0-py3-none-any.whl")
    _sdist(archives / "proj-2.0.tar.gz")
    failed = fetch_trees([Tree("my-pkg", "my-pkg==1.0", "tune"), Tree("proj", "proj==2.0", "measure")], tmp_path)
    assert failed == []
    assert (tmp_path / "trees/my-pkg/pkg/attn.py").read_text() == "k = 1\n"
    assert not (tmp_path / "trees/my-pkg/pkg/data.json").exists()
    assert (tmp_path / "trees/proj/proj-2.0/proj/attn.py").read_text() == "v = 2\n"
    assert not (tmp_path / "trees/proj/proj-2.0/README").exists()


def test_the_summary_counts_findings_per_split():
    runs = [TreeRun("a", Path("a"), files=3), TreeRun("b", Path("b"), files=4), TreeRun("c", Path("c"), files=1)]
    runs[1].findings = [object(), object()]
    text = split_summary(runs, {"a": "tune", "b": "measure"})
    assert text.splitlines() == [
        "measure: 1 trees, 4 files, 2 findings",
        "tune: 1 trees, 3 files, 0 findings",
        "unlisted: 1 trees, 1 files, 0 findings",
    ]
