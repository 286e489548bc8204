"""What a module rule's condition found in a file (KV105's helpers, KV208's callees, KV209's
facts), kept for the rule's text screen (``module_screens.TEXT_SCREENS``), which the runner asks
right after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from linter.plan.file import _File
from linter.settings import Settings


T = TypeVar("T")


# The runner asks a module rule's text screen right after ``parse_plan`` asked the rule's
# condition of the same text (or of its code, ``_File.source`` naming the text): what the
# condition found then is kept (by rule: text, settings, facts of the last whole file), not
# worked out again. Asked of any other text, the screen reads the whole text.
_LAST: dict[str, tuple] = {}


def _remembered(code: str, f: _File, facts: T) -> T:
    # Only a whole file's facts: a definition's raw text (``source`` of a unit) is no file.
    whole = f.text if not f.reduced else f.source if f.whole else None
    if whole is not None:
        _LAST[code] = (whole, f.settings, facts)
    return facts


def _recalled(code: str, text: str, settings: Settings, find: Callable[[_File], T]) -> T:
    last = _LAST.get(code)
    if last and last[0] is text and last[1] == settings:
        return last[2]
    return find(_File(text, settings))
