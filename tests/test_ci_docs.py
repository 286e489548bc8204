"""docs/ci.md's snippets work as written: YAML and TOML parse, hook ids exist, commands run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from linter.rules.kv101.rule import KeyOnlyReshape

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "ci.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.DOTALL)


def _documented_commands() -> list[list[str]]:
    """Every `kvlint check ...` in the doc's code blocks, without redirections or comments."""
    code = "\n".join(_blocks("yaml") + _blocks("bash"))
    return [shlex.split(match) for match in re.findall(r"kvlint (check[^>#\n]*)", code)]


def _kvlint(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "linter", *args], check=False, cwd=cwd, capture_output=True, text=True)


def _ran(run: subprocess.CompletedProcess) -> bool:
    """Exit 0 (clean) or 1 (findings), not 2 (usage error) and not a crash (also exit 1)."""
    return run.returncode in (0, 1) and "Traceback" not in run.stderr


def _project(tmp_path: Path, pyproject: str = "") -> Path:
    (tmp_path / "attention.py").write_text(KeyOnlyReshape.bad)
    (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def test_every_yaml_snippet_parses():
    assert len(_blocks("yaml")) == 3
    for block in _blocks("yaml"):
        assert yaml.safe_load(block)


def test_pre_commit_snippet_uses_only_hooks_this_repository_serves():
    served = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    config = next(yaml.safe_load(b) for b in _blocks("yaml") if "repos" in yaml.safe_load(b))
    used = {hook["id"] for repo in config["repos"] for hook in repo["hooks"]}
    assert used and used <= served


def test_hooks_are_declared_as_ruff_pre_commit_declares_its_own():
    """One process per run (one summary), and the file types `kvlint check .` lints."""
    for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()):
        assert hook["require_serial"] is True, hook["id"]
        assert hook["types_or"] == ["python", "pyi", "jupyter"] and "types" not in hook, hook["id"]
        assert hook["entry"].startswith("kvlint check --force-exclude"), hook["id"]


def test_github_job_uploads_the_sarif_file_it_writes():
    workflow = next(yaml.safe_load(b) for b in _blocks("yaml") if "jobs" in (yaml.safe_load(b) or {}))
    steps = workflow["jobs"]["kvlint"]["steps"]
    written = [s["run"].split(">")[-1].strip() for s in steps if "--format sarif" in s.get("run", "")]
    uploads = [s["with"]["sarif_file"] for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")]
    assert written and written == uploads


def test_every_documented_command_is_accepted(tmp_path):
    project = _project(tmp_path)
    commands = _documented_commands()
    assert len(commands) >= 6
    # In document order, so the baseline is written before it is read.
    for args in commands:
        run = _kvlint(args, project)
        assert _ran(run), f"kvlint {shlex.join(args)}: exit {run.returncode}\n{run.stderr}"


def test_baseline_recipe_reports_nothing_that_was_recorded(tmp_path):
    project = _project(tmp_path)
    assert _kvlint(["check", "."], project).returncode == 1
    write, read = (c for c in _documented_commands() if any(a.endswith("baseline") for a in c))
    assert _ran(_kvlint(write, project))
    run = _kvlint(read, project)
    assert run.returncode == 0, run.stdout + run.stderr


def test_toml_snippet_is_a_configuration_kvlint_accepts(tmp_path):
    (snippet,) = _blocks("toml")
    assert "[tool.kvlint]" in snippet
    # A snippet kvlint cannot read or does not understand exits 2.
    run = _kvlint(["check", "."], _project(tmp_path, snippet))
    assert _ran(run), run.stderr
