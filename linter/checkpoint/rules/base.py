"""What every checkpoint rule has: the house documentation fields and one ``check``.

Checkpoint rules read config.json and safetensors headers, not Python, so they are not libcst
visitors and live outside ``linter/rules``; ``kvlint rules``, ``kvlint rule CODE``, the
configuration's select/ignore and every output format know them through
``linter.checkpoint.documented_rules``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from linter.checkpoint.model import Model
from linter.checkpoint.resolve import Geometry, Value
from linter.finding import Finding


@dataclass(frozen=True)
class Context:
    model: Model
    geometry: Geometry
    tp_sizes: tuple[int, ...] = ()


class CheckpointRule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    what: ClassVar[str]
    why: ClassVar[str]
    bad: ClassVar[str]  # a config.json excerpt (or a header listing) that is reported
    good: ClassVar[str]
    fix_text: ClassVar[str]
    # "warning": a cost worth knowing, not a model that fails; the run's exit status ignores it.
    severity: ClassVar[str] = "error"
    # No checkpoint rule rewrites files; ``is_fixable`` reads INVALID examples.
    INVALID: ClassVar[tuple] = ()

    @classmethod
    def doc_text(cls) -> str:
        """Same shape as the code rules' pages, with JSON examples."""
        from linter.rules.base import doc_page  # here: it imports libcst, which checking a model never needs

        return doc_page(cls, "json")

    @classmethod
    def check(cls, context: Context) -> list[Finding]:
        raise NotImplementedError

    @classmethod
    def at_key(cls, context: Context, value: Value | tuple, message: str, suggestion: str) -> Finding:
        config = context.model.config
        assert config is not None
        key = value.key if isinstance(value, Value) else value
        span = config.span(key)
        return Finding(cls.code, message, config.path, span, suggestion, noqa_row=span.row)

    @classmethod
    def at_tensor(cls, context: Context, name: str, message: str, suggestion: str) -> Finding:
        path, span = context.model.tensor_location(name)
        return Finding(cls.code, message, path, span, suggestion, noqa_row=span.row)


def whole(value: object) -> bool:
    """A head count or size: an int >= 1 (JSON true is not a number)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


