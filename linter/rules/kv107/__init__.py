"""KV107 broken-kv-twin: ``rule`` (the libcst rule, its docs and examples), ``screen`` (its stdlib-``ast``
screen) and ``condition`` (its text condition). ``UNIT`` says where all the facts of one finding lie
(``linter.rules.UNITS``)."""

UNIT = "definition"
