"""A deterministic stand-in rule for testing the machinery around rules.

KV900 flags every call to ``flag_me(...)`` (the K side), names the first argument as the related
V side, and offers a safe fix renaming the call to ``fixed_me``. A call to ``explode()`` makes it
fail the way a buggy rule would.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from linter.finding import Edit, Fix
from linter.rules.base import Example, Rule
from linter.runner import Job
from linter.settings import Settings

# What the fix renames flag_me to; a test swaps in "explode" to fail on the fixed text.
FIXED_NAME = "fixed_me"


class FlagMe(Rule):
    code = "KV900"
    name = "flag-me"
    summary = "Calls to flag_me"
    what = bad = good = fix_text = why = "test rule"
    INVALID = (Example("flag_me(v)\n", line=1, expected_fix="fixed_me(v)\n"),)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "explode":
            raise ZeroDivisionError("boom")
        if isinstance(node.func, cst.Name) and node.func.value == "flag_me":
            related = [(node.args[0].value, "V side: the argument")] if node.args else []
            fix = Fix("rename to fixed_me", (Edit(self.span(node.func), FIXED_NAME),))
            self.report(node, "flag_me called", suggestion="call fixed_me instead", related=related, fix=fix)
            # The engine demotes a fix it cannot prove to unsafe (rules.base.mirror_is_proven);
            # this stand-in plays a rule whose fix was proven, as the machinery tests need one.
            self.findings[-1] = replace(self.findings[-1], fix=fix)


def fake_job(settings: Settings | None = None, **kwargs) -> Job:
    return Job(settings or Settings(), (FlagMe,), **kwargs)
