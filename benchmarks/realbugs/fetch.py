"""Getting one file out of a released wheel or sdist, through ``pip download --no-deps``."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from benchmarks.realbugs.manifest import Release


class FetchError(RuntimeError):
    """A release could not be downloaded or does not hold the file; the message says how to retry."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _archives(folder: Path, requirement: str) -> list[Path]:
    # Wheels and sdists start with name-version, the name spelt with "_", "-" or ".".
    name, _, version = requirement.partition("==")
    stem = _normal(f"{name}-{version}") + "_"
    return sorted(p for p in folder.iterdir()
                  if p.suffix in (".whl", ".gz", ".zip") and _normal(p.name).startswith(stem))


def _pip_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["pip printed nothing"])[-1]


def pip_command(release: Release, dest: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
           "-d", str(dest), release.requirement]
    if release.python or release.platform:
        # pip refuses target tags unless it may take wheels only; such releases are wheel-only here.
        cmd += ["--only-binary=:all:"]
        if release.python:
            cmd += ["--python-version", release.python]
        if release.platform:
            cmd += ["--platform", release.platform]
    return cmd


def download(release: Release, cache: Path) -> Path:
    """The archive for ``release`` under ``cache/dists/NAME==VERSION``, downloaded once."""
    dest = cache / "dists" / release.requirement
    if dest.is_dir():
        found = _archives(dest, release.requirement)
        if found:
            return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = pip_command(release, dest)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 and not (release.python or release.platform):
        # pip reads an sdist's metadata by running its build; some (DeepSpeed) import torch there,
        # which an isolated build environment lacks but this interpreter may have.
        cmd = [*cmd, "--no-build-isolation"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = _archives(dest, release.requirement)
    if done.returncode != 0 or not found:
        raise FetchError(f"cannot download {release.requirement}: {_pip_error(done.stderr)}\n"
                         f"  retry by hand: {' '.join(cmd)}")
    return found[0]


def read_member(archive: Path, path: str) -> str:
    """The text of ``path`` in a wheel, or in an sdist below its top folder."""
    try:
        if archive.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(archive) as zf:
                names = zf.namelist()
                member = path if path in names else next((n for n in names if n.partition("/")[2] == path), None)
                if member is not None:
                    return zf.read(member).decode("utf-8")
        else:
            with tarfile.open(archive) as tf:
                for member in tf.getmembers():
                    if member.isfile() and member.name.partition("/")[2] == path:
                        return tf.extractfile(member).read().decode("utf-8")
    except (OSError, zipfile.BadZipFile, tarfile.TarError, UnicodeDecodeError) as exc:
        raise FetchError(f"cannot read {path} from {archive}: {exc}\n"
                         f"  delete {archive.parent} and run again to download it afresh") from None
    raise FetchError(f"{archive.name} has no file {path}: the manifest's path is wrong for this release")


def release_file(release: Release, cache: Path) -> Path:
    """The one file of ``release``, extracted under ``cache/files`` so kvlint can read it."""
    target = cache / "files" / release.requirement / release.path
    if not target.is_file():
        text = read_member(download(release, cache), release.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return target


def commit_file(repos: Path, repo: str, commit: str, path: str, cache: Path) -> Path:
    """``path`` at ``commit`` from a local copy of ``repo``: ``repos/OWNER+NAME/repo`` (a bare or
    normal git directory), extracted under ``cache/files/git`` so kvlint can read it."""
    gitdir = repos / repo.replace("/", "+") / "repo"
    if not gitdir.exists():
        gitdir = repos / repo.replace("/", "+")
    target = cache / "files" / "git" / repo.replace("/", "+") / commit.replace("^", "-parent") / path
    if target.is_file():
        return target
    if not gitdir.exists():
        raise FetchError(f"no local copy of {repo} under {repos}: clone it to {repos / repo.replace('/', '+')} "
                         f"(or pass --repos with a folder that has it) to run this unreleased case")
    done = subprocess.run(["git", "--git-dir" if (gitdir / "HEAD").is_file() else "-C", str(gitdir),
                           "show", f"{commit}:{path}"], capture_output=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["git printed nothing"])[-1]
        raise FetchError(f"cannot read {path} at {commit} in {gitdir}: {last}\n"
                         f"  fetch the commit into that copy (git fetch) and run again")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(done.stdout)
    return target
