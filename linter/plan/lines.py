"""Lines of source text: old Mac line ends (``_LONE_CR``), the lines that start a definition
at any depth (``definition_lines``, ``_DEFINITION_LINE``), and the top-level definitions and
classes (``top_level_starts``, ``TOP_LEVEL_CLASS``: the module screens read them too).
"""

from __future__ import annotations

import re

from linter.plan.words import _is_word_char


_LONE_CR = re.compile(r"\r(?!\n)")


# A line that starts a definition, found from the newline before it (a leading literal lets
# ``re`` skip ahead; ``^`` in multiline mode would be tried at every position).
_DEFINITION = re.compile(r"\n(?=[ \t]*(?:(?:async[ \t]+)?def|class)\b|[ \t]*@)")


try:
    from linter._code_only import definition_lines as _compiled_definition_lines
except ImportError:  # a build without a C compiler: the search below answers alike
    _compiled_definition_lines = None


def definition_lines(text: str) -> list[int]:
    """The offsets of the lines after the first that start a ``def``, ``class`` or decorator,
    as ``_DEFINITION`` finds them: each line start read in C where the build made the helper
    (``linter/_code_only.c``); without it, the keywords found by substring search and their
    lines checked here, four times faster than trying the pattern at every newline."""
    if _compiled_definition_lines is not None:
        return _compiled_definition_lines(text)
    starts = set()
    for word in ("def", "class", "@"):
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if word == "@" or end == len(text) or not _is_word_char(text[end]):
                line = text.rfind("\n", 0, at) + 1
                head = text[line:at]
                if line and (not head.strip(" \t") or (word == "def" and _ASYNC.fullmatch(head))):
                    starts.add(line)
            at = text.find(word, end)
    return sorted(starts)


_ASYNC = re.compile(r"[ \t]*async[ \t]+")


def top_level_starts(text: str) -> list[re.Match[str]]:
    """``_TOP_LEVEL_START`` at each line in column 0 that starts a definition (group 1: a
    function's name)."""
    first = _TOP_LEVEL_START.match(text)
    found = [first] if first is not None else []
    # Only a keyword right after the newline can start one: most lines fail at their first
    # character, in ``re`` (a quarter faster than checking every definition line here).
    for newline in _TOP_LEVEL_LINE.finditer(text):
        if match := _TOP_LEVEL_START.match(text, newline.end()):
            found.append(match)
    return found


_TOP_LEVEL_START = re.compile(r"(?:(?:async[ \t]+)?def[ \t]+(\w+)|class\b|@)")
_TOP_LEVEL_LINE = re.compile(r"\n(?=async|def|class|@)")


# A top-level class and its name (the module screens read it too).
TOP_LEVEL_CLASS = re.compile(r"^class[ \t]+(\w+)", re.MULTILINE)


# A line that starts a ``def`` or ``class`` at any indentation: no statement crosses one.
_DEFINITION_LINE = re.compile(r"\n(?=[ \t]*(?:(?:async[ \t]+)?def|class)\b)")
