"""The module screens: ``ast`` screens for the rules whose facts lie in different top-level definitions of a file
(or in another file): KV105 (a helper and its caller), KV207 (a base class and its subclass),
KV208 (a pool class and the function that builds it), KV209 (a viewing helper and its caller).

The text pre-filter cannot cut such a file into units, so before these screens every file
their text conditions admitted went whole through libcst (on vllm: 105 files for KV208, 70
for KV105). Each screen reads the module's standard-library tree once and over-approximates
its rule as the other screens do (``linter.plan.screens``): it may say yes for code without
findings, never no for code with one. Its yes is the lines where its rule may report (a
call, a class); the runner sends libcst the top-level definitions holding them, with every
definition they name, in place. A file whose module-wide rules all fail their screens goes
on to the per-definition plan of its other rules.

Each rule's module screen lives in its folder (``linter/rules/kvNNN/screen.py``,
``MODULE_SCREEN`` and ``TEXT_SCREEN``); the helpers they share, in ``module_facts``.

``TEXT_SCREENS`` ask the same of the text (and of the modules it imports, read as text)
before the file is parsed at all: most files the text conditions admit call an imported
helper or pool whose module cannot make a finding.
"""

from __future__ import annotations

from linter.rules import module_screens, text_screens

TEXT_SCREENS = text_screens()
SCREENS = module_screens()
