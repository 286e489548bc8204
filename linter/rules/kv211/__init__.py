"""KV211 kv-heads-sharded-to-zero: ``rule`` (the libcst rule, its docs and examples), ``screen`` (its
stdlib-``ast`` screen) and ``condition`` (its text condition). ``UNIT`` says where all the facts of
one finding lie (``linter.rules.UNITS``)."""

UNIT = "class"
# A preview rule: it runs with --preview (or preview = true), or when its code is selected by
# name, until its precision on held-out code meets the other rules'.
PREVIEW = True
