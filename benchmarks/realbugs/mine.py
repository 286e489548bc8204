"""Candidate K/V bug fixes from a repository's history, for a person to read and judge.

``python -m benchmarks.realbugs.mine REPO [--since DATE] [PATHSPEC ...]`` walks ``git log -p`` of a
git directory and prints each changed line pair that looks like a one-sided K/V fix:

- swap: the fixed line is the old line with K-side names turned into V-side names (or back) and
  nothing else changed, e.g. a V statement that kept its K twin's projection or cache;
- kv-heads: a head count or size that was not a KV one (``num_heads``) became one
  (``num_key_value_heads``, ``n_kv_heads``, ``v_head_dim`` ...) in an otherwise similar line.

Most candidates are refactors or features; read every diff and keep only fixes where one side
was wrong. Nothing here reads or stores the repository's code beyond printing the pair.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from collections.abc import Iterator

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|\S")
_TWINS = {"k": "v", "K": "V", "key": "value", "keys": "values", "BK": "BV", "NK": "NV",
          "dk": "dv", "xk": "xv", "wk": "wv"}
_SIDE = {**{k: ("K", v) for k, v in _TWINS.items()}, **{v: ("V", k) for k, v in _TWINS.items()}}
_KV_SIZE = re.compile(r"kv_heads|key_value_heads|n_kv_head|num_kv|kv_head|query_groups|multi_query_group_num"
                      r"|v_head_dim|head_dim_v|value_head_dim|headdim_v|hdim_v")


def _side(token: str) -> tuple[str, str] | None:
    """(side, name with the K/V part blanked) when one underscore part of ``token`` is a K or V name."""
    parts = token.split("_")
    for i, part in enumerate(parts):
        if part in _SIDE:
            return _SIDE[part][0], "_".join([*parts[:i], "#", *parts[i + 1:]])
    return None


def is_swap(old: str, new: str) -> bool:
    """``new`` is ``old`` with some K-side names replaced by their V twins (or the reverse) only."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    if len(a) != len(b) or a == b:
        return False
    directions = set()
    for x, y in zip(a, b):
        if x == y:
            continue
        sx, sy = _side(x), _side(y)
        if not sx or not sy or sx[1] != sy[1] or sx[0] == sy[0]:
            return False
        directions.add((sx[0], sy[0]))
    return len(directions) == 1


def is_kv_size_fix(old: str, new: str) -> bool:
    """A size in ``old`` that named no KV head count or V head dim now does, the rest alike."""
    if _KV_SIZE.search(old) or not _KV_SIZE.search(new):
        return False
    return difflib.SequenceMatcher(None, old.strip(), new.strip()).ratio() > 0.7


def _hunks(repo: str, since: str, paths: list[str]) -> Iterator[tuple[str, str, list[str], list[str]]]:
    cmd = ["git", "--git-dir", repo, "log", "--no-merges", f"--since={since}", "--format=@@@ %h %ad %s",
           "--date=short", "-p", "-U0", "HEAD", "--", *(paths or ["*.py"])]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, errors="replace") as git:
        commit = path = ""
        removed: list[str] = []
        added: list[str] = []
        for line in git.stdout:
            line = line.rstrip("\n")
            if line.startswith(("@@@ ", "diff --git", "@@ ")):
                if removed and added:
                    yield commit, path, removed, added
                removed, added = [], []
                if line.startswith("@@@ "):
                    commit = line[4:]
                elif line.startswith("diff --git"):
                    path = line.split(" b/", 1)[-1]
            elif line.startswith("-") and not line.startswith("---"):
                removed.append(line[1:])
            elif line.startswith("+") and not line.startswith("+++"):
                added.append(line[1:])
        if removed and added:
            yield commit, path, removed, added


def candidates(repo: str, since: str, paths: list[str]) -> Iterator[tuple[str, str, str, str, str]]:
    """(kind, commit, path, old line, new line) for every candidate pair."""
    for commit, path, removed, added in _hunks(repo, since, paths):
        if "test" in path or len(removed) > 6 or len(added) > 6:
            continue
        squeeze = {re.sub(r"\s+", "", x) for x in removed}
        for new in added:
            for old in removed:
                if is_swap(old, new) and re.sub(r"\s+", "", new) not in squeeze:
                    yield "swap", commit, path, old.strip(), new.strip()
                elif is_kv_size_fix(old, new):
                    yield "kv-heads", commit, path, old.strip(), new.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realbugs.mine", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", help="a git directory (bare or .git)")
    parser.add_argument("--since", default="2022-01-01", help="oldest commit date (default: 2022-01-01)")
    parser.add_argument("paths", nargs="*", help="pathspecs to limit the walk (default: *.py)")
    args = parser.parse_intermixed_args(argv)
    try:
        for kind, commit, path, old, new in candidates(args.repo, args.since, args.paths):
            print(f"{kind}\t{commit[:90]}\t{path}\n  - {old[:160]}\n  + {new[:160]}")
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
