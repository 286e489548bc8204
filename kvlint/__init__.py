"""``python -m kvlint``: the ``kvlint`` command under the name users type.

The linter lives in the ``linter`` package and the guard in ``runtime_guard``; this package only
gives the command its own module name, as ``python -m ruff`` does for ruff.
"""

from linter import __version__

__all__ = ["__version__"]
