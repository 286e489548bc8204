"""``[tool.kvlint]`` in pyproject.toml, merged with command-line options into ``Settings``.

The configuration file is ``--config FILE`` or else, searched from the directory common to the
paths being checked (``.`` by default) upwards, the first directory holding a ``.kvlint.toml``,
a ``kvlint.toml`` or a ``pyproject.toml`` with a ``[tool.kvlint]`` table (ruff's order). In
``pyproject.toml`` the keys live under ``[tool.kvlint]``; in ``kvlint.toml``/``.kvlint.toml``
(and any other file given to ``--config``) they are top-level, the shape of ``ruff.toml``.
Patterns in ``exclude``, ``extend-exclude`` and ``per-file-ignores`` are relative to that file's
directory.

    [tool.kvlint]
    select = ["KV1"]                       # codes or prefixes; "ALL"; default: every rule
    extend-select = ["KV201"]
    ignore = ["KV203"]
    extend-ignore = ["KV202"]              # added to ignore
    per-file-ignores = { "legacy/**" = ["KV101"] }
    exclude = ["third_party/"]
    extend-exclude = ["generated/"]
    force-exclude = false                  # also exclude paths named on the command line
    respect-gitignore = true
    extra-pairs = [["k_rope", "v_rope"]]   # extra K/V name pairs (K name, V name)
    attention-callables = ["my_attn"]      # extra callables taking (q, k, v, ...)
    warnings-as-errors = false             # warnings (KV408, WKV001) exit 1 like findings
    rule-docs-url = "https://github.com/org/kvlint/blob/main/docs/rules/{code}.md"  # SARIF helpUri

The rule keys (select, extend-select, ignore, extend-ignore, per-file-ignores, extra-pairs,
attention-callables) may instead live in a ``lint`` subtable, ``[tool.kvlint.lint]``, as ruff
keeps them in ``[tool.ruff.lint]``.

Every problem (unreadable or malformed TOML, an unknown key, an unknown rule code, a wrong
type) is a ``ConfigError`` whose message is one line naming the file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from linter.settings import Settings


class ConfigError(Exception):
    """A one-line, user-facing configuration error."""


# Which rules run and how they read code: the keys ruff keeps under ``[tool.ruff.lint]``, which
# kvlint accepts there (``[tool.kvlint.lint]``) or at the top level, not both.
_LINT_KEYS = {
    "select", "extend-select", "ignore", "extend-ignore", "per-file-ignores", "extra-pairs",
    "attention-callables", "preview",
}
_KEYS = _LINT_KEYS | {
    "exclude", "extend-exclude", "force-exclude", "respect-gitignore", "warnings-as-errors",
    "rule-docs-url", "lint",
}
# Files holding kvlint's keys at the top level (ruff.toml's shape), in discovery order.
_STANDALONE = (".kvlint.toml", "kvlint.toml")


@dataclass(frozen=True)
class CliOptions:
    """The command-line options that override or extend the file's settings."""

    select: Sequence[str] | None = None
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    extend_exclude: Sequence[str] = ()  # relative to the current directory, as ruff's
    force_exclude: bool | None = None  # None: the file's force-exclude (default false)
    exclude: Sequence[str] | None = None  # replaces the file's exclude
    respect_gitignore: bool | None = None  # None: the file's respect-gitignore
    warnings_as_errors: bool | None = None  # None: the file's warnings-as-errors
    preview: bool | None = None  # None: the file's preview (default false)


def find_config(start: Path) -> Path | None:
    """The nearest kvlint configuration, from ``start`` upwards: ``.kvlint.toml``,
    ``kvlint.toml``, or a ``pyproject.toml`` with a ``[tool.kvlint]`` table."""
    directory = start.resolve()
    for candidate_dir in (directory, *directory.parents):
        for name in _STANDALONE:
            if (candidate_dir / name).is_file():
                return candidate_dir / name
        candidate = candidate_dir / "pyproject.toml"
        if _mentions_kvlint(candidate) and _kvlint_table(_read_toml(candidate), candidate) is not None:
            return candidate
    return None


def project_root(config: Path | None, start: Path) -> Path:
    """Where the cache lives: the configuration's directory, else the nearest directory from
    ``start`` upwards holding ``.git`` or a ``pyproject.toml``, else ``start`` (as ruff)."""
    if config is not None:
        return config.resolve().parent
    directory = start.resolve()
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists() or (candidate / "pyproject.toml").is_file():
            return candidate
    return directory


def _settings_table(config: Path) -> dict:
    """kvlint's keys in ``config``: ``[tool.kvlint]`` of a pyproject.toml, else top-level
    (a ``[tool.kvlint]`` table in another file is accepted too)."""
    document = _read_toml(config)
    if config.name == "pyproject.toml":
        return _kvlint_table(document, config) or {}
    tool = document.get("tool")
    if isinstance(tool, dict) and "kvlint" in tool:
        return _kvlint_table(document, config) or {}
    return document


def _kvlint_table(document: dict, path: Path) -> dict | None:
    """The ``[tool.kvlint]`` table, None when there is none."""
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: tool must be a table")
    table = tool.get("kvlint")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.kvlint] must be a table")
    return table


def common_directory(paths: Iterable[str]) -> Path:
    """Where config discovery starts for ``paths`` (files count as their directory)."""
    dirs = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") for p in paths]
    return Path(os.path.commonpath(dirs)) if dirs else Path.cwd()


def _mentions_kvlint(path: Path) -> bool:
    """Can ``path`` hold a ``[tool.kvlint]`` table? Every spelling of one names ``kvlint``, so a
    project's other pyproject.toml files are not parsed (nor their errors ours to report)."""
    try:
        with open(path, "rb") as handle:
            return b"kvlint" in handle.read()
    except OSError:
        return False


def _read_toml(path: Path) -> dict:
    # Imported here: most runs find no kvlint configuration to parse.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def load_settings(
    config: Path | None, cli: CliOptions, codes: Sequence[str], preview_codes: Iterable[str] = ()
) -> Settings:
    """Settings from ``config`` (may be None: defaults) overlaid with ``cli``.

    ``codes`` are the rule codes that exist; selectors may name a code, a prefix of codes, or ALL.
    ``preview_codes`` are the preview rules among them: ALL and prefixes select them only with
    ``preview`` on (``--preview``, ``preview = true``); naming one's exact code always selects it.
    """
    table: dict = {}
    root = Path.cwd()
    if config is not None:
        table = _settings_table(config)
        root = config.resolve().parent
    where = str(config) if config is not None else "command line"
    section = "[tool.kvlint]" if config is not None and config.name == "pyproject.toml" else ""
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{' in ' + section if section else ''}; known keys: {', '.join(sorted(_KEYS))}")
    table = _with_lint_keys(table, where, f"{section[:-1]}.lint]" if section else "[lint]")

    preview = table.get("preview", False)
    if not isinstance(preview, bool):
        raise ConfigError(f"{where}: preview must be true or false")
    if cli.preview is not None:
        preview = cli.preview
    hidden = frozenset() if preview else frozenset(preview_codes)

    def codes_of(value: object, key: str, hide: frozenset[str] = frozenset()) -> frozenset[str]:
        return _expand(_strings(value, key, where), codes, f"{where} ({key})", hide)

    select = codes_of(table.get("select", ["ALL"]), "select", hidden)
    if cli.select is not None:
        select = _expand(cli.select, codes, "--select", hidden)
    select |= codes_of(table.get("extend-select", []), "extend-select", hidden)
    select |= _expand(cli.extend_select, codes, "--extend-select", hidden)
    ignore = codes_of(table.get("ignore", []), "ignore") | codes_of(table.get("extend-ignore", []), "extend-ignore")
    ignore |= _expand(cli.ignore, codes, "--ignore")

    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of pattern = [codes]")
    per_file_ignores = tuple(
        (_anchor(pattern, root), codes_of(value, f"per-file-ignores {pattern!r}"))
        for pattern, value in per_file.items()
    )
    respect = table.get("respect-gitignore", True)
    if not isinstance(respect, bool):
        raise ConfigError(f"{where}: respect-gitignore must be true or false")
    force = table.get("force-exclude", False)
    if not isinstance(force, bool):
        raise ConfigError(f"{where}: force-exclude must be true or false")
    strict = table.get("warnings-as-errors", False)
    if not isinstance(strict, bool):
        raise ConfigError(f"{where}: warnings-as-errors must be true or false")
    if cli.warnings_as_errors is not None:
        strict = cli.warnings_as_errors
    docs_url = table.get("rule-docs-url")
    if docs_url is not None and not (isinstance(docs_url, str) and docs_url.startswith(("https://", "http://")) and "{code}" in docs_url):
        raise ConfigError(f'{where}: rule-docs-url must be an http(s) URL with {{code}} where the rule code goes, e.g. "https://github.com/org/kvlint/blob/main/docs/rules/{{code}}.md"')
    if cli.force_exclude is not None:
        force = cli.force_exclude
    if cli.respect_gitignore is not None:
        respect = cli.respect_gitignore
    exclude = [_anchor(p, root) for key in ("exclude", "extend-exclude") for p in _strings(table.get(key, []), key, where)]
    if cli.exclude is not None:
        exclude = [_anchor(p, Path.cwd()) for p in cli.exclude] + [_anchor(p, root) for p in _strings(table.get("extend-exclude", []), "extend-exclude", where)]
    exclude += [_anchor(p, Path.cwd()) for p in cli.extend_exclude]
    pairs = table.get("extra-pairs", [])
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(n, str) for n in p) for p in pairs
    ):
        raise ConfigError(f'{where}: extra-pairs must be a list of ["k_name", "v_name"] pairs')
    return Settings(
        select=select,
        ignore=ignore,
        per_file_ignores=per_file_ignores,
        exclude=tuple(exclude),
        force_exclude=force,
        respect_gitignore=respect,
        extra_pairs=tuple((k, v) for k, v in pairs),
        extra_attention_callables=tuple(_strings(table.get("attention-callables", []), "attention-callables", where)),
        warnings_as_errors=strict,
        rule_docs_url=docs_url,
    )


def _with_lint_keys(table: dict, where: str, lint_section: str) -> dict:
    """``table`` with its ``lint`` subtable's keys moved to the top level."""
    lint = table.get("lint", {})
    if not isinstance(lint, dict):
        raise ConfigError(f"{where}: {lint_section} must be a table")
    unknown = sorted(set(lint) - _LINT_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} in {lint_section}; known keys there: {', '.join(sorted(_LINT_KEYS))}")
    both = sorted(set(lint) & set(table))
    if both:
        raise ConfigError(f"{where}: {both[0]} is set both at the top level and in {lint_section}; keep one")
    return {**{k: v for k, v in table.items() if k != "lint"}, **lint}


def enabled_codes(settings: Settings) -> frozenset[str]:
    return settings.select - settings.ignore


def _strings(value: object, key: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return value


def _expand(selectors: Iterable[str], codes: Sequence[str], where: str, hidden: frozenset[str] = frozenset()) -> frozenset[str]:
    """The codes ``selectors`` name; ALL and prefixes pass over ``hidden`` (preview rules), an
    exact code does not."""
    chosen: set[str] = set()
    for raw in selectors:
        selector = raw.strip().upper()
        if not selector:
            continue
        matched = [c for c in codes if selector == "ALL" or c.startswith(selector)]
        if not matched:
            raise ConfigError(f"{where}: unknown rule code {raw!r}; valid codes: {', '.join(codes)}")
        chosen.update(c for c in matched if c == selector or c not in hidden)
    return frozenset(chosen)


def _anchor(pattern: str, root: Path) -> str:
    """A pattern with a slash is relative to the config's directory; a bare name matches anywhere."""
    pattern = pattern.replace(os.sep, "/")
    if "/" not in pattern.rstrip("/"):
        return pattern
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return root.as_posix().rstrip("/") + "/" + pattern.lstrip("/")
