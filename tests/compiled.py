"""Whether this environment could build kvlint's C helpers, as hatch_build.py decides."""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig


def compiler_at_hand() -> bool:
    """What hatch_build.py needs: a shared-library command that exists, and Python's headers."""
    linker = sysconfig.get_config_var("LDSHARED")
    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    return bool(linker) and shutil.which(shlex.split(linker)[0]) is not None and os.path.exists(headers) and not os.environ.get("KVLINT_PURE_PYTHON")
