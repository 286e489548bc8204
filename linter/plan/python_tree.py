"""CPython's verdict on a text before libcst sees it: its ``ast`` tree (which the screens read),
a syntax error libcst may still read, or a refusal (``Unlintable``) for a file libcst cannot be
trusted with."""

from __future__ import annotations

import ast
import re
import warnings
from itertools import accumulate

from linter.diagnostics import FileProblem

# libcst's native parser crashes the process (not an exception) somewhere past ~1,000 nested
# brackets; CPython itself refuses more than 200, so deeper files are not valid Python anyway.
_SAFE_BRACKET_DEPTH = 200
# libcst needs about 4 KB of memory per token and time that grows faster than the file (a 10 MB
# file of one long list took 12 minutes and 13 GB); a file this large is generated data, not
# attention code someone edits. The largest .py in torch is 1.4 MB.
MAX_SOURCE_CHARS = 2_000_000
_BRACKETS = re.compile(r"[()\[\]{}]")


class Unlintable(Exception):
    def __init__(self, problem: FileProblem) -> None:
        super().__init__(problem.line())
        self.problem = problem


# Stands for "CPython parsed this text" where the tree itself is not at hand.
PARSED = ast.Module(body=[], type_ignores=[])


def python_tree(text: str, path: str) -> ast.Module | SyntaxError:
    """CPython's syntax tree of ``text``, or its SyntaxError where libcst may still read the
    text (newer syntax); raises for a file libcst cannot be trusted with, before it takes
    minutes or crashes.

    Too large: refused outright. Too deep: CPython's own parser gives the verdict, because
    libcst overflows the C stack (a segfault, not an exception) on expressions nested a few
    thousand deep (``a.b.b...``, ``x[0][0]...``, ``lambda: lambda: ...``, brackets), all of
    which CPython refuses too. Any other syntax error is left to libcst, which may know newer
    syntax than this interpreter; the bracket count (strings and comments included) only
    decides whether a syntax error must be reported here.
    """
    if len(text) > MAX_SOURCE_CHARS:
        raise Unlintable(FileProblem(
            path, "EKV005",
            f"too large to lint ({len(text):,} characters, the limit is {MAX_SOURCE_CHARS:,}); exclude generated files",
        ))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are not ours to report
            return ast.parse(text)
    except SyntaxError as exc:
        if _bracket_depth(text) > _SAFE_BRACKET_DEPTH:
            raise Unlintable(FileProblem(path, "E999", f"syntax error: {exc.msg}", exc.lineno or 1, exc.offset or 1)) from None
        return exc
    except (RecursionError, MemoryError):
        raise Unlintable(FileProblem(path, "EKV003", "nested too deeply to parse; split the expression or statement")) from None


def _bracket_depth(text: str) -> int:
    if text.count("(") + text.count("[") + text.count("{") <= _SAFE_BRACKET_DEPTH:
        return 0
    return max(accumulate(1 if b in "([{" else -1 for b in _BRACKETS.findall(text)), default=0)
