"""Problems with a file itself (unreadable, undecodable, unparsable), as opposed to findings.

Codes, used the same way on stderr and in every output format:

- ``E999`` the file is not valid Python (a syntax error, as in flake8 and older ruff);
- ``EKV001`` the file cannot be read (missing, vanished mid-run, permission denied, a symlink
  loop, a directory);
- ``EKV002`` the bytes are not text kvlint can decode (not UTF-8 or the declared PEP 263
  encoding, or a NUL byte);
- ``EKV003`` the file nests too deeply for the parser;
- ``EKV004`` a fix could not be written back;
- ``EKV005`` the file is too large to lint (generated data, not code someone edits);
- ``EKV999`` kvlint itself failed on this file (a bug: please report it with the file).

Any of them makes the run exit 2; every other file is still linted and reported. Warnings
(``W`` codes) do not change the exit status:

- ``WKV001`` a malformed ``# noqa`` directive on a line with a finding (it suppresses nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

NAMES = {
    "E999": "syntax-error",
    "EKV001": "unreadable-file",
    "EKV002": "undecodable-file",
    "EKV003": "nesting-too-deep",
    "EKV004": "fix-not-written",
    "EKV005": "file-too-large",
    "EKV999": "internal-error",
    "WKV001": "invalid-noqa",
}


@dataclass(frozen=True)
class FileProblem:
    path: str
    code: str
    message: str
    row: int = 1
    column: int = 1

    @property
    def name(self) -> str:
        return NAMES[self.code]

    @property
    def warning(self) -> bool:
        """A warning about the file (exit status unchanged), not a file kvlint could not check."""
        return self.code.startswith("W")

    def line(self) -> str:
        """The stderr form: ``path:row: CODE message``."""
        return f"{self.path}:{self.row}: {self.code} {self.message}"
