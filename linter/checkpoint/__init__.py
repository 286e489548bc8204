"""Check a model checkpoint, not just the code: K/V head geometry from config.json and
safetensors headers (rules KV401-KV408; docs/checkpoints.md).

``kvlint check`` hands this package the paths that are models: a directory holding
``config.json`` (config, index and every ``*.safetensors`` header in it), or a ``.json`` file
(checked as a config). Everything here runs without torch and without reading tensor data.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING

from linter.checkpoint.model import CONFIG, Model, load_config, load_directory

if TYPE_CHECKING:
    from linter.checkpoint.rules.base import CheckpointRule
    from linter.runner import FileResult
    from linter.settings import Settings


@cache
def checkpoint_rules() -> tuple[type[CheckpointRule], ...]:
    from linter.checkpoint import rules as package
    from linter.checkpoint.rules.base import CheckpointRule

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("kv"):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found += [o for o in vars(module).values() if isinstance(o, type) and issubclass(o, CheckpointRule)
                      and o.__module__ == module.__name__]
    return tuple(sorted(found, key=lambda r: r.code))


@cache
def checkpoint_codes() -> tuple[str, ...]:
    """``("KV401", ...)`` from the module names, without importing the rules (as linter.rules)."""
    names = os.listdir(os.path.join(os.path.dirname(__file__), "rules"))
    return tuple(sorted(n.split("_", 1)[0].upper() for n in names if n.startswith("kv") and n.endswith(".py")))


@cache
def documented_rules() -> tuple:
    """Every rule kvlint has, code rules and checkpoint rules, by code: what ``kvlint rules``,
    ``kvlint rule``, docs/rules and SARIF's rule list show."""
    from linter.rules import all_rules

    return tuple(sorted((*all_rules(), *checkpoint_rules()), key=lambda r: r.code))


def is_model_path(path: str) -> bool:
    return path.endswith(".json") and os.path.isfile(path) or os.path.isfile(os.path.join(path, CONFIG))


def split_paths(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(model paths, paths to lint as code). A model directory is both: its ``*.py`` files
    (remote modeling code) are still linted; a JSON file is only a model."""
    models = [p for p in paths if is_model_path(p)]
    code = [p for p in paths if not (p.endswith(".json") and os.path.isfile(p))]
    return models, code


def code_settings(settings: Settings) -> Settings:
    """``settings`` without checkpoint codes, for the code linter's job."""
    return replace(settings, select=settings.select - frozenset(checkpoint_codes()))


def check(paths: Iterable[str], settings: Settings, tp_sizes: Sequence[int] = ()) -> list[FileResult]:
    """One result per file that has findings or problems (config.json, index, shards)."""
    from linter.runner import FileResult

    results: dict[str, FileResult] = {}
    for path in paths:
        model = load_config(path) if os.path.isfile(path) else load_directory(path)
        texts = model.texts()
        for problem in model.problems:
            results.setdefault(problem.path, FileResult(problem.path, [], [], texts.get(problem.path))).problems.append(problem)
        for finding in check_model(model, settings, tp_sizes):
            results.setdefault(finding.path, FileResult(finding.path, [], [], texts.get(finding.path))).findings.append(finding)
    return list(results.values())


def check_model(model: Model, settings: Settings, tp_sizes: Sequence[int] = ()) -> list:
    from linter import files
    from linter.checkpoint.resolve import resolve
    from linter.checkpoint.rules.base import Context

    if model.config is None:
        return []
    context = Context(model, resolve(model.config.data), tuple(tp_sizes))
    enabled = settings.select - settings.ignore
    findings = [f for rule in checkpoint_rules() if rule.code in enabled for f in rule.check(context)]
    if settings.per_file_ignores:
        findings = [
            f for f in findings
            if not any(f.code in codes and files.path_matches(files.posix_absolute(f.path), pattern)
                       for pattern, codes in settings.per_file_ignores)
        ]
    return sorted(findings, key=lambda f: f.sort_key)
