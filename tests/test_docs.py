"""The user-facing Markdown works as written.

- Every table parses as one table: a header, a delimiter row, and rows of the header's width,
  with no stray row left behind a paragraph (GitHub renders that as text).
- Every relative link names a file or folder that exists.
- Every shell block that runs kvlint runs, command by command, in a scratch git repository
  holding a copy of examples/, with the exit statuses it documents: 0 for each command unless an
  HTML comment right before the block says otherwise, ``<!-- exit status: 1 -->`` for every
  command or ``<!-- exit status: 1, 0 -->`` for each in turn. A block marked
  ``<!-- illustrative: why -->`` (paths the reader supplies, a model directory) is not run.
- The pages speak in the present tense: no session or issue numbers, no commits of this
  repository.
- README.md's rule table is exactly what ``kvlint rules`` lists.
- CI runs exactly the test command README.md gives, after the setup the quick start runs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import readme_rules

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
USER_DOCS = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "README.md",
             *sorted((ROOT / "examples").rglob("README.md"))]
# The pages whose prose must not be a development log (CHANGELOG.md is the place for changes).
PRESENT_TENSE_DOCS = [README, *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "README.md"]

FENCE = re.compile(r"^(```+)(\S*)[^\n]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)
SHELL = {"bash", "sh", "shell", "console"}
MARKER = re.compile(r"<!--\s*(illustrative|exit status:\s*\d+(?:\s*,\s*\d+)*)\b[^>]*-->\s*\Z")
RUNS_KVLINT = re.compile(r"(?:^|[\s|;&(/])kvlint (?:check|rules|rule)\b|-m kvlint\b", re.MULTILINE)


def _name(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else doc.name


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    language: str
    body: str
    before: str  # the document's text up to the fence

    @property
    def where(self) -> str:
        return f"{_name(self.doc)}:{self.line}"

    def marker(self) -> re.Match | None:
        return MARKER.search(self.before)


def _blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    return [
        Block(doc, text.count("\n", 0, m.start()) + 1, m.group(2), m.group(3), text[:m.start()])
        for m in FENCE.finditer(text)
    ]


def _prose_lines(doc: Path) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    text = doc.read_text(encoding="utf-8")
    fenced = set()
    for m in FENCE.finditer(text):
        first = text.count("\n", 0, m.start())
        fenced.update(range(first, first + m.group(0).count("\n") + 1))
    return [(n + 1, line) for n, line in enumerate(text.splitlines()) if n not in fenced]


# ---- tables -------------------------------------------------------------------------------


def _cells(row: str) -> int:
    """How many cells a GitHub table row has: unescaped pipes split cells, even in code spans."""
    inner = row.strip()
    inner = inner.removeprefix("|")
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return len(re.split(r"(?<!\\)\|", inner))


DELIMITER = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def table_problems(doc: Path) -> list[str]:
    """What keeps each table of ``doc`` from rendering as one table."""
    problems, run = [], []
    lines = _prose_lines(doc) + [(0, "")]
    for number, line in lines:
        if line.lstrip().startswith("|"):
            run.append((number, line))
            continue
        if run:
            (first, header), *rest = run
            where = f"{_name(doc)}:{first}"
            if not rest or not DELIMITER.match(rest[0][1]):
                problems.append(f"{where}: table rows without a header and delimiter row (a table split by a paragraph?)")
            else:
                width = _cells(header)
                for row_number, row in rest:
                    if _cells(row) != width:
                        problems.append(f"{_name(doc)}:{row_number}: {_cells(row)} cells in a table of {width} columns")
            run = []
    return problems


@pytest.mark.parametrize("doc", USER_DOCS, ids=_name)
def test_every_table_parses_as_one_table(doc):
    assert table_problems(doc) == []


def test_the_table_check_catches_a_table_split_by_a_paragraph_and_a_short_row(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("| a | b |\n| --- | --- |\n| 1 | 2 |\n\nA paragraph.\n| 3 | 4 |\n\n| c | d |\n| - | - |\n| x | y | z |\n")
    problems = [p.split(": ", 1)[1] for p in table_problems(doc)]
    assert problems == ["table rows without a header and delimiter row (a table split by a paragraph?)",
                        "3 cells in a table of 2 columns"]


# ---- links --------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def _relative_links(doc: Path) -> list[tuple[int, str]]:
    return [
        (number, target)
        for number, line in _prose_lines(doc)
        for target in LINK.findall(CODE_SPAN.sub("", line))
        if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)
    ]


@pytest.mark.parametrize("doc", USER_DOCS, ids=_name)
def test_every_relative_link_resolves(doc):
    broken = [
        f"{_name(doc)}:{number}: {target}"
        for number, target in _relative_links(doc)
        if not (doc.parent / target.split("#")[0]).exists()
    ]
    assert broken == []


# ---- shell blocks -------------------------------------------------------------------------


def _kvlint_blocks() -> list[Block]:
    return [b for doc in USER_DOCS if doc.exists() for b in _blocks(doc) if b.language in SHELL and RUNS_KVLINT.search(b.body)]


def commands(block: Block) -> list[str]:
    """The block's commands, one per line (``\\`` continuations joined); a console block's are
    its ``$ `` lines, the rest being the output they print."""
    found, current = [], None
    for line in block.body.splitlines():
        if current is not None:
            current += "\n" + line
        elif block.language != "console" and line.strip() and not line.lstrip().startswith("#"):
            current = line
        elif block.language == "console" and line.startswith("$ "):
            current = line[2:]
        else:
            continue
        if not current.endswith("\\"):
            found.append(current)
            current = None
    return found


def documented_statuses(block: Block) -> list[int] | None:
    """One exit status per command: ``<!-- exit status: 1, 0 -->`` before the block, one
    number for every command; 0 for each without a marker; None when marked illustrative."""
    marker = block.marker()
    count = len(commands(block))
    if marker is None:
        return [0] * count
    if marker.group(1) == "illustrative":
        return None
    statuses = [int(n) for n in re.findall(r"\d+", marker.group(1))]
    return statuses * count if len(statuses) == 1 else statuses


def _scratch(tmp_path: Path) -> dict[str, str]:
    """A git repository holding a copy of examples/, and an environment whose `kvlint` and
    `python` are this interpreter's: the code under test, wherever it is installed."""
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    # On PATH, and where the quick start leaves them (.venv/bin).
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, command in (("kvlint", f"{shlex.quote(sys.executable)} -m kvlint"), ("python", shlex.quote(sys.executable))):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        shim.chmod(0o755)
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=pythonpath, NO_COLOR="1")


@pytest.mark.parametrize("block", _kvlint_blocks(), ids=lambda b: b.where)
def test_every_kvlint_shell_block_runs_with_the_exit_status_it_documents(block, tmp_path):
    expected = documented_statuses(block)
    if expected is None:
        pytest.skip("marked illustrative")
    env = _scratch(tmp_path)
    statuses, outputs = [], []
    # In order, in one folder: a block may write a file a later command reads.
    for command in commands(block):
        run = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300, check=False)
        assert "Traceback" not in run.stderr, f"{command}\n{run.stderr}"
        statuses.append(run.returncode)
        outputs.append(f"$ {command}\n{run.stdout[-1500:]}{run.stderr[-1500:]}")
    assert statuses == expected, f"{block.where}: exit statuses {statuses}, documented {expected}\n" + "\n".join(outputs)


def test_commands_and_statuses_are_read_as_documented():
    body = "$ kvlint check a.py \\\n    --fix\nsome output\n$ kvlint rules\n"
    block = Block(README, 1, "console", body, "text\n<!-- exit status: 1, 0 -->\n")
    assert commands(block) == ["kvlint check a.py \\\n    --fix", "kvlint rules"]
    assert documented_statuses(block) == [1, 0]
    assert documented_statuses(Block(README, 1, "bash", "# a comment\nkvlint rules\nkvlint rule KV101\n", "")) == [0, 0]
    assert documented_statuses(Block(README, 1, "bash", "kvlint check x\n", "<!-- illustrative: a path you supply -->\n")) is None


def test_the_shell_block_check_finds_the_blocks_and_reads_their_markers():
    blocks = {b.where: b for b in _kvlint_blocks()}
    assert any(w.startswith("README.md") for w in blocks) and any(w.startswith("docs/cli.md") for w in blocks)
    illustrative = [w for w, b in blocks.items() if (m := b.marker()) and m.group(1) == "illustrative"]
    # Marking must stay the exception: most blocks are run.
    assert len(illustrative) * 2 < len(blocks), illustrative


# ---- present tense ------------------------------------------------------------------------

HISTORY = [
    (re.compile(r"\bsessions?\s+\d+", re.IGNORECASE), "a session number"),
    (re.compile(r"\bissues?\s+\d+", re.IGNORECASE), "an issue number"),
]
# 7 to 40 hex digits with a letter and a digit: a commit of this repository when git knows it
# (a third-party commit a page cites as its source is fine).
HEX = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")


def _our_commits(words: set[str]) -> set[str]:
    if not words or not (ROOT / ".git").exists():
        return set()
    run = subprocess.run(["git", "cat-file", "--batch-check"], input="".join(f"{w}^{{commit}}\n" for w in sorted(words)),
                         cwd=ROOT, capture_output=True, text=True, check=False)
    known = {line.split()[0] for line in run.stdout.splitlines() if not line.endswith("missing")}
    return {w for w in words if any(k.startswith(w) for k in known)}


def history_in(doc: Path) -> list[str]:
    lines = list(enumerate(doc.read_text(encoding="utf-8").splitlines(), 1))
    commits = _our_commits({m.group(0) for _, line in lines for m in HEX.finditer(line)})
    found = [
        f"{_name(doc)}:{number}: {what}: {match.group(0)!r}"
        for number, line in lines for pattern, what in HISTORY for match in pattern.finditer(line)
    ]
    return found + [
        f"{_name(doc)}:{number}: a commit of this repository: {match.group(0)!r}"
        for number, line in lines for match in HEX.finditer(line) if match.group(0) in commits
    ]


@pytest.mark.parametrize("doc", PRESENT_TENSE_DOCS, ids=_name)
def test_pages_say_what_kvlint_does_not_how_it_was_built(doc):
    assert history_in(doc) == [], "development history belongs in git log, changes for users in CHANGELOG.md"


# ---- README.md ----------------------------------------------------------------------------


def test_readme_rule_table_is_every_rule_kvlint_lists():
    rules = readme_rules.listed_rules()
    assert len(rules) >= 24
    table = readme_rules.table_in(README.read_text(encoding="utf-8"))
    assert table is not None, "README.md has no generated rule table"
    assert table == readme_rules.render(rules), "run `python -m tests.readme_rules` and commit README.md"


def _first_bash_block_after(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    rest = text[text.index(heading):]
    return next(b for b in FENCE.finditer(rest) if b.group(2) == "bash").group(3).strip()


def test_ci_runs_exactly_the_readme_test_command_after_the_quick_start_setup():
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    setup_and_lint = _first_bash_block_after("## Quick start")
    setup = setup_and_lint.split(" && ")[0]
    assert ci == [setup, _first_bash_block_after("Run the tests")]


def test_quick_start_sets_up_then_lints_the_bundled_examples_with_the_exit_status_it_states():
    setup, lint = _first_bash_block_after("## Quick start").split(" && ")
    assert setup == "bash .ci/setup"
    assert lint.startswith(".venv/bin/kvlint ")
    args = shlex.split(lint)[1:]
    run = subprocess.run([sys.executable, "-m", "kvlint", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 1 and "examples/" in run.stdout, run.stdout + run.stderr
    quick_start = README.read_text(encoding="utf-8").split("## Quick start")[1].split("\n## ")[0]
    assert "exits 1" in quick_start


# ---- CHANGELOG.md -------------------------------------------------------------------------

CHANGE_KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_changelog_is_keep_a_changelog_by_version_newest_first():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert versions[0] == "Unreleased" and versions.count("Unreleased") == 1
    numbered = [tuple(int(p) for p in v.split(".")) for v in versions[1:]]
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in versions[1:]) and numbered == sorted(numbered, reverse=True)
    kinds = set(re.findall(r"^### (.+)$", text, re.MULTILINE))
    assert kinds <= CHANGE_KINDS, kinds - CHANGE_KINDS
    # Every level-2 heading is a version; nothing else sits at that level.
    assert len(re.findall(r"^## ", text, re.MULTILINE)) == len(versions)
