"""The resolved configuration one lint run uses (config.py builds it from pyproject + CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Settings:
    # Concrete codes, already expanded by config.load_settings (whose default is ALL);
    # the runner runs exactly these, so an empty set runs nothing.
    select: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()  # (glob, codes)
    exclude: tuple[str, ...] = ()  # exclude and extend-exclude, anchored
    force_exclude: bool = False  # apply exclude to paths named on the command line too
    respect_gitignore: bool = True
    extra_pairs: tuple[tuple[str, str], ...] = ()  # (k_name, v_name)
    extra_attention_callables: tuple[str, ...] = ()
    # Warnings (KV408, WKV001) fail the run like findings; findings themselves do not change.
    warnings_as_errors: bool = False
    # Where the rule pages are hosted, for SARIF's helpUri: a URL with {code} in it.
    rule_docs_url: str | None = None
    fingerprint_extra: tuple[str, ...] = field(default=())

    def fingerprint(self) -> str:
        """Stable text that changes whenever a setting that can change findings changes."""
        return repr((
            sorted(self.select), sorted(self.ignore), self.per_file_ignores,
            self.extra_pairs, self.extra_attention_callables, self.fingerprint_extra,
        ))
