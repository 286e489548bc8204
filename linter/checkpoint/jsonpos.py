"""Where each key of a JSON document sits, so a finding can point at ``"num_key_value_heads"``.

``json`` gives values, not positions; this scanner walks the text once, keeping the stack of
keys, and records the 1-based (row, column) of every object key by its path, such as
``("text_config", "num_key_value_heads")``. Array elements are indexed, so keys inside lists
get paths too. Only called on text that ``json.loads`` already accepted.
"""

from __future__ import annotations

import json

Path = tuple[str | int, ...]


def key_positions(text: str) -> dict[Path, tuple[int, int]]:
    positions: dict[Path, tuple[int, int]] = {}
    # Each open container: [is_object, current key or index, path of the container].
    stack: list[list] = []
    row, line_start, i, n = 1, 0, 0, len(text)
    expect_key = False
    while i < n:
        ch = text[i]
        if ch == "\n":
            row, line_start = row + 1, i + 1
        elif ch == '"':
            end = _string_end(text, i)
            if expect_key and stack:
                key = json.loads(text[i:end])
                stack[-1][1] = key
                positions[(*stack[-1][2], key)] = (row, i - line_start + 1)
                expect_key = False
            i = end
            continue
        elif ch == "{" or ch == "[":
            path = stack[-1][2] + (stack[-1][1],) if stack else ()
            stack.append([ch == "{", 0, path])
            expect_key = ch == "{"
        elif ch == "}" or ch == "]":
            stack.pop()
        elif ch == ",":
            if stack and stack[-1][0]:
                expect_key = True
            elif stack:
                stack[-1][1] += 1
        i += 1
    return positions


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal opening at ``start``."""
    i = start + 1
    while True:
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        else:
            i += 1
